"""``MessageChatMemoryAdvisor``: gives the model the conversation so far and remembers the exchange.

Outside the tool loop (the default order, before ``ToolCallingAdvisor``) it runs once per request
and stores the user message and the final answer. Inside the loop (an order greater than the
ToolCallingAdvisor's) it runs on every iteration and stores every message the loop produces:
assistant tool-call messages, tool responses and the final answer, each once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, ClassVar

from .._checks import check_conversation_id
from .._streams import closing
from ..memory.api import ChatMemory, conversation_id_of
from ..messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage, UserMessage
from ..model import ChatClientMessageAggregator, ChatClientRequest, ChatClientResponse, ChatResponse
from .chain import CallAdvisorChain, StreamAdvisorChain
from .vocabulary import MEMORY_ORDER, AdvisorParams, MemoryAdvisor, check_order

__all__ = ["MessageChatMemoryAdvisor"]


class MessageChatMemoryAdvisor(MemoryAdvisor):
    """Prepends the conversation's stored messages to the prompt and stores the new ones.

    Before the model: loads the history of the request's conversation (request param
    ``ChatMemory.CONVERSATION_ID``, else ``conversation_id``), prepends it unless the prompt already
    holds it (as one contiguous run), moves system messages first, and stores the newest user or
    tool-response message. After: stores the response's assistant message(s).

    Streams are aggregated and the answer stored when the stream ends; a stream that fails or that
    the consumer abandons stores nothing of the answer (the request's message, stored before the
    model was called, stays). Memory is read and written without blocking the event loop.

    >>> memory = MessageWindowChatMemory(SQLiteChatMemoryRepository("chat.db"))
    >>> client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])
    >>> client.prompt("I'm Ada.").param(ChatMemory.CONVERSATION_ID, "u42").call().content()
    """

    DEFAULT_ORDER: ClassVar[int] = MEMORY_ORDER

    def __init__(
        self,
        chat_memory: ChatMemory,
        conversation_id: str = ChatMemory.DEFAULT_CONVERSATION_ID,
        order: int = DEFAULT_ORDER,
    ) -> None:
        if not all(callable(getattr(chat_memory, m, None)) for m in ("get", "add", "clear")):
            raise TypeError(f"chat_memory must be a ChatMemory (get, add, clear), got {chat_memory!r}")
        self.chat_memory = chat_memory
        self.conversation_id = check_conversation_id(conversation_id)
        self._order = check_order(order)

    @property
    def name(self) -> str:
        return "MessageChatMemoryAdvisor"

    @property
    def order(self) -> int:
        return self._order

    async def conversation_history(self, request: ChatClientRequest) -> list[Message]:
        """The stored messages of the request's conversation (the tool loop reads a round that
        waits for approval from here when this advisor sits inside the loop)."""
        return await _get(self.chat_memory, self._conversation_id(request))

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        conversation_id = self._conversation_id(request)
        response = await chain.next_call(await self._before(request, conversation_id))
        if response.chat_response is not None:
            await self._store_answer(
                conversation_id, response.chat_response, _resumed_round(request, response.context)
            )
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        conversation_id = self._conversation_id(request)
        chunks: list[ChatResponse] = []
        round_seen: object = None
        resumed: list[Message] = []
        async with closing(chain.next_stream(await self._before(request, conversation_id))) as stream:
            async for chunk in stream:
                if chunk.chat_response is not None:
                    # Outside the tool loop, only the last round's text is the answer: text streamed
                    # live in earlier (tool-calling) rounds is not part of the final exchange.
                    round_now = chunk.context.get(AdvisorParams.TOOL_LOOP_ITERATION)
                    if round_now != round_seen:
                        chunks.clear()
                        round_seen = round_now
                    chunks.append(chunk.chat_response)
                resumed = resumed or _resumed_round(request, chunk.context)
                yield chunk
        # Reached only when the stream ended normally: a cancelled or failed stream stores nothing.
        if chunks:
            await self._store_answer(conversation_id, ChatClientMessageAggregator.aggregate(chunks), resumed)

    def _conversation_id(self, request: ChatClientRequest) -> str:
        return conversation_id_of(request.context, self.conversation_id) or self.conversation_id

    async def _before(self, request: ChatClientRequest, conversation_id: str) -> ChatClientRequest:
        history = await _get(self.chat_memory, conversation_id)
        instructions = list(request.prompt.instructions)
        start = _find_run(instructions, history)
        if start < 0:
            start, instructions = 0, [*history, *instructions]
        newest = _newest_user_or_tool(instructions)
        if newest is not None and not start <= newest < start + len(history):
            await _add(self.chat_memory, conversation_id, [instructions[newest]])
        from_memory = {id(m) for m in instructions[start : start + len(history)]}
        ordered = _without_unanswered_calls(_system_first(instructions), from_memory)
        return request.copy(prompt=request.prompt.copy(instructions=ordered))

    async def _store_answer(
        self, conversation_id: str, response: ChatResponse, resumed: Sequence[Message] = ()
    ) -> None:
        answers: list[Message] = [*resumed, *(g.output for g in response.generations)]
        if answers:
            await _add(self.chat_memory, conversation_id, answers)


def _find_run(instructions: Sequence[Message], history: Sequence[Message]) -> int:
    """Where ``history`` appears in ``instructions`` as one contiguous run (by equality), or -1."""
    n = len(history)
    if n == 0:
        return 0
    for i in range(len(instructions) - n + 1):
        if instructions[i] == history[0] and list(instructions[i : i + n]) == list(history):
            return i
    return -1


def _newest_user_or_tool(instructions: Sequence[Message]) -> int | None:
    for i in range(len(instructions) - 1, -1, -1):
        if isinstance(instructions[i], UserMessage | ToolResponseMessage):
            return i
    return None


def _system_first(instructions: Sequence[Message]) -> list[Message]:
    systems = [m for m in instructions if isinstance(m, SystemMessage)]
    return [*systems, *(m for m in instructions if not isinstance(m, SystemMessage))]


def _resumed_round(request: ChatClientRequest, context: Mapping[str, Any]) -> list[Message]:
    """Outside the loop: the tool responses of a round that waited for approval and has now run
    (inside the loop they are stored as the next round's request)."""
    resumed = context.get(AdvisorParams.RESUMED_TOOL_RESPONSES)
    outside = AdvisorParams.TOOL_LOOP_ITERATION not in request.context
    return [resumed] if outside and isinstance(resumed, ToolResponseMessage) else []


def _without_unanswered_calls(messages: list[Message], from_memory: set[int]) -> list[Message]:
    """``messages`` where a stored tool-call message that no tool response follows keeps only its text.

    A loop can end without answering its last tool calls (return direct, a tool-call limit,
    max_iterations); inside the loop the tool-call message was stored but its results never reach
    memory, and providers reject tool calls left unanswered, so the next request sends only the text.
    A tool-call message that ends the prompt is kept whole: it is a round waiting for approval, which
    the tool loop resumes.
    """
    result: list[Message] = []
    for i, m in enumerate(messages):
        followed_by_results = i + 1 >= len(messages) or isinstance(messages[i + 1], ToolResponseMessage)
        if (
            isinstance(m, AssistantMessage)
            and m.tool_calls
            and id(m) in from_memory
            and not followed_by_results
        ):
            if m.text:
                result.append(AssistantMessage(m.text, (), m.metadata))
            continue
        result.append(m)
    return result


async def _get(memory: ChatMemory, conversation_id: str) -> list[Message]:
    aget = getattr(memory, "aget", None)
    if aget is not None:
        return list(await aget(conversation_id))
    return await asyncio.to_thread(memory.get, conversation_id)


async def _add(memory: ChatMemory, conversation_id: str, messages: list[Message]) -> None:
    aadd = getattr(memory, "aadd", None)
    if aadd is not None:
        await aadd(conversation_id, messages)
    else:
        await asyncio.to_thread(memory.add, conversation_id, messages)
