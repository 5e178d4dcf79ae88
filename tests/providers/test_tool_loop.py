"""The full ChatClient tool loop (ToolCallingAdvisor + @tool functions) over recorded round trips:
the client runs the tools the recording asked for, and every request the adapter sends carries
the same conversation as the recording — so the loop, the adapter and the provider agree."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from advisorchain.client import ChatClient
from advisorchain.errors import ModelError
from advisorchain.model import ChatOptions, ChatResponse
from advisorchain.models.anthropic import AnthropicChatModel
from advisorchain.models.openai import OpenAIChatModel
from advisorchain.replay import Cassette, load_cassette, replay_anthropic_client, replay_openai_client
from tests.providers.cassette_support import (
    anthropic_view,
    cassette_dir,
    openai_view,
    read,
    recorded_body,
)

pytest.importorskip("advisorchain.advisors.tool_calling", reason="the ToolCallingAdvisor is not there yet")
tool: Any = getattr(pytest.importorskip("advisorchain.tools"), "tool", None)
if tool is None:
    pytest.skip("advisorchain.tools.tool (@tool) is not there yet", allow_module_level=True)

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


def _cassette(name: str) -> Cassette:
    read(name)  # skips when the cassette folder is absent
    return load_cassette(cassette_dir() / name)


def _client(name: str, cassette: Cassette) -> ChatClient:
    body = recorded_body(name, 0)
    if read(name)["provider"] == "openai-chat":
        return ChatClient(OpenAIChatModel(body["model"], client=replay_openai_client(cassette)))
    return ChatClient(AnthropicChatModel(body["model"], client=replay_anthropic_client(cassette)))


def _extra(name: str, *own: str) -> ChatOptions:
    """The recorded request fields the adapter does not build itself (tool_choice, n, thinking...)."""
    body = recorded_body(name, 0)
    skip = {"messages", "tools", "model", "stream", "stream_options", "system", "max_tokens", *own}
    return ChatOptions(extra={k: v for k, v in body.items() if k not in skip})


def _asked(name: str, cassette: Cassette, question: str, *tools: Any, system: str | None = None) -> Any:
    """The recorded request's spec: ``question`` (after ``system``), ``tools`` and the recording's
    own options."""
    spec = _client(name, cassette).prompt()
    if system is not None:
        spec = spec.system(system)
    return spec.user(question).tools(*tools).options(_extra(name))


def _assert_conversation_matches(name: str, cassette: Cassette) -> None:
    cassette.assert_exhausted()
    relabel = name.startswith("gemini")
    for index, request in enumerate(cassette.requests):
        sent, recorded = request.body, recorded_body(name, index)
        if read(name)["provider"] == "openai-chat":
            assert openai_view(sent["messages"], relabel_ids=relabel) == openai_view(
                recorded["messages"], relabel_ids=relabel
            )
        else:
            assert anthropic_view(sent["messages"]) == anthropic_view(recorded["messages"])
            assert sent.get("system") == recorded.get("system")


def _usage(response: ChatResponse) -> tuple[int, int] | None:
    usage = response.metadata.usage
    return (usage.prompt_tokens, usage.completion_tokens) if usage else None


async def test_openai_single_tool_round_trip_runs_the_tool_and_answers() -> None:
    name = "openai_tool_call_roundtrip.json"
    cassette = _cassette(name)

    @tool
    def get_temperature(city: str) -> float:
        """Temperature of a city."""
        return 20.0 if city == "Tokyo" else -1.0

    response = (
        await _asked(
            name,
            cassette,
            "What is the temperature in Tokyo?",
            get_temperature,
            system="You are a helpful assistant.",
        )
        .acall()
        .chat_response()
    )

    assert response.text == "The temperature in Tokyo is currently 20.0 degrees Celsius."
    assert _usage(response) == (50 + 75, 15 + 15)
    _assert_conversation_matches(name, cassette)


async def test_openai_parallel_tool_calls_answer_each_call_with_its_own_tool_message() -> None:
    name = "openai_parallel_tool_calls_roundtrip.json"
    cassette = _cassette(name)

    @tool
    def delete_file(path: str) -> bool:
        """Delete a file."""
        return path == ".env"

    @tool
    def create_file(path: str) -> str:
        """Create a file."""
        return "Success"

    text = (
        await _asked(
            name,
            cassette,
            "Delete the file `.env` and create `test.txt`",
            create_file,
            delete_file,
            system="Just call tools without asking for confirmation.",
        )
        .acall()
        .content()
    )

    assert text == "The file `.env` has been deleted and `test.txt` has been created successfully."
    _assert_conversation_matches(name, cassette)


async def test_openai_native_json_schema_output_after_a_tool_call() -> None:
    name = "openai_json_schema_output.json"
    cassette = _cassette(name)
    schema = recorded_body(name, 0)["response_format"]["json_schema"]["schema"]

    @tool
    def get_user_country() -> str:
        """The user's country."""
        return "Mexico"

    text = await (
        _client(name, cassette)
        .prompt("What is the largest city in the user country?")
        .tools(get_user_country)
        .options(_extra(name, "response_format").copy(output_schema=schema))
        .acall()
        .content()
    )

    assert text == '{"city":"Mexico City","country":"Mexico"}'
    recorded_format = recorded_body(name, 0)["response_format"]
    assert all(r.body["response_format"] == recorded_format for r in cassette.requests)
    _assert_conversation_matches(name, cassette)


