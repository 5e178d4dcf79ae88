"""A conversation's stored entries, readable or not, and dropping only the unreadable ones: on every
backend that stores text (a damaged entry is injected behind the repository), and through
``read_entries``/``drop_unreadable`` on a repository of the user's own."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from advisorchain.memory import (
    ChatMemoryDecodeError,
    EntryChatMemoryRepository,
    InMemoryChatMemoryRepository,
    MessageWindowChatMemory,
    StoredEntry,
    drop_unreadable,
    read_entries,
)
from advisorchain.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)


def _damaged(backend: Any, conversation_id: str = "c") -> Any:
    """A conversation of three readable messages with two unreadable entries between them."""
    repository = backend.repository()
    repository.save_all(conversation_id, [UserMessage("one")])
    backend.inject(conversation_id, "{not json")
    backend.inject(conversation_id, '{"type":"assistant","text":"two","metadata":{},"tool_calls":[]}')
    backend.inject(conversation_id, '{"type": "function", "text": "?", "metadata": {}}')
    backend.inject(conversation_id, '{"type":"user","text":"three","metadata":{}}')
    return repository


def test_every_shipped_repository_offers_the_entries(repository: Any) -> None:
    assert isinstance(repository, EntryChatMemoryRepository)


def test_entries_show_readable_messages_and_name_the_unreadable_ones(persistent_backend: Any) -> None:
    repository = _damaged(persistent_backend)

    entries = repository.find_entries("c")

    assert [e.position for e in entries] == [0, 1, 2, 3, 4]
    assert [e.readable for e in entries] == [True, False, True, False, True]
    assert entries[0].message == UserMessage("one")
    assert entries[2].message == AssistantMessage("two")
    assert entries[1].text == "{not json" and entries[1].message is None
    assert entries[1].error is not None and "stored text" in entries[1].error
    assert entries[3].error is not None and "unknown message type 'function'" in entries[3].error
    with pytest.raises(ChatMemoryDecodeError):  # the protocol's read still refuses the conversation
        repository.find_by_conversation_id("c")


def test_dropping_the_unreadable_entries_keeps_every_readable_one_in_order(persistent_backend: Any) -> None:
    repository = _damaged(persistent_backend)

    dropped = repository.delete_unreadable("c")

    assert [(e.position, e.text) for e in dropped] == [
        (1, "{not json"),
        (3, '{"type": "function", "text": "?", "metadata": {}}'),
    ]
    assert repository.find_by_conversation_id("c") == [
        UserMessage("one"),
        AssistantMessage("two"),
        UserMessage("three"),
    ]
    assert repository.delete_unreadable("c") == []


def test_a_repaired_conversation_takes_new_messages(persistent_backend: Any) -> None:
    repository = _damaged(persistent_backend)
    repository.delete_unreadable("c")
    memory = MessageWindowChatMemory(repository, max_messages=100)

    memory.add("c", [UserMessage("four")])

    assert [m.text for m in memory.get("c")] == ["one", "two", "three", "four"]


def test_dropping_touches_no_other_conversation(persistent_backend: Any) -> None:
    repository = _damaged(persistent_backend)
    repository.save_all("other", [UserMessage("kept")])
    persistent_backend.inject("other", "{not json")

    repository.delete_unreadable("c")

    assert [e.readable for e in repository.find_entries("other")] == [True, False]


def test_an_unknown_conversation_has_no_entries(repository: Any) -> None:
    assert repository.find_entries("nobody") == []
    assert repository.delete_unreadable("nobody") == []


def test_entries_of_a_readable_conversation_are_its_messages(backend: Any) -> None:
    repository = backend.repository()
    messages = [
        UserMessage("weather?"),
        AssistantMessage(None, [ToolCall("1", "get_weather", "{}")]),
        ToolResponseMessage([ToolResponse("1", "get_weather", "sunny")]),
    ]
    repository.save_all("c", messages)

    assert [e.message for e in read_entries(repository, "c")] == messages
    assert drop_unreadable(repository, "c") == []
    assert repository.find_by_conversation_id("c") == messages


def test_appends_racing_a_repair_are_all_kept(persistent_backend: Any) -> None:
    repository = _damaged(persistent_backend)
    memory = MessageWindowChatMemory(persistent_backend.repository(), max_messages=10_000)
    errors: list[BaseException] = []

    def append(i: int) -> None:
        try:
            memory.add("c", [UserMessage(f"new {i}")])
        except ChatMemoryDecodeError:
            pass  # an append before the repair sees the damaged conversation and stores nothing
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    repository.delete_unreadable("c")
    for t in threads:
        t.join()
    after = [m.text for m in repository.find_by_conversation_id("c")]
    assert errors == []
    assert after[:3] == ["one", "two", "three"]
    assert all(text.startswith("new ") for text in after[3:])
    assert len(set(after[3:])) == len(after[3:])


class _PlainRepository:
    """A repository of the user's own: only the four protocol methods."""

    def __init__(self, broken: bool) -> None:
        self.broken = broken
        self.saved: dict[str, list[Message]] = {}

    def find_conversation_ids(self) -> list[str]:
        return list(self.saved)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        if self.broken:
            raise ChatMemoryDecodeError(conversation_id, 0, "broken on purpose")
        return list(self.saved.get(conversation_id, []))

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        self.saved[conversation_id] = list(messages)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        self.saved.pop(conversation_id, None)


def test_a_repository_of_your_own_is_read_through_the_protocol() -> None:
    plain = _PlainRepository(broken=False)
    plain.save_all("c", [UserMessage("hi")])

    assert not isinstance(plain, EntryChatMemoryRepository)
    assert read_entries(plain, "c") == [StoredEntry(0, repr(UserMessage("hi")), UserMessage("hi"))]
    assert drop_unreadable(plain, "c") == []


def test_a_repository_of_your_own_that_cannot_read_says_so() -> None:
    plain = _PlainRepository(broken=True)

    with pytest.raises(ChatMemoryDecodeError, match="broken on purpose"):
        read_entries(plain, "c")
    with pytest.raises(ChatMemoryDecodeError, match="broken on purpose"):
        drop_unreadable(plain, "c")


def test_a_conversation_id_is_checked() -> None:
    with pytest.raises(ValueError, match="non-empty str"):
        read_entries(InMemoryChatMemoryRepository(), "")
