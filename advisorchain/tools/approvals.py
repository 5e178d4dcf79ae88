"""Human approval of tool calls: the decisions, and how a decision is read.

A tool whose metadata has ``requires_approval=True`` runs only once a person approves the call:
inline (``ToolCallingManager(approver=fn)`` asks while the loop runs) or deferred (the loop ends
with finish reason ``"approvalRequired"`` and a later request carries the decisions with
``.tool_approvals({call_id: Approved() | Denied("why")})``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from .._tool_types import ToolCallback, ToolContext
from ..errors import ChainConfigurationError
from ..messages import ToolCall

__all__ = [
    "Approved",
    "Approver",
    "Decision",
    "Denied",
    "as_decision",
    "as_decisions",
    "denial_text",
    "requires_approval",
]

DENIED_TEXT = "Error: the user denied this tool call"


@dataclass(frozen=True, slots=True)
class Approved:
    """Run the call; ``arguments`` (JSON text), when given, replaces what the tool receives (the
    assistant message in the history keeps the model's call unchanged)."""

    arguments: str | None = None


@dataclass(frozen=True, slots=True)
class Denied:
    """Do not run the call: the model is told ``Error: the user denied this tool call`` (and
    ``: <reason>`` when a reason is given), and the loop goes on."""

    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Blocked(Denied):
    """Not run: a tool guard blocked the call (``advisorchain.guardrails``). The model is told
    ``text`` (``Error: blocked by guardrail <name>``...); no approver is asked about it."""

    text: str = ""


Decision: TypeAlias = Approved | Denied
Approver: TypeAlias = Callable[[ToolCall, ToolContext], "Decision | bool | Awaitable[Decision | bool]"]
"""``fn(call, context)`` → a decision (``True``/``False`` mean ``Approved()``/``Denied()``), sync or async."""


def as_decision(value: object, what: str = "a decision") -> Decision:
    """``value`` as a Decision: ``True``/``False`` are ``Approved()``/``Denied()``."""
    if isinstance(value, Approved | Denied):
        return value
    if value is True:
        return Approved()
    if value is False:
        return Denied()
    raise ChainConfigurationError(f"{what} must be Approved(...), Denied(...), True or False, got {value!r}")


def as_decisions(values: Mapping[str, object]) -> dict[str, Decision]:
    """Decisions by tool-call id (the values of ``tool_approvals``), each read with ``as_decision``."""
    if not isinstance(values, Mapping):
        raise ChainConfigurationError(
            f"tool_approvals takes a mapping of tool-call id to decision, got {values!r}"
        )
    decisions: dict[str, Decision] = {}
    for call_id, value in values.items():
        if not isinstance(call_id, str) or not call_id:
            raise ChainConfigurationError(f"tool_approvals keys must be tool-call ids (str), got {call_id!r}")
        decisions[call_id] = as_decision(value, f"the decision for tool call {call_id!r}")
    return decisions


def denial_text(decision: Denied) -> str:
    """What the model is told about a denied (or blocked) call."""
    if isinstance(decision, Blocked):
        return decision.text
    return f"{DENIED_TEXT}: {decision.reason}" if decision.reason else DENIED_TEXT


def requires_approval(callback: ToolCallback | None) -> bool:
    """True when ``callback``'s metadata asks for a person's approval before each call."""
    return callback is not None and bool(getattr(callback.metadata, "requires_approval", False))
