"""``MessageChatMemoryAdvisor``: gives the model the conversation so far and remembers the exchange.

Outside the tool loop (the default order, before ``ToolCallingAdvisor``) it runs once per request
and stores the user message and the final answer together, once the answer is complete. Inside
the loop (an order greater than the ToolCallingAdvisor's) it runs on every round and stores each
round whole: the assistant tool-call message with its tool responses, then the final answer.
``conversation_turns`` (which the ChatClient runs every request in, through ``open_run``) keeps
turns on one conversation from interleaving; a turn's state lives in the request's run. When an
advisor inside the loop rewrote the history (``AdvisorParams.HISTORY_REPLACEMENTS``, e.g. a
summary from ContextCompactionAdvisor), the rewrite is stored in place of what it replaced.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .._cache_points import without_cache_points
from .._checks import check_conversation_id
from .._streams import closing
from ..chain import CallAdvisorChain, Run, StreamAdvisorChain
from ..chain.vocabulary import APPROVAL_REQUIRED, MEMORY_ORDER, AdvisorParams, MemoryAdvisor, check_order
from ..memory.api import AtomicChatMemoryRepository, ChatMemory, conversation_id_of
from ..memory.locks import conversation_lock, lock_key
from ..memory.window import MessageWindowChatMemory, apply_window
from ..messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage, UserMessage
from ..model import ChatClientMessageAggregator, ChatClientRequest, ChatClientResponse, ChatResponse
from .history import HistoryReplacement, replace_history, replacements_in

__all__ = ["MessageChatMemoryAdvisor", "conversation_turns", "hold_turn"]


class MessageChatMemoryAdvisor(MemoryAdvisor):
    """Prepends the conversation's stored messages to the prompt and stores the new ones.

    Before the model: loads the history of the request's conversation (request param
    ``ChatMemory.CONVERSATION_ID``, else ``conversation_id``), prepends it unless the prompt already
    holds it (as one contiguous run) and moves system messages first; the advisors after it find
    the conversation's id under ``ChatMemory.CONVERSATION_ID`` in the request context.

    Nothing half-done is stored. Outside the tool loop the user message and the answer are stored
    together, once the answer is complete; a failed, cancelled or abandoned call stores nothing.
    Inside the loop each round's assistant tool-call message is stored together with its tool
    responses (the first round with the user message), and the prompt of every round holds the
    current question and whole rounds only: when the memory's window is too small, older turns
    go first, then the oldest rounds of this turn. Through a ``ChatClient``, turns on one
    conversation never interleave (see ``conversation_turns``). Memory is read and written
    without blocking the event loop.

    A history rewrite that an advisor inside the tool loop hands back
    (``AdvisorParams.HISTORY_REPLACEMENTS``, e.g. ContextCompactionAdvisor's summary) is stored in
    place of the messages it replaced, together with what is stored next (outside the loop: with
    the exchange, once it is complete; inside: at once, the round still waiting for its tool
    responses excepted), and later rounds build on it. The rewrite is one atomic update for a
    ``MessageWindowChatMemory`` on the shipped repositories; another ``ChatMemory`` is rewritten
    with ``clear`` and ``add`` (under the turn lock).

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
        self.order = check_order(order)

    @property
    def name(self) -> str:
        return "MessageChatMemoryAdvisor"

    @classmethod
    def open_run(
        cls, advisors: Sequence[object], request: ChatClientRequest, run: Run
    ) -> AbstractAsyncContextManager[ChatClientRequest]:
        """Held around a whole run by the chain's runner: the conversations' turns (see
        ``conversation_turns``)."""
        return conversation_turns(advisors, request, run)

    async def conversation_history(self, request: ChatClientRequest) -> list[Message]:
        """The stored messages of the request's conversation (the tool loop reads a round that
        waits for approval from here when this advisor sits inside the loop)."""
        return await _get(self.chat_memory, self.conversation_of(request))

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        request, turn = await self._before(request, chain.run)
        response = await chain.next_call(request)
        await self._after(turn, response.chat_response, response.context)
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        request, turn = await self._before(request, chain.run)
        chunks: list[ChatResponse] = []
        round_seen: object = None
        context: Mapping[str, Any] = {}
        async with closing(chain.next_stream(request)) as stream:
            async for chunk in stream:
                context = chunk.context
                if chunk.chat_response is not None:
                    # Outside the tool loop, only the last round's text is the answer: text streamed
                    # live in earlier (tool-calling) rounds is not part of the final exchange.
                    round_now = chunk.context.get(AdvisorParams.TOOL_LOOP_ITERATION)
                    if round_now != round_seen:
                        chunks.clear()
                        round_seen = round_now
                    chunks.append(chunk.chat_response)
                yield chunk
        # Reached only when the stream ended normally: a cancelled or failed stream stores nothing.
        if chunks:
            await self._after(turn, ChatClientMessageAggregator.aggregate(chunks), context)

    def conversation_of(self, request: ChatClientRequest) -> str:
        """The conversation id ``request`` belongs to (its param, else this advisor's default)."""
        return conversation_id_of(request.context, self.conversation_id) or self.conversation_id

    # -- one invocation ------------------------------------------------------------------------

    async def _before(self, request: ChatClientRequest, run: Run) -> tuple[ChatClientRequest, _Turn]:
        conversation_id = self.conversation_of(request)
        iteration = request.context.get(AdvisorParams.TOOL_LOOP_ITERATION)
        turn = run.slot(self, lambda: _Turn(conversation_id))
        if turn.conversation_id != conversation_id:
            turn = run.put(self, _Turn(conversation_id))
        turn.inside = iteration is not None
        if iteration is None or iteration == 1 or turn.older is None:
            instructions = await self._first_round(request, turn)
        else:
            instructions = await self._next_round(request, turn)
        context = request.context
        if ChatMemory.CONVERSATION_ID not in context:  # name it for the advisors after this one
            context = {**context, ChatMemory.CONVERSATION_ID: conversation_id}
        return request.copy(prompt=request.prompt.copy(instructions=instructions), context=context), turn

    async def _first_round(self, request: ChatClientRequest, turn: _Turn) -> list[Message]:
        turn.restart()
        stored = await _get(self.chat_memory, turn.conversation_id)
        instructions = list(request.prompt.instructions)
        start = _find_run(instructions, stored)
        if start < 0:
            start, instructions = 0, [*stored, *instructions]
        from_memory = {id(m) for m in instructions[start : start + len(stored)]}
        newest = _newest_user_or_tool(instructions)
        if newest is not None and id(instructions[newest]) in from_memory:
            newest = None
        ordered = _without_unanswered_calls(_system_first(instructions), from_memory)
        systems: list[Message] = [m for m in ordered if isinstance(m, SystemMessage)]
        rest: list[Message] = [m for m in ordered if not isinstance(m, SystemMessage)]
        split = len(rest) if newest is None else _index_by_identity(rest, instructions[newest])
        older, turn.older = rest[:split], rest[:split]
        turn.messages = rest[split:]
        turn.unstored = [instructions[newest]] if newest is not None else []
        return _fit(systems, older, turn.messages, self._budget()) if turn.inside else ordered

    async def _next_round(self, request: ChatClientRequest, turn: _Turn) -> list[Message]:
        """A later round of the tool loop: the round before is now whole; store it, then send the
        question and the rounds that fit."""
        systems: list[Message] = [m for m in request.prompt.instructions if isinstance(m, SystemMessage)]
        known = turn.messages
        new = [
            m
            for m in request.prompt.instructions
            if not isinstance(m, SystemMessage) and not any(m == k for k in known)
        ]
        turn.messages = [*known, *new]
        turn.unstored.extend(new)
        await self._store(turn, [])
        return _fit(systems, turn.older or [], turn.messages, self._budget())

    async def _after(
        self, turn: _Turn, response: ChatResponse | None, context: Mapping[str, Any] | None = None
    ) -> None:
        if response is None:  # no answer: outside the loop the question is not stored alone
            turn.unstored = turn.unstored if turn.inside else []
            return
        answers: list[Message] = [g.output for g in response.generations]
        replacements = replacements_in(context) if context is not None else ()
        if turn.inside and replacements:  # the round was sent a rewritten history: build on it
            _replace_in_turn(turn, replacements)
            await self._store(turn, [], replacements, unstored=False)
        if not turn.inside and context is not None:
            if _still_waiting(turn, response, answers):
                return  # a resume without decisions ended where it was: that round is stored already
            resumed = context.get(AdvisorParams.RESUMED_TOOL_RESPONSES)
            if isinstance(resumed, ToolResponseMessage):  # a waiting round ran: its answers first
                turn.unstored.append(resumed)
        if turn.inside and any(isinstance(a, AssistantMessage) and a.tool_calls for a in answers):
            # Its tool responses come in the next round; the call is stored with them.
            turn.messages.extend(answers)
            turn.unstored.extend(answers)
            return
        if turn.inside:
            turn.messages.extend(answers)
        await self._store(turn, answers, () if turn.inside else replacements)

    async def _store(
        self,
        turn: _Turn,
        answers: list[Message],
        replacements: Sequence[HistoryReplacement] = (),
        *,
        unstored: bool = True,
    ) -> None:
        """Store what waits and ``answers`` (with ``unstored=False``: nothing new), with the stored
        messages that ``replacements`` replaced replaced, in one write."""
        messages = [*turn.unstored, *answers] if unstored else []
        if unstored:
            turn.unstored = []
        if replacements:
            await _rewrite(self.chat_memory, turn.conversation_id, replacements, messages)
        elif messages:
            await _add(self.chat_memory, turn.conversation_id, messages)

    async def _finish(self, turn: _Turn) -> None:
        """The turn ended well: inside the loop, store what waits (a tool-call round the loop ended
        on — return direct, a limit, an approval pause — whose tool responses never reach this
        advisor). Outside the loop a question is only ever stored with its answer."""
        if turn.inside:
            await self._store(turn, [])

    def _budget(self) -> int | None:
        size = getattr(self.chat_memory, "max_messages", None)
        return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


@asynccontextmanager
async def conversation_turns(
    advisors: Sequence[object], request: ChatClientRequest, run: Run
) -> AsyncIterator[ChatClientRequest]:
    """Hold the turn of every conversation the memory advisors among ``advisors`` use for ``request``.

    The ChatClient runs each request inside this (``MessageChatMemoryAdvisor.open_run``): a second
    request on a conversation whose turn is still running waits for it (across processes too, when
    the memory's repository can lock), so turns never interleave; an error or cancellation releases
    the turn. The turns live in ``run`` (one slot per advisor). Yields the request to run.
    """
    memories = [a for a in advisors if isinstance(a, MessageChatMemoryAdvisor)]
    if not memories:
        yield request
        return
    turns = {id(a): run.put(a, _Turn(a.conversation_of(request))) for a in memories}
    locks = {lock_key(a.chat_memory, turns[id(a)].conversation_id): a for a in memories}
    # The turns the runs around this one hold (a tool of theirs made this request): not waited for.
    held: frozenset[object] = frozenset().union(
        *(r.slot(_HELD_LOCKS, set) for r in run.enclosing() if r is not run)
    )
    async with AsyncExitStack() as stack:
        for key in sorted(locks):  # one global order: two requests never wait on each other
            advisor = locks[key]
            await stack.enter_async_context(
                conversation_lock(advisor.chat_memory, turns[id(advisor)].conversation_id, held)
            )
        held_here: set[object] = run.slot(_HELD_LOCKS, set)
        held_here.update(locks)
        yield request
        for advisor in memories:
            await advisor._finish(turns[id(advisor)])


_HELD_LOCKS = object()
"""The run slot holding the turn-lock keys (``lock_key``) the run holds."""


@asynccontextmanager
async def hold_turn(memory: ChatMemory, conversation_id: str) -> AsyncIterator[Run]:
    """Hold the turn of ``conversation_id`` in ``memory`` (waiting while another turn holds it)
    and yield a run that holds it: a request made with that run as its parent
    (``spec._run_settings(parent=run)``) goes on inside the turn instead of waiting for it. What a
    server that reads the stored conversation before it builds the request (the served protocols)
    uses, so nothing can change the conversation between the read and the turn."""
    run = Run()
    async with conversation_lock(memory, conversation_id):
        held: set[object] = run.slot(_HELD_LOCKS, set)
        held.add(lock_key(memory, conversation_id))
        yield run


@dataclass(eq=False)
class _Turn:
    """One turn of one conversation as a memory advisor sees it.

    ``older`` is the history before the turn, ``messages`` the turn so far (its question, then each
    round), ``unstored`` those not stored yet (a tool-call message waits for its tool responses).
    """

    conversation_id: str
    inside: bool = False
    older: list[Message] | None = None
    messages: list[Message] = field(default_factory=list)
    unstored: list[Message] = field(default_factory=list)

    def restart(self) -> None:
        self.older, self.messages, self.unstored = None, [], []


def _replace_in_turn(turn: _Turn, replacements: Sequence[HistoryReplacement]) -> None:
    """Apply a history rewrite to the turn as this advisor holds it: later rounds are sent the
    rewritten history, and a replaced message that was not stored yet never will be."""
    question = turn.messages[0] if turn.messages else None
    whole = replace_history([*(turn.older or []), *turn.messages], replacements)
    split = next((i for i, m in enumerate(whole) if m is question), len(whole))
    turn.older, turn.messages = whole[:split], whole[split:]
    gone = {id(m) for r in replacements for m in r.replaced}
    turn.unstored = [m for m in turn.unstored if id(m) not in gone]


def _still_waiting(turn: _Turn, response: ChatResponse, answers: Sequence[Message]) -> bool:
    """True when the answer is the same round waiting for approval that the conversation ends with."""
    waiting = response.finish_reason == APPROVAL_REQUIRED
    return waiting and bool(turn.older) and turn.older is not None and list(answers) == turn.older[-1:]


def _index_by_identity(messages: Sequence[Message], target: Message) -> int:
    for i, m in enumerate(messages):
        if m is target:
            return i
    return len(messages)


def _fit(
    systems: list[Message], older: Sequence[Message], turn: Sequence[Message], budget: int | None
) -> list[Message]:
    """The prompt of a round inside the loop, within ``budget`` messages where possible.

    Older turns go first (whole turns, oldest first), then the oldest whole rounds of this turn;
    the question (the turn's first group) and the newest round are always kept, so a tool response
    never goes without its tool call.
    """
    count = len(systems) + len(older) + len(turn)
    if budget is None or count <= budget:
        return [*systems, *older, *turn]
    older_groups = _groups(older, UserMessage)
    while older_groups and count > budget:
        count -= len(older_groups.pop(0))
    rounds = _groups(turn, AssistantMessage)
    while len(rounds) > 2 and count > budget:
        count -= len(rounds.pop(1))
    return [*systems, *(m for g in older_groups for m in g), *(m for g in rounds for m in g)]


def _groups(messages: Sequence[Message], starter: type) -> list[list[Message]]:
    """``messages`` cut before every message of type ``starter`` (a leading run forms a group)."""
    groups: list[list[Message]] = []
    for m in messages:
        if not groups or isinstance(m, starter):
            groups.append([m])
        else:
            groups[-1].append(m)
    return groups


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


async def _rewrite(
    memory: ChatMemory,
    conversation_id: str,
    replacements: Sequence[HistoryReplacement],
    messages: list[Message],
) -> None:
    """Store the conversation with ``replacements`` applied to it (stored messages are found by
    equality) and ``messages`` appended: one atomic update on a window memory whose repository can
    update; otherwise read, ``clear`` and ``add`` (the turn lock keeps other turns out)."""

    # Memory never stores a cache point (API.md §21): found and stored without them.
    replacements = [
        HistoryReplacement(
            tuple(without_cache_points(r.replaced)), tuple(without_cache_points(r.replacement))
        )
        for r in replacements
    ]
    messages = without_cache_points(messages)

    def change(stored: Sequence[Message]) -> list[Message]:
        return [*replace_history(stored, replacements), *messages]

    if isinstance(memory, MessageWindowChatMemory) and isinstance(
        memory.repository, AtomicChatMemoryRepository
    ):
        repository, size = memory.repository, memory.max_messages
        await asyncio.to_thread(
            repository.update, conversation_id, lambda stored: apply_window([], change(stored), size)
        )
        return
    rewritten = change(await _get(memory, conversation_id))
    clear = getattr(memory, "aclear", None)
    if clear is not None:
        await clear(conversation_id)
    else:
        await asyncio.to_thread(memory.clear, conversation_id)
    if rewritten:
        await _add(memory, conversation_id, rewritten)


async def _add(memory: ChatMemory, conversation_id: str, messages: list[Message]) -> None:
    messages = without_cache_points(messages)  # memory never stores a cache point (API.md §21)
    aadd = getattr(memory, "aadd", None)
    if aadd is not None:
        await aadd(conversation_id, messages)
    else:
        await asyncio.to_thread(memory.add, conversation_id, messages)
