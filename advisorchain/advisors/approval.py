"""Human approval in the tool loop: which calls of a round wait for a person, their decisions, the
round a conversation waits on, and the loop's end while it waits.

The ToolCallingAdvisor decides approvals through one ``Approvals`` object per loop, with three entry
points: ``waiting`` (at the loop's start: the round the conversation waits on, with the request's
decisions), ``decide`` (a round's decisions) and ``run`` (a decided round through the manager);
``ending`` is the loop's answer while calls wait. The ToolCallingManager never sees approvals, and
approvals never read memory: the loop hands them the stored conversation when they need it. For each
round the loop asks ``decide`` once: no call needs a decision (the round runs as the model sent
it), every call that needs one has it (given by a resuming request, or asked of the manager's
``approver``), or some wait (the loop ends with ``approvalRequired``). A decided round reaches the
manager as a response holding only the calls that run, with their replaced arguments;
``run`` then rebuilds the history with the model's own assistant message and one
response per call, in call order (a denied call answers the denial text).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._tool_types import EMPTY_REGISTRY, ToolContext
from ..chain.vocabulary import AdvisorParams
from ..errors import ChainConfigurationError
from ..messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolResponse, ToolResponseMessage
from ..model import ChatClientRequest, ChatClientResponse, ChatResponse, FinishReason, Generation, Prompt
from ..tools.approvals import (
    Approved,
    Decision,
    Denied,
    as_decision,
    as_decisions,
    denial_text,
    requires_approval,
)
from ..tools.manager import ToolCallingManager, ToolCallingManagerProtocol, ToolExecutionResult

__all__ = ["Approvals", "Pending", "Waiting", "tool_call_message"]


@dataclass(frozen=True, slots=True)
class Pending:
    """A round whose calls wait for a person's decision: ``calls``, in call order."""

    calls: tuple[ToolCall, ...]


def tool_call_message(chat: ChatResponse) -> AssistantMessage | None:
    """The first generation's output that asks for tools, if any."""
    for generation in chat.generations:
        if generation.output.tool_calls:
            return generation.output
    return None


def _given_decisions(request: ChatClientRequest) -> dict[str, Decision] | None:
    """The request's ``tool_approvals`` (by call id), or None when it gives none."""
    given = request.context.get(AdvisorParams.TOOL_APPROVALS)
    return None if given is None else as_decisions(given)


def _has_decisions_to_make(prompt: Prompt, chat: ChatResponse, given: Mapping[str, Decision] | None) -> bool:
    """Whether ``_decide_round`` has anything to decide: decisions were given, or a call of the
    round is of a tool that requires approval (else the round runs as the model sent it)."""
    if given:
        return True
    message = tool_call_message(chat)
    if message is None:
        return False
    options = prompt.options
    if options is None or not options.tool_registry:
        return False
    registry = options.tool_registry
    return any(requires_approval(registry.get(c.name)) for c in message.tool_calls)


def _may_be_waiting(request: ChatClientRequest) -> bool:
    """False when ``_waiting_round`` cannot find a round that waits (no decisions given, the prompt
    does not end with a tool-call message, and it has a user message): the common request,
    answered without the walk."""
    if AdvisorParams.TOOL_APPROVALS in request.context:
        return True
    instructions = request.prompt.instructions
    last = instructions[-1] if instructions else None
    if isinstance(last, AssistantMessage) and last.tool_calls:
        return True
    return request.prompt.last_user_message is None


async def _decide_round(
    manager: object, prompt: Prompt, chat: ChatResponse, given: Mapping[str, Decision] | None = None
) -> dict[str, Decision] | Pending | None:
    """The round's decisions by call id; ``Pending`` when calls wait for a person; None when no
    call needs one and none was given (the round runs as the model sent it).

    A call needs a decision when its tool requires approval. ``given`` decisions (a resuming
    request) come first; a ``ToolCallingManager`` with an ``approver`` is asked for the rest, one
    call after another in call order. With decisions given, a call left without one is an error.
    """
    message = tool_call_message(chat)
    if message is None:
        return None
    options = prompt.options
    registry = options.tool_registry if options is not None else EMPTY_REGISTRY
    needing = [c for c in message.tool_calls if requires_approval(registry.get(c.name))]
    if not needing and not given:
        return None
    decided = {c.id: given[c.id] for c in message.tool_calls if given and c.id in given}
    undecided = [c for c in needing if c.id not in decided]
    approver = manager.approver if isinstance(manager, ToolCallingManager) else None
    if undecided and approver is not None:
        tool_context = options.tool_context if options is not None else {}
        for call in undecided:
            answer = approver(call, ToolContext(tool_context, tool_call_id=call.id))
            if inspect.isawaitable(answer):
                answer = await answer
            decided[call.id] = as_decision(answer, f"the approver's answer for tool call {call.id!r}")
        undecided = []
    if not undecided:
        return decided
    if given is not None:
        listed = ", ".join(f"{c.id!r} ({c.name!r})" for c in undecided)
        raise ChainConfigurationError(
            f"tool call {listed} needs approval and has no decision; pass "
            "tool_approvals({call_id: Approved() | Denied(...)}) for every call that waits"
        )
    return Pending(tuple(undecided))


