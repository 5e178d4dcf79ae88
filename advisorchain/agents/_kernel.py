"""What the agents package takes from the kernel: the chain and its run, and the run events it
emits (a handoff; an agent tool's nested run)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..chain import CallAdvisorChain, Run, RunEvent, StreamAdvisorChain, current_run, rebased
from ..chain.events import HandoffEvent, SubRunFinished, SubRunStarted

__all__ = [
    "CallAdvisorChain",
    "StreamAdvisorChain",
    "current_run",
    "emit_handoff",
    "nested_settings",
    "rebased",
    "sub_run_events",
]


def emit_handoff(chain: CallAdvisorChain | StreamAdvisorChain, source: str, target: str) -> None:
    """Tell the run's listener about a handoff (nothing without a listener)."""
    run = chain.run
    if run.listener is not None:
        run.emit(HandoffEvent(run.id, source, target))


class _SubRun:
    """The listener of an agent tool's nested run: its events go to the calling run's listener,
    the first one preceded by ``SubRunStarted`` (the nested run's id is known from then on)."""

    __slots__ = ("call_id", "child_id", "name", "parent")

    def __init__(self, parent: Run, call_id: str, name: str) -> None:
        self.parent = parent
        self.call_id = call_id
        self.name = name
        self.child_id: str | None = None

    def __call__(self, event: RunEvent) -> None:
        if self.child_id is None:
            self.child_id = event.run_id
            self.parent.emit(SubRunStarted(self.parent.id, self.call_id, self.name, event.run_id))
        self.parent.emit(event)


def nested_settings(spec: Any, parent: Run | None, listener: Any = None) -> Any:
    """``spec`` whose run is part of ``parent`` (its usage counts there; its limits hold)."""
    if parent is None:
        return spec
    return spec._run_settings(parent=parent, listener=listener)


@asynccontextmanager
async def sub_run_events(parent: Run | None, call_id: str, name: str) -> AsyncIterator[Any]:
    """The listener for a nested run (None when the calling run has no listener); once the nested
    run ends, ``SubRunFinished`` when it told anything."""
    if parent is None or parent.listener is None:
        yield None
        return
    listener = _SubRun(parent, call_id, name)
    try:
        yield listener
    finally:
        if listener.child_id is not None:
            parent.emit(SubRunFinished(parent.id, call_id, name, listener.child_id))
