"""Filling the retrieval templates: ``{documents}`` and ``{query}`` are replaced in one pass (so a
document that contains ``{query}`` stays as it is); every other brace is literal."""

from __future__ import annotations

import re

__all__ = ["check_template", "fill"]

_PLACEHOLDER = re.compile(r"\{(documents|query)\}")


def check_template(template: object, what: str, *, required: tuple[str, ...] = ("documents",)) -> str:
    """``template`` when it is a str holding each required placeholder (else ValueError)."""
    if not isinstance(template, str):
        raise TypeError(f"{what} must be a str, got {template!r}")
    for name in required:
        if "{" + name + "}" not in template:
            raise ValueError(
                f"{what} must contain the placeholder {{{name}}} (and may contain {{query}}); "
                f"got {template!r}"
            )
    return template


def fill(template: str, *, documents: str = "", query: str = "") -> str:
    """``template`` with ``{documents}`` and ``{query}`` replaced."""
    values = {"documents": documents, "query": query}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
