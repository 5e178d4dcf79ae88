"""The two ways an OpenAI request travels (``advisorchain.models._http.transport``): aiohttp, chosen
when it is installed and can carry the SDK client's exact configuration, and the SDK's own httpx2
stack otherwise. Both send the same request and report the same errors; the SDK client stays the
source of truth for the key, headers, timeouts and retry policy."""

from __future__ import annotations

import logging
from typing import Any

import httpx2
import openai
import pytest

from advisorchain import ModelError, Prompt, UserMessage, tool
from advisorchain.model import ChatOptions
from advisorchain.models._http import internals
from advisorchain.models._http.transport import AiohttpPath, SdkPath
from advisorchain.models.anthropic import AnthropicChatModel
from advisorchain.models.openai import OpenAIChatModel
from tests.support.openai_server import Received, ScriptedServer, json_reply, sse_reply
from tests.support.payloads import (
    anthropic_message,
    anthropic_text_events,
    openai_completion,
    openai_text_events,
)

pytest.importorskip("aiohttp", reason="the aiohttp path needs the fast extra")

PATHS = ("aiohttp", "sdk")


def _use(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    monkeypatch.setenv("ADVISORCHAIN_HTTP", "auto" if path == "aiohttp" else "sdk")


def _client(server: ScriptedServer, **kwargs: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="sk-test", **kwargs)


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _prompt() -> Prompt:
    return Prompt(
        [UserMessage("Weather in Paris? é")], ChatOptions(tool_callbacks=[get_weather], temperature=0)
    )


async def _path_of(model: OpenAIChatModel) -> object:
    return await model._clients.current_companion()


# -- which path ------------------------------------------------------------------------------------


async def test_a_plain_sdk_client_travels_over_aiohttp(server: ScriptedServer) -> None:
    assert isinstance(await _path_of(OpenAIChatModel("m", client=_client(server))), AiohttpPath)


async def test_the_environment_can_keep_every_request_on_the_sdk_stack(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(monkeypatch, "sdk")

    assert isinstance(await _path_of(OpenAIChatModel("m", client=_client(server))), SdkPath)


async def test_a_users_own_http_client_is_used_as_it_is(server: ScriptedServer) -> None:
    http_client = httpx2.AsyncClient(headers={"x-mine": "1"})
    model = OpenAIChatModel("m", client=_client(server, http_client=http_client))

    assert isinstance(await _path_of(model), SdkPath)
    server.queue(json_reply(200, openai_completion("hi")))
    await model.call(Prompt([UserMessage("hi")]))
    assert server.requests[-1].headers["x-mine"] == "1"
    await http_client.aclose()


async def test_azure_and_proxied_clients_keep_the_sdk_stack(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    azure = openai.AsyncAzureOpenAI(
        api_key="k", api_version="2024-10-21", azure_endpoint=server.url, azure_deployment="d"
    )
    assert isinstance(await _path_of(OpenAIChatModel("m", client=azure)), SdkPath)

    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    proxied = openai.AsyncOpenAI(base_url="https://api.example.com/v1", api_key="k")
    assert isinstance(await _path_of(OpenAIChatModel("m", client=proxied)), SdkPath)


def _defining_class(cls: type, name: str) -> type:
    return next(klass for klass in cls.__mro__ if name in vars(klass))


async def test_an_sdk_that_moved_what_the_aiohttp_path_reads_keeps_its_own_stack_and_answers(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _use(monkeypatch, "aiohttp")
    monkeypatch.setattr(internals, "_checked", {})
    owner = _defining_class(openai.AsyncOpenAI, "_calculate_retry_timeout")
    monkeypatch.delattr(owner, "_calculate_retry_timeout")  # as an SDK release that renamed it would
    server.queue(json_reply(200, openai_completion("done")))
    client = _client(server)
    model = OpenAIChatModel("m", client=client)
    with caplog.at_level(logging.WARNING, "advisorchain.models"):
        assert (await model.call(Prompt([UserMessage("hi")]))).text == "done"
    path = await _path_of(model)
    await client.close()
    assert isinstance(path, SdkPath)
    assert len(server.requests) == 1
    assert "client _calculate_retry_timeout (callable)" in caplog.text
    assert "keep the SDK's own HTTP stack" in caplog.text


# -- same request, same errors ---------------------------------------------------------------------


async def _request_on(
    path: str, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, *, stream: bool
) -> Received:
    _use(monkeypatch, path)
    client = _client(server, organization="org-1", project="proj-1", default_headers={"x-team": "t"})
    model = OpenAIChatModel("m", client=client, extra_headers={"x-call": "c"}, extra_query={"q": "1"})
    if stream:
        server.queue(sse_reply(openai_text_events("hi")))
        texts = [c.text async for c in model.stream(_prompt())]
        assert texts[0] == "hi"
    else:
        server.queue(json_reply(200, openai_completion("hi")))
        assert (await model.call(_prompt())).text == "hi"
    await client.close()
    return server.requests[-1]


# What an HTTP library adds of its own, beside what the SDK asks for.
_LIBRARY_HEADERS = {"accept-encoding", "connection", "host"}


@pytest.mark.parametrize("stream", [False, True])
async def test_both_paths_send_the_same_request(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    sent = {path: await _request_on(path, server, monkeypatch, stream=stream) for path in PATHS}

    over_aiohttp, over_sdk = sent["aiohttp"], sent["sdk"]
    assert over_aiohttp.path == over_sdk.path == "/v1/chat/completions?q=1"
    assert over_aiohttp.body == over_sdk.body
    assert over_aiohttp.body["tools"][0]["function"]["name"] == "get_weather"
    headers = {p: {k: v for k, v in r.headers.items() if k not in _LIBRARY_HEADERS} for p, r in sent.items()}
    assert headers["aiohttp"] == headers["sdk"]  # content-length included: the same bytes
    assert headers["aiohttp"]["authorization"] == "Bearer sk-test"
    assert headers["aiohttp"]["openai-organization"] == "org-1"
    assert headers["aiohttp"]["openai-project"] == "proj-1"
    assert (headers["aiohttp"]["x-team"], headers["aiohttp"]["x-call"]) == ("t", "c")


async def test_requests_whose_headers_differ_from_the_first_send_their_own_on_both_paths(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The aiohttp path keeps the first request's headers as its session's: a later request with a
    # header added, changed or removed (``extra_headers``, an ``Omit``) must still send exactly its own.
    layers: list[dict[str, Any]] = [
        {},
        {"extra_headers": {"x-call": "2"}},
        {"extra_headers": {"x-team": "other"}},
        {"extra_headers": {"x-team": openai.Omit()}},
        {},
    ]
    sent: dict[str, list[dict[str, str]]] = {}
    for path in PATHS:
        _use(monkeypatch, path)
        server.reset()
        client = _client(server, default_headers={"x-team": "t"})
        model = OpenAIChatModel("m", client=client)
        for extra in layers:
            server.queue(json_reply(200, openai_completion("hi")))
            assert (await model.call(Prompt([UserMessage("hi")], ChatOptions(extra=extra)))).text == "hi"
        await client.close()
        sent[path] = [
            {k: v for k, v in r.headers.items() if k not in _LIBRARY_HEADERS} for r in server.requests
        ]
    assert sent["aiohttp"] == sent["sdk"]
    assert [h.get("x-team") for h in sent["aiohttp"]] == ["t", "t", "other", None, "t"]
    assert [h.get("x-call") for h in sent["aiohttp"]] == [None, "2", None, None, None]


@pytest.mark.parametrize("path", PATHS)
async def test_retries_follow_the_sdk_clients_policy(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    _use(monkeypatch, path)
    busy = {"error": {"message": "busy", "type": "server_error"}}
    server.queue(
        json_reply(500, busy, headers={"retry-after-ms": "1"}),
        json_reply(429, busy, headers={"retry-after-ms": "1"}),
        json_reply(200, openai_completion("done")),
    )
    model = OpenAIChatModel("m", client=_client(server, max_retries=2))

    assert (await model.call(Prompt([UserMessage("hi")]))).text == "done"
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1", "2"]


@pytest.mark.parametrize("path", PATHS)
async def test_a_server_that_says_do_not_retry_is_not_retried(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    _use(monkeypatch, path)
    server.queue(json_reply(503, {"error": {"message": "down"}}, headers={"x-should-retry": "false"}))
    model = OpenAIChatModel("m", client=_client(server, max_retries=3))

    with pytest.raises(ModelError, match="down") as caught:
        await model.call(Prompt([UserMessage("hi")]))
    assert caught.value.status_code == 503
    assert len(server.requests) == 1


async def test_both_paths_report_a_provider_error_alike(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors: dict[str, ModelError] = {}
    for path in PATHS:
        _use(monkeypatch, path)
        body = {
            "error": {"message": "no such model", "type": "invalid_request_error", "code": "model_not_found"}
        }
        server.queue(json_reply(404, body, headers={"retry-after": "7"}))
        with pytest.raises(ModelError) as caught:
            await OpenAIChatModel("m", client=_client(server, max_retries=0)).call(
                Prompt([UserMessage("hi")])
            )
        errors[path] = caught.value

    assert str(errors["aiohttp"]) == str(errors["sdk"])
    assert "no such model" in str(errors["aiohttp"])
    for error in errors.values():
        assert (error.status_code, error.error_type, error.retry_after) == (404, "invalid_request_error", 7.0)


async def test_a_finished_stream_gives_its_connection_back(server: ScriptedServer) -> None:
    model = OpenAIChatModel("m", client=_client(server))
    before = server.connections
    for _ in range(3):
        server.queue(sse_reply(openai_text_events("a", "b")))
        assert "".join([c.text or "" async for c in model.stream(Prompt([UserMessage("hi")]))]) == "ab"

    assert server.connections - before == 1


# -- Anthropic: the same two paths ------------------------------------------------------------------


async def test_an_anthropic_client_travels_over_aiohttp_unless_told_not_to(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    anthropic = pytest.importorskip("anthropic")
    model = AnthropicChatModel("claude-x", client=anthropic.AsyncAnthropic(api_key="k", base_url=server.url))
    assert isinstance(await model._clients.current_companion(), AiohttpPath)

    _use(monkeypatch, "sdk")
    kept = AnthropicChatModel("claude-x", client=anthropic.AsyncAnthropic(api_key="k", base_url=server.url))
    assert isinstance(await kept._clients.current_companion(), SdkPath)


async def _anthropic_request_on(
    path: str, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, *, stream: bool
) -> Received:
    import anthropic

    _use(monkeypatch, path)
    client = anthropic.AsyncAnthropic(api_key="sk-ant", base_url=server.url, default_headers={"x-team": "t"})
    model = AnthropicChatModel("claude-x", client=client, extra_headers={"x-call": "c"}, temperature=0)
    if stream:
        server.queue(sse_reply(anthropic_text_events("hi"), done=False, event_names=True))
        texts = [c.text async for c in model.stream(_prompt())]
        assert texts[0] == "hi"
    else:
        server.queue(json_reply(200, anthropic_message("hi")))
        assert (await model.call(_prompt())).text == "hi"
    await client.close()
    return server.requests[-1]


@pytest.mark.parametrize("stream", [False, True])
async def test_both_paths_send_the_same_anthropic_request(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    sent = {path: await _anthropic_request_on(path, server, monkeypatch, stream=stream) for path in PATHS}

    over_aiohttp, over_sdk = sent["aiohttp"], sent["sdk"]
    assert over_aiohttp.path == over_sdk.path == "/v1/messages"
    assert over_aiohttp.body == over_sdk.body
    assert over_aiohttp.body["tools"][0]["name"] == "get_weather"
    headers = {p: {k: v for k, v in r.headers.items() if k not in _LIBRARY_HEADERS} for p, r in sent.items()}
    assert headers["aiohttp"] == headers["sdk"]
    assert headers["aiohttp"]["anthropic-version"]
    assert (headers["aiohttp"]["x-team"], headers["aiohttp"]["x-call"]) == ("t", "c")
