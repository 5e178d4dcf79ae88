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


def nested_settings(spec: Any, parent: Any) -> Any:
    return spec


class _NoEvents:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


def sub_run_events(parent: Any, spec: Any, call_id: str, name: str) -> Any:
    return _NoEvents()
