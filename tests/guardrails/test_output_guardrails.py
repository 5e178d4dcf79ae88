"""OutputGuardrailAdvisor on calls and streams: nothing unchecked reaches the caller or a store;
release by answer or by sentence; replacements; trips raised or finished; memory outside and
inside the tool loop."""

from __future__ import annotations

import pytest

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    ChatClient,
    ChatMemory,
    ChatResponse,
    GuardContext,
    GuardrailError,
    GuardrailTripped,
    GuardResult,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    OutputGuardrailAdvisor,
    ScriptedChatModel,
    ToolCall,
    ToolCallingAdvisor,
    Usage,
    keyword_guard,
    pii_guard,
    tool,
)
from advisorchain.guardrails.output import sentence_ends
from tests.guardrails.support import PATHS, Path, Recorder, chunks_of, run, texts_of

INSIDE = ToolCallingAdvisor.DEFAULT_ORDER + 100


def answer(text: str, tokens: int = 7) -> ChatResponse:
    return ChatResponse.of(AssistantMessage(text), "stop", Usage(10, tokens))


def no_secret(text: str, context: GuardContext) -> GuardResult:
    return GuardResult(False, "That is secret.") if "secret" in text else GuardResult(True)


def client_with(
    model: ScriptedChatModel, memory: MessageWindowChatMemory, guard: OutputGuardrailAdvisor
) -> ChatClient:
    return ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory), guard])


# -- the call path and release="answer" ----------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
async def test_a_replacement_is_the_answer_and_what_memory_stores(path: Path) -> None:
    memory = MessageWindowChatMemory()
    client = client_with(
        ScriptedChatModel([answer("Write to ada@example.com.")]), memory, OutputGuardrailAdvisor(pii_guard())
    )
    got = await run(client.prompt("how do I reach Ada?"), path)
    assert got.text == "Write to [EMAIL]."
    assert got.finish_reason == "stop" and got.metadata.usage == Usage(10, 7)
    assert texts_of(memory.get("default")) == ["how do I reach Ada?", "Write to [EMAIL]."]


@pytest.mark.parametrize("path", PATHS)
async def test_a_raised_trip_carries_the_answer_and_stores_nothing(path: Path) -> None:
    memory = MessageWindowChatMemory()
    client = client_with(
        ScriptedChatModel([answer("The secret is 42.")]), memory, OutputGuardrailAdvisor(no_secret)
    )
    with pytest.raises(GuardrailTripped) as info:
        await run(client.prompt("q"), path)
    error = info.value
    assert (error.guard, error.kind, error.message) == ("no_secret", "output", "That is secret.")
    assert error.partial_response is not None and error.partial_response.text == "The secret is 42."
    assert "42" not in str(error)
    assert memory.get("default") == []


@pytest.mark.parametrize("path", PATHS)
async def test_finish_ends_with_the_message_and_memory_stores_that_ending(path: Path) -> None:
    memory = MessageWindowChatMemory()
    client = client_with(
        ScriptedChatModel([answer("The secret is 42.")]),
        memory,
        OutputGuardrailAdvisor(no_secret, on_trip="finish"),
    )
    got = await run(client.prompt("q"), path)
    assert got.text == "That is secret." and got.finish_reason == "guardrailTripped"
    assert got.metadata.usage == Usage(10, 7)  # usage as far as it went
    assert texts_of(memory.get("default")) == ["q", "That is secret."]


async def test_release_answer_emits_one_chunk_with_the_finish_reason_and_usage() -> None:
    model = ScriptedChatModel([answer("One. Two. Three.")])
    client = ChatClient(model, default_advisors=[OutputGuardrailAdvisor(Recorder())])
    chunks = [c for c in await chunks_of(client.prompt("q")) if c.chat_response is not None]
    texts = [c.chat_response.text for c in chunks if c.chat_response.text]  # type: ignore[union-attr]
    assert texts == ["One. Two. Three."]
    last = chunks[-1].chat_response
    assert last is not None and last.finish_reason == "stop" and last.metadata.usage == Usage(10, 7)
    assert last.text == "One. Two. Three."


async def test_a_tool_rounds_preamble_is_checked_and_held_with_the_rest() -> None:
    @tool
    def weather(city: str) -> str:
        """Weather."""
        return "sunny"

    guard = Recorder()
    model = ScriptedChatModel(
        [AssistantMessage("Let me check. ", [ToolCall("c1", "weather", '{"city": "Oslo"}')]), "It is sunny."]
    )
    client = ChatClient(model, default_advisors=[OutputGuardrailAdvisor(guard)])
    texts = [
        c.chat_response.text for c in await chunks_of(client.prompt("q").tools(weather)) if c.chat_response
    ]
    assert [t for t in texts if t] == ["Let me check. It is sunny."]
    assert guard.texts == ["Let me check. It is sunny."]


# -- release="sentence" ----------------------------------------------------------------------------


