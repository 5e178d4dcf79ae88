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


def test_a_tool_response_whose_call_is_not_stored_is_not_stored() -> None:
    window = apply_window([], [_tool_round("c2")[1], AssistantMessage("a")], 5)

    assert window == []


def test_a_conversation_that_starts_with_an_orphan_round_is_healed_by_the_next_add() -> None:
    broken = [*_tool_round("c1"), *_tool_round("c2"), AssistantMessage("a0")]  # stored by an older version

    window = apply_window(broken, [UserMessage("q1"), AssistantMessage("a1")], 20)

    assert window == [UserMessage("q1"), AssistantMessage("a1")]


def test_a_newest_exchange_that_does_not_fit_keeps_its_question_and_answer() -> None:
    stored = [SystemMessage("rules"), UserMessage("q0"), AssistantMessage("a0")]

    window = apply_window(stored, [UserMessage("q1"), AssistantMessage("a1")], 2)

    assert window == [SystemMessage("rules"), UserMessage("q1"), AssistantMessage("a1")]


def test_a_tool_loop_turn_longer_than_the_window_keeps_its_question_and_newest_rounds() -> None:
    stored = [SystemMessage("rules"), UserMessage("q0"), AssistantMessage("a0"), UserMessage("q1")]
    stored = apply_window(stored, _tool_round("c1"), 4)  # older turns go first
    assert stored == [SystemMessage("rules"), UserMessage("q1"), *_tool_round("c1")]

    window = apply_window(stored, _tool_round("c2"), 4)  # then the oldest rounds of this turn

    assert window == [SystemMessage("rules"), UserMessage("q1"), *_tool_round("c2")]


def test_the_question_and_the_newest_round_are_kept_even_over_the_bound() -> None:
    stored = [UserMessage("q1"), *_tool_round("c1")]

    window = apply_window(stored, [*_tool_round("c2"), AssistantMessage("a1")], 1)

    assert window == [UserMessage("q1"), AssistantMessage("a1")]
    assert apply_window([UserMessage("q1")], _tool_round("c1"), 1) == [UserMessage("q1"), *_tool_round("c1")]


def test_a_12_round_turn_in_the_default_window_stays_a_valid_conversation() -> None:
    """Issue 37: every add of memory inside the loop, a window of 20 and a 12-round turn."""
    memory = MessageWindowChatMemory()
    memory.add("c1", [UserMessage("q0"), AssistantMessage("a0")])
    memory.add("c1", [UserMessage("q1"), *_tool_round("r1")])
    for i in range(2, 13):
        memory.add("c1", _tool_round(f"r{i}"))
        assert isinstance(memory.get("c1")[0], UserMessage)
    memory.add("c1", AssistantMessage("a1"))

    stored = memory.get("c1")
    assert stored[0] == UserMessage("q1")
    assert len(stored) == 20
    ids = [m.tool_calls[0].id for m in stored if isinstance(m, AssistantMessage) and m.tool_calls]
    assert ids == [f"r{i}" for i in range(4, 13)]  # the 9 newest rounds
    assert stored[-1] == AssistantMessage("a1")


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


def _newest_round(turn: Sequence[Message]) -> list[Message]:
    starts = [i for i, m in enumerate(turn) if isinstance(m, AssistantMessage)]
    return list(turn[starts[-1] :]) if starts else []


def _newest_turn(added: Sequence[Message]) -> list[Message]:
    users = [i for i, m in enumerate(added) if isinstance(m, UserMessage)]
    return list(added[users[-1] :]) if users else []


@given(_batches(), st.integers(1, 12))
def test_the_window_is_bounded_and_keeps_whole_turns_and_rounds_in_order(
    batches: list[list[Message]], max_messages: int
) -> None:
    for window, added in _run(batches, max_messages):
        systems = [m for m in window if isinstance(m, SystemMessage)]
        kept = _non_system(window)
        newest_turn = _newest_turn(added)
        over = 1 + len(_newest_round(newest_turn)) if newest_turn else 0
        assert len(window) <= max(max_messages, len(systems) + over)
        assert not kept or isinstance(kept[0], UserMessage)
        positions = [next(i for i in range(len(added)) if added[i] is m) for m in kept]
        assert positions == sorted(positions)  # a subsequence of what was added, in order
        # Only the first kept turn may miss rounds, and only whole rounds: the rest is a suffix.
        second = next((n for n, m in enumerate(kept) if n > 0 and isinstance(m, UserMessage)), len(kept))
        assert kept[second:] == added[len(added) - len(kept) + second :]


@given(_batches(), st.integers(1, 12))
def test_the_newest_question_and_round_are_always_kept(
    batches: list[list[Message]], max_messages: int
) -> None:
    for window, added in _run(batches, max_messages):
        newest_turn = _newest_turn(added)
        if not newest_turn:
            continue
        kept = _non_system(window)
        newest_round = _newest_round(newest_turn)
        assert kept and newest_turn[0] in kept
        assert kept[len(kept) - len(newest_round) :] == newest_round


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


def test_a_round_of_several_tool_call_messages_is_dropped_whole() -> None:
    first = AssistantMessage(None, [ToolCall("c1", "lookup", "{}")])
    second = AssistantMessage(None, [ToolCall("c2", "lookup", "{}")])
    answers = ToolResponseMessage([ToolResponse("c1", "lookup", "x"), ToolResponse("c2", "lookup", "y")])
    stored = [UserMessage("q"), first, second, answers]

    window = apply_window(stored, [AssistantMessage("a")], 4)

    assert window == [UserMessage("q"), AssistantMessage("a")]  # never the response to c1 without c1
