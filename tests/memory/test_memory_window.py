"""MessageWindowChatMemory: the window policy (unit and property tests) and the ChatMemory surface."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain.memory.api import ChatMemory
from advisorchain.memory.in_memory import InMemoryChatMemoryRepository
from advisorchain.memory.window import MessageWindowChatMemory, apply_window
from advisorchain.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)


def _tool_round(call_id: str) -> list[Message]:
    return [
        AssistantMessage(None, [ToolCall(call_id, "lookup", "{}")]),
        ToolResponseMessage([ToolResponse(call_id, "lookup", "found")]),
    ]


def test_window_memory_is_a_chat_memory_with_the_contract_constants() -> None:
    memory = MessageWindowChatMemory()

    assert isinstance(memory, ChatMemory)
    assert memory.CONVERSATION_ID == "chat_memory_conversation_id"
    assert memory.DEFAULT_CONVERSATION_ID == "default"
    assert memory.max_messages == 20
    assert isinstance(memory.repository, InMemoryChatMemoryRepository)


def test_each_window_memory_gets_its_own_default_repository() -> None:
    first, second = MessageWindowChatMemory(), MessageWindowChatMemory()
    first.add("c1", [UserMessage("only in first")])

    assert second.get("c1") == []


def test_messages_under_the_bound_are_all_kept_in_order() -> None:
    memory = MessageWindowChatMemory(max_messages=5)
    memory.add("c1", [UserMessage("a"), AssistantMessage("b")])
    memory.add("c1", UserMessage("c"))

    assert memory.get("c1") == [UserMessage("a"), AssistantMessage("b"), UserMessage("c")]


def test_the_oldest_messages_are_dropped_over_the_bound() -> None:
    memory = MessageWindowChatMemory(max_messages=4)
    for i in range(3):
        memory.add("c1", [UserMessage(f"q{i}"), AssistantMessage(f"a{i}")])

    assert memory.get("c1") == [
        UserMessage("q1"),
        AssistantMessage("a1"),
        UserMessage("q2"),
        AssistantMessage("a2"),
    ]


def test_system_messages_are_kept_and_count_towards_the_bound() -> None:
    stored = [SystemMessage("rules"), UserMessage("q0"), AssistantMessage("a0")]

    window = apply_window(stored, [UserMessage("q1"), AssistantMessage("a1")], 3)

    assert window == [SystemMessage("rules"), UserMessage("q1"), AssistantMessage("a1")]


def test_a_new_system_message_replaces_the_stored_ones() -> None:
    stored = [SystemMessage("old"), UserMessage("q0")]

    window = apply_window(stored, [SystemMessage("new")], 10)

    assert window == [UserMessage("q0"), SystemMessage("new")]


def test_a_system_message_already_stored_is_not_added_twice() -> None:
    stored = [SystemMessage("rules"), UserMessage("q0")]

    window = apply_window(stored, [SystemMessage("rules"), UserMessage("q1")], 10)

    assert window == [SystemMessage("rules"), UserMessage("q0"), UserMessage("q1")]


def test_dropping_continues_to_a_user_message_so_no_tool_response_is_orphaned() -> None:
    stored = [UserMessage("q0"), *_tool_round("c1"), AssistantMessage("a0"), UserMessage("q1")]

    window = apply_window(stored, [AssistantMessage("a1")], 5)

    assert window == [UserMessage("q1"), AssistantMessage("a1")]


def test_a_tool_response_whose_call_an_earlier_add_dropped_is_not_stored() -> None:
    stored = [UserMessage("q0"), _tool_round("c1")[0]]
    trimmed = apply_window(stored, [_tool_round("c1")[1]], 2)  # the call goes, the response too
    assert trimmed == []

    window = apply_window(trimmed, [_tool_round("c2")[1], AssistantMessage("a")], 5)

    assert window == []


def test_when_no_user_message_is_left_no_other_message_is_kept() -> None:
    stored = [SystemMessage("rules"), UserMessage("q0"), *_tool_round("c1")]

    window = apply_window(stored, _tool_round("c2"), 4)

    assert window == [SystemMessage("rules")]


@pytest.mark.parametrize("bad", [0, -3, True, "20", 2.0])
def test_max_messages_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match=repr(bad)):
        MessageWindowChatMemory(max_messages=bad)  # type: ignore[arg-type]


def test_adding_a_non_message_is_refused_and_keeps_the_stored_messages() -> None:
    memory = MessageWindowChatMemory()
    memory.add("c1", [UserMessage("kept")])

    with pytest.raises(TypeError, match=r"message 1 .*'c1'"):
        memory.add("c1", [UserMessage("fine"), {"role": "user"}])  # type: ignore[list-item]

    assert memory.get("c1") == [UserMessage("kept")]


def test_clear_forgets_the_conversation() -> None:
    memory = MessageWindowChatMemory()
    memory.add("c1", [UserMessage("a")])

    memory.clear("c1")

    assert memory.get("c1") == []


class _PlainRepository:
    """A third-party repository with only the four protocol methods (no atomic update)."""

    def __init__(self) -> None:
        self.data: dict[str, list[Message]] = {}

    def find_conversation_ids(self) -> list[str]:
        return list(self.data)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        return list(self.data.get(conversation_id, []))

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        self.data[conversation_id] = list(messages)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        self.data.pop(conversation_id, None)


def test_a_repository_without_update_still_gets_the_window() -> None:
    memory = MessageWindowChatMemory(_PlainRepository(), max_messages=2)
    memory.add("c1", [UserMessage("q0"), AssistantMessage("a0")])
    memory.add("c1", [UserMessage("q1"), AssistantMessage("a1")])

    assert memory.get("c1") == [UserMessage("q1"), AssistantMessage("a1")]


async def test_async_methods_match_the_blocking_ones() -> None:
    memory = MessageWindowChatMemory()
    await memory.aadd("c1", [UserMessage("a")])

    assert await memory.aget("c1") == [UserMessage("a")]
    await memory.aclear("c1")
    assert await memory.aget("c1") == []


# -- properties ----------------------------------------------------------------------------------

_ids = iter(range(10**9))


@st.composite
def _turn(draw: st.DrawFn) -> list[Message]:
    """One well-formed turn: a user message, tool rounds, a final answer (any of them optional)."""
    turn: list[Message] = []
    if draw(st.booleans()):
        turn.append(SystemMessage(draw(st.sampled_from(["s1", "s2", "s3"]))))
    turn.append(UserMessage(f"u{next(_ids)}"))
    for _ in range(draw(st.integers(0, 3))):
        turn.extend(_tool_round(f"call{next(_ids)}"))
    if draw(st.booleans()):
        turn.append(AssistantMessage(f"a{next(_ids)}"))
    return turn


@st.composite
def _batches(draw: st.DrawFn) -> list[list[Message]]:
    """A conversation cut into add() batches of any size."""
    messages = [m for turn in draw(st.lists(_turn(), max_size=8)) for m in turn]
    cuts = sorted(draw(st.lists(st.integers(0, len(messages)), max_size=10)))
    bounds = [0, *cuts, len(messages)]
    return [messages[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _non_system(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if not isinstance(m, SystemMessage)]


def _run(batches: list[list[Message]], max_messages: int) -> list[tuple[list[Message], list[Message]]]:
    """Every (window, all non-system messages added so far) pair along the way."""
    stored: list[Message] = []
    added: list[Message] = []
    states = []
    for batch in batches:
        stored = apply_window(stored, batch, max_messages)
        added.extend(_non_system(batch))
        states.append((stored, list(added)))
    return states


@given(_batches(), st.integers(1, 12))
def test_no_tool_response_is_ever_kept_without_its_tool_call(
    batches: list[list[Message]], max_messages: int
) -> None:
    for window, _ in _run(batches, max_messages):
        call_ids: set[str] = set()
        for m in window:
            if isinstance(m, AssistantMessage):
                call_ids.update(c.id for c in m.tool_calls)
            if isinstance(m, ToolResponseMessage):
                assert {r.id for r in m.responses} <= call_ids


@given(_batches(), st.integers(1, 12))
def test_the_newest_system_message_is_always_kept(batches: list[list[Message]], max_messages: int) -> None:
    newest: Message | None = None
    for batch, (window, _) in zip(batches, _run(batches, max_messages), strict=True):
        systems = [m for m in batch if isinstance(m, SystemMessage)]
        newest = systems[-1] if systems else newest
        if newest is not None:
            assert newest in window


@given(_batches(), st.integers(1, 12))
def test_the_window_is_bounded_and_is_the_newest_suffix(
    batches: list[list[Message]], max_messages: int
) -> None:
    for window, added in _run(batches, max_messages):
        systems = [m for m in window if isinstance(m, SystemMessage)]
        assert len(window) <= max(max_messages, len(systems))
        kept = _non_system(window)
        assert kept == added[len(added) - len(kept) :]
        assert not kept or not isinstance(kept[0], ToolResponseMessage)


@given(_batches(), st.integers(1, 12))
def test_the_newest_turn_is_kept_whenever_it_fits(batches: list[list[Message]], max_messages: int) -> None:
    for window, added in _run(batches, max_messages):
        users = [i for i, m in enumerate(added) if isinstance(m, UserMessage)]
        if not users:
            continue
        newest_turn = added[users[-1] :]
        systems = [m for m in window if isinstance(m, SystemMessage)]
        if len(systems) + len(newest_turn) <= max_messages:
            assert _non_system(window)[-len(newest_turn) :] == newest_turn
