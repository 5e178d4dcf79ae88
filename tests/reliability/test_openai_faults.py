"""OpenAIChatModel (the real SDK underneath) against a fault-injecting Chat Completions server on
loopback: an answer is either whole or a ModelError that says what happened — never a short
answer passed off as complete."""

from __future__ import annotations

import json

import pytest

from advisorchain import ChatClient, ModelError, Prompt, UserMessage, tool
from advisorchain.model import ChatOptions, ChatResponse
from advisorchain.models.openai import OpenAIChatModel
from tests.support.openai_server import (
    Pause,
    Reset,
    ScriptedServer,
    Send,
    Stall,
    json_reply,
    sse_frames,
    sse_reply,
)
from tests.support.payloads import openai_completion, openai_text_events, openai_tool_events
from tests.support.processes import free_port

TIMEOUT = 2.0
"""The read timeout: only a Stall (which never ends) may reach it; every other reply is sent at
once, and a busy machine still delivers each of its reads well within it."""


pytestmark = pytest.mark.usefixtures("http_path")  # every fault on both HTTP paths


def _model(server: ScriptedServer) -> OpenAIChatModel:
    return OpenAIChatModel(
        "fault-model", base_url=server.url + "/v1", api_key="k", max_retries=0, timeout=TIMEOUT
    )


def _prompt() -> Prompt:
    return Prompt([UserMessage("hi")])


async def _stream(model: OpenAIChatModel) -> list[ChatResponse]:
    return [chunk async for chunk in model.stream(_prompt())]


def _url(server: ScriptedServer) -> str:
    return f"{server.url}/v1/chat/completions"


# -- complete answers --------------------------------------------------------------------------------


async def test_a_stream_with_finish_reason_and_done_is_the_whole_answer(server: ScriptedServer) -> None:
    server.queue(sse_reply(openai_text_events("The answer ", "is four.")))

    chunks = await _stream(_model(server))

    assert "".join(c.text or "" for c in chunks) == "The answer is four."
    assert chunks[-1].metadata.finish_reason == "stop"


async def test_a_stream_with_a_finish_reason_but_no_done_marker_is_complete(server: ScriptedServer) -> None:
    server.queue(sse_reply(openai_text_events("four"), done=False))

    chunks = await _stream(_model(server))

    assert [c.text for c in chunks] == ["four", None]
    assert chunks[-1].metadata.finish_reason == "stop"


async def test_a_stream_with_done_but_no_finish_reason_is_complete(server: ScriptedServer) -> None:
    server.queue(sse_reply(openai_text_events("4", finish_reason=None), done=True))

    chunks = await _stream(_model(server))

    assert chunks[0].text == "4"
    assert chunks[-1].metadata.finish_reason == "stop"


async def test_an_empty_but_complete_answer_is_an_empty_answer(server: ScriptedServer) -> None:
    server.queue(json_reply(200, openai_completion("")))

    response = await _model(server).call(_prompt())

    assert response.text is None
    assert response.metadata.finish_reason == "stop"


async def test_an_empty_but_complete_stream_is_an_empty_answer(server: ScriptedServer) -> None:
    server.queue(sse_reply(openai_text_events("")))

    chunks = await _stream(_model(server))

    assert [c.text for c in chunks] == [None]
    assert chunks[-1].metadata.finish_reason == "stop"