async def test_sentences_are_released_one_by_one_and_the_guard_sees_the_whole_text_so_far() -> None:
    guard = Recorder()
    model = ScriptedChatModel([answer("It costs 2.50 today. Really!\n\nBuy now? Yes")])
    client = ChatClient(model, default_advisors=[OutputGuardrailAdvisor(guard, release="sentence")])
    chunks = await chunks_of(client.prompt("q"))
    texts = [c.chat_response.text for c in chunks if c.chat_response is not None and c.chat_response.text]
    assert texts == ["It costs 2.50 today.", " Really!", "\n", "\nBuy now?", " Yes"]
    assert guard.texts == [
        "It costs 2.50 today.",
        "It costs 2.50 today. Really!",
        "It costs 2.50 today. Really!\n",  # a newline followed by whitespace
        "It costs 2.50 today. Really!\n\nBuy now?",
        "It costs 2.50 today. Really!\n\nBuy now? Yes",
    ]
    last = chunks[-1].chat_response
    assert last is not None and last.finish_reason == "stop" and last.metadata.usage == Usage(10, 7)


def test_sentence_ends_in_chinese_and_japanese_need_no_space() -> None:
    stop, bang, ask = "\u3002", "\uff01", "\uff1f"  # the ideographic full stop, full-width ! and ?
    text = f"你好{stop}今天天气很好{bang}是吗{ask}はい{stop}"
    ends = sentence_ends(text)
    assert [text[:e] for e in ends] == [
        f"你好{stop}",
        f"你好{stop}今天天气很好{bang}",
        text[: text.index(ask) + 1],
        text,
    ]
    assert sentence_ends("v2.50 and e.g.x") == []
    assert sentence_ends("Done.") == []  # the end of the answer, not a sentence end yet


async def test_a_sentence_still_arriving_is_never_released() -> None:
    seen: list[str] = []

    def watch(text: str, context: GuardContext) -> bool:
        seen.append(text)
        return True

    client = ChatClient(
        ScriptedChatModel([answer("First one. Second")]),
        default_advisors=[OutputGuardrailAdvisor(watch, release="sentence")],
    )
    texts = []
    async for chunk in client.prompt("q").astream().content():
        texts.append(chunk)
        assert "".join(texts) in seen  # what reached the caller had passed the guard
    assert "".join(texts) == "First one. Second"


@pytest.mark.parametrize("on_trip", ["raise", "finish"])
async def test_a_trip_after_released_sentences_ends_the_stream_and_stores_nothing(on_trip: str) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([answer("All fine. The secret is 42. More text.")])
    client = client_with(
        model, memory, OutputGuardrailAdvisor(no_secret, release="sentence", on_trip=on_trip)
    )  # type: ignore[arg-type]
    received: list[str] = []
    if on_trip == "raise":
        with pytest.raises(GuardrailTripped) as info:
            async for text in client.prompt("q").astream().content():
                received.append(text)
        assert info.value.partial_response is not None
        assert received == ["All fine."]
    else:
        chunks = await chunks_of(client.prompt("q"))
        received = [c.chat_response.text for c in chunks if c.chat_response and c.chat_response.text]  # type: ignore[misc]
        assert received == ["All fine.", "That is secret."]
        assert chunks[-1].chat_response is not None
        assert chunks[-1].chat_response.finish_reason == "guardrailTripped"
    assert memory.get("default") == []


async def test_sentence_mode_redacts_and_memory_stores_what_the_caller_got() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([answer("Hi. Mail ada@example.com today. Or call +44 20 7946 0958.")])
    client = client_with(model, memory, OutputGuardrailAdvisor(pii_guard(), release="sentence"))
    texts = [t async for t in client.prompt("q").astream().content()]
    assert "".join(texts) == "Hi. Mail [EMAIL] today. Or call [PHONE]."
    assert texts[0] == "Hi."
    assert texts_of(memory.get("default")) == ["q", "Hi. Mail [EMAIL] today. Or call [PHONE]."]


async def test_a_replacement_that_rewrites_released_text_is_a_guardrail_error() -> None:
    def rewrite(text: str, context: GuardContext) -> GuardResult:
        return GuardResult(True, replacement="[REDACTED]" + text[5:]) if "Two" in text else GuardResult(True)

    memory = MessageWindowChatMemory()
    client = client_with(
        ScriptedChatModel([answer("One. Two. Three.")]),
        memory,
        OutputGuardrailAdvisor(rewrite, release="sentence"),
    )
    received: list[str] = []
    with pytest.raises(GuardrailError) as info:
        async for text in client.prompt("q").astream().content():
            received.append(text)
    assert received == ["One."]
    assert info.value.guard == "rewrite" and info.value.kind == "output"
    assert memory.get("default") == []


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("release", ["answer", "sentence"])
async def test_a_failing_guard_raises_guardrail_error_even_with_finish(path: Path, release: str) -> None:
    def broken(text: str, context: GuardContext) -> bool:
        raise ValueError("boom")

    client = ChatClient(
        ScriptedChatModel([answer("One. Two.")]),
        default_advisors=[OutputGuardrailAdvisor(broken, release=release, on_trip="finish")],  # type: ignore[arg-type]
    )
    with pytest.raises(GuardrailError) as info:
        await run(client.prompt("q"), path)
    assert isinstance(info.value.__cause__, ValueError)


