"""Tool guards in the tool loop (API.md §19): the loop asks ``ToolGuards`` at two points.

- ``before_approvals``: each call's argument JSON, before approvals and before the call runs. A trip
  blocks the call (a ``Blocked`` decision: it answers ``Error: blocked by guardrail <name>`` and
  never runs nor reaches an approver or the manager); a replacement becomes the arguments the tool
  receives (an ``Approved(arguments=...)`` decision; an approver is asked with them).
- ``check_results``: each result of a call that ran, before the model, memory or a return-direct
  answer sees it. A replacement replaces it; a trip withholds it
  (``Error: the result of <tool> was withheld by guardrail <name>``).

A guard that fails raises ``GuardrailError`` (fail closed): no call of the round runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ..guards import Guard, GuardContext, Verdict, check_guards, run_guards
from ..messages import ToolCall, ToolResponse, ToolResponseMessage
from ..model import ChatResponse
from .approvals import Approved, Blocked, Decision, Denied
from .manager import ToolExecutionResult

__all__ = ["ToolGuards"]

# The request-context keys a guard's context is read from: ChatMemory.CONVERSATION_ID and
# AdvisorParams.ACTIVE_AGENT (both live above the tools layer; a test pins them equal).
CONVERSATION_ID_KEY = "chat_memory_conversation_id"
ACTIVE_AGENT_KEY = "advisorchain.active_agent"


def _calls(chat: ChatResponse) -> tuple[ToolCall, ...]:
    for generation in chat.generations:
        if generation.output.tool_calls:
            return tuple(generation.output.tool_calls)
    return ()


def _context(kind: str, call: ToolCall, request_context: Mapping[str, Any]) -> GuardContext:
    conversation = request_context.get(CONVERSATION_ID_KEY)
    agent = request_context.get(ACTIVE_AGENT_KEY)
    return GuardContext(
        "tool_call" if kind == "tool_call" else "tool_result",
        conversation_id=conversation if isinstance(conversation, str) else None,
        agent=agent if isinstance(agent, str) else None,
        tool_name=call.name,
        tool_call_id=call.id,
    )


def blocked_text(verdict: Verdict) -> str:
    """What the model is told about a call a tool guard blocked."""
    assert verdict.tripped is not None
    name, result = verdict.tripped
    return f"Error: blocked by guardrail {name}" + (f": {result.message}" if result.message else "")


def withheld_text(tool_name: str, guard: str) -> str:
    """What the model is told in place of a result a tool-result guard withheld."""
    return f"Error: the result of {tool_name} was withheld by guardrail {guard}"


class ToolGuards:
    """The tool guards and tool-result guards of one tool loop (empty: nothing to do)."""

    __slots__ = ("calls", "results")

    def __init__(self, tool_guards: Sequence[Guard] = (), tool_result_guards: Sequence[Guard] = ()) -> None:
        self.calls = check_guards(tool_guards, "tool_guards", allow_empty=True)
        self.results = check_guards(tool_result_guards, "tool_result_guards", allow_empty=True)

    def __bool__(self) -> bool:
        return bool(self.calls or self.results)

    async def before_approvals(
        self, chat: ChatResponse, request_context: Mapping[str, Any]
    ) -> dict[str, Decision] | None:
        """The decisions the tool guards took for the round's calls (``Blocked``, or ``Approved``
        with replaced arguments); None without tool guards or tool calls."""
        if not self.calls:
            return None
        calls = _calls(chat)
        if not calls:
            return None
        verdicts = await asyncio.gather(
            *(run_guards(self.calls, c.arguments, _context("tool_call", c, request_context)) for c in calls)
        )
        decisions: dict[str, Decision] = {}
        for call, verdict in zip(calls, verdicts, strict=True):
            if not verdict.passed:
                decisions[call.id] = Blocked(text=blocked_text(verdict))
            elif verdict.text != call.arguments:
                decisions[call.id] = Approved(arguments=verdict.text)
        return decisions

    async def check_results(
        self,
        result: ToolExecutionResult,
        chat: ChatResponse,
        decisions: Mapping[str, Decision] | None,
        request_context: Mapping[str, Any],
    ) -> ToolExecutionResult:
        """``result`` with the results of the calls that ran checked (replaced or withheld)."""
        context = request_context
        history = result.conversation_history
        last = history[-1] if history else None
        if not self.results or not isinstance(last, ToolResponseMessage):
            return result
        by_id = {c.id: c for c in _calls(chat)}
        ran = [
            r for r in last.responses if r.id in by_id and not isinstance((decisions or {}).get(r.id), Denied)
        ]
        if not ran:
            return result
        verdicts = await asyncio.gather(
            *(
                run_guards(self.results, r.response_data, _context("tool_result", by_id[r.id], context))
                for r in ran
            )
        )
        checked: dict[int, str] = {}
        for response, verdict in zip(ran, verdicts, strict=True):
            if not verdict.passed:
                assert verdict.tripped is not None
                name = verdict.tripped[0]
                checked[id(response)] = withheld_text(response.name, name)
            elif verdict.text != response.response_data:
                checked[id(response)] = verdict.text
        if not checked:
            return result
        responses = tuple(
            ToolResponse(r.id, r.name, checked[id(r)]) if id(r) in checked else r for r in last.responses
        )
        return ToolExecutionResult(
            (*history[:-1], ToolResponseMessage(responses, last.metadata)),
            return_direct=result.return_direct,
            malformed_calls=result.malformed_calls,
        )