async def test_arguments_split_over_fifty_deltas_make_one_whole_tool_call(server: ScriptedServer) -> None:
    arguments = json.dumps({"city": "Paris", "note": "x" * 200})
    pieces = [arguments[i * len(arguments) // 50 : (i + 1) * len(arguments) // 50] for i in range(50)]
    server.queue(sse_reply(openai_tool_events("weather", pieces), sizes=[7] * 40, pause=0.001))

    chunks = await _stream(_model(server))

    (call,) = chunks[-1].result.output.tool_calls  # type: ignore[union-attr]
    assert (call.id, call.name, call.arguments) == ("call_1", "weather", arguments)
    assert chunks[-1].metadata.finish_reason == "tool_calls"


async def test_a_codepoint_split_across_chunks_arrives_whole(server: ScriptedServer) -> None:
    text = "héllo 🌍 wörld"
    payload = sse_frames(openai_text_events(text))
    cut = payload.index("🌍".encode()) + 2  # inside the four bytes of the globe
    server.queue(sse_reply(openai_text_events(text), sizes=[cut], pause=0.02))

    chunks = await _stream(_model(server))

    assert "".join(c.text or "" for c in chunks) == text


# -- answers cut short -------------------------------------------------------------------------------


async def test_a_stream_ending_without_finish_reason_or_done_is_a_model_error(server: ScriptedServer) -> None:
    server.queue(sse_reply(openai_text_events("The answer is f", finish_reason=None), done=False))

    with pytest.raises(
        ModelError, match=r"is incomplete: the stream ended with no finish_reason and no \[DONE\]"
    ) as caught:
        await _stream(_model(server))

    assert caught.value.error_type == "incomplete_answer"
    assert _url(server) in str(caught.value)


async def test_a_stream_cut_inside_tool_call_arguments_is_a_model_error(server: ScriptedServer) -> None:
    server.queue(sse_reply(openai_tool_events("weather", ['{"city": "Pa'], finish_reason=None), done=False))

    with pytest.raises(ModelError, match="tool-call arguments cut off"):
        await _stream(_model(server))


async def test_a_tool_call_cut_short_is_never_executed(server: ScriptedServer) -> None:
    runs: list[str] = []

    @tool
    def weather(city: str) -> str:
        """Weather in a city."""
        runs.append(city)
        return "sunny"

    server.queue(
        sse_reply(openai_tool_events("weather", ['{"city": "Paris"'], finish_reason=None), done=False)
    )
    client = ChatClient(_model(server))

    with pytest.raises(ModelError):
        async for _ in client.prompt("weather?").tools(weather).astream().content():
            pass

    assert runs == []
    assert len(server.requests) == 1


async def test_an_answer_without_choices_is_a_model_error(server: ScriptedServer) -> None:
    server.queue(json_reply(200, {"id": "x", "object": "chat.completion", "choices": []}))

    with pytest.raises(ModelError, match="no choices"):
        await _model(server).call(_prompt())


async def test_a_stream_without_choices_is_a_model_error(server: ScriptedServer) -> None:
    usage_only = {"id": "x", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 0}}
    server.queue(sse_reply([usage_only]))

    with pytest.raises(ModelError, match="no choices"):
        await _stream(_model(server))


# -- provider errors ---------------------------------------------------------------------------------


async def test_a_429_with_retry_after_is_a_model_error_carrying_the_wait(server: ScriptedServer) -> None:
    body = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    server.queue(json_reply(429, body, headers={"retry-after": "3"}))

    with pytest.raises(ModelError, match="slow down") as caught:
        await _model(server).call(_prompt())

    assert (caught.value.status_code, caught.value.retry_after) == (429, 3.0)


async def test_a_503_without_retry_after_carries_no_wait(server: ScriptedServer) -> None:
    server.queue(json_reply(503, {"error": {"message": "overloaded"}}))

    with pytest.raises(ModelError, match="overloaded") as caught:
        await _model(server).call(_prompt())

    assert (caught.value.status_code, caught.value.retry_after) == (503, None)


async def test_retry_after_in_milliseconds_is_read(server: ScriptedServer) -> None:
    server.queue(json_reply(429, {"error": {"message": "later"}}, headers={"retry-after-ms": "250"}))

    with pytest.raises(ModelError) as caught:
        await _model(server).call(_prompt())

    assert caught.value.retry_after == 0.25


async def test_an_error_object_inside_a_200_stream_is_a_model_error(server: ScriptedServer) -> None:
    error_chunk = {"id": "x", "error": {"code": 400, "message": "Token limit reached"}, "choices": []}
    server.queue(sse_reply([*openai_text_events("Hel", finish_reason=None), error_chunk]))

    with pytest.raises(ModelError, match="Token limit reached") as caught:
        await _stream(_model(server))

    assert caught.value.status_code == 400


async def test_an_sse_error_event_is_a_model_error(server: ScriptedServer) -> None:
    error = {
        "error": {"message": "tool call validation failed", "code": "tool_use_failed", "status_code": 400}
    }
    frame = f"event: error\ndata: {json.dumps(error)}\n\n"
    server.queue(sse_reply([*openai_text_events("Hel", finish_reason=None), frame], done=False))

    with pytest.raises(ModelError, match="tool call validation failed") as caught:
        await _stream(_model(server))

    assert (caught.value.status_code, caught.value.error_type) == (400, "tool_use_failed")


async def test_invalid_json_in_a_chunk_is_a_model_error(server: ScriptedServer) -> None:
    server.queue(sse_reply([*openai_text_events("Hel", finish_reason=None), 'data: {"choices": [\n\n']))

    with pytest.raises(ModelError, match="not JSON") as caught:
        await _stream(_model(server))

    assert caught.value.error_type == "invalid_response"


# -- broken connections ------------------------------------------------------------------------------


async def test_a_reset_before_any_byte_names_the_reset_and_the_url(server: ScriptedServer) -> None:
    server.queue([Reset()])

    with pytest.raises(ModelError) as caught:
        await _model(server).call(_prompt())

    assert caught.value.error_type == "connection_error"
    assert "reset" in str(caught.value) or "closed the connection" in str(caught.value)
    assert _url(server) in str(caught.value)


async def test_a_reset_inside_the_body_is_a_connection_error(server: ScriptedServer) -> None:
    (whole,) = json_reply(200, openai_completion("a long answer"))
    assert isinstance(whole, Send)
    server.queue([Send(whole.data[: len(whole.data) - 20]), Pause(0.02), Reset()])

    with pytest.raises(ModelError) as caught:
        await _model(server).call(_prompt())

    assert caught.value.error_type == "connection_error"
    assert _url(server) in str(caught.value)


async def test_a_reset_inside_a_stream_is_a_connection_error_mid_stream(server: ScriptedServer) -> None:
    server.queue([*sse_reply(openai_text_events("par", "tial"), finished=False)[:2], Pause(0.02), Reset()])

    with pytest.raises(ModelError, match="mid-stream") as caught:
        await _stream(_model(server))

    assert caught.value.error_type == "connection_error"
    assert "reset" in str(caught.value)


async def test_a_refused_connection_names_the_refusal_and_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    model = OpenAIChatModel("m", base_url=url, api_key="k", max_retries=0, timeout=TIMEOUT)

    with pytest.raises(ModelError, match="connection refused") as caught:
        await model.call(_prompt())

    assert f"{url}/chat/completions" in str(caught.value)


async def test_a_server_that_never_answers_is_a_read_timeout_naming_the_url(server: ScriptedServer) -> None:
    server.queue([Stall()])

    with pytest.raises(ModelError, match="timed out") as caught:
        await _model(server).call(_prompt())

    assert caught.value.error_type == "timeout"
    assert "read timeout" in str(caught.value)
    assert _url(server) in str(caught.value)


async def test_a_stall_mid_stream_is_a_timeout_naming_the_url(server: ScriptedServer) -> None:
    server.queue([*sse_reply(openai_text_events("par"), finished=False)[:2], Stall()])
    seen: list[str | None] = []

    with pytest.raises(ModelError, match="timed out mid-stream") as caught:
        async for chunk in _model(server).stream(_prompt()):
            seen.append(chunk.text)

    assert seen == ["par"]
    assert caught.value.error_type == "timeout"
    assert f"after {TIMEOUT:g} s" in str(caught.value)
    assert _url(server) in str(caught.value)


async def test_options_timeout_override_still_applies(server: ScriptedServer) -> None:
    server.queue([Stall()])
    prompt = Prompt([UserMessage("hi")], ChatOptions(extra={"timeout": 0.2}))

    with pytest.raises(ModelError, match=r"after 0\.2 s"):
        await _model(server).call(prompt)
