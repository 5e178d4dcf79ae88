"""AnthropicChatModel (the real SDK underneath) against a fault-injecting Messages-API server on
loopback: a stream without a stop reason or ``message_stop`` is never passed off as complete."""

from __future__ import annotations

import json

import pytest

from advisorchain import ModelError, Prompt, UserMessage
from advisorchain.model import ChatResponse
from advisorchain.models.anthropic import AnthropicChatModel
from tests.support.openai_server import Pause, Reset, ScriptedServer, Stall, json_reply, sse_frames, sse_reply
from tests.support.payloads import anthropic_text_events, anthropic_tool_events

TIMEOUT = 2.0
"""The read timeout: only a Stall (which never ends) may reach it; every other reply is sent at
once, and a busy machine still delivers each of its reads well within it."""


pytestmark = pytest.mark.usefixtures("http_path")  # every fault on both HTTP paths


def _model(server: ScriptedServer) -> AnthropicChatModel:
    return AnthropicChatModel("fault-model", base_url=server.url, api_key="k", max_retries=0, timeout=TIMEOUT)


def _prompt() -> Prompt:
    return Prompt([UserMessage("hi")])


async def _stream(model: AnthropicChatModel) -> list[ChatResponse]:
    return [chunk async for chunk in model.stream(_prompt())]


def _events(events: list[dict[str, object]], **kwargs: object) -> list[object]:
    return sse_reply(events, done=False, event_names=True, **kwargs)  # type: ignore[arg-type]


async def test_a_whole_stream_is_the_whole_answer(server: ScriptedServer) -> None:
    server.queue(_events(anthropic_text_events("The answer ", "is four.")))

    chunks = await _stream(_model(server))

    assert "".join(c.text or "" for c in chunks) == "The answer is four."
    assert chunks[-1].metadata.finish_reason == "stop"


async def test_a_stream_without_stop_reason_or_message_stop_is_a_model_error(server: ScriptedServer) -> None:
    server.queue(_events(anthropic_text_events("The answer is f", stop=False)))

    with pytest.raises(ModelError, match="no stop_reason and no message_stop") as caught:
        await _stream(_model(server))

    assert caught.value.error_type == "incomplete_answer"
    assert f"{server.url}/v1/messages" in str(caught.value)


async def test_a_stream_cut_inside_tool_input_is_a_model_error(server: ScriptedServer) -> None:
    server.queue(_events(anthropic_tool_events("weather", ['{"city": "Pa'], stop=False)))

    with pytest.raises(ModelError, match="tool input cut off"):
        await _stream(_model(server))


async def test_a_stop_reason_without_message_stop_is_complete(server: ScriptedServer) -> None:
    events = anthropic_text_events("four")[:-1]  # message_delta with stop_reason, no message_stop
    server.queue(_events(events))

    chunks = await _stream(_model(server))

    assert chunks[-1].metadata.finish_reason == "stop"


async def test_tool_input_split_over_fifty_deltas_makes_one_whole_call(server: ScriptedServer) -> None:
    arguments = json.dumps({"city": "Paris", "note": "y" * 150})
    pieces = [arguments[i * len(arguments) // 50 : (i + 1) * len(arguments) // 50] for i in range(50)]
    server.queue(_events(anthropic_tool_events("weather", pieces), sizes=[11] * 60, pause=0.001))

    chunks = await _stream(_model(server))

    (call,) = chunks[-1].result.output.tool_calls  # type: ignore[union-attr]
    assert (call.name, json.loads(call.arguments)) == ("weather", json.loads(arguments))


async def test_a_codepoint_split_across_chunks_arrives_whole(server: ScriptedServer) -> None:
    text = "naïve 🌍 café"
    payload = sse_frames(anthropic_text_events(text), done=False, event_names=True)
    cut = payload.index("🌍".encode()) + 1
    server.queue(_events(anthropic_text_events(text), sizes=[cut], pause=0.02))

    chunks = await _stream(_model(server))

    assert "".join(c.text or "" for c in chunks) == text


async def test_an_overloaded_error_with_retry_after_carries_status_and_wait(server: ScriptedServer) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.queue(json_reply(529, body, headers={"retry-after": "2"}))

    with pytest.raises(ModelError, match="Overloaded") as caught:
        await _model(server).call(_prompt())

    assert (caught.value.status_code, caught.value.retry_after) == (529, 2.0)


async def test_an_error_event_in_a_stream_is_a_model_error_with_its_status(server: ScriptedServer) -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.queue(_events([*anthropic_text_events("Hel", stop=False), error]))

    with pytest.raises(ModelError, match="Overloaded") as caught:
        await _stream(_model(server))

    assert caught.value.status_code == 529


async def test_invalid_json_in_an_event_is_a_model_error(server: ScriptedServer) -> None:
    broken = 'event: content_block_delta\ndata: {"type": "content_block_delta", \n\n'
    server.queue(_events([*anthropic_text_events("Hel", stop=False), broken]))

    with pytest.raises(ModelError, match="not JSON") as caught:
        await _stream(_model(server))

    assert caught.value.error_type == "invalid_response"


async def test_a_reset_inside_a_stream_is_a_connection_error_mid_stream(server: ScriptedServer) -> None:
    reply = _events(anthropic_text_events("par", "tial"), finished=False)
    server.queue([*reply[:4], Pause(0.02), Reset()])

    with pytest.raises(ModelError, match="mid-stream") as caught:
        await _stream(_model(server))

    assert caught.value.error_type == "connection_error"
    assert "reset" in str(caught.value)


async def test_a_stall_mid_stream_is_a_timeout_naming_the_url(server: ScriptedServer) -> None:
    reply = _events(anthropic_text_events("par", "tial"), finished=False)
    server.queue([*reply[:4], Stall()])

    with pytest.raises(ModelError, match="timed out mid-stream") as caught:
        await _stream(_model(server))

    assert caught.value.error_type == "timeout"
    assert f"{server.url}/v1/messages" in str(caught.value)