def _round_to_run(chat: ChatResponse, decisions: Mapping[str, Decision]) -> ChatResponse | None:
    """What the manager is given for a decided round: a response holding only the calls that run,
    in call order, each with its approved arguments; None when every call was denied."""
    message = tool_call_message(chat)
    assert message is not None  # decide_round returned decisions, so the round has tool calls
    run: list[ToolCall] = []
    for call in message.tool_calls:
        decision = decisions.get(call.id)
        if isinstance(decision, Denied):
            continue
        if isinstance(decision, Approved) and decision.arguments is not None:
            call = ToolCall(call.id, call.name, decision.arguments)
        run.append(call)
    if not run:
        return None
    output = dataclasses.replace(message, tool_calls=tuple(run))
    return ChatResponse((Generation(output, FinishReason.TOOL_CALLS),), chat.metadata)


def _merged_result(
    before: Sequence[Message],
    chat: ChatResponse,
    decisions: Mapping[str, Decision],
    result: ToolExecutionResult | None,
) -> ToolExecutionResult:
    """The decided round's history: ``before``, the model's own assistant message, and one
    ToolResponseMessage with a response per call in call order — the manager's responses for the
    calls that ran (``result``), the denial text for the others."""
    message = tool_call_message(chat)
    assert message is not None
    denied = {c.id for c in message.tool_calls if isinstance(decisions.get(c.id), Denied)}
    ran: Sequence[ToolResponse] = ()
    expected = len(message.tool_calls) - len(denied)
    if result is not None:
        history = result.conversation_history
        last = history[-1] if history else None
        if not isinstance(last, ToolResponseMessage) or len(last.responses) != expected:
            raise ChainConfigurationError(
                f"the tool-calling manager returned {last!r} as the last message of the round; it must "
                f"end the history with one ToolResponseMessage holding a response per call ({expected})"
            )
        ran = last.responses
    answers = iter(ran)
    responses = tuple(
        ToolResponse(c.id, c.name, denial_text(decision))
        if isinstance(decision := decisions.get(c.id), Denied)
        else next(answers)
        for c in message.tool_calls
    )
    return ToolExecutionResult(
        (*before, message, ToolResponseMessage(responses)),
        return_direct=result is not None and not denied and result.return_direct,
        malformed_calls=result.malformed_calls if result is not None else (),
    )


def _waiting_response(
    response: ChatClientResponse, chat: ChatResponse, pending: Pending, history: Sequence[Message]
) -> ChatClientResponse:
    """The loop's end while calls wait for a decision: the model's tool-call message with finish
    reason ``approvalRequired``, the pending calls and the whole history in the context."""
    message = tool_call_message(chat)
    assert message is not None
    reason = FinishReason.APPROVAL_REQUIRED
    waiting = ChatResponse(
        (Generation(message, reason),), dataclasses.replace(chat.metadata, finish_reason=reason)
    )
    context = {
        **response.context,
        AdvisorParams.PENDING_TOOL_CALLS: pending.calls,
        AdvisorParams.CONVERSATION_HISTORY: (*history, message),
    }
    return ChatClientResponse(waiting, context)


def _model_history(
    history: Sequence[Message], chat: ChatResponse, stored: Sequence[Message] | None
) -> tuple[Message, ...]:
    """The history a waiting round reports: the loop's own, or — with memory inside the loop, whose
    stored conversation (``stored``) the model saw but the loop does not hold — the prompt's system
    messages, that conversation and the loop's messages of this turn (each once: what the memory
    already stored of the turn is not repeated), without the waiting message, which follows it in
    the response."""
    if stored is None:
        return tuple(history)
    kept = list(stored)
    message = tool_call_message(chat)
    tail = kept[-1] if kept else None
    if isinstance(tail, AssistantMessage) and message is not None and tail.tool_calls == message.tool_calls:
        kept.pop()
    systems = [m for m in history if isinstance(m, SystemMessage)]
    turn = [m for m in history if not isinstance(m, SystemMessage)]
    shared = next(k for k in range(min(len(kept), len(turn)), -1, -1) if kept[len(kept) - k :] == turn[:k])
    return (*systems, *(m for m in kept if not isinstance(m, SystemMessage)), *turn[shared:])


