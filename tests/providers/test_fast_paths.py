"""The OpenAI path's speed work changes nothing a server or a user sees: the request's bytes and
headers are those ``chat.completions.create`` sends, provider JSON reads as the stdlib reads it
(orjson or not)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from functools import partial
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain.messages import AssistantMessage, ToolCall, ToolResponse, ToolResponseMessage, UserMessage
from advisorchain.model import ChatOptions, Prompt
from advisorchain.models import openai as openai_module
from advisorchain.models._http import json as _json
from advisorchain.models._http import sse as _sse
from advisorchain.models._http.wire import WireCache, json_body
from advisorchain.models.openai import OpenAIChatModel

COMPLETION = {
    "id": "c1",
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
}


def _capturing_client(seen: list[httpx2.Request]) -> openai.AsyncOpenAI:
    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json=COMPLETION)

    http_client = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    return openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1", http_client=http_client)


async def test_the_request_bytes_and_headers_are_those_of_the_sdks_create() -> None:
    seen: list[httpx2.Request] = []
    client = _capturing_client(seen)
    messages = [
        UserMessage("Wetter in Zürich? ✓"),
        AssistantMessage(None, (ToolCall("call_1", "get_weather", '{"city": "Zürich"}'),)),
        ToolResponseMessage((ToolResponse("call_1", "get_weather", "sunny, 21°C"),)),
    ]
    model = OpenAIChatModel("m", client=client, temperature=0.5, top_k=3)
    await model.call(Prompt(messages, ChatOptions(max_tokens=20)))
    await client.chat.completions.create(
        model="m",
        stream=False,
        messages=[
            {"role": "user", "content": "Wetter in Zürich? ✓"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21°C"},
        ],
        extra_body={"temperature": 0.5, "top_k": 3, "max_tokens": 20},
    )

    mine, sdk = seen
    assert mine.content == sdk.content
    assert mine.url == sdk.url
    drop = {"x-stainless-raw-response", "x-stainless-retry-count", "x-stainless-read-timeout"}
    assert {k: v for k, v in mine.headers.items() if k not in drop} == {
        k: v for k, v in sdk.headers.items() if k not in drop
    }


async def test_extra_headers_query_and_timeout_still_reach_the_request() -> None:
    seen: list[httpx2.Request] = []
    model = OpenAIChatModel(
        "m", client=_capturing_client(seen), extra_headers={"x-app": "a"}, extra_query={"v": "1"}, timeout=7
    )

    await model.call(Prompt([UserMessage("hi")]))

    (request,) = seen
    assert request.headers["x-app"] == "a"
    assert request.url.params["v"] == "1"
    assert request.extensions["timeout"]["read"] == 7
    assert "timeout" not in json.loads(request.content)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_json_values)
def test_provider_json_reads_as_the_stdlib_reads_it(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)

    assert _json.loads(text) == json.loads(text)
    assert _json.loads(text.encode()) == json.loads(text)


def test_nan_and_integers_past_64_bits_read_as_the_stdlib_reads_them() -> None:
    read = _json.loads(b'{"a": NaN, "b": 123456789012345678901234567890, "c": -9223372036854775809}')

    assert math.isnan(read["a"])
    assert read["b"] == 123456789012345678901234567890
    assert read["c"] == -9223372036854775809


def test_text_that_is_not_json_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        _json.loads(b"{not json")


def _decode(chunks: list[bytes]) -> list[tuple[str, object]]:
    decoder = _sse.SseDecoder("openai", "http://127.0.0.1/v1/chat/completions")
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.close()


@given(
    st.lists(st.tuples(st.sampled_from(["", "delta", "é"]), st.text(alphabet='ab:{}é "', max_size=6))),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.data(),
)
def test_stream_events_are_the_same_however_the_bytes_are_split(
    frames: list[tuple[str, str]], end: str, data: st.DataObject
) -> None:
    lines: list[str] = []
    for event, text in frames:
        lines += ([f"event: {event}"] if event else []) + [
            f"data: {json.dumps(text, ensure_ascii=False)}",
            "",
        ]
    raw = "".join(line + end for line in lines).encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=5)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]

    assert _decode(chunks) == [(event or "message", text) for event, text in frames]


def test_a_last_event_without_a_line_end_still_counts_and_done_is_the_marker() -> None:
    assert _decode([b"data: [DONE]\n", b'data: {"a"', b": 1}"]) == [
        ("message", _sse.DONE),
        ("message", {"a": 1}),
    ]


def test_importing_the_openai_adapters_leaves_the_sdk_unimported_until_first_use() -> None:
    script = (
        "import sys\n"
        "from advisorchain.models.openai import OpenAIChatModel, OpenAIResponsesChatModel\n"
        "before = 'openai' in sys.modules\n"
        "OpenAIChatModel('m', base_url='http://127.0.0.1:9/v1')\n"
        "print(before, 'openai' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)

    assert done.stdout.split() == ["False", "True"]


# -- wire dicts kept across rounds -----------------------------------------------------------------

_messages = st.lists(
    st.one_of(
        st.builds(UserMessage, st.text(max_size=8)),
        st.builds(AssistantMessage, st.none() | st.text(max_size=8)),
        st.builds(
            AssistantMessage,
            st.none(),
            st.lists(
                st.builds(ToolCall, st.text(min_size=1, max_size=4), st.just("f"), st.just("{}")), max_size=2
            ),
        ),
        st.builds(
            ToolResponseMessage,
            st.lists(
                st.builds(ToolResponse, st.text(max_size=4), st.just("f"), st.text(max_size=8)), max_size=2
            ),
        ),
    ),
    max_size=8,
)


@given(_messages, _messages, st.integers(1, 6))
def test_cached_wire_dicts_are_what_a_fresh_conversion_gives(
    first: list[Any], second: list[Any], size: int
) -> None:
    cache = WireCache(partial(openai_module._CHAT_MESSAGES.items, replay_reasoning=True), size=size)
    for messages in (first, first + second, second + first, first):  # history grows, reorders, repeats
        assert json.loads(cache.array(messages)) == openai_module.to_openai_messages(messages)
    assert cache.size <= size


def test_a_message_sent_again_is_not_converted_again() -> None:
    built: list[object] = []

    def build(message: Any) -> tuple[dict[str, Any], ...]:
        built.append(message)
        return openai_module._CHAT_MESSAGES.items(message, True)

    cache = WireCache(build)
    question, answer = UserMessage("hi"), AssistantMessage("hello")
    cache.array([question])
    cache.array([question, answer])
    cache.array([question, answer, UserMessage("hi")])  # equal to the first, but a new message

    assert len(built) == 3
    assert built[2] is not question


def test_request_body_is_the_callers_to_change() -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    prompt = Prompt([UserMessage("hi")])
    model.request_body(prompt)["messages"][0]["content"] = "changed"

    assert model.request_body(prompt)["messages"][0]["content"] == "hi"
    assert json.loads(model._body(prompt, stream=False)[0])["messages"][0]["content"] == "hi"


@pytest.mark.parametrize("before", [{}, {"model": "m", "stream": False}])
@pytest.mark.parametrize("after", [{}, {"temperature": 0.5, "tools": [{"a": "]}"}]}])
def test_a_body_with_spliced_messages_is_the_json_of_the_whole(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    cache = WireCache(partial(openai_module._CHAT_MESSAGES.items, replay_reasoning=True))
    messages = [UserMessage('é " ]}'), AssistantMessage("ok")]
    whole = {**before, "messages": openai_module.to_openai_messages(messages), **after}

    body = json_body(before, "messages", cache.array(messages), after)

    assert body == json.dumps(whole, ensure_ascii=False, separators=(",", ":")).encode()


def test_messages_set_by_the_caller_replace_the_history() -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    prompt = Prompt(
        [UserMessage("hi")], ChatOptions(extra={"messages": [{"role": "user", "content": "raw"}]})
    )

    assert json.loads(model._body(prompt, stream=False)[0])["messages"] == [
        {"role": "user", "content": "raw"}
    ]
    assert model.request_body(prompt)["messages"] == [{"role": "user", "content": "raw"}]
