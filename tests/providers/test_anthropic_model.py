"""AnthropicChatModel: request mapping, block replay, stop reasons, stream assembly, errors."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain.errors import ModelError
from advisorchain.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.model import ChatModel, ChatOptions, Prompt
from advisorchain.models.anthropic import (
    DEFAULT_MAX_TOKENS,
    AnthropicChatModel,
    StreamAssembler,
    parse_message,
    to_anthropic_messages,
)
from advisorchain.replay import load_cassette, replay_anthropic_client
from advisorchain.tools.api import ToolDefinition
from tests.providers.cassette_support import RecordedTool, cassette_dir, read

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
THINKING = {"type": "thinking", "thinking": "Let me look.", "signature": "sig"}
REDACTED = {"type": "redacted_thinking", "data": "opaque"}


def _model(**kwargs: Any) -> AnthropicChatModel:
    return AnthropicChatModel("claude-sonnet-4-5", api_key="test-key", **kwargs)


def _prompt(options: ChatOptions | None = None) -> Prompt:
    return Prompt([SystemMessage("Be brief."), UserMessage("hi")], options)


# -- construction ----------------------------------------------------------------------------------


def test_model_exposes_model_name_and_provider_for_spans() -> None:
    model = _model()

    assert (model.model_name, model.provider, model.max_tokens) == ("claude-sonnet-4-5", "anthropic", 4096)
    assert isinstance(model, ChatModel)


def test_api_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")

    assert AnthropicChatModel("claude-sonnet-4-5").client.api_key == "from-env"


def test_max_retries_configures_the_sdk_client() -> None:
    assert _model(max_retries=0).client.max_retries == 0


@pytest.mark.parametrize("max_tokens", [0, -1, True, 1.5])
def test_max_tokens_must_be_a_positive_int(max_tokens: Any) -> None:
    with pytest.raises(ValueError, match=r"max_tokens \(the Messages API requires it\) must be an int"):
        AnthropicChatModel("claude-sonnet-4-5", api_key="k", max_tokens=max_tokens)


def test_client_and_connection_settings_together_are_refused() -> None:
    with pytest.raises(ValueError, match="either a ready `client`"):
        AnthropicChatModel(
            "claude-sonnet-4-5", client=anthropic.AsyncAnthropic(api_key="k"), base_url="http://x"
        )


# -- requests --------------------------------------------------------------------------------------


def test_system_is_top_level_and_options_map_to_request_fields() -> None:
    options = ChatOptions(model="claude-haiku-4-5", temperature=0.1, max_tokens=99, top_p=0.5, stop=["END"])

    body = _model().request_body(_prompt(options))

    assert body == {
        "model": "claude-haiku-4-5",
        "max_tokens": 99,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "temperature": 0.1,
        "top_p": 0.5,
        "stop_sequences": ["END"],
        "stream": False,
    }


def test_max_tokens_defaults_to_the_model_setting() -> None:
    assert _model().request_body(_prompt())["max_tokens"] == DEFAULT_MAX_TOKENS


def test_several_system_messages_become_system_text_blocks() -> None:
    system, _ = to_anthropic_messages([SystemMessage("a"), UserMessage("q"), SystemMessage("b")])

    assert system == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]


def test_tool_callbacks_become_tools_and_extra_tools_join_them() -> None:
    tool = RecordedTool(ToolDefinition("get_weather", "Weather.", SCHEMA))
    server = {"type": "web_search_20250305", "name": "web_search"}

    body = _model().request_body(_prompt(ChatOptions(tool_callbacks=[tool], extra={"tools": [server]})))

    assert body["tools"] == [
        {"name": "get_weather", "description": "Weather.", "input_schema": SCHEMA},
        server,
    ]


def test_output_schema_becomes_output_config_format_and_merges_with_extra() -> None:
    options = ChatOptions(output_schema=SCHEMA, extra={"output_config": {"effort": "low"}})

    body = _model(thinking={"type": "adaptive"}).request_body(_prompt(options))

    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}, "effort": "low"}
    assert body["thinking"] == {"type": "adaptive"}


def test_all_tool_results_of_a_round_go_in_one_user_message() -> None:
    _, turns = to_anthropic_messages(
        [
            UserMessage("q"),
            AssistantMessage("Looking.", [ToolCall("a", "f", '{"x": 1}'), ToolCall("b", "g", "{}")]),
            ToolResponseMessage([ToolResponse("a", "f", "1"), ToolResponse("b", "g", "2")]),
        ]
    )

    assert turns == [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "a", "name": "f", "input": {"x": 1}},
                {"type": "tool_use", "id": "b", "name": "g", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                {"type": "tool_result", "tool_use_id": "b", "content": "2"},
            ],
        },
    ]


def test_a_user_message_after_tool_results_joins_their_turn() -> None:
    _, turns = to_anthropic_messages(
        [
            AssistantMessage(None, [ToolCall("a", "f", "{}")]),
            ToolResponseMessage([ToolResponse("a", "f", "1")]),
            UserMessage("now answer"),
        ]
    )

    assert [b["type"] for b in turns[-1]["content"]] == ["tool_result", "text"]
    assert len(turns) == 2


def test_stored_blocks_are_replayed_in_order_when_the_message_is_unchanged() -> None:
    use = {"type": "tool_use", "id": "a", "name": "f", "input": {}, "caller": {"type": "direct"}}
    blocks = [THINKING, {"type": "text", "text": "Hi", "citations": None}, use]
    message = AssistantMessage("Hi", [ToolCall("a", "f", "{}")], {"anthropic_content": blocks})

    _, [turn] = to_anthropic_messages([message])

    assert turn["content"] == [
        THINKING,
        {"type": "text", "text": "Hi"},
        {k: use[k] for k in ("type", "id", "name", "input")},
    ]


def test_thinking_still_comes_first_when_the_message_was_changed() -> None:
    blocks = [REDACTED, {"type": "text", "text": "old"}]
    message = AssistantMessage("new", [ToolCall("a", "f", '{"k": "v"}')], {"anthropic_content": blocks})

    _, [turn] = to_anthropic_messages([message])

    assert turn["content"] == [
        REDACTED,
        {"type": "text", "text": "new"},
        {"type": "tool_use", "id": "a", "name": "f", "input": {"k": "v"}},
    ]


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", ""])
def test_tool_call_arguments_that_are_not_an_object_go_back_as_an_empty_input(arguments: str) -> None:
    _, [turn] = to_anthropic_messages([AssistantMessage(None, [ToolCall("a", "f", arguments)])])

    assert turn["content"] == [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]


def test_an_assistant_message_with_nothing_to_send_is_left_out() -> None:
    _, turns = to_anthropic_messages([UserMessage("q"), AssistantMessage(), UserMessage("again")])

    assert turns == [
        {"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "again"}]}
    ]


# -- responses -------------------------------------------------------------------------------------


def _message(content: list[dict[str, Any]], stop_reason: str | None, **usage: int) -> dict[str, Any]:
    return {"id": "msg", "model": "m", "content": content, "stop_reason": stop_reason, "usage": usage}


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
def test_stop_reasons_map_to_finish_reasons_and_the_raw_one_is_kept(stop_reason: str, finish: str) -> None:
    response = parse_message(_message([{"type": "text", "text": "x"}], stop_reason))

    assert response.finish_reason == finish
    assert response.result is not None and response.result.output.metadata["stop_reason"] == stop_reason


def test_cached_input_tokens_count_as_prompt_tokens() -> None:
    usage = {
        "input_tokens": 5,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
        "output_tokens": 7,
    }

    response = parse_message(_message([{"type": "text", "text": "x"}], "end_turn", **usage))

    assert response.metadata.usage is not None
    assert (response.metadata.usage.prompt_tokens, response.metadata.usage.completion_tokens) == (125, 7)


def test_server_tool_blocks_are_neither_text_nor_tool_calls_but_are_kept() -> None:
    server_use = {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {"query": "q"}}
    result = {"type": "web_search_tool_result", "tool_use_id": "srv", "content": []}

    response = parse_message(_message([server_use, result, {"type": "text", "text": "Found."}], "end_turn"))

    assert response.result is not None
    output = response.result.output
    assert (output.text, output.tool_calls) == ("Found.", ())
    assert output.metadata["anthropic_content"][:2] == [server_use, result]


def test_thinking_is_kept_out_of_the_text() -> None:
    response = parse_message(_message([THINKING, {"type": "text", "text": "Answer."}], "end_turn"))

    assert response.result is not None
    assert response.text == "Answer."
    assert response.result.output.metadata["reasoning"] == "Let me look."


# -- stream assembly -------------------------------------------------------------------------------


def _events(arguments_pieces: list[str]) -> list[dict[str, Any]]:
    start = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    return [
        {"type": "message_start", "message": {"id": "msg", "model": "m", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": start},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in arguments_pieces
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]


@given(
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4),
    st.lists(st.integers(min_value=0, max_value=80), max_size=8),
)
def test_input_json_deltas_reassemble_exactly_however_they_are_split(
    value: dict[str, Any], cuts: list[int]
) -> None:
    arguments = json.dumps(value)
    bounds = sorted({0, len(arguments), *(min(c, len(arguments)) for c in cuts)})
    assembler = StreamAssembler()
    for event in _events([arguments[a:b] for a, b in itertools.pairwise(bounds)]):
        assembler.feed(event)

    final = assembler.final()

    assert final.result is not None
    [call] = final.result.output.tool_calls
    assert (call.id, call.name, call.arguments) == ("t1", "f", arguments)
    assert final.finish_reason == "tool_calls"
    assert final.metadata.usage is not None and final.metadata.usage.total_tokens == 12


def test_a_tool_use_without_input_deltas_has_its_start_input_as_arguments() -> None:
    assembler = StreamAssembler()
    for event in _events([]):
        assembler.feed(event)

    assert assembler.final().result.output.tool_calls[0].arguments == "{}"  # type: ignore[union-attr]


def test_text_deltas_are_passed_on_and_thinking_deltas_are_not() -> None:
    assembler = StreamAssembler()
    events = [
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hmm"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}},
    ]

    got = [assembler.feed(e) for e in events]

    assert got == [None, None, None, None, "Hi"]
    metadata = assembler.final().result.output.metadata  # type: ignore[union-attr]
    assert metadata["anthropic_content"] == [
        {"type": "thinking", "thinking": "Hmm", "signature": "sig"},
        {"type": "text", "text": "Hi"},
    ]


async def test_error_event_in_a_stream_becomes_a_model_error_with_its_status() -> None:
    sse = (
        'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","type":"message",'
        '"role":"assistant","model":"claude","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        '"content_block":{"type":"text","text":""}}\n\n'
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        '"delta":{"type":"text_delta","text":"Hel"}}\n\n'
        'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )
    interaction = {
        "request": {"method": "POST", "path": "/v1/messages", "body": {}},
        "response": {"status": 200, "content_type": "text/event-stream", "sse": sse},
    }
    cassette = load_cassette({"host": "api.anthropic.com", "interactions": [interaction]})
    model = AnthropicChatModel("claude", client=replay_anthropic_client(cassette))
    texts: list[str | None] = []

    with pytest.raises(ModelError) as caught:
        async for chunk in model.stream(Prompt([UserMessage("hi")])):
            texts.append(chunk.text)

    assert texts == ["Hel"]
    assert (caught.value.status_code, caught.value.error_type) == (529, "overloaded_error")
    assert "Overloaded" in str(caught.value)
    assert cassette.open_streams == 0


@pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
async def test_closing_the_stream_early_closes_the_http_response() -> None:
    read("anthropic_stream_thinking_text.json")  # skips when the cassette folder is absent
    cassette = load_cassette(cassette_dir() / "anthropic_stream_thinking_text.json")
    model = AnthropicChatModel("claude-sonnet-4-0", client=replay_anthropic_client(cassette))
    stream = model.stream(Prompt([UserMessage("How do I cross the street?")]))

    first = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]

    assert first.text == "Here are"
    assert cassette.open_streams == 0


class _LostConnection(httpx2.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield (
            b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","type":"message",'
            b'"role":"assistant","model":"claude","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
        )
        raise httpx2.ReadError("connection lost")


async def test_a_connection_lost_mid_stream_becomes_a_model_error() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_LostConnection())

    client = anthropic.AsyncAnthropic(
        api_key="test-key", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    )
    model = AnthropicChatModel("claude", client=client)

    with pytest.raises(ModelError) as caught:
        async for _ in model.stream(Prompt([UserMessage("hi")])):
            pass

    assert caught.value.error_type == "connection_error"
    assert caught.value.status_code is None
