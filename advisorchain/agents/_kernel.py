"""What the agents package needs of the kernel (a shim until the kernel's run seams land)."""

from __future__ import annotations

from typing import Any

from ..advisors.chain import CallAdvisorChain, StreamAdvisorChain, rebased

__all__ = ["CallAdvisorChain", "StreamAdvisorChain", "current_run", "emit_handoff", "rebased"]


def emit_handoff(chain: Any, source: str, target: str) -> None:
    run = getattr(chain, "run", None)
    if run is None:
        return


def current_run() -> Any:
    return None