async def test_openai_made_up_tool_call_id_pairs_the_call_with_its_result() -> None:
    name = "gemini_openai_compat_tool_call_empty_id.json"
    cassette = _cassette(name)

    @tool
    def get_current_time() -> str:
        """Get the current time."""
        return "Noon"

    text = await _asked(name, cassette, "What is the current time?", get_current_time).acall().content()

    assert text == "The current time is Noon."
    assistant, result = cassette.requests[1].body["messages"][1:]
    assert assistant["tool_calls"][0]["id"] == result["tool_call_id"] != ""
    _assert_conversation_matches(name, cassette)


async def test_openai_streamed_tool_round_trip_streams_the_answer() -> None:
    name = "openai_stream_tool_call_roundtrip.json"
    cassette = _cassette(name)

    @tool
    def get_capital(country: str) -> str:
        """Capital of a country."""
        return "London" if country == "UK" else "?"

    deltas = [
        d
        async for d in _asked(
            name, cassette, "What is the capital of the UK? Use the tool, then answer.", get_capital
        )
        .astream()
        .content()
    ]

    assert len(deltas) > 1
    assert "".join(deltas) == "The capital of the UK is London."
    _assert_conversation_matches(name, cassette)


class Answer(BaseModel):
    label: str
    answer: str


async def test_openai_streamed_three_step_run_ends_with_a_return_direct_tool() -> None:
    name = "openai_stream_parallel_tool_calls.json"
    cassette = _cassette(name)
    calls: list[str] = []

    @tool
    def get_country() -> str:
        """The country."""
        calls.append("get_country")
        return "Mexico"

    @tool
    def get_product_name() -> str:
        """The product name."""
        calls.append("get_product_name")
        return "Pydantic AI"

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(f"get_weather({city})")
        return "sunny"

    @tool(return_direct=True)
    def final_result(answers: list[Answer]) -> str:
        """The final response which ends this conversation."""
        return "; ".join(f"{a.label}: {a.answer}" for a in answers)

    deltas = [
        d
        async for d in _asked(
            name,
            cassette,
            "Tell me: the capital of the country; the weather there; the product name",
            get_weather,
            get_country,
            get_product_name,
            final_result,
        )
        .astream()
        .content()
    ]

    assert calls == ["get_country", "get_product_name", "get_weather(Mexico City)"]
    assert "".join(deltas) == (
        "Capital: The capital of Mexico is Mexico City.; Weather: The weather in Mexico City is currently "
        "sunny.; Product Name: The product name is Pydantic AI."
    )
    _assert_conversation_matches(name, cassette)


FAMILY = {
    "Alice": "alice is bob's wife",
    "Bob": "bob is alice's husband",
    "Charlie": "charlie is alice's son",
    "Daisy": "daisy is bob's daughter and charlie's younger sister",
}


