"""Advisors written for calls are safe on streams (API.md §3 BaseAdvisor, §6 stream path)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    BaseAdvisor,
    CallAdvisorChain,
    ChainConfigurationError,
    ChatClient,
    ChatClientRequest,
    ChatClientResponse,
    ChatResponse,
    Generation,
    Prompt,
    SafeGuardAdvisor,
    StreamAdvisorChain,
    ToolCall,
    ToolCallingAdvisor,
    Usage,
    tool,
)
from advisorchain.testing import FunctionChatModel, ScriptedChatModel

INSIDE = ToolCallingAdvisor.DEFAULT_ORDER + 100
OUTSIDE = ToolCallingAdvisor.DEFAULT_ORDER - 100
SECRET = "s3cr3t"


@tool
def get_secret(name: str) -> str:
    """Look up a secret."""
    return f"the {name} is {SECRET}"


def _with_text(chat: ChatResponse, text: str) -> ChatResponse:
    """``chat`` with its first generation's text replaced (tool calls and finish reason kept)."""
    first = chat.generations[0]
    output = AssistantMessage(text, first.output.tool_calls, first.output.metadata)
    return ChatResponse((Generation(output, first.finish_reason), *chat.generations[1:]), chat.metadata)


def _chunk(text: str | None = None, finish: str | None = None, usage: Usage | None = None) -> ChatResponse:
    return ChatResponse.of(AssistantMessage(text), finish, usage)


def _tool_then_answer(answer: str) -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            AssistantMessage("let me check", [ToolCall("c1", "get_secret", '{"name": "password"}')]),
            AssistantMessage(answer),
        ]
    )


class Redact(BaseAdvisor):
    """Replaces the secret in the answer it sees."""

    stream_mode = "buffer"

    def __init__(self, order: int) -> None:
        self.order = order
        self.seen: list[str | None] = []

    def after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        chat = response.chat_response
        assert chat is not None
        self.seen.append(chat.text)
        return response.copy(chat_response=_with_text(chat, (chat.text or "").replace(SECRET, "[redacted]")))


class Observe(BaseAdvisor):
    """Records every answer its after() sees and marks the context."""

    def __init__(self, order: int) -> None:
        self.order = order
        self.answers: list[ChatResponse | None] = []

    def after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        self.answers.append(response.chat_response)
        return response.copy(context={**response.context, "observed": len(self.answers)})


async def _stream(client: ChatClient, question: str = "what is the password?") -> list[ChatClientResponse]:
    return [c async for c in client.prompt(question).tools(get_secret).astream().chat_client_responses()]


def _text(chunks: list[ChatClientResponse]) -> str:
    return "".join(c.chat_response.text or "" for c in chunks if c.chat_response is not None)


@pytest.mark.parametrize("order", [OUTSIDE, INSIDE], ids=["outside the loop", "inside the loop"])
async def test_a_buffer_advisor_redacts_the_stream_and_leaks_nothing(order: int) -> None:
    redact = Redact(order)
    client = ChatClient(_tool_then_answer(f"it is {SECRET}"), default_advisors=[redact])
    chunks = await _stream(client)
    assert SECRET not in _text(chunks)
    assert _text(chunks).endswith("it is [redacted]")
    assert redact.seen[-1] is not None and SECRET in redact.seen[-1]


async def test_a_buffer_advisor_emits_exactly_what_after_returned_as_one_chunk() -> None:
    redact = Redact(OUTSIDE)
    model = ScriptedChatModel([AssistantMessage(f"one two {SECRET}")])
    chunks = [
        c
        async for c in ChatClient(model, default_advisors=[redact])
        .prompt("q")
        .astream()
        .chat_client_responses()
    ]
    assert [c.chat_response.text for c in chunks if c.chat_response] == ["one two [redacted]"]


async def test_a_buffer_advisor_redacts_the_call_path_too() -> None:
    client = ChatClient(_tool_then_answer(f"it is {SECRET}"), default_advisors=[Redact(OUTSIDE)])
    assert await client.prompt("q").tools(get_secret).acall().content() == "it is [redacted]"


