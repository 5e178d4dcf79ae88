"""Prompt templates: ``{name}`` placeholders filled with ``str(value)``, ``{{``/``}}`` for literal braces.

A safe renderer, never ``str.format``: a placeholder is a plain identifier, so text from a user
(``{x.__class__}``, ``{0}``, ``{x!r}``) can never reach attributes, indexes or conversions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import ChainConfigurationError

__all__ = ["render", "check_params"]

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def render(template: str, params: Mapping[str, Any], what: str = "template") -> str:
    """``template`` with each ``{name}`` replaced by ``str(params[name])``; ``{{`` and ``}}`` stand
    for ``{`` and ``}``. A placeholder without a value, or one that is not a plain identifier
    (``{a.b}``, ``{0}``, ``{x!r}``, ``{x:>5}``, ``{}``), or a lone brace, raises
    ChainConfigurationError (a ValueError) naming it. Unused params are allowed."""

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        if name is None:
            raise ChainConfigurationError(
                f"the {what} has a lone {token!r} at position {match.start()}; write {token * 2!r} "
                "for a literal brace"
            )
        if not name.isidentifier():
            raise ChainConfigurationError(
                f"the {what} has the placeholder {token!r}; placeholders are plain names such as "
                "{city} (write {{ and }} for literal braces)"
            )
        if name not in params:
            given = ", ".join(sorted(params)) or "none"
            raise ChainConfigurationError(
                f"the {what} has the placeholder {token!r} but no value for {name!r} (params given: {given})"
            )
        return str(params[name])

    return _TOKEN.sub(replace, template)


def check_params(params: Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    """``params`` as a dict (None is empty); ChainConfigurationError unless a mapping of str keys."""
    if params is None:
        return {}
    if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
        raise ChainConfigurationError(
            f"{what} must be a mapping of placeholder name to value, got {params!r}"
        )
    return dict(params)