# -- memory inside the tool loop -------------------------------------------------------------------


@tool
def lookup(name: str) -> str:
    """Look a person up."""
    return "found"


def loop_model(final: str) -> ScriptedChatModel:
    return ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "lookup", '{"name": "Ada"}')]), answer(final)]
    )


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("release", ["answer", "sentence"])
async def test_memory_inside_the_loop_stores_the_replacement(path: Path, release: str) -> None:
    memory = MessageWindowChatMemory()
    client = ChatClient(
        loop_model("Her mail is ada@example.com."),
        default_advisors=[
            MessageChatMemoryAdvisor(memory, order=INSIDE),
            OutputGuardrailAdvisor(pii_guard(), release=release),
        ],  # type: ignore[arg-type]
    )
    got = await run(client.prompt("find Ada").tools(lookup), path)
    assert got.text == "Her mail is [EMAIL]."
    stored = memory.get("default")
    assert stored[-1] == AssistantMessage("Her mail is [EMAIL].")
    assert all("ada@" not in str(m) for m in stored)


@pytest.mark.parametrize("path", PATHS)
async def test_memory_inside_the_loop_keeps_the_rounds_but_not_an_answer_that_tripped(path: Path) -> None:
    memory = MessageWindowChatMemory()
    client = ChatClient(
        loop_model("The secret is 42."),
        default_advisors=[MessageChatMemoryAdvisor(memory, order=INSIDE), OutputGuardrailAdvisor(no_secret)],
    )
    with pytest.raises(GuardrailTripped):
        await run(client.prompt("find Ada").tools(lookup), path)
    stored = memory.get("default")
    assert all("secret" not in str(m) for m in stored)
    assert not any(isinstance(m, AssistantMessage) and m.text and not m.tool_calls for m in stored)


@pytest.mark.parametrize("path", PATHS)
async def test_memory_outside_the_loop_stores_the_checked_final_answer_after_tool_rounds(path: Path) -> None:
    memory = MessageWindowChatMemory()
    client = client_with(loop_model("Mail ada@example.com."), memory, OutputGuardrailAdvisor(pii_guard()))
    got = await run(client.prompt("find Ada").tools(lookup), path)
    assert got.text == "Mail [EMAIL]."
    assert texts_of(memory.get("default"))[-1] == "Mail [EMAIL]."


async def test_the_output_guard_is_told_the_agent_that_answered() -> None:
    guard = Recorder()
    client = ChatClient(ScriptedChatModel([answer("Hi.")]), default_advisors=[OutputGuardrailAdvisor(guard)])
    spec = (
        client.prompt("q")
        .param(AdvisorParams.ACTIVE_AGENT, "billing")
        .param(ChatMemory.CONVERSATION_ID, "u1")
    )
    await spec.acall().content()
    assert dict(guard.contexts[0]) == {"kind": "output", "conversation_id": "u1", "agent": "billing"}


async def test_a_keyword_guard_on_the_output_on_both_paths() -> None:
    client = ChatClient(
        ScriptedChatModel([answer("Use the Password field."), answer("Use the Password field.")]),
        default_advisors=[OutputGuardrailAdvisor(keyword_guard(["password"], message="Not that."))],
    )
    for path in PATHS:
        with pytest.raises(GuardrailTripped, match="Not that"):
            await run(client.prompt("q"), path)


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="release"):
        OutputGuardrailAdvisor(no_secret, release="word")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_trip"):
        OutputGuardrailAdvisor(no_secret, on_trip="log")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one guard"):
        OutputGuardrailAdvisor()
    assert OutputGuardrailAdvisor(no_secret).order == OutputGuardrailAdvisor.DEFAULT_ORDER


@pytest.mark.parametrize("path", PATHS)
async def test_with_agents_the_guards_are_told_which_agent_answered_and_which_made_the_call(
    path: Path,
) -> None:
    from advisorchain import Agent

    billing = Agent("billing", instructions="You do billing.")
    triage = Agent("triage", instructions="You route.", handoffs=[billing])
    model = ScriptedChatModel(
        [
            AssistantMessage(None, [ToolCall("h1", "transfer_to_billing", "{}")]),
            answer("Card 4111 1111 1111 1111."),
        ]
    )
    outputs, calls = Recorder(), Recorder()
    client = ChatClient(
        model, default_advisors=[OutputGuardrailAdvisor(outputs, pii_guard())], tool_guards=[calls]
    )
    got = await run(client.prompt("my bill").agent(triage), path)
    assert got.text == "Card [CREDIT_CARD]."
    assert outputs.contexts[-1]["agent"] == "billing"
    assert calls.contexts[0]["agent"] == "triage" and calls.contexts[0]["tool_name"] == "transfer_to_billing"
