"""ToolCallingAdvisor: the recursive tool loop, as an advisor.

Each round calls ``chain.copy(self)`` — the advisors after this one, then the model — and, while
the response asks for tools, has the ToolCallingManager execute them and goes round again.
Advisors inside the loop (higher order) run on every round; advisors outside run once. The call and
the stream path share one family of async hooks (``do_*``) that subclasses override.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import ClassVar

from .._streams import close_stream
from ..errors import MaxIterationsExceeded, ToolCallLimitExceeded
from ..messages import AssistantMessage, Message, ToolResponseMessage
from ..model import ChatClientMessageAggregator, ChatResponse, Generation, Prompt, Usage
from ..tools.manager import ToolCallingManager, ToolExecutionResult
from .api import (
    AdvisorParams,
    CallAdvisorChain,
    ChatClientRequest,
    ChatClientResponse,
    Ordered,
    StreamAdvisorChain,
    ToolAdvisor,
)

__all__ = ["ToolCallingAdvisor"]

LIMIT_FINISH_REASON = "toolCallLimitExceeded"


def _default_eligibility(response: ChatResponse | None) -> bool:
    return response is not None and response.has_tool_calls()


@dataclass(slots=True)
class _Loop:
    """The state of one loop: the full history the manager sees, rounds run, usage per round."""

    history: tuple[Message, ...] | None = None
    iteration: int = 0
    usages: list[Usage | None] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Stop:
    response: ChatClientResponse
    synthetic: bool  # made by the loop (return direct, limit), not by the model


class ToolCallingAdvisor(ToolAdvisor):
    """Runs the tool loop: calls the rest of the chain, executes requested tools, repeats.

    >>> client = ChatClient(model, default_advisors=[ToolCallingAdvisor(max_iterations=10)])
    """

    DEFAULT_ORDER: ClassVar[int] = Ordered.HIGHEST_PRECEDENCE + 300

    def __init__(
        self,
        tool_calling_manager: ToolCallingManager | None = None,
        tool_execution_eligibility_checker: Callable[[ChatResponse | None], bool] | None = None,
        order: int = DEFAULT_ORDER,
        conversation_history_enabled: bool = True,
        max_iterations: int | None = None,
    ) -> None:
        if isinstance(order, bool) or not isinstance(order, int):
            raise ValueError(f"order must be an int, got {order!r}")
        if not Ordered.HIGHEST_PRECEDENCE < order < Ordered.LOWEST_PRECEDENCE:
            raise ValueError(
                f"order {order} must lie strictly between Ordered.HIGHEST_PRECEDENCE and "
                "Ordered.LOWEST_PRECEDENCE, so advisors can run outside and inside the loop"
            )
        if max_iterations is not None and (isinstance(max_iterations, bool) or max_iterations < 1):
            raise ValueError(f"max_iterations must be a positive int or None, got {max_iterations!r}")
        self.tool_calling_manager = tool_calling_manager or ToolCallingManager()
        self.tool_execution_eligibility_checker = tool_execution_eligibility_checker or _default_eligibility
        self.order = order
        self.conversation_history_enabled = conversation_history_enabled
        self.max_iterations = max_iterations

    @property
    def name(self) -> str:
        return "Tool Calling Advisor"

    # -- the two paths -------------------------------------------------------------------------

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        request = await self.do_initialize_loop(request, chain)
        inner, loop = chain.copy(self), _Loop()
        while True:
            request = _numbered(await self.do_before_call(request, chain), loop)
            response = await self.do_after_call(await inner.next_call(request), chain)
            step = await self._after_round(loop, request, response)
            if isinstance(step, _Stop):
                return await self.do_finalize_loop(step.response, chain)
            request = step

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        request = await self.do_initialize_loop(request, chain)
        inner, loop = chain.copy(self), _Loop()
        while True:
            request = _numbered(await self.do_before_call(request, chain), loop)
            chunks: list[ChatClientResponse] = []
            held: list[ChatClientResponse] = []
            source = inner.next_stream(request)
            try:
                async for chunk in source:
                    chunks.append(chunk)
                    live = _live_part(chunk, held)
                    if live is not None:
                        yield live
            finally:
                await close_stream(source)
            aggregated = ChatClientMessageAggregator.aggregate_responses(chunks)
            step = await self._after_round(loop, request, await self.do_after_call(aggregated, chain))
            if isinstance(step, ChatClientRequest):
                request = step
                continue
            for chunk in [step.response] if step.synthetic else _final_chunks(held, step.response):
                yield chunk
            await self.do_finalize_loop(step.response, chain)
            return

    # -- one round's decision, shared by both paths --------------------------------------------

    async def _after_round(
        self, loop: _Loop, request: ChatClientRequest, response: ChatClientResponse
    ) -> ChatClientRequest | _Stop:
        """Execute the round's tool calls and return the next request, or the loop's end."""
        loop.iteration += 1
        chat = response.chat_response
        loop.usages.append(chat.metadata.usage if chat is not None else None)
        if not self.tool_execution_eligibility_checker(chat):
            return _Stop(self._with_total_usage(response, chat, loop), synthetic=False)
        if chat is None:
            raise ValueError("the eligibility checker asked for tool execution, but there is no response")
        self._check_iterations(loop, chat)
        try:
            result = await self.tool_calling_manager.execute_tool_calls(
                self._manager_prompt(loop, request), chat
            )
        except ToolCallLimitExceeded as exc:
            limited = ChatResponse.of(
                AssistantMessage(f"I stopped calling tools: {exc}."),
                LIMIT_FINISH_REASON,
                id=chat.metadata.id,
                model=chat.metadata.model,
            )
            return _Stop(self._with_total_usage(response, limited, loop), synthetic=True)
        loop.history = result.conversation_history
        if result.return_direct:
            direct = ChatResponse(
                ToolExecutionResult.build_generations(result),
                dataclasses.replace(chat.metadata, finish_reason=ToolExecutionResult.FINISH_REASON),
            )
            return _Stop(self._with_total_usage(response, direct, loop), synthetic=True)
        messages = await self.do_get_next_instructions_for_tool_call(request, response, result)
        return request.copy(
            prompt=request.prompt.copy(instructions=tuple(messages)),
            context={**request.context, **response.context},
        )

    def _check_iterations(self, loop: _Loop, chat: ChatResponse) -> None:
        if self.max_iterations is not None and loop.iteration >= self.max_iterations:
            names = [c.name for g in chat.generations for c in g.output.tool_calls]
            raise MaxIterationsExceeded(
                f"the tool loop made {loop.iteration} model calls (max_iterations={self.max_iterations}) "
                f"and the model still asks for tools {names!r}; raise max_iterations or change the prompt",
                max_iterations=self.max_iterations,
            )

    def _manager_prompt(self, loop: _Loop, request: ChatClientRequest) -> Prompt:
        # The manager always sees the loop's full history (its limits count the whole turn), even
        # when the model is sent less.
        if self.conversation_history_enabled or loop.history is None:
            return request.prompt
        return request.prompt.copy(instructions=loop.history)

    @staticmethod
    def _with_total_usage(
        response: ChatClientResponse, chat: ChatResponse | None, loop: _Loop
    ) -> ChatClientResponse:
        total = Usage.sum(loop.usages)
        if chat is None or total is None:
            return response.copy(chat_response=chat)
        return response.copy(chat_response=chat.with_usage(total))

    # -- hooks -----------------------------------------------------------------------------------

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


def _numbered(request: ChatClientRequest, loop: _Loop) -> ChatClientRequest:
    """The round's request, its context naming the round (AdvisorParams.TOOL_LOOP_ITERATION)."""
    return request.copy(context={**request.context, AdvisorParams.TOOL_LOOP_ITERATION: loop.iteration + 1})