@pytest.mark.parametrize("order", [OUTSIDE, INSIDE], ids=["outside the loop", "inside the loop"])
async def test_an_observe_advisor_sees_each_whole_answer_once_and_chunks_pass_unchanged(order: int) -> None:
    observe = Observe(order)
    client = ChatClient(_tool_then_answer("it is blue"), default_advisors=[observe])
    plain = [
        c
        async for c in ChatClient(_tool_then_answer("it is blue"))
        .prompt("q")
        .tools(get_secret)
        .astream()
        .content()
    ]
    chunks = await _stream(client)
    assert [c.chat_response.text for c in chunks if c.chat_response and c.chat_response.text] == plain
    if order == OUTSIDE:  # the whole loop's output is one answer
        assert len(observe.answers) == 1
        assert observe.answers[0] is not None and observe.answers[0].text == "let me checkit is blue"
    else:  # one answer per round, tool calls and finish reason included
        assert len(observe.answers) == 2
        assert observe.answers[0] is not None and observe.answers[0].has_tool_calls()
        assert observe.answers[1] is not None and observe.answers[1].text == "it is blue"
    assert all(a is not None and a.finish_reason for a in observe.answers)
    assert chunks[-1].context["observed"] == len(observe.answers)


async def test_an_observe_advisor_sees_text_usage_and_finish_in_one_aggregated_answer() -> None:
    def stream_fn(prompt: Prompt) -> AsyncIterator[ChatResponse]:
        async def chunks() -> AsyncIterator[ChatResponse]:
            yield _chunk("Hello ")
            yield _chunk("world", "stop", Usage(3, 2))

        return chunks()

    observe = Observe(OUTSIDE)
    model = FunctionChatModel(lambda p: AssistantMessage("unused"), stream_fn=stream_fn)
    await _stream(ChatClient(model, default_advisors=[observe]))
    (answer,) = observe.answers
    assert answer is not None
    assert (answer.text, answer.finish_reason, answer.metadata.usage) == ("Hello world", "stop", Usage(3, 2))


async def test_the_tool_loop_keeps_text_in_the_finish_chunk_with_the_summed_usage() -> None:
    rounds = iter(
        [
            [
                ChatResponse.of(
                    AssistantMessage(None, [ToolCall("c1", "get_secret", '{"name": "pin"}')]),
                    "tool_calls",
                    Usage(5, 1),
                )
            ],
            [_chunk("The pin "), _chunk("is known", "stop", Usage(7, 2))],
        ]
    )

    def stream_fn(prompt: Prompt) -> AsyncIterator[ChatResponse]:
        batch = next(rounds)

        async def chunks() -> AsyncIterator[ChatResponse]:
            for c in batch:
                yield c

        return chunks()

    observe = Observe(OUTSIDE)
    model = FunctionChatModel(lambda p: AssistantMessage("unused"), stream_fn=stream_fn)
    chunks = await _stream(ChatClient(model, default_advisors=[observe]))
    responses = [c.chat_response for c in chunks if c.chat_response is not None]
    assert [r.text for r in responses] == ["The pin ", "is known"]
    last = responses[-1]
    assert (last.finish_reason, last.metadata.usage) == ("stop", Usage(12, 3))
    (answer,) = observe.answers
    assert answer is not None and answer.text == "The pin is known"


class CallOnlyUpper:
    """A call-only advisor that upper-cases the answer."""

    name = "upper"

    def __init__(self, order: int) -> None:
        self.order = order

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        response = await chain.next_call(request)
        chat = response.chat_response
        assert chat is not None
        return response.copy(chat_response=_with_text(chat, (chat.text or "").upper()))


@pytest.mark.parametrize("order", [OUTSIDE, INSIDE], ids=["outside the loop", "inside the loop"])
async def test_a_call_only_advisor_runs_on_a_stream_and_its_result_reaches_the_caller(order: int) -> None:
    client = ChatClient(_tool_then_answer("it is blue"), default_advisors=[CallOnlyUpper(order)])
    chunks = await _stream(client)
    assert _text(chunks).endswith("IT IS BLUE")


class StreamOnlyTag:
    """A stream-only advisor that appends a tag chunk."""

    name = "tag"
    order = OUTSIDE

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        async for chunk in chain.next_stream(request):
            yield chunk
        yield ChatClientResponse(ChatResponse.of(AssistantMessage(" [tagged]")), request.context)


