"""ContextCompactionAdvisor (§14) on scripted models: when it compacts, what it summarizes, what it
never touches, how the tool loop goes on from the compacted history, and what a context overflow
from the provider makes it do."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    ChatClient,
    ChatMemory,
    ChatResponse,
    ContextCompactionAdvisor,
    ContextLengthExceededError,
    Generation,
    HistoryReplacement,
    Message,
    ModelError,
    Prompt,
    SystemMessage,
    ToolCallingAdvisor,
    Usage,
    UserMessage,
)
from advisorchain.testing import FunctionChatModel, ScriptedChatModel
from tests.compaction.compaction_support import Provider, answered, ask, lookup, summary, text, texts

SYSTEM = SystemMessage(text(5, "sys"))
U1, A1 = UserMessage(text(10, "u1")), AssistantMessage(text(10, "a1"))
U2, A2 = UserMessage(text(10, "u2")), AssistantMessage(text(10, "a2"))
QUESTION = UserMessage(text(10, "q"))
HISTORY: list[Message] = [U1, A1, U2, A2]
BIG_HISTORY: list[Message] = [
    UserMessage(text(40, "u1")),
    AssistantMessage(text(40, "a1")),
    UserMessage(text(40, "u2")),
    AssistantMessage(text(40, "a2")),
]


def client(provider: Provider, advisor: ContextCompactionAdvisor, **kwargs: Any) -> ChatClient:
    return ChatClient(provider.model, default_advisors=[advisor], default_tools=[lookup], **kwargs)


def ask_of(prompt: Prompt) -> AssistantMessage:
    """A reply asking for a lookup whose id counts the tool rounds in the prompt."""
    n = sum(1 for m in prompt.instructions if isinstance(m, AssistantMessage) and m.tool_calls) + 1
    return ask(f"c{n}", text(10, f"k{n}"))


# -- construction --------------------------------------------------------------------------------


def test_default_order_is_just_inside_the_tool_loop() -> None:
    assert ContextCompactionAdvisor.DEFAULT_ORDER == ToolCallingAdvisor.DEFAULT_ORDER + 50
    advisor = ContextCompactionAdvisor(max_tokens=10)
    assert (advisor.order, advisor.keep_last_turns, advisor.summarizer) == (advisor.DEFAULT_ORDER, 1, None)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_tokens": 0}, {"max_tokens": -5}, {"max_tokens": 10, "keep_last_turns": -1}, {"max_tokens": 1.5}],
)
def test_bad_budgets_are_value_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ContextCompactionAdvisor(**kwargs)


def test_max_tokens_is_required_and_keyword_only() -> None:
    with pytest.raises(TypeError):
        ContextCompactionAdvisor()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ContextCompactionAdvisor(None, 100)  # type: ignore[misc]


def test_a_summarizer_that_is_neither_model_nor_client_is_refused() -> None:
    with pytest.raises(ValueError, match="summarizer"):
        ContextCompactionAdvisor("gpt-4o", max_tokens=10)  # type: ignore[arg-type]


# -- when it compacts and what it summarizes -----------------------------------------------------


def test_under_the_budget_the_prompt_is_sent_as_is() -> None:
    provider = Provider(["ok"])

    client(provider, ContextCompactionAdvisor(max_tokens=55)).prompt().system(SYSTEM.text).messages(
        HISTORY
    ).user(QUESTION.text).call().content()

    assert provider.prompts[0].instructions == (SYSTEM, *HISTORY, QUESTION)
    assert provider.summary_prompts == []


def test_over_the_budget_the_earlier_turns_become_one_summary_message() -> None:
    provider = Provider(["ok"])

    answer = (
        client(provider, ContextCompactionAdvisor(max_tokens=54))
        .prompt()
        .system(SYSTEM.text)
        .messages(HISTORY)
        .user(QUESTION.text)
        .call()
        .content()
    )

    assert answer == "ok"
    assert provider.prompts[0].instructions == (SYSTEM, summary(1), QUESTION)
    assert summary(1).text.startswith("Summary of the earlier conversation:")
    assert len(provider.summary_prompts) == 1
    transcript = provider.summary_prompts[0].instructions[-1].text
    assert all(m.text in transcript for m in HISTORY)  # type: ignore[operator]
    assert SYSTEM.text not in transcript and QUESTION.text not in transcript


def test_the_default_summarizer_is_the_chains_model_once_with_an_instruction_and_no_tools() -> None:
    provider = Provider(["ok"])

    client(provider, ContextCompactionAdvisor(max_tokens=40)).prompt().messages(HISTORY).user(
        QUESTION.text
    ).call().content()

    (prompt,) = provider.summary_prompts
    assert isinstance(prompt.instructions[0], SystemMessage)
    assert prompt.instructions[0].text == ContextCompactionAdvisor.SUMMARY_INSTRUCTION.replace("{words}", "7")
    assert prompt.options is not None and prompt.options.tool_callbacks == ()
    assert provider.prompts[0].options is not None and len(provider.prompts[0].options.tool_callbacks) == 1


def test_a_summarizer_model_of_its_own_writes_the_summary() -> None:
    provider = Provider(["ok"])
    summarizer = ScriptedChatModel(["the gist"])

    client(provider, ContextCompactionAdvisor(summarizer, max_tokens=40)).prompt().messages(HISTORY).user(
        QUESTION.text
    ).call().content()

    assert provider.summary_prompts == []
    assert len(summarizer.prompts) == 1 and summarizer.prompts[0].options is None
    assert provider.prompts[0].instructions == (
        UserMessage("Summary of the earlier conversation: the gist"),
        QUESTION,
    )


def test_a_chat_client_can_be_the_summarizer() -> None:
    provider = Provider(["ok"])
    summarizer_model = ScriptedChatModel(["via a client"])

    client(provider, ContextCompactionAdvisor(ChatClient(summarizer_model), max_tokens=40)).prompt().messages(
        HISTORY
    ).user(QUESTION.text).call().content()

    assert provider.prompts[0].instructions[0] == UserMessage(
        "Summary of the earlier conversation: via a client"
    )
    assert isinstance(summarizer_model.prompts[0].instructions[0], SystemMessage)


def test_when_nothing_may_be_summarized_the_prompt_goes_as_is_and_no_summary_is_made() -> None:
    provider = Provider(["ok"])
    big = UserMessage(text(100, "huge question"))

    client(provider, ContextCompactionAdvisor(max_tokens=20)).prompt().system(SYSTEM.text).user(
        big.text
    ).call().content()

    assert provider.prompts[0].instructions == (SYSTEM, big)
    assert provider.summary_prompts == []


def test_keep_last_turns_keeps_the_newest_user_turns_whole() -> None:
    provider = Provider(["ok"])

    client(provider, ContextCompactionAdvisor(max_tokens=45, keep_last_turns=2)).prompt().messages(
        HISTORY
    ).user(QUESTION.text).call().content()

    assert provider.prompts[0].instructions == (summary(1), U2, A2, QUESTION)


def test_system_messages_are_never_summarized_and_stay_first() -> None:
    provider = Provider(["ok"])
    late = SystemMessage(text(3, "late rule"))

    client(provider, ContextCompactionAdvisor(max_tokens=40)).prompt().system(SYSTEM.text).messages(
        [U1, A1, late, U2, A2]
    ).user(QUESTION.text).call().content()

    assert provider.prompts[0].instructions == (SYSTEM, late, summary(1), QUESTION)


# -- the count -----------------------------------------------------------------------------------


def test_the_count_is_the_previous_rounds_reported_tokens_plus_the_estimate_of_what_was_added() -> None:
    # Round 1 (estimate 30) is reported at 1000 tokens: round 2 is over although its estimate is not.
    provider = Provider([ask_of, "done"], reported=lambda p: 1000 if len(p.instructions) == 3 else 1)

    client(provider, ContextCompactionAdvisor(max_tokens=100)).prompt().messages([U1, A1]).user(
        QUESTION.text
    ).call().content()

    assert texts(provider.prompts[0].instructions) == ["u1", "a1", "q"]
    assert provider.prompts[1].instructions == (
        summary(1),
        QUESTION,
        ask_of(provider.prompts[0]),
        answered("c1", text(10, "k1")),
    )


def test_a_lower_reported_count_keeps_a_prompt_the_estimate_alone_would_compact() -> None:
    # Round 1's estimate is 90; the provider counts 30. Round 2 (estimate > 100) stays whole.
    big = UserMessage(text(70, "u1"))
    provider = Provider([ask_of, "done"], reported=lambda p: 30 if len(p.instructions) == 3 else 60)

    client(provider, ContextCompactionAdvisor(max_tokens=100)).prompt().messages([big, A1]).user(
        QUESTION.text
    ).call().content()

    assert provider.summary_prompts == []
    assert provider.prompts[1].instructions[:3] == (big, A1, QUESTION)


def test_without_reported_usage_the_estimate_alone_counts() -> None:
    provider = Provider([ask_of, "done"], reported=lambda p: None)

    client(provider, ContextCompactionAdvisor(max_tokens=55)).prompt().messages([U1, A1]).user(
        QUESTION.text
    ).call().content()

    # round 1: estimate 30; round 2: 30 + the tool round (estimate 28) = 58 > 55
    assert provider.prompts[0].instructions == (U1, A1, QUESTION)
    assert provider.prompts[1].instructions[:2] == (summary(1), QUESTION)


@pytest.mark.parametrize("named", [True, False])
def test_a_named_conversation_counts_from_its_last_requests_reported_tokens(named: bool) -> None:
    provider = Provider(["one", "two"], reported=lambda p: 500 if len(p.instructions) == 1 else 10)
    c = client(provider, ContextCompactionAdvisor(max_tokens=50))
    first = c.prompt().user(U1.text)
    second = c.prompt().messages([U1, AssistantMessage("one")]).user(QUESTION.text)
    if named:
        first, second = (s.param(ChatMemory.CONVERSATION_ID, "c1") for s in (first, second))

    first.call().content()
    second.call().content()

    # named: 500 reported for the first request + the estimate of the two new messages is over 50
    expected = (summary(1), QUESTION) if named else (U1, AssistantMessage("one"), QUESTION)
    assert provider.prompts[1].instructions == expected


# -- inside the tool loop ------------------------------------------------------------------------


def _loop_provider(rounds: int, **kwargs: Any) -> Provider:
    return Provider([*([ask_of] * rounds), "done"], **kwargs)


# The fourth prompt after the turn's oldest round was summarized: the summary stands where that round
# stood (after the question), the newer rounds follow whole.
OLDEST_ROUND_SUMMARIZED = [
    "q",
    "Summary of the earlier conversation: summary 1",
    "call:c2",
    "tool:c2",
    "call:c3",
    "tool:c3",
]


def test_when_the_earlier_turns_are_not_enough_the_oldest_whole_rounds_of_the_turn_go() -> None:
    # Each tool round is 28 tokens: round 4 (94) is over 90, and the question, three rounds and the
    # room for the summary (22) would still be: the oldest round goes.
    provider = _loop_provider(4)

    client(provider, ContextCompactionAdvisor(max_tokens=90)).prompt().user(QUESTION.text).call().content()

    labels = [texts(p.instructions) for p in provider.prompts]
    assert labels[:3] == [
        ["q"],
        ["q", "call:c1", "tool:c1"],
        ["q", "call:c1", "tool:c1", "call:c2", "tool:c2"],
    ]
    assert labels[3] == OLDEST_ROUND_SUMMARIZED
    assert text(10, "k1") in provider.summary_prompts[0].instructions[-1].text  # type: ignore[operator]


def test_the_question_and_the_newest_round_are_never_summarized() -> None:
    provider = _loop_provider(2)

    client(provider, ContextCompactionAdvisor(max_tokens=10)).prompt().user(QUESTION.text).call().content()

    last = texts(provider.prompts[-1].instructions)
    assert last[0] == "q" and last[-2:] == ["call:c2", "tool:c2"]
    for prompt in provider.summary_prompts:
        assert QUESTION.text not in prompt.instructions[-1].text  # type: ignore[operator]


def test_rounds_are_never_split_and_every_tool_response_follows_its_call() -> None:
    provider = _loop_provider(6)

    client(provider, ContextCompactionAdvisor(max_tokens=70)).prompt().user(QUESTION.text).call().content()

    for prompt in provider.prompts:
        labels = texts(prompt.instructions)
        for i, label in enumerate(labels):
            if label.startswith("tool:"):
                assert labels[i - 1] == "call:" + label[5:]
            if label.startswith("call:"):
                assert labels[i + 1] == "tool:" + label[5:]


def test_the_tool_loop_continues_from_the_compacted_history() -> None:
    provider = _loop_provider(3)

    response = (
        client(provider, ContextCompactionAdvisor(max_tokens=120))
        .prompt()
        .messages(BIG_HISTORY)
        .user(QUESTION.text)
        .call()
        .chat_client_response()
    )

    # round 1 (170) compacted the earlier turns (to 22); rounds 2-4 build on it, one summary in all
    assert len(provider.summary_prompts) == 1
    for prompt in provider.prompts:
        assert prompt.instructions[:2] == (summary(1), QUESTION)
    assert texts(provider.prompts[3].instructions)[2:] == [
        "call:c1",
        "tool:c1",
        "call:c2",
        "tool:c2",
        "call:c3",
        "tool:c3",
    ]
    (replacement,) = response.context[AdvisorParams.HISTORY_REPLACEMENTS]
    assert replacement == HistoryReplacement(tuple(BIG_HISTORY), (summary(1),))


def test_keep_last_turns_zero_summarizes_the_older_rounds_of_the_turn_at_once() -> None:
    provider = _loop_provider(3)

    client(provider, ContextCompactionAdvisor(max_tokens=80, keep_last_turns=0)).prompt().messages(
        [U1, A1]
    ).user(QUESTION.text).call().content()

    labels = [texts(p.instructions) for p in provider.prompts]
    # round 3 (estimate 82) is over: the earlier turn and round 1 go at once, round 2 is the newest
    assert labels[2] == ["Summary of the earlier conversation: summary 1", "q", "call:c2", "tool:c2"]


def test_a_summary_never_counts_as_a_user_turn_and_is_summarized_again_with_what_follows() -> None:
    provider = _loop_provider(6)

    client(provider, ContextCompactionAdvisor(max_tokens=80)).prompt().user(QUESTION.text).call().content()

    assert len(provider.summary_prompts) >= 2
    # the second summary took in the first (the question stayed the current turn's question)
    assert "summary 1" in provider.summary_prompts[1].instructions[-1].text  # type: ignore[operator]
    last = provider.prompts[-1].instructions
    assert last[0] == QUESTION
    assert sum(1 for m in last if isinstance(m, UserMessage) and m.text.startswith("Summary of")) == 1


def test_the_old_summary_is_summarized_with_the_newly_replaced_turns() -> None:
    provider = Provider(["ok"])
    old = UserMessage("Summary of the earlier conversation: " + text(10, "old"))

    client(provider, ContextCompactionAdvisor(max_tokens=40)).prompt().messages([old, *HISTORY]).user(
        QUESTION.text
    ).call().content()

    assert provider.prompts[0].instructions == (summary(1), QUESTION)
    transcript = provider.summary_prompts[0].instructions[-1].text
    assert text(10, "old") in transcript and U1.text in transcript  # type: ignore[operator]


def test_a_history_of_earlier_summaries_only_is_not_summarized_again() -> None:
    provider = Provider(["ok"])
    old = UserMessage("Summary of the earlier conversation: " + text(30, "old"))

    client(provider, ContextCompactionAdvisor(max_tokens=20)).prompt().messages([old]).user(
        QUESTION.text
    ).call().content()

    assert provider.prompts[0].instructions == (old, QUESTION) and provider.summary_prompts == []


def test_the_summary_usage_of_the_chains_model_joins_the_response_usage() -> None:
    provider = Provider(["ok"], reported=lambda p: 12)

    usage = (
        client(provider, ContextCompactionAdvisor(max_tokens=40))
        .prompt()
        .messages(HISTORY)
        .user(QUESTION.text)
        .call()
        .chat_response()
        .metadata.usage
    )

    assert usage == Usage(12 + 100, 5 + 10)


# -- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("summary", "said"),
    [("   ", "returned no text"), (ModelError("summarizer down"), "summarizer down")],
    ids=["a blank summary", "a failing summarizer"],
)
def test_no_summary_fails_the_call_and_the_model_is_not_called(summary: object, said: str) -> None:
    provider = Provider(["never"], summaries=[summary])

    with pytest.raises(ModelError, match=said):
        client(provider, ContextCompactionAdvisor(max_tokens=40)).prompt().messages(HISTORY).user(
            QUESTION.text
        ).call().content()

    assert provider.prompts == []


def test_a_context_overflow_compacts_and_retries_the_call_once() -> None:
    overflow = ContextLengthExceededError("maximum context length", status_code=400)
    provider = Provider([overflow, "ok"])

    answer = (
        client(provider, ContextCompactionAdvisor(max_tokens=1000))
        .prompt()
        .messages(HISTORY)
        .user(QUESTION.text)
        .call()
        .content()
    )

    assert answer == "ok"
    assert provider.prompts[0].instructions == (*HISTORY, QUESTION)
    assert provider.prompts[1].instructions == (summary(1), QUESTION)
    assert len(provider.summary_prompts) == 1


def test_a_second_overflow_is_raised_with_the_first_chained() -> None:
    first = ContextLengthExceededError("too long")
    second = ContextLengthExceededError("still too long")
    provider = Provider([first, second, "never"])

    with pytest.raises(ContextLengthExceededError) as raised:
        client(provider, ContextCompactionAdvisor(max_tokens=1000)).prompt().messages(HISTORY).user(
            QUESTION.text
        ).call().content()

    assert raised.value is second and raised.value.__context__ is first
    assert len(provider.prompts) == 2 and len(provider.summary_prompts) == 1


def test_an_overflow_with_nothing_to_summarize_is_raised_untouched() -> None:
    overflow = ContextLengthExceededError("too long")
    provider = Provider([overflow, "never"])

    with pytest.raises(ContextLengthExceededError) as raised:
        client(provider, ContextCompactionAdvisor(max_tokens=1000)).prompt(QUESTION.text).call().content()

    assert raised.value is overflow and len(provider.prompts) == 1 and provider.summary_prompts == []


def test_an_overflow_inside_the_loop_compacts_the_older_rounds() -> None:
    provider = Provider([ask_of, ask_of, ContextLengthExceededError("too long"), "done"])

    client(provider, ContextCompactionAdvisor(max_tokens=1000)).prompt().user(QUESTION.text).call().content()

    assert texts(provider.prompts[3].instructions) == [
        "q",
        "Summary of the earlier conversation: summary 1",
        "call:c2",
        "tool:c2",
    ]


def test_other_model_errors_are_not_retried() -> None:
    provider = Provider([ModelError("server error", status_code=500), "never"])

    with pytest.raises(ModelError, match="server error"):
        client(provider, ContextCompactionAdvisor(max_tokens=1000)).prompt().messages(HISTORY).user(
            QUESTION.text
        ).call().content()

    assert len(provider.prompts) == 1 and provider.summary_prompts == []


# -- the stream path -----------------------------------------------------------------------------


def test_the_stream_path_compacts_the_same_way() -> None:
    provider = _loop_provider(3)

    chunks = list(
        client(provider, ContextCompactionAdvisor(max_tokens=90))
        .prompt()
        .user(QUESTION.text)
        .stream()
        .content()
    )

    assert "".join(chunks) == "done"
    labels = [texts(p.instructions) for p in provider.prompts]
    assert labels[3] == OLDEST_ROUND_SUMMARIZED
    assert len(provider.summary_prompts) == 1


def test_a_stream_overflow_before_the_first_chunk_is_compacted_and_retried() -> None:
    provider = Provider([ContextLengthExceededError("too long"), "fits now"])

    chunks = list(
        client(provider, ContextCompactionAdvisor(max_tokens=1000))
        .prompt()
        .messages(HISTORY)
        .user(QUESTION.text)
        .stream()
        .content()
    )

    assert "".join(chunks) == "fits now"
    assert provider.prompts[1].instructions == (summary(1), QUESTION)


def test_a_stream_overflow_after_a_chunk_went_out_is_raised() -> None:
    calls: list[Prompt] = []

    async def stream(prompt: Prompt) -> AsyncIterator[ChatResponse]:
        calls.append(prompt)
        yield ChatResponse([Generation(AssistantMessage("partial "))])
        raise ContextLengthExceededError("too long")

    model = FunctionChatModel(lambda p: "summary", stream_fn=stream)
    c = ChatClient(model, default_advisors=[ContextCompactionAdvisor(max_tokens=1000)])

    got: list[str] = []
    with pytest.raises(ContextLengthExceededError):
        for chunk in c.prompt().messages(HISTORY).user(QUESTION.text).stream().content():
            got.append(chunk)

    assert got == ["partial "] and len(calls) == 1


# -- observability -------------------------------------------------------------------------------


def _attributes(spans: InMemorySpanExporter) -> dict[str, Any]:
    span = next(s for s in spans.get_finished_spans() if s.name == "advisor Context Compaction Advisor")
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith("advisorchain.compaction.")}


def test_the_span_tells_how_many_messages_were_sent_and_whether_it_summarized(
    spans: InMemorySpanExporter,
) -> None:
    provider = Provider(["ok"])

    client(provider, ContextCompactionAdvisor(max_tokens=54)).prompt().system(SYSTEM.text).messages(
        HISTORY
    ).user(QUESTION.text).call().content()

    assert _attributes(spans) == {
        "advisorchain.compaction.messages_before": 6,
        "advisorchain.compaction.messages_after": 3,
        "advisorchain.compaction.summarized": True,
    }


def test_the_span_of_a_prompt_sent_as_is(spans: InMemorySpanExporter) -> None:
    provider = Provider(["ok"])

    list(client(provider, ContextCompactionAdvisor(max_tokens=500)).prompt("hi").stream().content())

    assert _attributes(spans) == {
        "advisorchain.compaction.messages_before": 1,
        "advisorchain.compaction.messages_after": 1,
        "advisorchain.compaction.summarized": False,
    }
