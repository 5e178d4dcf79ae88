"""The real adapters (OpenAI Chat, OpenAI Responses, Anthropic) on recorded traffic and on a loopback
server: they fill the cache counts from the providers' own fields and price their own answers from
the bundled data — by the model the answer reports and the provider, known only on its own host."""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai", reason="the openai extra is not installed")
pytest.importorskip("anthropic", reason="the anthropic extra is not installed")
genai_prices = pytest.importorskip("genai_prices", reason="genai-prices comes with the provider extras")

from advisorchain import (  # noqa: E402
    AdvisorParams,
    ChatClient,
    ChatClientMessageAggregator,
    ChatResponse,
    ModelError,
    ModelPrice,
    Prompt,
    RunUsage,
    Usage,
    UserMessage,
)
from advisorchain.models import FallbackChatModel, RetryChatModel  # noqa: E402
from advisorchain.models.anthropic import AnthropicChatModel  # noqa: E402
from advisorchain.models.openai import OpenAIChatModel, OpenAIResponsesChatModel  # noqa: E402
from advisorchain.replay import Cassette, replay_anthropic_client, replay_openai_client  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _cassette(name: str) -> dict[str, Any]:
    folder = Path(os.environ.get("ADVISORCHAIN_CASSETTES") or REPO.parent / "shared" / "cassettes")
    if not folder.is_dir():
        pytest.skip(f"no cassette folder at {folder} (set ADVISORCHAIN_CASSETTES to its path)")
    data: dict[str, Any] = json.loads((folder / name).read_text(encoding="utf-8"))
    return data


def _load(data: dict[str, Any]) -> Cassette:
    return Cassette(data["interactions"], name="test", host=data["host"], provider=data["provider"])


def _genai(provider: str, model: str, usage: Usage) -> Decimal:
    genai_usage = genai_prices.Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    return genai_prices.calc_price(genai_usage, model, provider_id=provider).total_price


async def _answer(model: Any, text: str, *, stream: bool) -> ChatResponse:
    prompt = Prompt([UserMessage(text)])
    if stream:
        return ChatClientMessageAggregator.aggregate([c async for c in model.stream(prompt)])
    response: ChatResponse = await model.call(prompt)
    return response


# -- recorded traffic: the provider's own host prices its answers --------------------------------------


@pytest.mark.parametrize(
    ("name", "provider", "stream"),
    [
        ("openai_text_simple.json", "openai", False),
        ("openai_stream_text.json", "openai", True),
        ("anthropic_text_simple.json", "anthropic", False),
        ("anthropic_stream_text.json", "anthropic", True),
        ("openai_responses_tool_call_roundtrip.json", "openai", False),
    ],
)
async def test_an_answer_from_the_providers_own_host_is_priced(
    name: str, provider: str, stream: bool
) -> None:
    data = _cassette(name)
    cassette = _load(data)
    requested = data["interactions"][0]["request"]["body"]["model"]
    if provider == "anthropic":
        model: Any = AnthropicChatModel(requested, client=replay_anthropic_client(cassette))
    elif "responses" in name:
        model = OpenAIResponsesChatModel(requested, client=replay_openai_client(cassette))
    else:
        model = OpenAIChatModel(requested, client=replay_openai_client(cassette))
    response = await _answer(model, "hello", stream=stream)
    meta = response.metadata
    assert meta.usage is not None and meta.provider == provider
    assert meta.usage.cost is not None and meta.usage.cost > 0
    assert meta.usage.cost == _genai(provider, meta.model or requested, meta.usage)


async def test_a_client_run_on_recorded_traffic_carries_the_cost_everywhere() -> None:
    cassette = _load(_cassette("openai_stream_text.json"))
    model = OpenAIChatModel("gpt-4o", client=replay_openai_client(cassette))
    chunks = [c async for c in ChatClient(model).prompt("hello").astream().chat_client_responses()]
    last = chunks[-1]
    run = last.context[AdvisorParams.RUN_USAGE]
    assert isinstance(run, RunUsage) and run.requests == 1
    assert last.chat_response is not None and last.chat_response.metadata.usage == run.usage
    assert run.usage.cost == _genai("openai", "gpt-4o-2024-08-06", run.usage)


@pytest.mark.parametrize(
    ("name", "stream"),
    [("groq_json_schema_output.json", False), ("deepseek_stream_reasoning_text.json", True)],
)
async def test_an_answer_from_any_other_server_is_unpriced(name: str, stream: bool) -> None:
    data = _cassette(name)
    requested = data["interactions"][0]["request"]["body"]["model"]
    model = OpenAIChatModel(requested, client=replay_openai_client(_load(data)))
    response = await _answer(model, "hello", stream=stream)
    usage = response.metadata.usage
    assert usage is not None and usage.total_tokens > 0
    assert usage.cost is None and response.metadata.provider is None


async def test_prices_price_an_other_servers_model_and_override_the_bundled_one() -> None:
    data = _cassette("groq_json_schema_output.json")
    requested = data["interactions"][0]["request"]["body"]["model"]
    model = OpenAIChatModel(requested, client=replay_openai_client(_load(data)))
    price = ModelPrice(Decimal(1), Decimal(2))
    response = await ChatClient(model, prices={requested: price}).prompt("hi").acall().chat_response()
    assert response.metadata.usage is not None and response.metadata.usage.cost == price.cost(
        response.metadata.usage
    )

    seen: list[tuple[str, str | None]] = []

    def keep_bundled(name: str, provider: str | None, usage: Usage) -> Decimal | None:
        seen.append((name, provider))
        return None

    own = OpenAIChatModel("gpt-4o", client=replay_openai_client(_load(_cassette("openai_text_simple.json"))))
    answer = await ChatClient(own, prices=keep_bundled).prompt("hi").acall().chat_response()
    assert seen == [("gpt-4o-2024-08-06", "openai")]  # the model the answer reports, and its provider
    assert answer.metadata.usage is not None and answer.metadata.usage.cost == Decimal("0.000105")
    own = OpenAIChatModel("gpt-4o", client=replay_openai_client(_load(_cassette("openai_text_simple.json"))))
    cheaper = await ChatClient(own, prices={"gpt-4o-2024-08-06": price}).prompt("hi").acall().chat_response()
    assert cheaper.metadata.usage is not None and cheaper.metadata.usage.cost == price.cost(
        cheaper.metadata.usage
    )