async def test_a_stream_only_advisor_runs_on_a_call() -> None:
    client = ChatClient(ScriptedChatModel(["hello"]), default_advisors=[StreamOnlyTag()])
    assert await client.prompt("q").acall().content() == "hello [tagged]"


class ReturnsNone(BaseAdvisor):
    def __init__(self, where: str) -> None:
        self.where = where

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        return None if self.where == "before" else request  # type: ignore[return-value]

    def after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        return None if self.where == "after" else response  # type: ignore[return-value]


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_a_base_advisor_returning_none_is_named(where: str, path: str) -> None:
    client = ChatClient(ScriptedChatModel(["hi"]), default_advisors=[ReturnsNone(where)])
    with pytest.raises(
        ChainConfigurationError, match=rf"advisor 'ReturnsNone' returned None from {where}\(\)"
    ):
        if path == "call":
            await client.prompt("q").acall().content()
        else:
            [c async for c in client.prompt("q").astream().content()]


class ProtocolReturnsNone:
    name = "forgetful"
    order = 0

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        await chain.next_call(request)
        return None  # type: ignore[return-value]

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        yield None  # type: ignore[misc]


@pytest.mark.parametrize("path", ["call", "stream"])
async def test_an_advisor_returning_none_is_named_on_both_paths(path: str) -> None:
    client = ChatClient(ScriptedChatModel(["hi"]), default_advisors=[ProtocolReturnsNone()])
    with pytest.raises(ChainConfigurationError, match="advisor 'forgetful' returned None from advise_"):
        if path == "call":
            await client.prompt("q").acall().content()
        else:
            [c async for c in client.prompt("q").astream().content()]


class StreamReturnsNone:
    name = "no-stream"
    order = 0

    def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        return None  # type: ignore[return-value]


async def test_an_advise_stream_that_returns_none_is_named() -> None:
    client = ChatClient(ScriptedChatModel(["hi"]), default_advisors=[StreamReturnsNone()])
    with pytest.raises(ChainConfigurationError, match="advisor 'no-stream' returned None from advise_stream"):
        [c async for c in client.prompt("q").astream().content()]


class HookReturnsNone(ToolCallingAdvisor):
    async def do_before_call(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        return None  # type: ignore[return-value]


@pytest.mark.parametrize("path", ["call", "stream"])
async def test_a_tool_loop_hook_returning_none_is_named(path: str) -> None:
    client = ChatClient(ScriptedChatModel(["hi"]), default_advisors=[HookReturnsNone()])
    with pytest.raises(
        ChainConfigurationError, match="'Tool Calling Advisor' returned None from do_before_call"
    ):
        if path == "call":
            await client.prompt("q").acall().content()
        else:
            [c async for c in client.prompt("q").astream().content()]


def test_an_unknown_stream_mode_is_refused_when_the_class_is_made() -> None:
    with pytest.raises(ChainConfigurationError, match="stream_mode is 'live'"):

        class Bad(BaseAdvisor):
            stream_mode = "live"  # type: ignore[assignment]


@pytest.mark.parametrize("path", ["call", "stream"])
async def test_safeguard_answers_without_calling_the_model(path: str) -> None:
    model = ScriptedChatModel([])
    client = ChatClient(model, default_advisors=[SafeGuardAdvisor(["Password"], "No.")])
    if path == "call":
        response = await client.prompt("what is the PASSWORD?").acall().chat_response()
        assert (response.text, response.finish_reason) == ("No.", "stop")
    else:
        assert [t async for t in client.prompt("what is the password?").astream().content()] == ["No."]
    assert model.prompts == []


@pytest.mark.parametrize("path", ["call", "stream"])
async def test_safeguard_lets_other_requests_through(path: str) -> None:
    client = ChatClient(ScriptedChatModel(["fine"]), default_advisors=[SafeGuardAdvisor(["password"])])
    if path == "call":
        assert await client.prompt("hello").acall().content() == "fine"
    else:
        assert [t async for t in client.prompt("hello").astream().content()] == ["fine"]


def test_safeguard_has_springs_default_failure_response() -> None:
    advisor = SafeGuardAdvisor(["x"])
    assert advisor.failure_response.startswith("I'm unable to respond to that due to sensitive content.")
    assert advisor.order == 0
