"""The ChatClient's side of agents: ``spec.agent(...)``, ``default_agent`` and the HandoffAdvisor
the client adds (kept here so that the client carries a few lines only)."""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

from ._advisor import AGENT_PARAM, HandoffAdvisor
from .agent import Agent, check_agent, graph_of

__all__ = ["AGENT_PARAM", "agent_advisors", "agent_param", "checked_default_agent"]


def agent_param(agent: object, resume: object) -> tuple[Agent, bool]:
    """The value of ``spec.agent(agent, resume=...)``: the agent (its graph checked now) and resume."""
    checked = check_agent(agent, "agent()")
    if not isinstance(resume, bool):
        raise TypeError(f"agent(resume=...) takes a bool, got {resume!r}")
    graph_of(checked)
    return checked, resume


def checked_default_agent(agent: object) -> Agent | None:
    if agent is None:
        return None
    checked = check_agent(agent, "ChatClient(default_agent=...)")
    graph_of(checked)
    return checked


def agent_advisors(
    default_agent: Agent | None, context: MutableMapping[str, Any], advisors: Iterable[object]
) -> tuple[HandoffAdvisor, ...]:
    """The HandoffAdvisor a request needs and its chain lacks (none without an agent). The
    starting agent — the request's ``.agent(...)``, else ``default_agent`` — goes in ``context``,
    so a hand-added HandoffAdvisor starts there too."""
    given = context.get(AGENT_PARAM)
    if given is None and default_agent is not None:
        given = context[AGENT_PARAM] = (default_agent, True)
    if given is None or any(isinstance(a, HandoffAdvisor) for a in advisors):
        return ()
    cache = graph_of(given[0]).cache  # one advisor per starting agent: it keeps no request's state
    advisor = cache.get("advisor")
    if advisor is None:
        advisor = cache["advisor"] = HandoffAdvisor(given[0])
    return (advisor,)
