"""``client.as_tool(...)``: a client's whole chain as one tool of another run (API.md §18).

A call is one request through the client on a fresh conversation holding only the tool's input;
its run is a child of the calling run (``spec._run_settings(parent=current_run())``), so its
requests, tool calls and usage count in the calling run and the calling run's limits hold.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from ..chain.vocabulary import AdvisorParams
from ..errors import ToolError, UsageLimitExceeded
from ..memory.api import ChatMemory
from ..model import FinishReason
from ..tools.api import ToolContext, ToolDefinition
from ..tools.callbacks import ParsedTool
from ._kernel import current_run, nested_settings, sub_run_events
from .agent import Agent, check_agent


class ChatClient(Protocol):
    """What an agent tool needs of its client (a ``ChatClient``)."""

    def prompt(self, prompt: str) -> Any: ...


__all__ = ["AgentTool", "NestedRunError", "agent_tool"]

INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
}


class NestedRunError(ToolError):
    """An agent tool's nested run failed: the model is told ``Error: <message>``; a manager built
    with ``raise_on_error=True`` raises ``ToolExecutionError`` whose ``__cause__`` is the nested
    run's error (``relays_cause``)."""

    relays_cause = True


class AgentTool(ParsedTool):
    """A ToolCallback whose call runs ``client``'s chain (with ``agent`` active when given)."""

    __slots__ = ("_agent", "_client")

    def __init__(self, client: ChatClient, name: str, description: str, agent: Agent | None) -> None:
        super().__init__(ToolDefinition(name, description, dict(INPUT_SCHEMA)))
        self._client = client
        self._agent = agent

    async def call_parsed(self, args: Mapping[str, Any], context: ToolContext | None) -> str:
        text = args.get("input")
        if not isinstance(text, str) or not text.strip():
            return "Error: give the agent its task as a non-empty string in 'input'"
        name = self.definition.name
        # A fresh conversation: a memory of the nested client loads nothing older than this input.
        spec = self._client.prompt(text).param(ChatMemory.CONVERSATION_ID, f"{name}-{uuid.uuid4().hex}")
        if self._agent is not None:
            spec.agent(self._agent, resume=False)
        parent = current_run()
        call_id = context.tool_call_id if context is not None else None
        async with sub_run_events(parent, call_id or "", name) as listener:
            spec = nested_settings(spec, parent, listener)
            try:
                response = await spec.acall().chat_client_response()
            except asyncio.CancelledError:
                raise
            except UsageLimitExceeded as exc:
                if _refused_by_caller(exc, parent):
                    exc.ends_the_run = True  # type: ignore[attr-defined]  # the manager lets it through
                    raise  # the calling run's budget: its loop ends or raises, as for its own calls
                raise NestedRunError(str(exc)) from exc
            except Exception as exc:
                raise NestedRunError(str(exc) or type(exc).__name__) from exc
        chat = response.chat_response
        if chat is not None and chat.finish_reason == FinishReason.APPROVAL_REQUIRED:
            calls = response.context.get(AdvisorParams.PENDING_TOOL_CALLS) or ()
            listed = ", ".join(f"{c.name}({c.arguments})" for c in calls)
            return f"Error: the agent {name} is waiting for approval of {listed}"
        return (chat.text if chat is not None else None) or ""


def _refused_by_caller(error: UsageLimitExceeded, parent: Any) -> bool:
    """True when the calling run's limits (not the nested client's own) refused the nested call:
    the meter that raised is the calling run's, or one its totals count in."""
    raised_by = getattr(error, "_advisorchain_meter", None)
    meter = getattr(parent, "meter", None)
    while meter is not None:
        if meter is raised_by:
            return True
        meter = meter.parent
    return False


def agent_tool(client: ChatClient, *, name: str, description: str, agent: Agent | None = None) -> AgentTool:
    """``client.as_tool(...)``: checked arguments, the tool."""
    from .agent import _check_name

    _check_name(name, "as_tool name")
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"as_tool description must be a non-empty str, got {description!r}")
    if agent is not None:
        check_agent(agent, "as_tool(agent=...)")
    return AgentTool(client, name, description, agent)
