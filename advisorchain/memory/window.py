"""``MessageWindowChatMemory``: a ChatMemory that keeps a sliding window of the newest messages."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import ClassVar

from .._checks import check_int
from ..messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage, UserMessage
from ._store import check_conversation_id, check_messages
from .api import AtomicChatMemoryRepository, ChatMemory, ChatMemoryRepository
from .in_memory import InMemoryChatMemoryRepository

__all__ = ["MessageWindowChatMemory", "apply_window"]


def apply_window(stored: Sequence[Message], new: Sequence[Message], max_messages: int) -> list[Message]:
    """The messages to store after adding ``new`` to ``stored``, as Spring's window does.

    * A new system message that is not stored yet replaces every stored system message (one that
      is already stored is not added twice).
    * System messages are always kept. When there are more than ``max_messages`` messages, the
      oldest others are dropped in whole turns (a turn starts with a UserMessage), so the first
      kept non-system message is a UserMessage and a tool response never outlives its assistant
      tool-call message.
    * When even the newest turn does not fit, its UserMessage is kept and the oldest whole rounds
      after it are dropped (a round is an assistant message with the tool responses that follow
      it); the question and the newest round are kept even over the bound. This is what memory
      inside the tool loop needs: a stored conversation never starts, after its system messages,
      with an assistant or tool message (Anthropic refuses such a prompt) and never loses the
      turn's question. ``max_messages`` bounds everything whenever the system messages, the newest
      question and the newest round fit in it.
    * Whatever the count, messages before the first UserMessage are dropped when the first
      non-system message is a tool response or an assistant tool-call message (a round whose
      question or tool call is no longer stored): an orphan round is never stored, since providers
      reject it. With no UserMessage at all, only the system messages are kept then.
    """
    new_systems = [m for m in new if isinstance(m, SystemMessage)]
    if any(s not in stored for s in new_systems):
        merged: list[Message] = [m for m in stored if not isinstance(m, SystemMessage)]
        merged.extend(new)
    else:
        merged = list(stored)
        merged.extend(m for m in new if not isinstance(m, SystemMessage))
    if len(merged) <= max_messages and not _starts_with_an_orphan_round(merged):
        return merged
    return _trim(merged, max_messages)


def _starts_with_an_orphan_round(messages: Sequence[Message]) -> bool:
    """True when the first non-system message is a tool response or a tool-call message: a round
    whose tool call (or question) is no longer stored."""
    for m in messages:
        if not isinstance(m, SystemMessage):
            return isinstance(m, ToolResponseMessage) or (
                isinstance(m, AssistantMessage) and bool(m.tool_calls)
            )
    return False


def _trim(messages: Sequence[Message], max_messages: int) -> list[Message]:
    """``messages`` with the oldest whole turns (then the oldest whole rounds of a tool-loop turn)
    dropped until the bound holds; system messages stay where they are."""
    others = [i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)]
    budget = max_messages - (len(messages) - len(others))
    first_user = next((n for n, i in enumerate(others) if isinstance(messages[i], UserMessage)), len(others))
    turns = _groups(others[first_user:], messages, UserMessage)
    count = sum(len(t) for t in turns)
    while len(turns) > 1 and count > budget:
        count -= len(turns.pop(0))
    if turns and count > budget:  # the newest turn alone does not fit: drop its oldest rounds
        question, *rest = turns[0]
        rounds = _rounds(rest, messages)
        while len(rounds) > 1 and count > budget:
            count -= len(rounds.pop(0))
        turns = [[question, *(i for r in rounds for i in r)]]
    kept = {i for t in turns for i in t}
    return [m for i, m in enumerate(messages) if isinstance(m, SystemMessage) or i in kept]


def _rounds(indexes: Sequence[int], messages: Sequence[Message]) -> list[list[int]]:
    """``indexes`` (a turn after its question) cut into rounds: each starts with an assistant message,
    unless the round before still waits for the responses to its tool calls (then it joins it), so
    dropping a round never leaves a tool response without its call."""
    rounds: list[list[int]] = []
    for i in indexes:
        m = messages[i]
        waiting = bool(rounds) and _calls_tools(messages[rounds[-1][-1]])
        if not rounds or (isinstance(m, AssistantMessage) and not waiting):
            rounds.append([i])
        else:
            rounds[-1].append(i)
    return rounds


def _calls_tools(message: Message) -> bool:
    return isinstance(message, AssistantMessage) and bool(message.tool_calls)


def _groups(indexes: Sequence[int], messages: Sequence[Message], starter: type) -> list[list[int]]:
    """``indexes`` (into ``messages``) cut before every message of type ``starter``."""
    groups: list[list[int]] = []
    for i in indexes:
        if not groups or isinstance(messages[i], starter):
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


class MessageWindowChatMemory(ChatMemory):
    """A ChatMemory keeping at most ``max_messages`` messages per conversation (see ``apply_window``).

    ``add`` is one atomic read-modify-write when the repository has ``update`` (every repository
    shipped here does), so concurrent appends to one conversation are all kept, in order of arrival,
    even from several processes. The ``a``-prefixed methods never block the event loop.

    >>> memory = MessageWindowChatMemory(SQLiteChatMemoryRepository("chat.db"), max_messages=30)
    >>> memory.add("c1", [UserMessage("Hi, I'm Ada.")])
    >>> memory.get("c1")
    [UserMessage(text="Hi, I'm Ada.", metadata={})]
    """

    DEFAULT_MAX_MESSAGES: ClassVar[int] = 20

    def __init__(
        self, repository: ChatMemoryRepository | None = None, max_messages: int = DEFAULT_MAX_MESSAGES
    ) -> None:
        check_int(max_messages, "max_messages", minimum=1)
        self.repository: ChatMemoryRepository = (
            InMemoryChatMemoryRepository() if repository is None else repository
        )
        self.max_messages = max_messages
        # Only for repositories without ``update``: then appends are atomic within this process only.
        self._fallback_lock = threading.Lock()

    def get(self, conversation_id: str) -> list[Message]:
        """The conversation's stored messages, oldest first."""
        return self.repository.find_by_conversation_id(check_conversation_id(conversation_id))

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        """Append ``messages`` (one message or several) and apply the window, atomically."""
        check_conversation_id(conversation_id)
        new = check_messages(conversation_id, messages)
        if not new:
            return
        max_messages = self.max_messages

        def change(stored: list[Message]) -> list[Message]:
            return apply_window(stored, new, max_messages)

        repository = self.repository
        if isinstance(repository, AtomicChatMemoryRepository):
            repository.update(conversation_id, change)
            return
        with self._fallback_lock:
            repository.save_all(conversation_id, change(repository.find_by_conversation_id(conversation_id)))

    def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        self.repository.delete_by_conversation_id(check_conversation_id(conversation_id))

    async def aget(self, conversation_id: str) -> list[Message]:
        """``get`` without blocking the event loop."""
        return await asyncio.to_thread(self.get, conversation_id)

    async def aadd(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        """``add`` without blocking the event loop."""
        await asyncio.to_thread(self.add, conversation_id, messages)

    async def aclear(self, conversation_id: str) -> None:
        """``clear`` without blocking the event loop."""
        await asyncio.to_thread(self.clear, conversation_id)
