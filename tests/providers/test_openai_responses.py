"""OpenAIResponsesChatModel on the project's own fixtures (tests/providers/fixtures/, served to the real
SDK client): text, tool round trips, streams, structured output, reasoning carried across rounds,
and every way an answer can fail. The request each round sends is compared with the recorded one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from advisorchain import ChatClient, tool
from advisorchain.errors import ModelError
from advisorchain.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.model import ChatClientMessageAggregator, ChatModel, ChatOptions, ChatResponse, Prompt
from advisorchain.models.openai import OpenAIResponsesChatModel
from advisorchain.models.openai_responses import ResponsesStreamAssembler
from advisorchain.replay import Cassette, load_cassette, replay_openai_client
from advisorchain.tools.api import ToolDefinition
from tests.providers.cassette_support import RecordedTool

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WEATHER_SCHEMA = {
    "additionalProperties": False,
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
WEATHER = RecordedTool(ToolDefinition("get_weather", "Current weather in a city.", WEATHER_SCHEMA))
REASONING = {"reasoning": {"effort": "low", "summary": "auto"}, "include": ["reasoning.encrypted_content"]}
WEATHER_BY_CITY = {"Paris": "Sunny in Paris", "Rome": "Cloudy in Rome"}


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return WEATHER_BY_CITY[city]


def _replay(name: str, **defaults: Any) -> tuple[OpenAIResponsesChatModel, Cassette]:
    cassette = load_cassette(FIXTURES / name)
    return OpenAIResponsesChatModel("gpt-5-mini", client=replay_openai_client(cassette), **defaults), cassette


def _sent(cassette: Cassette) -> list[Any]:
    return [request.body for request in cassette.requests]


def _recorded(cassette: Cassette) -> list[Any]:
    return [cassette.recorded_request(i).body for i in range(len(cassette.interactions))]


async def _collect(model: ChatModel, prompt: Prompt) -> list[ChatResponse]:
    return [chunk async for chunk in model.stream(prompt)]


def _tools() -> ChatOptions:
    return ChatOptions(tool_callbacks=[WEATHER])


# -- construction ----------------------------------------------------------------------------------


def test_the_responses_model_is_a_chat_model_named_for_spans() -> None:
    model = OpenAIResponsesChatModel("gpt-5-mini", api_key="k")

    assert isinstance(model, ChatModel)
    assert (model.model_name, model.provider) == ("gpt-5-mini", "openai")


def test_missing_api_key_is_a_model_error_naming_the_variable_at_construction() -> None:
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        OpenAIResponsesChatModel("gpt-5-mini")


def test_a_base_url_without_a_key_is_accepted_for_local_servers() -> None:
    model = OpenAIResponsesChatModel("local", base_url="http://127.0.0.1:9/v1")

    assert str(model.client.base_url) == "http://127.0.0.1:9/v1/"


def test_client_and_connection_settings_together_are_refused() -> None:
    with pytest.raises(ValueError, match="either a ready `client`"):
        OpenAIResponsesChatModel(
            "m", client=replay_openai_client(FIXTURES / "responses_text.json"), api_key="k"
        )


@pytest.mark.parametrize("name", ["", "  ", None])
def test_a_blank_model_name_is_refused(name: Any) -> None:
    with pytest.raises(ValueError, match="needs a model name"):
        OpenAIResponsesChatModel(name, api_key="k")


# -- text ------------------------------------------------------------------------------------------


async def test_a_text_answer_comes_back_with_id_model_usage_and_stop() -> None:
    model, cassette = _replay("responses_text.json")

    response = await model.call(Prompt([SystemMessage("Be brief."), UserMessage("Say hello.")]))

    assert response.text == "Hello!"
    assert (response.metadata.id, response.metadata.model) == ("resp_text_1", "gpt-5-mini-2025-08-07")
    assert response.metadata.usage is not None
    assert (response.metadata.usage.prompt_tokens, response.metadata.usage.completion_tokens) == (18, 4)
    assert response.metadata.finish_reason == "stop"
    assert _sent(cassette) == _recorded(cassette)


async def test_a_streamed_text_arrives_as_live_deltas_then_a_last_chunk_with_finish_and_usage() -> None:
    model, cassette = _replay("responses_stream_text.json")

    chunks = await _collect(model, Prompt([UserMessage("Capital of France?")]))

    assert [c.text for c in chunks[:-1]] == ["The capital", " of France", " is Paris."]
    last = chunks[-1]
    assert last.text is None and last.metadata.finish_reason == "stop"
    assert last.metadata.usage is not None and last.metadata.usage.total_tokens == 23
    assert ChatClientMessageAggregator.aggregate(chunks).text == "The capital of France is Paris."
    assert _sent(cassette) == _recorded(cassette)
    assert cassette.open_streams == 0


# -- tools -----------------------------------------------------------------------------------------


async def test_parallel_function_calls_become_tool_calls_with_their_call_ids_in_order() -> None:
    model, _ = _replay("responses_tool_roundtrip.json")

    response = await model.call(Prompt([UserMessage("Weather in Paris and Rome?")], _tools()))

    assert response.result is not None
    assert response.result.output.tool_calls == (
        ToolCall("call_tr_paris", "get_weather", '{"city":"Paris"}'),
        ToolCall("call_tr_rome", "get_weather", '{"city":"Rome"}'),
    )
    assert response.metadata.finish_reason == "tool_calls"


async def test_tool_results_go_back_as_function_call_output_items_after_the_calls() -> None:
    model, cassette = _replay("responses_tool_roundtrip.json")
    calls = [
        ToolCall("call_tr_paris", "get_weather", '{"city":"Paris"}'),
        ToolCall("call_tr_rome", "get_weather", '{"city":"Rome"}'),
    ]
    await model.call(Prompt([UserMessage("Weather in Paris and Rome?")], _tools()))

    response = await model.call(
        Prompt(
            [
                UserMessage("Weather in Paris and Rome?"),
                AssistantMessage(None, calls),
                ToolResponseMessage(
                    [
                        ToolResponse("call_tr_paris", "get_weather", "Sunny in Paris"),
                        ToolResponse("call_tr_rome", "get_weather", "Cloudy in Rome"),
                    ]
                ),
            ],
            _tools(),
        )
    )

    assert response.text == "Paris is sunny, Rome is cloudy."
    assert _sent(cassette) == _recorded(cassette)


def test_the_whole_tool_loop_runs_through_the_chat_client() -> None:
    model, cassette = _replay("responses_tool_roundtrip.json")

    answer = ChatClient(model).prompt("Weather in Paris and Rome?").tools(get_weather).call().content()

    assert answer == "Paris is sunny, Rome is cloudy."
    assert _sent(cassette) == _recorded(cassette)
    cassette.assert_exhausted()


def test_the_whole_tool_loop_streams_through_the_chat_client() -> None:
    model, cassette = _replay("responses_stream_tool_roundtrip.json")

    deltas = list(ChatClient(model).prompt("Weather in Paris?").tools(get_weather).stream().content())

    assert deltas == ["It is sunny", " in Paris."]
    assert _sent(cassette) == _recorded(cassette)
    cassette.assert_exhausted()


async def test_streamed_function_call_arguments_are_assembled_into_one_whole_call() -> None:
    model, _ = _replay("responses_stream_tool_roundtrip.json")

    chunks = await _collect(model, Prompt([UserMessage("Weather in Paris?")], _tools()))

    assert [c.text for c in chunks] == [None]
    assert chunks[-1].result is not None
    assert chunks[-1].result.output.tool_calls == (
        ToolCall("call_stt_paris", "get_weather", '{"city":"Paris"}'),
    )
    assert chunks[-1].metadata.finish_reason == "tool_calls"


def test_arguments_are_joined_from_deltas_when_the_item_never_finished() -> None:
    assembler = ResponsesStreamAssembler()
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}
    for event in [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"a":'},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": " 1}"},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": []}},
    ]:
        assembler.feed(event)

    final = assembler.final()

    assert final.result is not None
    assert final.result.output.tool_calls == (ToolCall("call_1", "f", '{"a": 1}'),)


async def test_tools_are_sent_as_non_strict_functions() -> None:
    model = OpenAIResponsesChatModel("m", api_key="k")

    body = model.request_body(Prompt([UserMessage("hi")], _tools()))

    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": WEATHER_SCHEMA,
            "strict": False,
        }
    ]


# -- options and structured output -----------------------------------------------------------------


class City(BaseModel):
    name: str
    country: str


CITY_SCHEMA = {
    "title": "City",
    "type": "object",
    "properties": {"name": {"type": "string"}, "country": {"type": "string"}},
    "required": ["name", "country"],
}


async def test_an_output_schema_becomes_a_native_json_schema_text_format() -> None:
    model, cassette = _replay("responses_structured_output.json")

    response = await model.call(
        Prompt([UserMessage("Name the capital of Italy.")], ChatOptions(output_schema=CITY_SCHEMA))
    )

    assert City.model_validate_json(response.text or "") == City(name="Rome", country="Italy")
    assert _sent(cassette) == _recorded(cassette)


def test_entity_with_native_output_parses_the_json_answer() -> None:
    model, cassette = _replay("responses_structured_output.json")

    city = ChatClient(model).prompt("Name the capital of Italy.").call().entity(City, native=True)

    assert city == City(name="Rome", country="Italy")
    assert cassette.requests[0].body["text"]["format"]["type"] == "json_schema"
    assert cassette.requests[0].body["text"]["format"]["name"] == "City"


def test_sampling_options_map_to_responses_fields_and_extra_overrides_defaults() -> None:
    model = OpenAIResponsesChatModel("m", api_key="k", store=False, temperature=0.5)

    body = model.request_body(
        Prompt(
            [UserMessage("hi")],
            ChatOptions(model="other", temperature=0.1, max_tokens=99, top_p=0.9, extra={"store": None}),
        )
    )

    assert body == {
        "model": "other",
        "input": [{"role": "user", "content": "hi"}],
        "temperature": 0.1,
        "max_output_tokens": 99,
        "top_p": 0.9,
        "stream": False,
    }


async def test_stop_sequences_are_refused_before_any_request() -> None:
    model, cassette = _replay("responses_text.json")

    with pytest.raises(ModelError, match=r"no stop sequences, got stop=\['END'\]"):
        await model.call(Prompt([UserMessage("hi")], ChatOptions(stop=["END"])))
    assert cassette.requests == []


# -- reasoning ---------------------------------------------------------------------------------------


async def test_reasoning_items_are_kept_in_metadata_with_their_summary_as_reasoning() -> None:
    model, _ = _replay("responses_reasoning_roundtrip.json", **REASONING)

    response = await model.call(Prompt([UserMessage("Weather in Paris?")], _tools()))

    assert response.result is not None
    output = response.result.output
    assert output.text is None
    assert output.metadata["reasoning"] == "The user wants the weather; call get_weather for Paris."
    assert [item["type"] for item in output.metadata["openai_output"]] == ["reasoning", "function_call"]


def test_reasoning_items_are_sent_back_across_the_rounds_of_a_tool_loop() -> None:
    model, cassette = _replay("responses_reasoning_roundtrip.json", **REASONING)

    answer = ChatClient(model).prompt("Weather in Paris?").tools(get_weather).call().content()

    assert answer == "Sunny in Paris."
    assert _sent(cassette) == _recorded(cassette)


def test_streamed_reasoning_is_never_text_and_is_sent_back_in_the_next_round() -> None:
    model, cassette = _replay("responses_stream_reasoning_roundtrip.json", **REASONING)

    deltas = list(ChatClient(model).prompt("Weather in Paris?").tools(get_weather).stream().content())

    assert deltas == ["Sunny", " in Paris."]
    assert _sent(cassette) == _recorded(cassette)


def test_an_assistant_message_changed_after_parsing_still_sends_its_reasoning_first() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"}
    stored = [
        reasoning,
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{}"},
    ]
    edited = AssistantMessage("note", [ToolCall("c2", "g", "{}")], {"openai_output": stored})
    model = OpenAIResponsesChatModel("m", api_key="k")

    body = model.request_body(Prompt([UserMessage("hi"), edited]))

    assert body["input"][1:] == [
        reasoning,
        {"role": "assistant", "content": "note"},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
    ]


def test_without_replay_reasoning_an_assistant_message_goes_as_its_own_text_and_calls() -> None:
    model, cassette = _replay("responses_reasoning_roundtrip.json", replay_reasoning=False, **REASONING)

    answer = ChatClient(model).prompt("Weather in Paris?").tools(get_weather).call().content()

    assert answer == "Sunny in Paris."
    assert cassette.requests[1].body["input"] == [  # no reasoning item, no item ids
        {"role": "user", "content": "Weather in Paris?"},
        {
            "type": "function_call",
            "call_id": "call_rr_paris",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_rr_paris", "output": "Sunny in Paris"},
    ]
    assert "replay_reasoning" not in cassette.requests[0].body


def test_replay_reasoning_can_be_turned_off_after_construction() -> None:
    stored = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{}"},
    ]
    prompt = Prompt(
        [UserMessage("hi"), AssistantMessage(None, [ToolCall("c1", "f", "{}")], {"openai_output": stored})]
    )
    model = OpenAIResponsesChatModel("m", api_key="k")
    replayed = model.request_body(prompt)["input"][1:]

    model.replay_reasoning = False

    assert replayed == stored
    assert model.request_body(prompt)["input"][1:] == [
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    ]


# -- failures ----------------------------------------------------------------------------------------


async def test_an_http_error_is_a_model_error_with_status_and_type() -> None:
    model, _ = _replay("responses_error_400.json")

    with pytest.raises(ModelError, match="does not exist") as caught:
        await model.call(Prompt([UserMessage("hi")], ChatOptions(model="gpt-5-mni")))

    assert (caught.value.status_code, caught.value.error_type) == (400, "invalid_request_error")


async def test_an_incomplete_blocking_answer_is_a_model_error_naming_the_reason() -> None:
    model, _ = _replay("responses_incomplete.json")

    with pytest.raises(ModelError, match="max_output_tokens") as caught:
        await model.call(Prompt([UserMessage("Tell a story.")], ChatOptions(max_tokens=16)))

    assert caught.value.error_type == "incomplete_answer"


@pytest.mark.parametrize(
    ("fixture", "prompt", "message"),
    [
        (
            "responses_stream_incomplete.json",
            Prompt([UserMessage("Tell a story.")], ChatOptions(max_tokens=16)),
            "max_output_tokens",
        ),
        ("responses_stream_failed.json", Prompt([UserMessage("hi")]), "The server had an error"),
        (
            "responses_stream_truncated.json",
            Prompt([UserMessage("Weather in Paris?")], _tools()),
            "before response.completed",
        ),
        ("responses_stream_error_event.json", Prompt([UserMessage("hi")]), "Rate limit reached"),
    ],
)
async def test_a_stream_that_does_not_complete_is_a_model_error(
    fixture: str, prompt: Prompt, message: str
) -> None:
    model, cassette = _replay(fixture)

    with pytest.raises(ModelError, match=message):
        await _collect(model, prompt)
    assert cassette.open_streams == 0


@pytest.mark.parametrize(
    ("fixture", "status", "error_type"),
    [
        ("responses_stream_failed.json", 500, "server_error"),
        ("responses_stream_error_event.json", 429, "rate_limit_exceeded"),
        ("responses_stream_truncated.json", None, "incomplete_answer"),
    ],
)
async def test_a_failed_stream_reports_the_status_its_error_code_stands_for(
    fixture: str, status: int | None, error_type: str
) -> None:
    model, _ = _replay(fixture)

    with pytest.raises(ModelError) as caught:
        await _collect(model, Prompt([UserMessage("Weather in Paris?")], _tools()))

    assert (caught.value.status_code, caught.value.error_type) == (status, error_type)


def test_a_stream_that_does_not_complete_stores_no_answer_in_memory() -> None:
    from advisorchain import MessageChatMemoryAdvisor, MessageWindowChatMemory

    memory = MessageWindowChatMemory()
    model, _ = _replay("responses_stream_incomplete.json")
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])

    with pytest.raises(ModelError):
        list(client.prompt("Tell a story.").options(ChatOptions(max_tokens=16)).stream().content())

    assert [m for m in memory.get("default") if isinstance(m, AssistantMessage)] == []


async def test_a_stream_event_that_is_not_json_is_a_model_error() -> None:
    cassette = Cassette(
        [
            {
                "request": {"method": "POST", "path": "/v1/responses"},
                "response": {"status": 200, "content_type": "text/event-stream", "sse": "data: {oops\n\n"},
            }
        ],
        host="api.openai.com",
    )
    model = OpenAIResponsesChatModel("m", client=replay_openai_client(cassette))

    with pytest.raises(ModelError, match="not JSON") as caught:
        await _collect(model, Prompt([UserMessage("hi")]))

    assert caught.value.error_type == "invalid_response"


async def test_a_connection_lost_mid_stream_is_a_model_error_naming_the_url() -> None:
    import httpx2
    import openai

    class Lost(httpx2.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield b'event: response.created\ndata: {"type":"response.created","response":{"id":"r"}}\n\n'
            raise httpx2.ReadError("connection reset by peer")

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Lost())

    client = openai.AsyncOpenAI(
        api_key="k",
        base_url="https://api.example.com/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    model = OpenAIResponsesChatModel("m", client=client)

    with pytest.raises(ModelError, match=r"mid-stream \(https://api.example.com/v1/responses\)") as caught:
        await _collect(model, Prompt([UserMessage("hi")]))

    assert caught.value.error_type == "connection_error"