async def test_wrappers_pass_on_the_answering_models_priced_usage() -> None:
    class Down:
        model_name = "down"

        async def call(self, prompt: Prompt) -> ChatResponse:
            raise ModelError("down", status_code=503)

        def stream(self, prompt: Prompt) -> Any:
            raise NotImplementedError

    own = OpenAIChatModel("gpt-4o", client=replay_openai_client(_load(_cassette("openai_text_simple.json"))))
    model = FallbackChatModel(Down(), RetryChatModel(own, max_attempts=1))  # type: ignore[arg-type]
    response = await ChatClient(model).prompt("hi").acall().chat_response()
    assert response.metadata.provider == "openai"
    assert response.metadata.usage is not None and response.metadata.usage.cost == Decimal("0.000105")


# -- the cache counts, from each provider's own fields ---------------------------------------------------


def _with_openai_cache(data: dict[str, Any], cached: int) -> dict[str, Any]:
    data = copy.deepcopy(data)
    response = data["interactions"][0]["response"]
    if "json" in response:
        usage = response["json"]["usage"]
        details = "input_tokens_details" if "input_tokens" in usage else "prompt_tokens_details"
        usage[details]["cached_tokens"] = cached
    else:
        response["sse"] = response["sse"].replace('"cached_tokens":0', f'"cached_tokens":{cached}')
    return data


def _with_anthropic_cache(data: dict[str, Any], read: int, written: int) -> dict[str, Any]:
    data = copy.deepcopy(data)
    response = data["interactions"][0]["response"]
    text = json.dumps(response["json"]) if "json" in response else response["sse"]
    for spacing in ("", " "):
        text = text.replace(
            f'"cache_read_input_tokens":{spacing}0', f'"cache_read_input_tokens":{spacing}{read}'
        )
        text = text.replace(
            f'"cache_creation_input_tokens":{spacing}0', f'"cache_creation_input_tokens":{spacing}{written}'
        )
    if "json" in response:
        response["json"] = json.loads(text)
    else:
        response["sse"] = text
    return data


@pytest.mark.parametrize(
    ("name", "stream"),
    [
        ("openai_text_simple.json", False),
        ("openai_stream_text.json", True),
        ("openai_responses_tool_call_roundtrip.json", False),
    ],
)
async def test_openai_cached_tokens_are_counted_and_priced_at_the_cache_rate(name: str, stream: bool) -> None:
    data = _with_openai_cache(_cassette(name), cached=8)
    requested = data["interactions"][0]["request"]["body"]["model"]
    kind = OpenAIResponsesChatModel if "responses" in name else OpenAIChatModel
    model = kind(requested, client=replay_openai_client(_load(data)))
    response = await _answer(model, "hello", stream=stream)
    usage = response.metadata.usage
    assert usage is not None and usage.cache_read_tokens == 8 and usage.cache_write_tokens == 0
    assert usage.prompt_tokens > 8  # the cached tokens are part of the prompt
    assert usage.cost == _genai("openai", response.metadata.model or requested, usage)
    assert usage.cost < _genai(
        "openai", response.metadata.model or requested, Usage(usage.prompt_tokens, usage.completion_tokens)
    )


@pytest.mark.parametrize(
    ("name", "stream"), [("anthropic_text_simple.json", False), ("anthropic_stream_text.json", True)]
)
async def test_anthropic_cache_reads_and_writes_are_counted_and_priced(name: str, stream: bool) -> None:
    data = _with_anthropic_cache(_cassette(name), read=100, written=50)
    requested = data["interactions"][0]["request"]["body"]["model"]
    model = AnthropicChatModel(requested, client=replay_anthropic_client(_load(data)))
    response = await _answer(model, "hello", stream=stream)
    usage = response.metadata.usage
    assert usage is not None and (usage.cache_read_tokens, usage.cache_write_tokens) == (100, 50)
    assert usage.prompt_tokens == 20 + 100 + 50  # input_tokens leaves the cache out; the prompt is all three
    assert usage.cost == _genai("anthropic", response.metadata.model or requested, usage)


# -- a loopback server: an OpenAI-compatible server of one's own ------------------------------------------

_COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "local-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."}, "finish_reason": "stop"}],
    "usage": {
        "prompt_tokens": 1000,
        "completion_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 600},
    },
}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps(_COMPLETION).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


async def test_a_local_servers_cache_counts_are_kept_and_only_prices_price_it(local_server: str) -> None:
    model = OpenAIChatModel("local-model", base_url=local_server, max_retries=0)
    try:
        response = await model.call(Prompt([UserMessage("hi")]))
        usage = response.metadata.usage
        assert usage == Usage(1000, 10, cache_read_tokens=600, cost=None)
        assert response.metadata.provider is None
        price = ModelPrice(Decimal(1), Decimal(2), cache_read_per_mtok=Decimal("0.1"))
        priced = await ChatClient(model, prices={"local-model": price}).prompt("hi").acall().chat_response()
        # 400 uncached at $1, 600 cached at $0.10, 10 out at $2 (per million)
        assert priced.metadata.usage is not None and priced.metadata.usage.cost == Decimal("0.00048")
    finally:
        await model.client.close()
