"""``--agents FILE``: a YAML file of agents for ``chat``, ``web`` and ``serve`` (API.md §18).

::

    agents:
      - name: triage
        instructions: Route the customer.
        handoffs: [billing]
      - name: billing
        description: Invoices and payments
        instructions: You are billing.
        tools: [shop.tools:lookup_invoice]
        model: openai:gpt-4o

The first agent starts. A file with an unknown key, a tool that cannot be found, a handoff to an
agent the file does not hold or a bad name is one error line naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

__all__ = ["load_agents"]

_KEYS = ("name", "instructions", "description", "tools", "handoffs", "model")


def _bad(path: str, message: str) -> click.BadParameter:
    return click.BadParameter(f"{path}: {message}", param_hint="'--agents'")


def load_agents(
    path: str,
    *,
    wrap_tool: Callable[[Any], Any] = lambda tool: tool,
    build_model: Callable[[str], Any] | None = None,
) -> Any:
    """The starting agent of the file at ``path`` (its first), its graph checked. ``wrap_tool``
    wraps each ToolCallback (the CLI shows every call); ``build_model`` builds an agent's
    ``model: provider:name``."""
    from ..agents.agent import graph_of
    from ..errors import ChainConfigurationError

    entries = _entries(path)
    names = [e["name"] for e in entries]
    agents: dict[str, Any] = {}
    for entry in reversed(entries):  # targets first, so handoffs to earlier agents go by name
        agents[entry["name"]] = _agent(path, entry, agents, wrap_tool, build_model)
    start = agents[names[0]]
    try:
        graph_of(start)
    except ChainConfigurationError as exc:
        raise _bad(path, str(exc)) from exc
    return start


def _entries(path: str) -> list[dict[str, Any]]:
    """The file's agents as mappings, each key and reference checked."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise _bad(path, f"cannot read it ({exc.strerror or exc})") from exc
    except yaml.YAMLError as exc:
        raise _bad(path, f"is not YAML ({' '.join(str(exc).split())})") from exc
    if isinstance(data, Mapping):
        unknown = sorted(set(data) - {"agents"})
        if unknown:
            raise _bad(path, f"unknown key {unknown[0]!r} (the file holds 'agents': a list of agents)")
        data = data.get("agents")
    if not isinstance(data, list) or not data:
        raise _bad(path, "holds no agents (write 'agents:' and a list of agents with a name each)")
    entries = [_entry(path, i, entry) for i, entry in enumerate(data)]
    names = [e["name"] for e in entries]
    twice = sorted({str(n) for n in names if names.count(n) > 1})
    if twice:
        raise _bad(path, f"two agents are named {twice[0]!r}")
    for entry in entries:
        for target in entry.get("handoffs") or []:
            if target not in names:
                where = f"agent {entry['name']!r} hands off to {target!r}"
                raise _bad(path, f"{where}, which the file does not define")
    return entries


def _entry(path: str, i: int, entry: object) -> dict[str, Any]:
    if not isinstance(entry, Mapping):
        raise _bad(path, f"agent {i + 1} is not a mapping of {', '.join(_KEYS)}")
    label = repr(entry.get("name", f"#{i + 1}"))
    unknown = sorted(set(entry) - set(_KEYS))
    if unknown:
        raise _bad(path, f"agent {label}: unknown key {unknown[0]!r} (known: {', '.join(_KEYS)})")
    if "name" not in entry:
        raise _bad(path, f"agent {i + 1} has no name")
    for key in ("tools", "handoffs"):
        value = entry.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _bad(path, f"agent {label}: {key} must be a list of names")
    return dict(entry)


def _agent(
    path: str,
    entry: dict[str, Any],
    built: Mapping[str, Any],
    wrap_tool: Callable[[Any], Any],
    build_model: Callable[[str], Any] | None,
) -> Any:
    from ..agents import Agent
    from ..tools import tool_callbacks
    from ._setup import load_tools

    label = repr(entry["name"])
    try:
        tools = [wrap_tool(cb) for cb in tool_callbacks(*load_tools(tuple(entry.get("tools") or ())))]
    except click.BadParameter as exc:
        raise _bad(path, f"agent {label}: tool {exc.message}") from exc
    model = entry.get("model")
    try:
        return Agent(
            entry["name"],
            instructions=entry.get("instructions"),
            description=entry.get("description"),
            tools=tools,
            handoffs=[built.get(t, t) for t in entry.get("handoffs") or []],
            model=build_model(model) if model is not None and build_model is not None else None,
        )
    except (TypeError, ValueError) as exc:
        raise _bad(path, f"agent {label}: {exc}") from exc
