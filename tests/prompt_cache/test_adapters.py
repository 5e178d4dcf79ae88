"""Cache points and cache keys through the real adapters (API.md §21, §8): Anthropic's
``cache_control`` on a loopback server that emulates its prefix caching, OpenAI's
``prompt_cache_key`` on recorded traffic from its own host, and the bad input of issue 40."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("openai", reason="the openai extra is not installed")
pytest.importorskip("anthropic", reason="the anthropic extra is not installed")

from advisorchain import (
    AssistantMessage,
    ChatClientMessageAggregator,
    ChatOptions,
    ChatResponse,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.models.anthropic import AnthropicChatModel
from advisorchain.models.openai import OpenAIChatModel, OpenAIResponsesChatModel
from advisorchain.replay import Cassette, replay_anthropic_client, replay_openai_client
from tests.support.anthropic_cache import CacheEmulator
from tests.support.openai_server import ScriptedServer, json_reply, running_server
from tests.support.payloads import openai_completion

REPO = Path(__file__).resolve().parents[2]
EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def _cassette(name: str) -> dict[str, Any]:
    folder = Path(os.environ.get("ADVISORCHAIN_CASSETTES") or REPO.parent / "shared" / "cassettes")
    if not folder.is_dir():
        pytest.skip(f"no cassette folder at {folder} (set ADVISORCHAIN_CASSETTES to its path)")
    data: dict[str, Any] = json.loads((folder / name).read_text(encoding="utf-8"))
    return data


def _load(data: dict[str, Any]) -> Cassette:
    return Cassette(data["interactions"], name="test", host=data["host"], provider=data["provider"])


async def _send(model: Any, prompt: Prompt, *, stream: bool) -> ChatResponse:
    if stream:
        return ChatClientMessageAggregator.aggregate([c async for c in model.stream(prompt)])
    response: ChatResponse = await model.call(prompt)
    return response


def _text(reply: dict[str, Any]) -> dict[str, Any]:
    return {"text": "ok"}


def _marked(text: str, ttl: str = "5m") -> UserMessage:
    return UserMessage(text, {"cache_point": ttl})


def _round(call_id: str, ttl: str | None = None) -> tuple[AssistantMessage, ToolResponseMessage]:
    metadata = {"cache_point": ttl} if ttl else {}
    return (
        AssistantMessage(None, (ToolCall(call_id, "lookup", "{}"),)),
        ToolResponseMessage(
            (ToolResponse(call_id, "lookup", "a"), ToolResponse(call_id + "b", "lookup", "b")), metadata
        ),
    )


# -- Anthropic: cache_control --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_sends_cache_control_on_the_last_block_of_each_marked_message(stream: bool) -> None:
    emulator = CacheEmulator(_text)
    assistant, tools = _round("t1", "5m")
    prompt = Prompt(
        [
            SystemMessage("You are terse.", {"cache_point": "1h"}),
            UserMessage("first", {"note": "kept"}),
            assistant,
            tools,
            _marked("second"),
        ],
        ChatOptions(cache_key="never-sent-here"),
    )
    with running_server(emulator) as server:
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k")
        await _send(model, prompt, stream=stream)
        body = server.bodies[0]
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": HOUR}]
    user, asked, answered = body["messages"]
    assert user["content"] == [{"type": "text", "text": "first"}]
    assert "cache_control" not in asked["content"][-1]
    results = answered["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
    assert "cache_control" not in results[0]
    assert results[1]["cache_control"] == EPHEMERAL  # the round's last tool_result block
    assert results[2] == {"type": "text", "text": "second", "cache_control": EPHEMERAL}
    assert "cache_key" not in json.dumps(body) and "never-sent-here" not in json.dumps(body)
    assert "cache_point" not in json.dumps(body)


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_sends_only_the_newest_four_marks(stream: bool) -> None:
    emulator = CacheEmulator(_text)
    messages: list[Any] = [SystemMessage("sys", {"cache_point": "5m"})]
    for i in range(5):
        messages += [_marked(f"q{i}"), AssistantMessage(f"a{i}")]
    messages.append(UserMessage("last"))
    with running_server(emulator) as server:
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k")
        await _send(model, Prompt(messages), stream=stream)
        body = server.bodies[0]
    assert body["system"] == "sys"  # the oldest mark (the system message) is the one left out
    marked = [b["text"] for m in body["messages"] for b in m["content"] if "cache_control" in b]
    assert marked == ["q1", "q2", "q3", "q4"]
    assert len(json.dumps(body).split("cache_control")) - 1 == 4


async def test_anthropic_sends_an_hour_after_five_minutes_as_five_minutes() -> None:
    emulator = CacheEmulator(_text)
    prompt = Prompt(
        [
            SystemMessage("sys", {"cache_point": "1h"}),
            _marked("a", "5m"),
            AssistantMessage("b"),
            _marked("c", "1h"),
        ]
    )
    with running_server(emulator) as server:
        await AnthropicChatModel("claude-x", base_url=server.url, api_key="k").call(prompt)
        body = server.bodies[0]
    assert body["system"][0]["cache_control"] == HOUR
    controls = [b.get("cache_control") for m in body["messages"] for b in m["content"]]
    assert controls == [EPHEMERAL, None, EPHEMERAL]  # "c" asked for 1h after a 5m: sent as 5m


async def test_an_empty_assistant_message_passes_its_mark_to_the_block_sent_before_it() -> None:
    emulator = CacheEmulator(_text)
    prompt = Prompt(
        [UserMessage("q"), AssistantMessage(None, (), {"cache_point": "5m"}), UserMessage("go on")]
    )
    with running_server(emulator) as server:
        await AnthropicChatModel("claude-x", base_url=server.url, api_key="k").call(prompt)
        body = server.bodies[0]
    # The empty message sends no block; the prefix up to it ends with "q", which carries the mark.
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "q", "cache_control": EPHEMERAL},
                {"type": "text", "text": "go on"},
            ],
        }
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_marked_prefix_is_read_from_the_emulated_cache_and_reported_as_usage(stream: bool) -> None:
    emulator = CacheEmulator(_text)
    system = SystemMessage("policy " * 400, {"cache_point": "5m"})
    with running_server(emulator) as server:
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k")
        first = await _send(model, Prompt([system, _marked("one")]), stream=stream)
        second = await _send(
            model, Prompt([system, UserMessage("one"), AssistantMessage("ok"), _marked("two")]), stream=stream
        )
    assert first.metadata.usage is not None and second.metadata.usage is not None
    assert first.metadata.usage.cache_read_tokens == 0 and first.metadata.usage.cache_write_tokens > 700
    assert second.metadata.usage.cache_read_tokens == first.metadata.usage.cache_write_tokens
    assert second.metadata.usage.prompt_tokens > second.metadata.usage.cache_read_tokens


# -- bad input: a cache point that is not 5m / 1h -----------------------------------------------------


BAD_VALUES = ["10m", "5M", 300, True, ""]


def _models(server: ScriptedServer) -> list[Any]:
    return [
        AnthropicChatModel("claude-x", base_url=server.url, api_key="k"),
        OpenAIChatModel("gpt-x", base_url=server.base_url, api_key="k"),
        OpenAIResponsesChatModel("gpt-x", base_url=server.base_url, api_key="k"),
    ]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("value", BAD_VALUES)
async def test_every_adapter_refuses_a_bad_cache_point_before_any_request(
    value: object, stream: bool
) -> None:
    prompt = Prompt([SystemMessage("s"), UserMessage("q", {"cache_point": value})])
    with running_server() as server:
        for model in _models(server):
            with pytest.raises(ValueError, match=r'message 1 \(user\) must be "5m" or "1h"') as raised:
                await _send(model, prompt, stream=stream)
            assert repr(value) in str(raised.value)
        assert server.requests == []


# -- OpenAI: prompt_cache_key ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "stream"),
    [
        ("openai_text_simple.json", "chat", False),
        ("openai_stream_text.json", "chat", True),
        ("openai_responses_tool_call_roundtrip.json", "responses", False),
    ],
)
async def test_openai_sends_the_cache_key_as_prompt_cache_key_on_its_own_host(
    name: str, kind: str, stream: bool
) -> None:
    data = _cassette(name)
    cassette = _load(data)
    requested = data["interactions"][0]["request"]["body"]["model"]
    cls = OpenAIChatModel if kind == "chat" else OpenAIResponsesChatModel
    model = cls(requested, client=replay_openai_client(cassette))
    prompt = Prompt(
        [SystemMessage("s", {"cache_point": "5m"}), _marked("hello", "1h")], ChatOptions(cache_key="conv-7")
    )
    response = await _send(model, prompt, stream=stream)
    body = cassette.requests[0].body
    assert body["prompt_cache_key"] == "conv-7"
    assert "cache_control" not in json.dumps(body) and "cache_point" not in json.dumps(body)  # marks ignored
    usage = response.metadata.usage
    assert usage is not None and usage.cache_read_tokens == 0  # the recorded cached_tokens: 0


@pytest.mark.parametrize("stream", [False, True])
async def test_no_other_openai_compatible_server_gets_prompt_cache_key(stream: bool) -> None:
    with running_server() as server:
        for cls in (OpenAIChatModel, OpenAIResponsesChatModel):
            model = cls("local", base_url=server.base_url, api_key="k")
            body = model.request_body(
                Prompt([UserMessage("q")], ChatOptions(cache_key="conv-7")), stream=stream
            )
            assert "prompt_cache_key" not in body
        server.queue(json_reply(200, openai_completion("hi")))
        model = OpenAIChatModel("local", base_url=server.base_url, api_key="k")
        await model.call(Prompt([UserMessage("q", {"cache_point": "5m"})], ChatOptions(cache_key="conv-7")))
        assert "prompt_cache_key" not in server.bodies[0]


async def test_a_cache_key_given_in_extra_reaches_any_server() -> None:
    with running_server() as server:
        server.queue(json_reply(200, openai_completion("hi")))
        model = OpenAIChatModel("local", base_url=server.base_url, api_key="k")
        await model.call(Prompt([UserMessage("q")], ChatOptions(extra={"prompt_cache_key": "mine"})))
        assert server.bodies[0]["prompt_cache_key"] == "mine"


# -- recorded Anthropic traffic with cache fields ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "stream"), [("anthropic_text_simple.json", False), ("anthropic_stream_text.json", True)]
)
async def test_anthropic_recorded_traffic_reports_its_cache_fields(name: str, stream: bool) -> None:
    data = _cassette(name)
    cassette = _load(data)
    requested = data["interactions"][0]["request"]["body"]["model"]
    model = AnthropicChatModel(requested, client=replay_anthropic_client(cassette))
    response = await _send(
        model, Prompt([SystemMessage("s", {"cache_point": "5m"}), _marked("hello")]), stream=stream
    )
    body = cassette.requests[0].body
    assert body["system"] == [{"type": "text", "text": "s", "cache_control": EPHEMERAL}]
    assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    recorded = json.dumps(data["interactions"][0]["response"])
    usage = response.metadata.usage
    assert usage is not None
    if "cache_read_input_tokens" in recorded:
        assert usage.cache_read_tokens == 0 and usage.cache_write_tokens == 0


def test_chat_options_cache_key_must_be_text() -> None:
    with pytest.raises(TypeError, match="cache_key"):
        ChatOptions(cache_key=7)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(max_size=6),
        st.integers(),
        st.floats(allow_nan=False),
        st.booleans(),
        st.lists(st.text(max_size=2)),
    )
)
def test_any_cache_point_but_5m_or_1h_is_refused_by_every_adapter_mapping(value: object) -> None:
    prompt = Prompt([UserMessage("q", {"cache_point": value})])
    models: list[Any] = [
        AnthropicChatModel("claude-x", base_url="http://127.0.0.1:9", api_key="k"),
        OpenAIChatModel("gpt-x", base_url="http://127.0.0.1:9/v1", api_key="k"),
        OpenAIResponsesChatModel("gpt-x", base_url="http://127.0.0.1:9/v1", api_key="k"),
    ]
    for model in models:
        if value in ("5m", "1h"):
            model.request_body(prompt)
        else:
            with pytest.raises(ValueError, match='"5m" or "1h"'):
                model.request_body(prompt)