async def test_anthropic_four_parallel_tool_uses_go_back_in_one_user_message() -> None:
    name = "anthropic_parallel_tool_use_roundtrip.json"
    cassette = _cassette(name)

    @tool
    def retrieve_entity_info(name: str) -> str:
        """Get the knowledge about the given entity."""
        return FAMILY[name]

    response = (
        await _asked(
            name,
            cassette,
            "Alice, Bob, Charlie and Daisy are a family. Who is the youngest?",
            retrieve_entity_info,
            system=recorded_body(name, 0)["system"],
        )
        .acall()
        .chat_response()
    )

    assert response.text is not None and "Daisy is the youngest" in response.text
    assert _usage(response) == (423 + 771, 202 + 77)
    results = cassette.requests[1].body["messages"][2]
    assert results["role"] == "user" and [b["type"] for b in results["content"]] == ["tool_result"] * 4
    _assert_conversation_matches(name, cassette)


async def test_anthropic_sequential_tool_uses_run_to_the_answer() -> None:
    name = "anthropic_sequential_tool_use_run.json"
    cassette = _cassette(name)

    @tool
    def country_source() -> str:
        """The country."""
        return "Japan"

    @tool
    def capital_lookup(country: str) -> str:
        """The capital of a country."""
        return {"Japan": "Tokyo"}.get(country, "unknown")

    text = (
        await _asked(
            name,
            cassette,
            "Use the registered tools and respond exactly as `Capital: <city>`.",
            country_source,
            capital_lookup,
            system=recorded_body(name, 0)["system"],
        )
        .acall()
        .content()
    )

    assert text == "Capital: Tokyo"
    _assert_conversation_matches(name, cassette)


async def test_anthropic_thinking_is_sent_back_before_the_tool_use() -> None:
    name = "anthropic_tool_use_with_thinking_roundtrip.json"
    cassette = _cassette(name)

    @tool
    def get_user_country() -> str:
        """The user's country."""
        return "Mexico"

    text = (
        await _asked(name, cassette, "What is the largest city in the user country?", get_user_country)
        .acall()
        .content()
    )

    assert text is not None and "**Mexico City**" in text
    replayed = cassette.requests[1].body["messages"][1]["content"]
    assert [b["type"] for b in replayed] == ["thinking", "text", "tool_use"]
    assert replayed[0]["signature"] == recorded_body(name, 1)["messages"][1]["content"][0]["signature"]
    _assert_conversation_matches(name, cassette)


async def test_anthropic_streamed_loop_replays_server_tool_blocks_and_streams_both_rounds() -> None:
    name = "anthropic_stream_tool_use_roundtrip.json"
    cassette = _cassette(name)
    server_tools = [t for t in recorded_body(name, 0)["tools"] if "input_schema" not in t]

    @tool
    def get_exchange_rate(from_currency: str, to_currency: str) -> str:
        """Look up the current exchange rate between two currencies."""
        return f"1 {from_currency} = 0.92 {to_currency}"

    options = _extra(name)
    deltas = [
        d
        async for d in _client(name, cassette)
        .prompt("What is the current USD to EUR exchange rate?")
        .tools(get_exchange_rate)
        .options(options.copy(extra={**options.extra, "tools": server_tools}))
        .astream()
        .content()
    ]

    text = "".join(deltas)
    assert text.startswith("Let me search for a tool")  # the first round's preamble, streamed live
    assert text.endswith("rate may change throughout the day.")
    _assert_conversation_matches(name, cassette)


async def test_provider_error_reaches_the_caller_as_model_error() -> None:
    name = "anthropic_error_404_model_not_found.json"
    cassette = _cassette(name)

    with pytest.raises(ModelError) as caught:
        await _client(name, cassette).prompt("hello").acall().content()

    assert (caught.value.status_code, caught.value.error_type) == (404, "not_found_error")


def test_blocking_call_works_through_the_sync_bridge() -> None:
    name = "openai_text_simple.json"
    cassette = _cassette(name)

    text = _client(name, cassette).prompt("What is the capital of France?").call().content()

    assert text == "The capital of France is Paris."