# -- stream helpers --------------------------------------------------------------------------------


def _live_part(chunk: ChatClientResponse, held: list[ChatClientResponse]) -> ChatClientResponse | None:
    """What of ``chunk`` the caller gets now: text deltas pass; a chunk with tool calls or a finish
    reason is held back (only its text goes out now) until the round's fate is known."""
    chat = chunk.chat_response
    if chat is None or not (chat.has_tool_calls() or chat.finish_reason is not None):
        return chunk
    text = chat.text
    if not text:
        held.append(chunk)
        return None
    first = chat.generations[0]
    held.append(
        chunk.copy(
            chat_response=dataclasses.replace(
                chat,
                generations=(
                    dataclasses.replace(first, output=dataclasses.replace(first.output, text=None)),
                    *chat.generations[1:],
                ),
            )
        )
    )
    metadata = dataclasses.replace(chat.metadata, finish_reason=None, usage=None)
    return chunk.copy(chat_response=ChatResponse((Generation(AssistantMessage(text)),), metadata))


def _final_chunks(held: list[ChatClientResponse], final: ChatClientResponse) -> list[ChatClientResponse]:
    """The held end-of-answer chunks of the last round; the last carries the loop's total usage."""
    if not held:
        return []
    last = held[-1]
    usage = final.chat_response.metadata.usage if final.chat_response is not None else None
    if last.chat_response is not None and usage is not None:
        last = last.copy(chat_response=last.chat_response.with_usage(usage))
    return [*held[:-1], last]
