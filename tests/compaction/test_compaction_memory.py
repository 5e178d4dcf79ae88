"""ContextCompactionAdvisor with MessageChatMemoryAdvisor outside and inside the tool loop, on the
call and the stream path: memory stores the compacted conversation in place of what it replaced
(each part summarized once), nothing half-done is stored, and no stored message is lost, crossed
or invented — on every repository."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatMemory,
    ContextCompactionAdvisor,
    ContextLengthExceededError,
    InMemoryChatMemoryRepository,
    Message,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ModelError,
    Ordered,
    Prompt,
    SQLiteChatMemoryRepository,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from tests.compaction.compaction_support import SUMMARY, Provider, ask, text, texts

OUTSIDE = MessageChatMemoryAdvisor.DEFAULT_ORDER
INSIDE_AFTER = Ordered.HIGHEST_PRECEDENCE + 400  # inside the loop, after the compaction advisor's order
INSIDE_BEFORE = Ordered.HIGHEST_PRECEDENCE + 320  # inside the loop, before it
PLACES = {"outside": OUTSIDE, "inside-after": INSIDE_AFTER, "inside-before": INSIDE_BEFORE}


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def agent(rounds: int, made: dict[str, int] | None = None) -> Callable[[Prompt], AssistantMessage | str]:
    """Answers each question (``turn <n> ...``) after ``rounds`` tool rounds (counted by the
    replies given, since compaction may summarize a turn's earlier rounds away)."""
    made = {} if made is None else made

    def reply(prompt: Prompt) -> AssistantMessage | str:
        question = max(
            i
            for i, m in enumerate(prompt.instructions)
            if isinstance(m, UserMessage) and not m.text.startswith(SUMMARY)
        )
        turn = prompt.instructions[question].text.split()[1]  # type: ignore[union-attr]
        done = made.get(turn, 0)
        made[turn] = done + 1
        if done < rounds:
            return ask(f"t{turn}r{done + 1}", text(10, f"k{turn}.{done + 1}"))
        return text(10, f"answer {turn}")

    return reply


def question(n: int) -> str:
    return text(10, f"turn {n} ")


def run_turns(
    client: ChatClient, turns: Sequence[int], *, stream: bool, conversation: str = "c1"
) -> list[str | None]:
    answers: list[str | None] = []
    for n in turns:
        spec = client.prompt(question(n)).param(ChatMemory.CONVERSATION_ID, conversation)
        answers.append("".join(spec.stream().content()) if stream else spec.call().content())
    return answers


def build(provider: Provider, memory: Any, place: str, max_tokens: int, **kwargs: Any) -> ChatClient:
    return ChatClient(
        provider.model,
        default_advisors=[
            MessageChatMemoryAdvisor(memory, order=PLACES[place]),
            ContextCompactionAdvisor(max_tokens=max_tokens, **kwargs),
        ],
        default_tools=[lookup],
    )


def check_whole(messages: Sequence[Message]) -> None:
    """Every tool response right after its own call, every call answered, one summary at most."""
    for i, m in enumerate(messages):
        if isinstance(m, ToolResponseMessage):
            before = messages[i - 1]
            assert isinstance(before, AssistantMessage)
            assert [c.id for c in before.tool_calls] == [r.id for r in m.responses]
        if isinstance(m, AssistantMessage) and m.tool_calls:
            assert i + 1 < len(messages) and isinstance(messages[i + 1], ToolResponseMessage)
    assert sum(1 for m in messages if isinstance(m, UserMessage) and m.text.startswith(SUMMARY)) <= 1


def summarized_once(provider: Provider) -> None:
    """No message was summarized twice (an old summary is carried into the next one, as text)."""
    seen: set[str] = set()
    for prompt in provider.summary_prompts:
        lines = prompt.instructions[-1].text.splitlines()[2:]  # type: ignore[union-attr]
        fresh = [line for line in lines if not line.startswith(SUMMARY)]
        assert not seen & set(fresh), "a message was summarized twice"
        seen.update(fresh)


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("place", list(PLACES))
def test_memory_stores_the_compacted_conversation_and_builds_on_it(place: str, stream: bool) -> None:
    provider = Provider([agent(2)] * 60)
    memory = MessageWindowChatMemory(max_messages=1000)
    client = build(provider, memory, place, max_tokens=150)

    answers = run_turns(client, range(1, 13), stream=stream)

    assert answers == [text(10, f"answer {n}") for n in range(1, 13)]
    stored = memory.get("c1")
    check_whole(stored)
    assert isinstance(stored[0], UserMessage) and stored[0].text.startswith(SUMMARY)
    assert stored[-1] == AssistantMessage(text(10, "answer 12"))
    assert len(provider.summary_prompts) >= 2
    summarized_once(provider)
    for prompt in provider.prompts:  # every prompt within the budget, every round whole
        check_whole(prompt.instructions)
    # what is stored is what the next request is sent: the summary, then what followed it
    next_prompt = provider.prompts[-1].instructions
    assert next_prompt[0] == stored[0]


@pytest.mark.parametrize("place", list(PLACES))
def test_every_prompt_stays_under_the_budget(place: str) -> None:
    from advisorchain._tokens import estimate_tokens

    provider = Provider([agent(2)] * 80)
    client = build(provider, MessageWindowChatMemory(max_messages=1000), place, max_tokens=150)

    run_turns(client, range(1, 16), stream=False)

    assert max(estimate_tokens(p.instructions) for p in provider.prompts) <= 150


def test_inside_the_loop_the_stored_turn_keeps_its_rounds_whole_after_a_compaction() -> None:
    provider = Provider([agent(3)] * 40)
    memory = MessageWindowChatMemory(max_messages=1000)
    client = build(provider, memory, "inside-after", max_tokens=120)

    run_turns(client, range(1, 5), stream=False)

    stored = memory.get("c1")
    check_whole(stored)
    labels = texts(stored)
    # the newest turn is stored whole: its question, its three rounds, its answer
    assert labels[-8:] == [
        "turn 4",
        "call:t4r1",
        "tool:t4r1",
        "call:t4r2",
        "tool:t4r2",
        "call:t4r3",
        "tool:t4r3",
        "answer 4",
    ]


@pytest.mark.parametrize("place", list(PLACES))
def test_the_conversation_memory_names_counts_from_its_last_requests_reported_tokens(place: str) -> None:
    # No conversation param: the memory advisor's own conversation ("default") is the one counted.
    provider = Provider(["one", "two"], reported=lambda p: 500 if len(p.instructions) == 1 else 10)
    memory = MessageWindowChatMemory(max_messages=1000)
    client = build(provider, memory, place, max_tokens=50)

    client.prompt(question(1)).call().content()
    client.prompt(question(2)).call().content()

    # 500 reported for the first request, plus the estimate of the answer and the new question
    assert texts(provider.prompts[1].instructions) == [f"{SUMMARY} summary 1", "turn 2"]
    assert texts(memory.get(ChatMemory.DEFAULT_CONVERSATION_ID)) == [f"{SUMMARY} summary 1", "turn 2", "two"]


# -- the repositories ----------------------------------------------------------------------------


def _repositories(tmp_path: Path) -> dict[str, Callable[[], Any]]:
    shared = InMemoryChatMemoryRepository()
    kinds: dict[str, Callable[[], Any]] = {
        "in_memory": lambda: shared,
        "sqlite": lambda: SQLiteChatMemoryRepository(str(tmp_path / "chat.db")),
    }
    dsn, url = os.environ.get("ADVISORCHAIN_TEST_POSTGRES_DSN"), os.environ.get("ADVISORCHAIN_TEST_REDIS_URL")
    suffix = tmp_path.name.replace("-", "_")[-20:]
    if dsn:
        from advisorchain.memory.postgres import PostgresChatMemoryRepository

        kinds["postgres"] = lambda: PostgresChatMemoryRepository(dsn, table_name=f"compaction_{suffix}")
    if url:
        from advisorchain.memory.redis import RedisChatMemoryRepository

        kinds["redis"] = lambda: RedisChatMemoryRepository(url, key_prefix=f"compaction:{suffix}:")
    return kinds


@pytest.mark.parametrize("kind", ["in_memory", "sqlite", "postgres", "redis"])
@pytest.mark.parametrize("place", ["outside", "inside-after"])
def test_every_repository_stores_the_summary_in_place_of_what_it_replaced(
    kind: str, place: str, tmp_path: Path
) -> None:
    kinds = _repositories(tmp_path)
    if kind not in kinds:
        pytest.skip(f'{kind} needs its server: eval "$(scripts/services.sh start)"')
    repository = kinds[kind]()
    try:
        provider = Provider([agent(1)] * 30)
        memory = MessageWindowChatMemory(repository, max_messages=1000)
        run_turns(build(provider, memory, place, max_tokens=100), range(1, 7), stream=False)

        stored = MessageWindowChatMemory(kinds[kind](), max_messages=1000).get("c1")  # read back anew
        check_whole(stored)
        assert stored[0].text.startswith(SUMMARY)  # type: ignore[union-attr]
        assert stored[-1] == AssistantMessage(text(10, "answer 6"))
        summarized_once(provider)
    finally:
        repository.delete_by_conversation_id("c1")
        close = getattr(repository, "close", None)
        if close is not None:
            close()


class PlainMemory:
    """A ChatMemory of its own (get, add, clear only): rewritten with clear and add."""

    def __init__(self) -> None:
        self.data: dict[str, list[Message]] = {}

    def get(self, conversation_id: str) -> list[Message]:
        return list(self.data.get(conversation_id, []))

    def add(self, conversation_id: str, messages: Sequence[Message]) -> None:
        self.data.setdefault(conversation_id, []).extend(messages)

    def clear(self, conversation_id: str) -> None:
        self.data.pop(conversation_id, None)


@pytest.mark.parametrize("place", ["outside", "inside-after"])
def test_a_chat_memory_of_ones_own_is_rewritten_too(place: str) -> None:
    provider = Provider([agent(1)] * 30)
    memory = PlainMemory()

    run_turns(build(provider, memory, place, max_tokens=100), range(1, 7), stream=False)

    stored = memory.get("c1")
    check_whole(stored)
    assert stored[0].text.startswith(SUMMARY)  # type: ignore[union-attr]
    summarized_once(provider)


def test_window_memory_and_compaction_together_never_store_an_orphan() -> None:
    provider = Provider([agent(2)] * 60)
    memory = MessageWindowChatMemory(max_messages=9)

    run_turns(build(provider, memory, "inside-after", max_tokens=150), range(1, 11), stream=False)

    stored = memory.get("c1")
    assert len(stored) <= 9
    check_whole(stored)
    assert isinstance(stored[0], UserMessage)


# -- failures: nothing half-done is stored --------------------------------------------------------


def _stored_before_failure(
    place: str, failure: Any, **provider_kwargs: Any
) -> tuple[list[Message], list[Message]]:
    """Run two turns, then a third whose model call (after a compaction) fails; the stored
    conversation before and after the failed turn."""
    provider = Provider([agent(0), agent(0), failure, agent(0)], **provider_kwargs)
    memory = MessageWindowChatMemory(max_messages=1000)
    client = build(provider, memory, place, max_tokens=40)
    run_turns(client, [1, 2], stream=False)
    before = memory.get("c1")
    with pytest.raises(ModelError):
        run_turns(client, [3], stream=False)
    return before, memory.get("c1")


@pytest.mark.parametrize("place", list(PLACES))
def test_a_model_failure_after_a_compaction_stores_nothing_of_the_turn(place: str) -> None:
    before, after = _stored_before_failure(place, ModelError("server error", status_code=500))

    assert after == before  # no summary, no question, nothing replaced
    assert not any(m.text.startswith(SUMMARY) for m in after if isinstance(m, UserMessage))


FAILED_COMPACTIONS = {
    "a failing summarizer": (
        lambda: Provider([agent(0)] * 5, summaries=[ModelError("summarizer down")]),
        40,
        ModelError,
        "summarizer down",
    ),
    "a second overflow": (
        lambda: Provider(
            [agent(0), agent(0), ContextLengthExceededError("too long"), ContextLengthExceededError("again")]
        ),
        1000,
        ContextLengthExceededError,
        "again",
    ),
}


@pytest.mark.parametrize("failure", list(FAILED_COMPACTIONS))
@pytest.mark.parametrize("place", list(PLACES))
def test_a_turn_whose_compaction_fails_stores_nothing_of_it(place: str, failure: str) -> None:
    make_provider, max_tokens, error, said = FAILED_COMPACTIONS[failure]
    memory = MessageWindowChatMemory(max_messages=1000)
    client = build(make_provider(), memory, place, max_tokens=max_tokens)
    run_turns(client, [1, 2], stream=False)
    before = memory.get("c1")

    with pytest.raises(error, match=said):
        run_turns(client, [3], stream=False)

    assert memory.get("c1") == before


@pytest.mark.parametrize("place", list(PLACES))
def test_an_overflow_that_compaction_cured_stores_the_compacted_conversation(place: str) -> None:
    provider = Provider([agent(0), agent(0), ContextLengthExceededError("too long"), agent(0)])
    memory = MessageWindowChatMemory(max_messages=1000)
    client = build(provider, memory, place, max_tokens=1000)

    run_turns(client, [1, 2, 3], stream=False)

    assert texts(memory.get("c1")) == [f"{SUMMARY} summary 1", "turn 3", "answer 3"]


def test_inside_the_loop_a_later_failure_keeps_the_compaction_and_the_whole_rounds() -> None:
    provider = Provider([*[agent(3)] * 6, ModelError("down", status_code=503)])
    memory = MessageWindowChatMemory(max_messages=1000)
    client = build(provider, memory, "inside-after", max_tokens=80)
    run_turns(client, [1], stream=False)

    with pytest.raises(ModelError, match="down"):
        run_turns(client, [2], stream=False)

    stored = memory.get("c1")
    check_whole(stored)  # the round that was cut is not stored; the earlier ones are whole
    assert texts(stored)[0].startswith(SUMMARY)
    assert "turn 2" in texts(stored)


@pytest.mark.parametrize("place", ["outside", "inside-after"])
def test_a_stream_abandoned_after_a_compaction_stores_nothing_more(place: str) -> None:
    provider = Provider([agent(0)] * 5)
    memory = MessageWindowChatMemory(max_messages=1000)
    client = build(provider, memory, place, max_tokens=40)
    run_turns(client, [1, 2], stream=False)
    before = memory.get("c1")

    stream = client.prompt(question(3)).param(ChatMemory.CONVERSATION_ID, "c1").stream().content()
    next(iter(stream))
    stream.close()  # type: ignore[attr-defined]

    after = memory.get("c1")
    check_whole(after)
    if place == "outside":
        assert after == before
