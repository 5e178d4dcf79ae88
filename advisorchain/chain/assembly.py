"""The assembly of a request's chain: the client's advisors and the request's, sorted by order,
each once, at most one tool loop, and the tool loop added when none was given."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import ChainConfigurationError
from .cursor import Advisor
from .vocabulary import TOOL_CALLING_ORDER, MemoryAdvisor, ToolAdvisor

__all__ = ["assemble_advisors"]


def assemble_advisors(
    defaults: Sequence[Advisor],
    requested: Sequence[Advisor],
    *,
    auto_register: bool,
    tool_advisor_factory: Callable[[bool], Advisor],
) -> tuple[Advisor, ...]:
    """The advisors of one request's chain, sorted by order (ties keep registration order, the
    client's defaults first).

    Each advisor may appear once; a chain holds at most one ``ToolAdvisor``; with ``auto_register``
    and none given, ``tool_advisor_factory(conversation_history_enabled)`` makes one — with the
    history off when a ``MemoryAdvisor`` sits inside the loop (it supplies the history).
    """
    if not defaults and not requested:  # the common request: the tool loop alone, or nothing
        return (tool_advisor_factory(True),) if auto_register else ()
    advisors: list[Advisor] = [*defaults, *requested]
    seen: set[int] = set()
    for advisor in advisors:
        if id(advisor) in seen:
            raise ChainConfigurationError(f"advisor {advisor.name!r} was registered twice")
        seen.add(id(advisor))
    tool_advisors = [a for a in advisors if isinstance(a, ToolAdvisor)]
    if len(tool_advisors) > 1:
        names = " and ".join(repr(a.name) for a in tool_advisors)
        raise ChainConfigurationError(f"a chain may hold one ToolAdvisor, this one has {names}")
    if not tool_advisors and auto_register:
        inner_memory = any(isinstance(a, MemoryAdvisor) and a.order > TOOL_CALLING_ORDER for a in advisors)
        advisors.append(tool_advisor_factory(not inner_memory))
    # sorted() is stable: equal orders keep registration order, defaults first.
    return tuple(sorted(advisors, key=_order))


def _order(advisor: Advisor) -> int:
    return advisor.order
