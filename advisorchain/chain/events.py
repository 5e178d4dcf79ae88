"""What a run tells its listener as it goes: rounds, tool calls, handoffs and nested runs.

A ``Run`` built with a ``listener`` hands it each event as it happens (served protocols turn them
into their own event streams); a run without one pays a single attribute check per event. Every
event names the run it happened in (``run_id``), so the events of a nested run — an agent called
as a tool — can be told from its caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from ..messages import ToolCall

__all__ = [
    "HandoffEvent",
    "RoundFinished",
    "RoundStarted",
    "RunEvent",
    "RunListener",
    "SubRunFinished",
    "SubRunStarted",
    "ToolCallFinished",
    "ToolCallStarted",
]


@dataclass(frozen=True, slots=True)
class RoundStarted:
    """The tool loop is about to call the model (round ``iteration``, from 1)."""

    run_id: str
    iteration: int
    agent: str | None = None


@dataclass(frozen=True, slots=True)
class RoundFinished:
    """The round's answer is complete; its tools (if any) run next."""

    run_id: str
    iteration: int
    agent: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool call is about to run (after guards and approvals)."""

    run_id: str
    call: ToolCall
    agent: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool call's result, as the model is sent it."""

    run_id: str
    call: ToolCall
    result: str
    agent: str | None = None


@dataclass(frozen=True, slots=True)
class HandoffEvent:
    """The conversation moved from one agent to another."""

    run_id: str
    from_agent: str
    to_agent: str


@dataclass(frozen=True, slots=True)
class SubRunStarted:
    """A nested run (an agent called as a tool) started for the call ``tool_call_id``."""

    run_id: str
    tool_call_id: str
    name: str
    child_run_id: str


@dataclass(frozen=True, slots=True)
class SubRunFinished:
    """The nested run of ``SubRunStarted`` ended."""

    run_id: str
    tool_call_id: str
    name: str
    child_run_id: str


RunEvent: TypeAlias = (
    RoundStarted
    | RoundFinished
    | ToolCallStarted
    | ToolCallFinished
    | HandoffEvent
    | SubRunStarted
    | SubRunFinished
)
"""Any event a run emits."""

RunListener: TypeAlias = Callable[[RunEvent], None]
"""A function a run hands each event to (called on the run's event loop; it must not block)."""