def _waiting_round(
    request: ChatClientRequest, stored: Sequence[Message] | None
) -> tuple[AssistantMessage | None, tuple[Message, ...]]:
    """The assistant tool-call message a conversation ends with (unanswered), and the history
    before it: from the request's prompt, or — with memory inside the loop — from that memory's
    stored conversation (``stored``)."""
    instructions = tuple(request.prompt.instructions)
    last = instructions[-1] if instructions else None
    if isinstance(last, AssistantMessage) and last.tool_calls:
        return last, instructions[:-1]
    tail = stored[-1] if stored else None
    if stored and isinstance(tail, AssistantMessage) and tail.tool_calls:
        systems = tuple(m for m in instructions if isinstance(m, SystemMessage))
        return tail, (*systems, *(m for m in stored[:-1] if not isinstance(m, SystemMessage)))
    return None, ()


@dataclass(frozen=True, slots=True)
class Waiting:
    """The round a conversation waits on: its assistant tool-call message, as a response, the
    history before it, and the request's decisions for it (None when the request gives none)."""

    chat: ChatResponse
    history: tuple[Message, ...]
    given: dict[str, Decision] | None


class Approvals:
    """The approvals of one tool loop (see the module docstring): ``waiting``, ``decide``, ``run``,
    and the loop's ``ending`` while calls wait."""

    __slots__ = ("manager",)

    def __init__(self, manager: ToolCallingManagerProtocol) -> None:
        self.manager = manager

    @staticmethod
    def may_be_waiting(request: ChatClientRequest) -> bool:
        """False when no round can be waiting at the start of ``request`` (the common request:
        then ``waiting`` need not be asked)."""
        return _may_be_waiting(request)

    @staticmethod
    def needs_stored(request: ChatClientRequest) -> bool:
        """Whether ``waiting`` needs the stored conversation of a memory inside the loop: the
        prompt does not end with the waiting message, and decisions were given or no user text."""
        instructions = request.prompt.instructions
        last = instructions[-1] if instructions else None
        if isinstance(last, AssistantMessage) and last.tool_calls:
            return False
        return AdvisorParams.TOOL_APPROVALS in request.context or request.prompt.last_user_message is None

    def waiting(self, request: ChatClientRequest, stored: Sequence[Message] | None) -> Waiting | None:
        """The round ``request``'s conversation waits on, with the request's decisions; None when
        nothing waits. Decisions without a waiting round, or naming calls it does not have, raise
        ``ChainConfigurationError``."""
        given = _given_decisions(request)
        message, history = _waiting_round(request, stored)
        if message is None:
            if given is not None:
                raise ChainConfigurationError(
                    "tool_approvals was given, but no round waits for approval: the conversation does "
                    "not end with an assistant message asking for tools"
                )
            return None
        unknown = sorted(set(given or ()) - {c.id for c in message.tool_calls})
        if unknown:
            raise ChainConfigurationError(
                f"tool_approvals names tool calls {unknown!r} that the waiting round does not have; "
                f"it has {[c.id for c in message.tool_calls]!r}"
            )
        return Waiting(ChatResponse.of(message, FinishReason.TOOL_CALLS), history, given)

    async def decide(
        self, prompt: Prompt, chat: ChatResponse, given: Mapping[str, Decision] | None = None
    ) -> dict[str, Decision] | Pending | None:
        """The round's decisions by call id; ``Pending`` when calls wait for a person; None when no
        call needs one and none was given (the round runs as the model sent it)."""
        if not _has_decisions_to_make(prompt, chat, given):
            return None
        return await _decide_round(self.manager, prompt, chat, given)

    async def run(
        self, prompt: Prompt, chat: ChatResponse, decisions: Mapping[str, Decision] | None
    ) -> ToolExecutionResult:
        """The manager's result for the round: as it is when no call needed a decision; else the
        manager runs only the calls that run, and the history is rebuilt around its responses."""
        if decisions is None:
            return await self.manager.execute_tool_calls(prompt, chat)
        to_run = _round_to_run(chat, decisions)
        result = None if to_run is None else await self.manager.execute_tool_calls(prompt, to_run)
        return _merged_result(prompt.instructions, chat, decisions, result)

    @staticmethod
    def ending(
        response: ChatClientResponse,
        chat: ChatResponse,
        pending: Pending,
        history: Sequence[Message],
        stored: Sequence[Message] | None = None,
    ) -> ChatClientResponse:
        """The loop's end while calls wait for a decision (finish reason ``approvalRequired``): the
        history it reports is the loop's, or — with ``stored``, the conversation of a memory inside
        the loop — that conversation with the turn's messages."""
        return _waiting_response(response, chat, pending, _model_history(history, chat, stored))
