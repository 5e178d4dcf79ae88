"""OpenAIChatModel: request mapping, response quirks, stream assembly, errors, construction."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import ChatClient, UsageLimits
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
from advisorchain.models.openai import OpenAIChatModel, StreamAssembler, parse_completion, to_openai_messages
from advisorchain.replay import Cassette, load_cassette, replay_openai_client
from advisorchain.tools.api import ToolDefinition
from tests.providers.cassette_support import RecordedTool, cassette_dir, openai_messages, read

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _model(**defaults: Any) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o", api_key="test-key", **defaults)


def _prompt(options: ChatOptions | None = None) -> Prompt:
    return Prompt([UserMessage("hi")], options)


# -- construction ----------------------------------------------------------------------------------


def test_model_exposes_model_name_and_provider_for_spans() -> None:
    model = _model()

    assert (model.model_name, model.provider) == ("gpt-4o", "openai")
    assert isinstance(model, ChatModel)


def test_provider_name_can_name_an_openai_compatible_server() -> None:
    model = OpenAIChatModel("llama3.2", base_url="http://localhost:11434/v1", provider_name="ollama")

    assert model.provider == "ollama"
    assert str(model.client.base_url) == "http://localhost:11434/v1/"


def test_api_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")

    assert OpenAIChatModel("gpt-4o").client.api_key == "from-env"


def test_missing_api_key_is_a_model_error_naming_the_variable() -> None:
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o")


def test_max_retries_configures_the_sdk_client() -> None:
    assert OpenAIChatModel("gpt-4o", api_key="k", max_retries=5).client.max_retries == 5


def test_client_and_connection_settings_together_are_refused() -> None:
    client = openai.AsyncOpenAI(api_key="k")

    with pytest.raises(ValueError, match="either a ready `client`"):
        OpenAIChatModel("gpt-4o", client=client, api_key="other")


def test_blank_model_name_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a model name, got ' '"):
        OpenAIChatModel(" ", api_key="k")


# -- requests --------------------------------------------------------------------------------------


def test_chat_options_map_to_request_fields() -> None:
    options = ChatOptions(model="gpt-4o-mini", temperature=0.2, max_tokens=50, top_p=0.9, stop=["END"])

    body = _model().request_body(_prompt(options))

    assert body == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.2,
        "max_completion_tokens": 50,
        "top_p": 0.9,
        "stop": ["END"],
        "stream": False,
    }


# Where ChatOptions.max_tokens goes: OpenAI's own API wants max_completion_tokens (its reasoning models
# refuse max_tokens); OpenAI-compatible servers read max_tokens. (base_url, its field, the other name)
_MAX_TOKENS_HOSTS = [
    (None, "max_completion_tokens", "max_tokens"),
    ("https://api.openai.com/v1", "max_completion_tokens", "max_tokens"),
    ("http://localhost:11434/v1", "max_tokens", "max_completion_tokens"),
    ("https://api.groq.com/openai/v1", "max_tokens", "max_completion_tokens"),
]


@pytest.mark.parametrize(("base_url", "field", "other"), _MAX_TOKENS_HOSTS)
def test_max_tokens_goes_in_the_field_the_hosts_api_reads(
    base_url: str | None, field: str, other: str
) -> None:
    model = OpenAIChatModel("m", base_url=base_url, api_key="k")

    body = model.request_body(_prompt(ChatOptions(max_tokens=50)))

    assert body[field] == 50
    assert other not in body


@pytest.mark.parametrize(("base_url", "field", "other"), _MAX_TOKENS_HOSTS)
def test_the_requests_max_tokens_is_the_only_cap_sent_when_the_defaults_name_the_other_field(
    base_url: str | None, field: str, other: str
) -> None:
    model = OpenAIChatModel("m", base_url=base_url, api_key="k", **{other: 1000})

    capped = model.request_body(_prompt(ChatOptions(max_tokens=50)))
    uncapped = model.request_body(_prompt())

    assert capped[field] == 50
    assert other not in capped
    assert uncapped[other] == 1000  # no cap of the request's own: the defaults go as given
    assert field not in uncapped


@pytest.mark.parametrize(
    ("name", "field", "other"),
    [
        ("openai_text_simple.json", "max_completion_tokens", "max_tokens"),
        ("mistral_text_tool_calls_null.json", "max_tokens", "max_completion_tokens"),
    ],
)
async def test_a_usage_limit_caps_the_request_in_the_field_the_hosts_api_reads(
    name: str, field: str, other: str
) -> None:
    read(name)  # skips when the cassette folder is absent
    cassette = load_cassette(cassette_dir() / name)
    recorded = cassette.recorded_request(0).body
    model = OpenAIChatModel(recorded["model"], client=replay_openai_client(cassette), **{other: 1000})
    client = ChatClient(model, usage_limits=UsageLimits(output_tokens_limit=300))

    answer = await client.prompt(recorded["messages"][0]["content"]).acall().content()

    assert answer
    (sent,) = cassette.requests
    assert sent.body[field] == 300  # lowered from the defaults' 1000 to what the limit leaves
    assert other not in sent.body


def test_defaults_apply_and_options_then_extra_override_them() -> None:
    model = _model(temperature=1.0, seed=7, user="u1")
    options = ChatOptions(temperature=0.0, extra={"seed": 8, "reasoning_effort": "low"})

    body = model.request_body(_prompt(options))

    assert (body["temperature"], body["seed"], body["user"], body["reasoning_effort"]) == (
        0.0,
        8,
        "u1",
        "low",
    )


def test_none_in_extra_removes_a_parameter() -> None:
    body = _model(seed=7).request_body(
        _prompt(ChatOptions(extra={"seed": None, "stream_options": None})), stream=True
    )

    assert "seed" not in body and "stream_options" not in body


def test_stream_asks_for_usage() -> None:
    assert _model().request_body(_prompt(), stream=True)["stream_options"] == {"include_usage": True}


def test_sdk_options_do_not_go_into_the_body() -> None:
    body = _model(extra_headers={"X-Trace": "1"}, timeout=5).request_body(_prompt())

    assert "extra_headers" not in body and "timeout" not in body


def test_tool_callbacks_become_function_tools() -> None:
    tool = RecordedTool(ToolDefinition("get_weather", "Weather of a city.", SCHEMA))

    body = _model().request_body(_prompt(ChatOptions(tool_callbacks=[tool])))

    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather of a city.", "parameters": SCHEMA},
        }
    ]


def test_two_tools_with_one_name_are_refused() -> None:
    tool = RecordedTool(ToolDefinition("same", "", SCHEMA))

    with pytest.raises(ValueError, match="two tools are named 'same'"):
        _model().request_body(_prompt(ChatOptions(tool_callbacks=[tool, tool])))


def test_output_schema_becomes_a_json_schema_response_format() -> None:
    body = _model().request_body(_prompt(ChatOptions(output_schema={**SCHEMA, "title": "City Info!"})))

    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "CityInfo", "schema": {**SCHEMA, "title": "City Info!"}, "strict": False},
    }


def test_each_tool_response_becomes_its_own_tool_message() -> None:
    messages = [
        SystemMessage("sys"),
        UserMessage("q"),
        AssistantMessage(None, [ToolCall("a", "f", "{}"), ToolCall("b", "g", '{"x":1}')]),
        ToolResponseMessage([ToolResponse("a", "f", "1"), ToolResponse("b", "g", "2")]),
    ]

    wire = to_openai_messages(messages)

    assert wire == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": '{"x":1}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
    ]


def test_an_empty_assistant_message_is_sent_with_empty_content() -> None:
    assert to_openai_messages([AssistantMessage()]) == [{"role": "assistant", "content": ""}]


def test_reasoning_is_sent_back_under_the_field_it_came_in() -> None:
    message = AssistantMessage("a", metadata={"reasoning": "r", "reasoning_field": "reasoning"})

    assert to_openai_messages([message]) == [{"role": "assistant", "content": "a", "reasoning": "r"}]


def test_reasoning_from_another_provider_is_not_sent() -> None:
    message = AssistantMessage("a", metadata={"reasoning": "anthropic thinking"})

    assert to_openai_messages([message]) == [{"role": "assistant", "content": "a"}]


def test_reasoning_replay_can_be_turned_off() -> None:
    message = AssistantMessage("a", metadata={"reasoning": "r", "reasoning_field": "reasoning_content"})

    assert to_openai_messages([message], replay_reasoning=False) == [{"role": "assistant", "content": "a"}]


# -- responses -------------------------------------------------------------------------------------


def _completion(message: dict[str, Any], finish: str | None = "stop") -> dict[str, Any]:
    return {"id": "c", "model": "m", "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


@pytest.mark.parametrize("content", ["", None])
def test_empty_or_null_content_is_no_text(content: str | None) -> None:
    response = parse_completion(_completion({"role": "assistant", "content": content}))

    assert response.text is None


@pytest.mark.parametrize("tool_calls", [None, []])
def test_null_or_empty_tool_calls_are_no_tool_calls(tool_calls: list[Any] | None) -> None:
    response = parse_completion(_completion({"role": "assistant", "content": "x", "tool_calls": tool_calls}))

    assert not response.has_tool_calls()


def test_text_content_parts_are_joined() -> None:
    content = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]

    assert parse_completion(_completion({"role": "assistant", "content": content})).text == "ab"


def test_empty_tool_call_id_gets_a_made_up_one() -> None:
    call = {"id": "", "type": "function", "function": {"name": "f", "arguments": "{}"}}

    [made] = parse_completion(
        _completion({"role": "assistant", "tool_calls": [call]}, "tool_calls")
    ).generations

    assert made.output.tool_calls[0].id.startswith("call_")


def test_missing_finish_reason_is_reported_as_tool_calls_when_tools_were_called() -> None:
    call = {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}

    response = parse_completion(_completion({"role": "assistant", "tool_calls": [call]}, None))

    assert response.finish_reason == "tool_calls"


def test_refusal_is_kept_in_metadata() -> None:
    response = parse_completion(_completion({"role": "assistant", "content": None, "refusal": "no"}))

    assert response.result is not None and response.result.output.metadata == {"refusal": "no"}


def test_every_choice_becomes_a_generation() -> None:
    data = {
        "choices": [
            {"index": 0, "message": {"content": "a"}, "finish_reason": "stop"},
            {"index": 1, "message": {"content": "b"}, "finish_reason": "length"},
        ]
    }

    response = parse_completion(data)

    assert [(g.output.text, g.finish_reason) for g in response.generations] == [
        ("a", "stop"),
        ("b", "length"),
    ]


# -- stream assembly -------------------------------------------------------------------------------


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "s", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _call_delta(index: int | None, call_id: str | None, name: str | None, arguments: str) -> dict[str, Any]:
    delta: dict[str, Any] = {"function": {"arguments": arguments}}
    if index is not None:
        delta["index"] = index
    if call_id is not None:
        delta["id"] = call_id
    if name is not None:
        delta["function"]["name"] = name
    return delta


@given(st.text(max_size=60), st.lists(st.integers(min_value=0, max_value=60), max_size=8))
def test_streamed_arguments_reassemble_exactly_however_they_are_split(
    arguments: str, cuts: list[int]
) -> None:
    bounds = sorted({0, len(arguments), *(min(c, len(arguments)) for c in cuts)})
    pieces = [arguments[a:b] for a, b in itertools.pairwise(bounds)] or [""]
    assembler = StreamAssembler()
    assembler.feed(_chunk({"tool_calls": [_call_delta(0, "id1", "f", pieces[0])]}))
    for piece in pieces[1:]:
        assembler.feed(_chunk({"tool_calls": [_call_delta(0, None, None, piece)]}))

    [call] = assembler.final().result.output.tool_calls  # type: ignore[union-attr]

    assert (call.id, call.name, call.arguments) == ("id1", "f", arguments)


def test_parallel_streamed_calls_are_kept_apart_by_index() -> None:
    assembler = StreamAssembler()
    for delta in (
        _call_delta(0, "a", "f", '{"x"'),
        _call_delta(1, "b", "g", '{"y"'),
        _call_delta(0, None, None, ":1}"),
        _call_delta(1, None, None, ":2}"),
    ):
        assembler.feed(_chunk({"tool_calls": [delta]}))

    calls = assembler.final().result.output.tool_calls  # type: ignore[union-attr]

    assert [(c.id, c.name, c.arguments) for c in calls] == [("a", "f", '{"x":1}'), ("b", "g", '{"y":2}')]


def test_streamed_calls_without_index_start_a_new_call_on_each_id() -> None:
    assembler = StreamAssembler()
    for delta in (
        _call_delta(None, "a", "f", "{"),
        _call_delta(None, None, None, "}"),
        _call_delta(None, "b", "g", "{}"),
    ):
        assembler.feed(_chunk({"tool_calls": [delta]}))

    calls = assembler.final().result.output.tool_calls  # type: ignore[union-attr]

    assert [(c.id, c.arguments) for c in calls] == [("a", "{}"), ("b", "{}")]


def test_streamed_call_without_id_gets_one_made_up_id() -> None:
    assembler = StreamAssembler()
    assembler.feed(_chunk({"tool_calls": [_call_delta(0, "", "f", "{")]}))
    assembler.feed(_chunk({"tool_calls": [_call_delta(0, "", None, "}")]}))

    [call] = assembler.final().result.output.tool_calls  # type: ignore[union-attr]

    assert call.id.startswith("call_") and call.arguments == "{}"


def test_text_deltas_are_passed_on_and_reasoning_is_not() -> None:
    assembler = StreamAssembler()

    got = [
        assembler.feed(_chunk({"reasoning_content": "thinking"})),
        assembler.feed(_chunk({"content": "Hel"})),
        assembler.feed(_chunk({"content": ""})),
        assembler.feed(_chunk({"content": "lo"}, "stop")),
    ]

    assert got == [None, "Hel", None, "lo"]
    assert assembler.final().result.output.metadata == {  # type: ignore[union-attr]
        "reasoning": "thinking",
        "reasoning_field": "reasoning_content",
    }


def test_usage_on_a_finish_chunk_or_a_later_usage_chunk_is_kept() -> None:
    assembler = StreamAssembler()
    assembler.feed({**_chunk({}, "stop"), "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
    assembler.feed({"choices": [], "usage": None})

    final = assembler.final()

    assert final.metadata.usage is not None and final.metadata.usage.total_tokens == 7
    assert final.finish_reason == "stop"


# -- errors and closing, on recorded traffic ---------------------------------------------------------


def _replay(name: str, *, max_retries: int = 2) -> tuple[OpenAIChatModel, Cassette]:
    read(name)  # skips when the cassette folder is absent
    cassette = load_cassette(cassette_dir() / name, headers={"retry-after-ms": "1"})
    model_name = cassette.recorded_request(0).body["model"]
    return OpenAIChatModel(
        model_name, client=replay_openai_client(cassette, max_retries=max_retries)
    ), cassette


def _recorded_prompt(cassette: Cassette) -> Prompt:
    return Prompt(openai_messages(cassette.recorded_request(0).body["messages"]))


async def test_rate_limit_is_retried_by_the_sdk_then_raised_as_model_error() -> None:
    model, cassette = _replay("openrouter_error_429_retries.json")

    with pytest.raises(ModelError) as caught:
        await model.call(_recorded_prompt(cassette))

    assert len(cassette.requests) == 3
    assert caught.value.status_code == 429
    assert caught.value.provider == "openai"


async def test_retries_follow_max_retries() -> None:
    model, cassette = _replay("openrouter_error_429_retries.json", max_retries=0)

    with pytest.raises(ModelError):
        await model.call(_recorded_prompt(cassette))

    assert len(cassette.requests) == 1


async def test_error_event_in_a_stream_keeps_the_provider_error_body() -> None:
    model, cassette = _replay("groq_stream_error_event_tool_use_failed.json")

    with pytest.raises(ModelError) as caught:
        async for _ in model.stream(_recorded_prompt(cassette)):
            pass

    assert caught.value.body["code"] == "tool_use_failed"
    assert cassette.open_streams == 0


async def test_closing_the_stream_early_closes_the_http_response() -> None:
    model, cassette = _replay("openai_stream_text.json")
    stream = model.stream(_recorded_prompt(cassette))

    first = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]

    assert first.text == "The"
    assert cassette.open_streams == 0


async def test_adapter_logs_nothing_of_the_prompt_or_the_key(caplog: pytest.LogCaptureFixture) -> None:
    model, _ = _replay("openai_error_404_model_not_found.json")
    caplog.set_level(logging.DEBUG, logger="advisorchain")

    with pytest.raises(ModelError) as caught:
        await model.call(Prompt([UserMessage("my secret question")]))

    assert not [r for r in caplog.records if r.name.startswith("advisorchain")]
    assert "replay-dummy-key" not in str(caught.value)
    assert "my secret question" not in str(caught.value)


async def test_a_stream_event_that_is_not_json_is_a_model_error() -> None:
    import httpx2

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=b"data: {oops\n\n")

    client = openai.AsyncOpenAI(
        api_key="k",
        base_url="http://127.0.0.1:9/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    model = OpenAIChatModel("m", client=client)
    with pytest.raises(ModelError, match="a stream event is not JSON"):
        async for _ in model.stream(Prompt([UserMessage("hi")])):
            pass
    with pytest.raises(ModelError, match="not JSON"):
        await model.call(Prompt([UserMessage("hi")]))


def _mock_model(handler: Any) -> OpenAIChatModel:
    import httpx2

    client = openai.AsyncOpenAI(
        api_key="k",
        base_url="http://127.0.0.1:9/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return OpenAIChatModel("m", client=client)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"[1, 2]", "not a JSON object"),
        (b'{"error": {"message": "model overloaded", "type": "server_error"}}', "model overloaded"),
    ],
)
async def test_a_malformed_or_error_body_with_status_200_is_a_model_error(body: bytes, fragment: str) -> None:
    import httpx2

    model = _mock_model(
        lambda request: httpx2.Response(200, headers={"content-type": "application/json"}, content=body)
    )
    with pytest.raises(ModelError, match=fragment):
        await model.call(Prompt([UserMessage("hi")]))


async def test_a_stream_event_that_is_not_an_object_is_a_model_error() -> None:
    import httpx2

    model = _mock_model(
        lambda request: httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=b"data: 42\n\n"
        )
    )
    with pytest.raises(ModelError, match="not a JSON object"):
        async for _ in model.stream(Prompt([UserMessage("hi")])):
            pass


async def test_a_connection_lost_mid_stream_is_a_model_error() -> None:
    import httpx2

    class Broken(httpx2.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield b'data: {"choices": [{"index": 0, "delta": {"content": "par"}}]}\n\n'
            raise httpx2.ReadError("connection reset by peer")

    model = _mock_model(
        lambda request: httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Broken())
    )
    seen: list[str | None] = []
    with pytest.raises(ModelError, match="connection failed mid-stream") as caught:
        async for chunk in model.stream(Prompt([UserMessage("hi")])):
            seen.append(chunk.text)
    assert seen == ["par"]
    assert caught.value.error_type == "connection_error"
