"""OpenAIResponsesChatModel on recorded real traffic: ../shared/cassettes/openai_responses_tool_call_roundtrip.json
(gpt-4o over the Responses API) served to the real SDK client. An extra check: without the shared
folder it skips, and the project's own fixtures (test_openai_responses.py) cover every path."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from advisorchain import ChatClient, tool
from advisorchain.messages import UserMessage
from advisorchain.model import ChatOptions, Prompt
from advisorchain.models.openai import OpenAIResponsesChatModel
from advisorchain.replay import load_cassette, replay_openai_client
from advisorchain.tools.api import ToolDefinition
from tests.providers.cassette_support import RecordedTool, cassette_dir, read

NAME = "openai_responses_tool_call_roundtrip.json"


@tool
def get_capital(country: str) -> str:
    """The capital of a country."""
    return {"PotatoLand": "Potato City"}.get(country, "unknown")


def _view(body: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """The input items that must survive a round trip (an empty assistant message carries nothing)."""
    view: list[tuple[Any, ...]] = []
    for item in body["input"]:
        kind = item.get("type", "message")
        if kind == "message" and item["role"] == "assistant" and not item["content"]:
            continue
        if kind == "message":
            view.append((item["role"], item["content"]))
        elif kind == "function_call":
            view.append((kind, item["call_id"], item["name"], item["arguments"]))
        else:
            view.append((kind, item["call_id"], item["output"]))
    return view


def _replay() -> tuple[OpenAIResponsesChatModel, Any]:
    read(NAME)  # skips without the shared cassettes
    cassette = load_cassette(cassette_dir() / NAME)
    return OpenAIResponsesChatModel("gpt-4o", client=replay_openai_client(cassette)), cassette


async def test_the_recorded_function_call_is_parsed_exactly() -> None:
    model, _ = _replay()
    schema = read(NAME)["interactions"][0]["request"]["body"]["tools"][0]["parameters"]

    recorded_tool = RecordedTool(ToolDefinition("get_capital", "", schema))

    response = await model.call(
        Prompt(
            [UserMessage("What is the capital of PotatoLand?")], ChatOptions(tool_callbacks=[recorded_tool])
        )
    )

    assert response.result is not None
    call = response.result.output.tool_calls[0]
    assert (call.id, call.name, call.arguments) == (
        "call_61cRAI5gleGxCN89umufHn2a",
        "get_capital",
        '{"country":"PotatoLand"}',
    )
    assert response.metadata.usage is not None
    assert (response.metadata.usage.prompt_tokens, response.metadata.usage.completion_tokens) == (256, 18)
    assert response.metadata.finish_reason == "tool_calls"


def test_the_recorded_tool_loop_sends_what_the_real_client_sent() -> None:
    model, cassette = _replay()

    answer = (
        ChatClient(model).prompt("What is the capital of PotatoLand?").tools(get_capital).call().content()
    )

    assert answer == "The capital of PotatoLand is Potato City."
    sent = [request.body for request in cassette.requests]
    recorded = [cassette.recorded_request(i).body for i in range(2)]
    assert [_view(b) for b in sent] == [_view(b) for b in recorded]
    assert [json.dumps(b["tools"][0]["parameters"], sort_keys=True) for b in sent] == [
        json.dumps(b["tools"][0]["parameters"], sort_keys=True) for b in recorded
    ]
    cassette.assert_exhausted()
