"""Durable agent runs: an agent (a ChatClient with its advisors, tools, memory and output type) run
as a Temporal workflow (``advisorchain.durable.temporal``, extra ``temporal``) or a DBOS workflow
(``advisorchain.durable.dbos``, extra ``dbos``).

The advisor chain and the tool loop run unchanged as workflow code; model calls, the agent's tool
calls and memory reads/writes become activities (Temporal) or steps (DBOS). This package imports
neither engine: import the submodule of the engine you use. It holds what both engines share in
their signatures: ``RunRequest``, the keywords of a run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from ..messages import Message

__all__ = ["RunRequest"]


class RunRequest(TypedDict, total=False):
    """What a durable run is asked besides its user text, the same on every engine: the keywords
    ``start``, ``run`` and ``stream`` of ``TemporalAgent`` and ``DBOSAgent`` take after their own.

    >>> await agent.run("And tomorrow?", conversation_id="c42", tool_context={"tenant": "acme"})
    """

    messages: Iterable[Message]
    """Messages before the user text (a conversation resumed without memory, say)."""
    system: str | None
    """The system text."""
    conversation_id: str | None
    """The memory conversation of the run."""
    tool_context: Mapping[str, Any] | None
    """What every tool call's ``ToolContext`` holds (``run_id`` and ``tool_call_id`` are added)."""
