"""ToolCallingAdvisor: the recursive tool loop, as an advisor.

Each round calls ``chain.copy(self)`` — the advisors after this one, then the model — and, while
the response asks for tools, has the ToolCallingManager execute them and goes round again.
Advisors inside the loop (higher order) run on every round; advisors outside run once. The call and
the stream path share one family of async hooks (``do_*``) that subclasses override.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from .._checks import check_int
from .._run_meter import limit_ending
from .._streams import closing
from ..chain import CallAdvisorChain, Run, StreamAdvisorChain, checked_request, checked_response, current_run
from ..chain.events import RoundFinished, RoundStarted, ToolCallFinished, ToolCallStarted
from ..chain.vocabulary import TOOL_CALLING_ORDER, AdvisorParams, MemoryAdvisor, ToolAdvisor, check_order
from ..errors import (
    ChainConfigurationError,
    MaxIterationsExceeded,
    ToolCallLimitExceeded,
    ToolExecutionError,
    UsageLimitExceeded,
)
from ..messages import AssistantMessage, Message, ToolCall, ToolResponseMessage
from ..model import (
    ChatClientRequest,
    ChatClientResponse,
    ChatResponse,
    FinishReason,
    Generation,
    Prompt,
    StreamAggregation,
    Usage,
    with_total_usage,
)
from ..tools.approvals import Decision, Denied
from ..tools.manager import NOT_EXECUTED, ToolCallingManager, ToolCallingManagerProtocol, ToolExecutionResult
from .approval import Approvals, Pending, tool_call_message
from .history import HistoryReplacement, replace_history, replacements_in

__all__ = ["ToolCallingAdvisor", "end_tool_loop"]

_END = object()  # the run slot a tool sets to end the tool loop after its round


def end_tool_loop() -> None:
    """Called by a tool while its round runs (a handoff): the loop ends once the round's tools ran,
    without calling the model again; its last response's context holds the history
    (``AdvisorParams.CONVERSATION_HISTORY``, the round's tool responses last)."""
    run = current_run()
    if run is not None:
        run.put(_END, True)


def _default_eligibility(response: ChatResponse | None) -> bool:
    return response is not None and response.has_tool_calls()


@dataclass(slots=True)
class _Loop:
    """The state of one loop: the full history the manager sees, rounds run, usage per round, how
    many rounds in a row had only unparsable tool arguments, and the history replacements that
    advisors inside the loop made (handed on in the final response)."""

    history: tuple[Message, ...] | None = None
    iteration: int = 0
    usages: list[Usage | None] = field(default_factory=list)
    malformed_rounds: int = 0
    replacements: list[HistoryReplacement] = field(default_factory=list)
    run: Run = field(default_factory=Run)
    inner: Sequence[object] = ()  # the advisors inside the loop (a memory there holds history too)
    approvals: Approvals = field(default_factory=lambda: Approvals(ToolCallingManager()))
    offset: int = 0  # rounds of this turn before the loop (a handoff's target continues the turn)


@dataclass(frozen=True, slots=True)
class _Stop:
    response: ChatClientResponse
    synthetic: bool  # made by the loop (return direct, limit, approval), not by the model
    approval: bool = False  # the loop waits for a person's decision


class ToolCallingAdvisor(ToolAdvisor):
    """Runs the tool loop: calls the rest of the chain, executes requested tools, repeats.

    >>> client = ChatClient(model, default_advisors=[ToolCallingAdvisor(max_iterations=10)])
    """

    DEFAULT_ORDER: ClassVar[int] = TOOL_CALLING_ORDER

    APPROVAL_REQUIRED: ClassVar[str] = FinishReason.APPROVAL_REQUIRED
    """The finish reason of a loop that stopped because a tool call needs a person's decision."""

    def __init__(
        self,
        tool_calling_manager: ToolCallingManagerProtocol | None = None,
        tool_execution_eligibility_checker: Callable[[ChatResponse | None], bool] | None = None,
        order: int = DEFAULT_ORDER,
        conversation_history_enabled: bool = True,
        max_iterations: int | None = None,
        *,
        max_malformed_rounds: int = 3,
    ) -> None:
        self.order = check_order(order, inside=True)
        self.max_iterations: int | None = check_int(
            max_iterations, "max_iterations", minimum=1, optional=True
        )
        self.max_malformed_rounds = check_int(max_malformed_rounds, "max_malformed_rounds", minimum=1)
        if tool_calling_manager is not None and not callable(
            getattr(tool_calling_manager, "execute_tool_calls", None)
        ):
            raise ChainConfigurationError(
                f"tool_calling_manager must implement resolve_tool_definitions(options) and async "
                f"execute_tool_calls(prompt, chat_response), got {tool_calling_manager!r}"
            )
        self.tool_calling_manager: ToolCallingManagerProtocol = (
            ToolCallingManager() if tool_calling_manager is None else tool_calling_manager
        )
        self.tool_execution_eligibility_checker = tool_execution_eligibility_checker or _default_eligibility
        self.conversation_history_enabled = conversation_history_enabled

    @property
    def name(self) -> str:
        return "Tool Calling Advisor"

    # -- the two paths -------------------------------------------------------------------------

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        request = await self._initialize(request, chain)
        inner = chain.copy(self)
        approvals = Approvals(self.tool_calling_manager)
        loop = _Loop(run=chain.run, inner=inner.call_advisors, approvals=approvals)
        try:
            resumed = await self._resume(loop, request) if Approvals.may_be_waiting(request) else None
            if isinstance(resumed, _Stop):
                return await self._finalize(resumed.response, chain)
            request = resumed or request
            while True:
                request = await self._round_request(request, chain, loop)
                response = await self._after_call(await inner.next_call(request), chain)
                step = await self._after_round(loop, request, response)
                if isinstance(step, _Stop):
                    return await self._finalize(step.response, chain)
                request = step
        except UsageLimitExceeded as exc:
            return await self._finalize(_usage_stop(exc, loop, request).response, chain)

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        request = await self._initialize(request, chain)
        inner = chain.copy(self)
        loop = _Loop(
            run=chain.run, inner=inner.stream_advisors, approvals=Approvals(self.tool_calling_manager)
        )
        try:
            resumed = await self._resume(loop, request) if Approvals.may_be_waiting(request) else None
        except UsageLimitExceeded as exc:
            resumed = _usage_stop(exc, loop, request)
        if isinstance(resumed, _Stop):
            yield resumed.response
            await self._finalize(resumed.response, chain)
            return
        request = resumed or request
        sent = False  # whether text went out live (a limit's ending then starts a paragraph)
        try:
            while True:
                request = await self._round_request(request, chain, loop)
                # The round's answer is aggregated as it streams: its chunks are not kept (they go out).
                aggregation = StreamAggregation()
                held: list[ChatClientResponse] = []  # chunks with tool calls or a finish reason
                async with closing(inner.next_stream(request)) as stream:
                    async for chunk in stream:
                        aggregation.add_client(chunk)
                        if _decides_the_round(chunk):
                            held.append(chunk)
                        else:
                            sent = True
                            yield chunk  # text streams live
                aggregated = aggregation.client_response()
                step = await self._after_round(loop, request, await self._after_call(aggregated, chain))
                if isinstance(step, ChatClientRequest):
                    for chunk in held:  # a round that asked for tools: only its text goes out
                        text = _text_only(chunk)
                        if text is not None:
                            sent = True
                            yield text
                    request = step
                    continue
                if step.approval:  # one final chunk; its text is what did not stream live already
                    yield _unstreamed_text_only(step.response, held)
                else:
                    for chunk in [step.response] if step.synthetic else _final_chunks(held, step.response):
                        yield chunk
                    if not held and not step.synthetic and loop.replacements:
                        yield ChatClientResponse(None, step.response.context)  # context-only (§3)
                await self._finalize(step.response, chain)
                return
        except UsageLimitExceeded as exc:
            stop = _usage_stop(exc, loop, request, after_text=sent)  # the text went out; the ending follows
            yield stop.response
            await self._finalize(stop.response, chain)

    # -- one round's decision, shared by both paths --------------------------------------------

    async def _after_round(
        self, loop: _Loop, request: ChatClientRequest, response: ChatClientResponse
    ) -> ChatClientRequest | _Stop:
        """Execute the round's tool calls and return the next request, or the loop's end (whose
        context hands on every history replacement of the loop)."""
        request = _with_replacements(loop, request, response)
        step = await self._decide_round(loop, request, response)
        if isinstance(step, _Stop) and loop.replacements:
            every = {AdvisorParams.HISTORY_REPLACEMENTS: tuple(loop.replacements)}
            return dataclasses.replace(
                step, response=step.response.copy(context={**step.response.context, **every})
            )
        return step

    async def _decide_round(
        self, loop: _Loop, request: ChatClientRequest, response: ChatClientResponse
    ) -> ChatClientRequest | _Stop:
        loop.iteration += 1
        if loop.run.listener is not None:
            loop.run.emit(RoundFinished(loop.run.id, loop.iteration, _agent(request)))
        chat = response.chat_response
        loop.usages.append(chat.metadata.usage if chat is not None else None)
        if not self.tool_execution_eligibility_checker(chat):
            return _Stop(with_total_usage(response, loop.usages), synthetic=False)
        if chat is None:
            raise ChainConfigurationError(
                f"the eligibility checker of {self.name!r} asked for tool execution, but there is no response"
            )
        self._check_iterations(loop, chat)
        prompt = self._manager_prompt(loop, request)
        decided = await loop.approvals.decide(prompt, chat)
        if isinstance(decided, Pending):
            stored = await _stored(loop, request)
            waiting = Approvals.ending(response, chat, decided, prompt.instructions, stored)
            return _Stop(with_total_usage(waiting, loop.usages), synthetic=True, approval=True)
        return await self._execute(loop, request, response, chat, prompt, decided)

    async def _execute(
        self,
        loop: _Loop,
        request: ChatClientRequest,
        response: ChatClientResponse,
        chat: ChatResponse,
        prompt: Prompt,
        decisions: Mapping[str, Decision] | None,
    ) -> ChatClientRequest | _Stop:
        """Run the round's tool calls (the decided ones, when approvals were needed); the next
        round's request, or the loop's end."""
        run = loop.run
        meter = run.meter
        ran = len(_calls_that_ran(chat, decisions))
        meter.before_tool_calls(ran)  # the run's tool_calls_limit: the round runs whole or not at all
        try:
            if run.gated:  # what must pass before any tool of the run runs (input guards)
                await run.wait_gates()
            if run.listener is not None:
                _emit_calls(run, request, _calls_that_ran(chat, decisions))
            with run.active():  # tools (and requests they make) find their run
                result = await loop.approvals.run(prompt, chat, decisions)
        except ToolCallLimitExceeded as exc:
            run.put(_END, None)  # the limit ends the loop whatever a tool asked
            meter.ran_tool_calls(_executed_before_limit(exc, ran))
            limited = ChatResponse.of(
                AssistantMessage(f"I stopped calling tools: {exc}."),
                FinishReason.TOOL_CALL_LIMIT_EXCEEDED,
                id=chat.metadata.id,
                model=chat.metadata.model,
            )
            return _Stop(with_total_usage(response, loop.usages, limited), synthetic=True)
        meter.ran_tool_calls(ran)
        if run.listener is not None:
            _emit_results(run, request, chat, result)
        self._check_malformed(loop, chat, decisions, result)
        loop.history = result.conversation_history
        if run.get(_END):  # a tool ended the loop: the round's end, with the history, is the loop's answer
            run.put(_END, None)
            history = {AdvisorParams.CONVERSATION_HISTORY: loop.history}
            ended = response.copy(context={**response.context, **history})
            return _Stop(with_total_usage(ended, loop.usages), synthetic=True, approval=True)
        if result.return_direct:
            direct = ChatResponse(
                ToolExecutionResult.build_generations(result),
                dataclasses.replace(chat.metadata, finish_reason=ToolExecutionResult.FINISH_REASON),
            )
            return _Stop(with_total_usage(response, loop.usages, direct), synthetic=True)
        context = {**request.context, **response.context}
        context.pop(AdvisorParams.HISTORY_REPLACEMENTS, None)  # applied once, in this round
        instructions = await self._next_instructions(request, response, result)
        return request.copy(prompt=request.prompt.copy(instructions=instructions), context=context)

    async def _next_instructions(
        self, request: ChatClientRequest, response: ChatClientResponse, result: ToolExecutionResult
    ) -> tuple[Message, ...]:
        """The next round's messages (``do_get_next_instructions_for_tool_call``, checked); the
        full history as it is when the hook is the base one and the history is on."""
        hook = "do_get_next_instructions_for_tool_call"
        if self.conversation_history_enabled and not _overrides(type(self), hook):
            return result.conversation_history
        messages = await self.do_get_next_instructions_for_tool_call(request, response, result)
        if type(messages) is not list and not isinstance(messages, Sequence):
            raise ChainConfigurationError(
                f"advisor {self.name!r} returned {messages!r} from {hook}; "
                "return the list of messages for the next round"
            )
        return tuple(messages)

    async def _resume(self, loop: _Loop, request: ChatClientRequest) -> ChatClientRequest | _Stop | None:
        """A round waiting for approval at the end of the conversation: run it with the request's
        decisions (the next request), or end again with APPROVAL_REQUIRED when it has none; None
        when nothing waits."""
        approvals = loop.approvals
        stored = await _stored(loop, request) if Approvals.needs_stored(request) else None
        waiting = approvals.waiting(request, stored)
        if waiting is None:
            return None
        chat, history = waiting.chat, waiting.history
        prompt = request.prompt.copy(instructions=history)
        response = ChatClientResponse(chat, request.context)
        decided = await approvals.decide(prompt, chat, waiting.given)
        if isinstance(decided, Pending):
            ending = Approvals.ending(response, chat, decided, history)
            return _Stop(with_total_usage(ending, loop.usages), synthetic=True, approval=True)
        step = await self._execute(loop, request.copy(prompt=prompt), response, chat, prompt, decided)
        resumed = {AdvisorParams.RESUMED_TOOL_RESPONSES: loop.history[-1] if loop.history else None}
        if isinstance(step, _Stop):
            return dataclasses.replace(
                step, response=step.response.copy(context={**step.response.context, **resumed})
            )
        return step.copy(context={**step.context, **resumed})

    def _check_iterations(self, loop: _Loop, chat: ChatResponse) -> None:
        if self.max_iterations is not None and loop.iteration >= self.max_iterations:
            names = [c.name for g in chat.generations for c in g.output.tool_calls]
            raise MaxIterationsExceeded(
                f"the tool loop made {loop.iteration} model calls (max_iterations={self.max_iterations}) "
                f"and the model still asks for tools {names!r}; raise max_iterations or change the prompt",
                max_iterations=self.max_iterations,
            )

    def _check_malformed(
        self,
        loop: _Loop,
        chat: ChatResponse,
        decisions: Mapping[str, Decision] | None,
        result: ToolExecutionResult,
    ) -> None:
        """Count rounds whose every call that ran had unparsable arguments; too many in a row end
        the loop. The library's manager reports them; any other manager's calls are parsed here."""
        ran = _calls_that_ran(chat, decisions)
        if isinstance(self.tool_calling_manager, ToolCallingManager):
            malformed = result.malformed_calls
        else:
            malformed = tuple(c for c in ran if not _is_json(c.arguments))
        if not malformed or len(malformed) < len(ran):
            loop.malformed_rounds = 0
            return
        loop.malformed_rounds += 1
        if loop.malformed_rounds >= self.max_malformed_rounds:
            last = malformed[-1]
            raise ToolExecutionError(
                f"the model sent tool arguments that are not valid JSON in {loop.malformed_rounds} rounds "
                f"in a row (max_malformed_rounds={self.max_malformed_rounds}); the last call of tool "
                f"{last.name!r} had arguments {last.arguments[:500]!r}",
                tool_name=last.name,
                tool_call_id=last.id,
            )

    def _manager_prompt(self, loop: _Loop, request: ChatClientRequest) -> Prompt:
        # The manager always sees the loop's full history (its limits count the whole turn), even
        # when the model is sent less.
        if self.conversation_history_enabled or loop.history is None:
            return request.prompt
        return request.prompt.copy(instructions=loop.history)

    # -- the hooks, with their results checked --------------------------------------------------

    async def _initialize(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientRequest:
        if request is None or chain is None:
            missing = "request" if request is None else "chain"
            raise ChainConfigurationError(f"{self.name!r} was given no {missing}; it must not be None")
        if not _overrides(type(self), "do_initialize_loop"):
            return request
        return checked_request(await self.do_initialize_loop(request, chain), self, "do_initialize_loop")

    async def _round_request(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain, loop: _Loop
    ) -> ChatClientRequest:
        """The round's request after ``do_before_call``, its context naming the round."""
        if _overrides(type(self), "do_before_call"):
            request = checked_request(await self.do_before_call(request, chain), self, "do_before_call")
        if loop.iteration == 0:  # a loop continued in the same turn (a handoff) numbers its rounds after it
            given = request.context.get(AdvisorParams.TOOL_LOOP_ITERATION)
            loop.offset = given if type(given) is int else 0
        if loop.run.listener is not None:
            loop.run.emit(RoundStarted(loop.run.id, loop.iteration + 1, _agent(request)))
        return request.copy(
            context={**request.context, AdvisorParams.TOOL_LOOP_ITERATION: loop.offset + loop.iteration + 1}
        )

    async def _after_call(
        self, response: ChatClientResponse, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientResponse:
        return await self._response_hook("do_after_call", response, chain)

    async def _finalize(
        self, response: ChatClientResponse, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientResponse:
        return await self._response_hook("do_finalize_loop", response, chain)

    async def _response_hook(
        self,
        hook: Literal["do_after_call", "do_finalize_loop"],
        response: ChatClientResponse,
        chain: CallAdvisorChain | StreamAdvisorChain,
    ) -> ChatClientResponse:
        """``response`` through a subclass's ``hook``, checked (the base class's hooks are skipped)."""
        if not _overrides(type(self), hook):
            return response
        return checked_response(await getattr(self, hook)(response, chain), self, hook)

    async def do_initialize_loop(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientRequest:
        """Once, before the first round (set up loop state, augment the prompt)."""
        return request

    async def do_before_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientRequest:
        """Before each round; the returned request is what the rest of the chain receives."""
        return request

    async def do_after_call(
        self, response: ChatClientResponse, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientResponse:
        """After each round (on the stream path: the round's aggregated response); the returned
        response decides whether tools run."""
        return response

    async def do_finalize_loop(
        self, response: ChatClientResponse, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientResponse:
        """Once, after the loop ended (on the stream path for observation only)."""
        return response

    async def do_get_next_instructions_for_tool_call(
        self,
        request: ChatClientRequest,
        response: ChatClientResponse,
        tool_execution_result: ToolExecutionResult,
    ) -> list[Message]:
        """The next round's messages: the full history, or — with conversation history off — the
        system message (when there is one) and the newest ToolResponseMessage."""
        history = tool_execution_result.conversation_history
        if self.conversation_history_enabled:
            return list(history)
        messages: list[Message] = []
        system = request.prompt.system_message
        if system is not None:
            messages.append(system)
        messages.extend(m for m in history[-1:] if isinstance(m, ToolResponseMessage))
        return messages


def _usage_stop(
    error: UsageLimitExceeded, loop: _Loop, request: ChatClientRequest, *, after_text: bool = False
) -> _Stop:
    """The loop's end on a usage limit of the run whose limits say ``on_exceeded="finish"`` (one
    answer saying which limit was hit, like a tool-call limit); otherwise ``error`` propagates."""
    ending = limit_ending(error, loop.run.meter, after_text=after_text)
    if ending is None:
        raise error
    return _Stop(ChatClientResponse(ending, request.context), synthetic=True)


def _executed_before_limit(error: ToolCallLimitExceeded, handed: int) -> int:
    """How many of the ``handed`` calls ran before the manager's per-turn limit stopped the round
    (the library's manager answers the others "not executed")."""
    partial = error.partial_result
    history = getattr(partial, "conversation_history", None)
    last = history[-1] if history else None
    if not isinstance(last, ToolResponseMessage):
        return 0
    skipped = sum(1 for r in last.responses if r.response_data.startswith(NOT_EXECUTED))
    return max(0, min(handed, len(last.responses) - skipped))


async def _stored(loop: _Loop, request: ChatClientRequest) -> list[Message] | None:
    """The conversation a memory advisor inside the loop holds for ``request`` (None without one):
    what approvals read a waiting round and report the history from."""
    memory = next((a for a in loop.inner if isinstance(a, MemoryAdvisor)), None)
    return None if memory is None else list(await memory.conversation_history(request))


def _agent(request: ChatClientRequest) -> str | None:
    agent = request.context.get(AdvisorParams.ACTIVE_AGENT)
    return agent if isinstance(agent, str) else None


def _emit_calls(run: Run, request: ChatClientRequest, calls: Sequence[ToolCall]) -> None:
    agent = _agent(request)
    for call in calls:
        run.emit(ToolCallStarted(run.id, call, agent))


def _emit_results(
    run: Run, request: ChatClientRequest, chat: ChatResponse, result: ToolExecutionResult
) -> None:
    """A ToolCallFinished for each call of the round, with the response the model is sent."""
    history = result.conversation_history
    last = history[-1] if history else None
    message = tool_call_message(chat)
    if not isinstance(last, ToolResponseMessage) or message is None:
        return
    calls = {c.id: c for c in message.tool_calls}
    agent = _agent(request)
    for response in last.responses:
        call = calls.get(response.id)
        if call is not None:
            run.emit(ToolCallFinished(run.id, call, response.response_data, agent))


def _overrides(cls: type, hook: str) -> bool:
    """True when ``cls`` overrides the ``hook`` of ToolCallingAdvisor: the base hooks change
    nothing, so a loop that keeps them skips their await (a few per round). Looked up each time
    (two class attribute reads), so a hook patched onto a class later is seen."""
    return getattr(cls, hook) is not getattr(ToolCallingAdvisor, hook)


def _with_replacements(
    loop: _Loop, request: ChatClientRequest, response: ChatClientResponse
) -> ChatClientRequest:
    """``request`` with the history replacements an advisor inside the loop made in this round
    (``AdvisorParams.HISTORY_REPLACEMENTS``) applied, and the loop's full history likewise: the
    loop continues from the rewritten history."""
    made = replacements_in(response.context)
    if not made:
        return request
    loop.replacements.extend(made)
    if loop.history is not None:
        loop.history = tuple(replace_history(loop.history, made))
    instructions = replace_history(request.prompt.instructions, made)
    return request.copy(prompt=request.prompt.copy(instructions=instructions))


# -- stream helpers --------------------------------------------------------------------------------


def _decides_the_round(chunk: ChatClientResponse) -> bool:
    """A chunk with tool calls or a finish reason waits until the round's fate is known."""
    chat = chunk.chat_response
    if chat is None:
        return False
    generations = chat.generations
    if len(generations) == 1:  # a text delta, mostly: read once per streamed chunk
        first = generations[0]
        finished = chat.metadata.finish_reason is not None or first.finish_reason is not None
        return finished or bool(first.output.tool_calls)
    return chat.has_tool_calls() or chat.finish_reason is not None


def _text_only(chunk: ChatClientResponse) -> ChatClientResponse | None:
    """The text of a held chunk of a round that asked for tools (no tool calls, no finish reason)."""
    chat = chunk.chat_response
    text = chat.text if chat is not None else None
    if chat is None or not text:
        return None
    metadata = dataclasses.replace(chat.metadata, finish_reason=None, usage=None)
    return chunk.copy(chat_response=ChatResponse((Generation(AssistantMessage(text)),), metadata))


def _unstreamed_text_only(final: ChatClientResponse, held: list[ChatClientResponse]) -> ChatClientResponse:
    """``final`` with its message's text cut to what the held chunks had (the rest streamed live)."""
    chat = final.chat_response
    if chat is None or not chat.generations:
        return final
    texts = [c.chat_response.text for c in held if c.chat_response is not None and c.chat_response.text]
    first = chat.generations[0]
    output = dataclasses.replace(first.output, text="".join(texts) if texts else None)
    generation = dataclasses.replace(first, output=output)
    return final.copy(
        chat_response=dataclasses.replace(chat, generations=(generation, *chat.generations[1:]))
    )


def _calls_that_ran(chat: ChatResponse, decisions: Mapping[str, Decision] | None) -> tuple[ToolCall, ...]:
    message = tool_call_message(chat)
    if message is None:
        return ()
    if not decisions:
        return tuple(message.tool_calls)
    return tuple(c for c in message.tool_calls if not isinstance(decisions.get(c.id), Denied))


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _final_chunks(held: list[ChatClientResponse], final: ChatClientResponse) -> list[ChatClientResponse]:
    """The held chunks of the last round, whole; the last carries the loop's total usage (and the
    loop's history replacements, when advisors inside it made any)."""
    if not held:
        return []
    last = held[-1]
    usage = final.chat_response.metadata.usage if final.chat_response is not None else None
    if last.chat_response is not None and usage is not None:
        last = last.copy(chat_response=last.chat_response.with_usage(usage))
    replacements = final.context.get(AdvisorParams.HISTORY_REPLACEMENTS)
    if replacements:
        last = last.copy(context={**last.context, AdvisorParams.HISTORY_REPLACEMENTS: replacements})
    return [*held[:-1], last]
