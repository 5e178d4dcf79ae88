"""Both HTTP paths, fault for fault: every fault the scripted server plays, for each HTTP adapter (Chat
Completions, Responses, Anthropic), played once over aiohttp and once over the SDK's own stack
(``ADVISORCHAIN_HTTP=sdk``) — and the caller sees the same thing on both: the same answer, or an
error of the same class with the same type, status, wait and message; and the server sees the
same number of requests (the same retries).

Each case also says what that outcome must be, so the two paths cannot agree on a wrong one.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from advisorchain import (
    ContextLengthExceededError,
    IncompleteAnswerError,
    InvalidResponseError,
    ModelConnectionError,
    ModelError,
    ModelStatusError,
    ModelTimeoutError,
    Prompt,
    UserMessage,
)
from advisorchain.model import ChatModel
from advisorchain.models.anthropic import AnthropicChatModel
from advisorchain.models.openai import OpenAIChatModel, OpenAIResponsesChatModel
from tests.support.openai_server import (
    Pause,
    Reset,
    ScriptedServer,
    Send,
    Stall,
    Step,
    json_reply,
    raw_reply,
    sse_reply,
)
from tests.support.payloads import (
    anthropic_message,
    anthropic_text_events,
    anthropic_tool_events,
    openai_completion,
    openai_text_events,
    openai_tool_events,
    responses_body,
    responses_text_events,
    responses_tool_events,
)
from tests.support.processes import free_port

pytest.importorskip("aiohttp", reason="the aiohttp path needs the fast extra")

TIMEOUT = 0.5
PATHS = ("aiohttp", "sdk")


# -- the three adapters, as the scripted server speaks to them ---------------------------------------


@dataclass(frozen=True)
class Adapter:
    """What a case needs of an adapter: how to build it, and its payloads."""

    name: str
    endpoint: str
    make: Callable[..., ChatModel]
    answer: Callable[[str], list[Step]]
    stream: Callable[..., list[Step]]
    tool_stream: Callable[..., list[Step]]
    error_event: bytes
    error_event_outcome: tuple[str, int]
    overflow_body: dict[str, Any]


def _chat(url: str, **kwargs: Any) -> ChatModel:
    return OpenAIChatModel("fault-model", base_url=url + "/v1", api_key="sk-test", **kwargs)


def _responses(url: str, **kwargs: Any) -> ChatModel:
    return OpenAIResponsesChatModel("fault-model", base_url=url + "/v1", api_key="sk-test", **kwargs)


def _anthropic(url: str, **kwargs: Any) -> ChatModel:
    return AnthropicChatModel("fault-model", base_url=url, api_key="sk-test", **kwargs)


def _sse(events: Sequence[Any], *, names: bool, done: bool = False, **kwargs: Any) -> list[Step]:
    return sse_reply(events, done=done, event_names=names, **kwargs)


ADAPTERS = {
    "chat": Adapter(
        name="chat",
        endpoint="/v1/chat/completions",
        make=_chat,
        answer=lambda text: json_reply(200, openai_completion(text)),
        stream=lambda *deltas, complete=True, **kw: _sse(
            openai_text_events(*deltas, finish_reason="stop" if complete else None),
            names=False,
            done=complete,
            **kw,
        ),
        tool_stream=lambda pieces, complete=True: _sse(
            openai_tool_events("weather", pieces, finish_reason="tool_calls" if complete else None),
            names=False,
            done=complete,
        ),
        error_event=(
            b'event: error\ndata: {"error": {"message": "tool call validation failed", '
            b'"code": "tool_use_failed", "status_code": 400}}\n\n'
        ),
        error_event_outcome=("tool call validation failed", 400),
        overflow_body={
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130532 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    "responses": Adapter(
        name="responses",
        endpoint="/v1/responses",
        make=_responses,
        answer=lambda text: json_reply(200, responses_body(text)),
        stream=lambda *deltas, complete=True, **kw: _sse(
            responses_text_events(*deltas, complete=complete), names=True, **kw
        ),
        tool_stream=lambda pieces, complete=True: _sse(
            responses_tool_events("weather", pieces, complete=complete), names=True
        ),
        error_event=(
            b'event: error\ndata: {"type": "error", "code": "rate_limit_exceeded", '
            b'"message": "Rate limit reached for gpt-5-mini", "param": null}\n\n'
        ),
        error_event_outcome=("Rate limit reached", 429),
        overflow_body={
            "error": {
                "message": "Your input exceeds the context window of this model. Please adjust your "
                "input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        },
    ),
    "anthropic": Adapter(
        name="anthropic",
        endpoint="/v1/messages",
        make=_anthropic,
        answer=lambda text: json_reply(200, anthropic_message(text)),
        stream=lambda *deltas, complete=True, **kw: _sse(
            anthropic_text_events(*deltas, stop=complete), names=True, **kw
        ),
        tool_stream=lambda pieces, complete=True: _sse(
            anthropic_tool_events("weather", pieces, stop=complete), names=True
        ),
        error_event=(
            b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
            b'"message": "Overloaded"}}\n\n'
        ),
        error_event_outcome=("Overloaded", 529),
        overflow_body={
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 208310 tokens > 200000 maximum",
            },
            "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
        },
    ),
}


# -- what the caller sees --------------------------------------------------------------------------

Outcome = tuple[Any, ...]


async def _outcome(model: ChatModel, kind: str) -> Outcome:
    prompt = Prompt([UserMessage("hi")])
    try:
        if kind == "call":
            response = await model.call(prompt)
            calls = response.result.output.tool_calls if response.result else ()
            return ("answer", response.text, response.metadata.finish_reason, tuple(calls))
        chunks = [chunk async for chunk in model.stream(prompt)]
        text = "".join(c.text or "" for c in chunks)
        last = chunks[-1]
        calls = last.result.output.tool_calls if last.result else ()
        return ("answer", text, last.metadata.finish_reason, tuple(calls))
    except ModelError as error:
        return ("error", type(error), error.error_type, error.status_code, error.retry_after, str(error))


@dataclass
class Case:
    """One fault: the replies queued, how the model is called, and what must come of it."""

    replies: Callable[[Adapter], list[list[Step]]]
    kind: str = "call"
    expect: Callable[[Outcome, Adapter], None] = lambda outcome, adapter: None
    requests: int = 1
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    url: Callable[[ScriptedServer], str] | None = None


def _answer(text: str, finish: str = "stop") -> Callable[[Outcome, Adapter], None]:
    def check(outcome: Outcome, adapter: Adapter) -> None:
        assert outcome[:3] == ("answer", text, finish), outcome

    return check


def _error(
    cls: type[ModelError], *fragments: str, status: int | None = None, retry_after: float | None = None
) -> Callable[[Outcome, Adapter], None]:
    def check(outcome: Outcome, adapter: Adapter) -> None:
        assert outcome[0] == "error", outcome
        assert issubclass(outcome[1], cls), outcome
        assert (outcome[3], outcome[4]) == (status, retry_after), outcome
        for fragment in fragments:
            assert fragment in outcome[5], outcome

    return check


_NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n"
)
_LOGIN_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in - Corporate Proxy</title></head><body>...</body></html>"
)


def _cut_body(adapter: Adapter, tail: list[Step]) -> list[Step]:
    """The whole answer's bytes but its last 20, then ``tail`` (a reset, a stall)."""
    (whole,) = adapter.answer("a long enough answer")
    assert isinstance(whole, Send)
    return [Send(whole.data[:-20]), Pause(0.02), *tail]


def _stream_head(adapter: Adapter, *deltas: str) -> list[Step]:
    """A stream's head and first events, not finished (a fault follows)."""
    return adapter.stream(*deltas, complete=False, finished=False)[:3]


def _chunk(data: bytes) -> Send:
    """One HTTP chunk of a chunked body."""
    return Send(b"%x\r\n%s\r\n" % (len(data), data))


def _overflow(outcome: Outcome, adapter: Adapter) -> None:
    _error(ContextLengthExceededError, status=400)(outcome, adapter)
    assert outcome[2] in ("invalid_request_error",), outcome


def _error_event(outcome: Outcome, adapter: Adapter) -> None:
    message, status = adapter.error_event_outcome
    _error(ModelStatusError, message, status=status)(outcome, adapter)


CASES: dict[str, Case] = {
    "whole answer": Case(lambda a: [a.answer("four")], expect=_answer("four")),
    "whole stream": Case(lambda a: [a.stream("fo", "ur")], "stream", _answer("four")),
    "stream cut short": Case(
        lambda a: [a.stream("The answer is f", complete=False)],
        "stream",
        _error(IncompleteAnswerError, "is incomplete"),
    ),
    "stream cut in tool arguments": Case(
        lambda a: [a.tool_stream(['{"city": "Pa'], complete=False)],
        "stream",
        _error(IncompleteAnswerError, "is incomplete"),
    ),
    "429 with retry-after": Case(
        lambda a: [
            json_reply(
                429, {"error": {"message": "slow down", "type": "rate_limit_error"}}, {"retry-after": "3"}
            )
        ],
        expect=_error(ModelStatusError, "slow down", status=429, retry_after=3.0),
    ),
    "503 without retry-after": Case(
        lambda a: [json_reply(503, {"error": {"message": "overloaded"}})],
        expect=_error(ModelStatusError, "overloaded", status=503),
    ),
    "retry-after in milliseconds": Case(
        lambda a: [json_reply(429, {"error": {"message": "later"}}, {"retry-after-ms": "250"})],
        expect=_error(ModelStatusError, "later", status=429, retry_after=0.25),
    ),
    "500 then an answer, retried": Case(
        lambda a: [
            json_reply(500, {"error": {"message": "busy"}}, {"retry-after-ms": "1"}),
            a.answer("done"),
        ],
        expect=_answer("done"),
        requests=2,
        model_kwargs={"max_retries": 2},
    ),
    "503 the server says not to retry": Case(
        lambda a: [json_reply(503, {"error": {"message": "down"}}, {"x-should-retry": "false"})],
        expect=_error(ModelStatusError, "down", status=503),
        model_kwargs={"max_retries": 3},
    ),
    "context overflow": Case(lambda a: [json_reply(400, a.overflow_body)], expect=_overflow),
    "an error event inside a stream": Case(
        lambda a: [[*_stream_head(a, "Hel"), _chunk(a.error_event)]],
        "stream",
        _error_event,
    ),
    "an event that is not JSON": Case(
        lambda a: [[*_stream_head(a, "Hel"), _chunk(b'data: {"choices": [\n\n'), Send(b"0\r\n\r\n")]],
        "stream",
        _error(InvalidResponseError, "not JSON"),
    ),
    "an HTML 502 from a proxy": Case(
        lambda a: [raw_reply(502, "text/html", _NGINX_502)],
        expect=_error(
            ModelStatusError, "HTTP 502 Bad Gateway (text/html)", "<title>502 Bad Gateway</title>", status=502
        ),
    ),
    "an HTML 502 on a streamed request": Case(
        lambda a: [raw_reply(502, "text/html", _NGINX_502)],
        "stream",
        _error(
            ModelStatusError, "HTTP 502 Bad Gateway (text/html)", "<title>502 Bad Gateway</title>", status=502
        ),
    ),
    "a login page with status 200": Case(
        lambda a: [raw_reply(200, "text/html; charset=utf-8", _LOGIN_PAGE)],
        expect=_error(
            InvalidResponseError,
            "not JSON",
            "HTTP 200 OK (text/html)",
            "<title>Sign in - Corporate Proxy</title>",
        ),
    ),
    "a login page on a streamed request": Case(
        lambda a: [raw_reply(200, "text/html", _LOGIN_PAGE)],
        "stream",
        _error(InvalidResponseError, "not an event stream", "HTTP 200 OK (text/html)", "<title>Sign in"),
    ),
    "plain text on a streamed request": Case(
        lambda a: [
            raw_reply(200, "text/plain", b"upstream connect error or disconnect/reset before headers\n")
        ],
        "stream",
        _error(InvalidResponseError, "not an event stream", "(text/plain)", "upstream connect error"),
    ),
    "a JSON error with status 200 on a streamed request": Case(
        lambda a: [json_reply(200, {"error": {"message": "model is loading", "type": "server_error"}})],
        "stream",
        _error(ModelStatusError, "model is loading", status=500),
    ),
    "reset before any byte": Case(lambda a: [[Reset()]], expect=_error(ModelConnectionError)),
    "reset inside the body": Case(
        lambda a: [_cut_body(a, [Reset()])], expect=_error(ModelConnectionError, "reset")
    ),
    "reset inside the body, retried": Case(
        lambda a: [_cut_body(a, [Reset()]), a.answer("whole")],
        expect=_answer("whole"),
        requests=2,
        model_kwargs={"max_retries": 1},
    ),
    "stall inside the body": Case(
        lambda a: [_cut_body(a, [Stall()])], expect=_error(ModelTimeoutError, "timed out", "after 0.5 s")
    ),
    "stall inside the body, retried": Case(
        lambda a: [_cut_body(a, [Stall()]), a.answer("whole")],
        expect=_answer("whole"),
        requests=2,
        model_kwargs={"max_retries": 1},
    ),
    "reset inside a stream": Case(
        lambda a: [[*_stream_head(a, "par"), Pause(0.02), Reset()]],
        "stream",
        _error(ModelConnectionError, "mid-stream", "reset"),
    ),
    "a server that never answers": Case(
        lambda a: [[Stall()]], expect=_error(ModelTimeoutError, "read timeout", "after 0.5 s")
    ),
    "stall inside a stream": Case(
        lambda a: [[*_stream_head(a, "par"), Stall()]],
        "stream",
        _error(ModelTimeoutError, "timed out mid-stream", "after 0.5 s"),
    ),
    "a refused connection": Case(
        lambda a: [],
        expect=_error(ModelConnectionError, "connection refused"),
        requests=0,
        url=lambda server: f"http://127.0.0.1:{free_port()}",
    ),
    "user:password@ in the base URL": Case(
        lambda a: [a.answer("in")],
        expect=_answer("in"),
        url=lambda server: server.url.replace("http://", "http://al%40ice:p%3Ass@"),
    ),
}


@pytest.mark.parametrize("adapter_name", sorted(ADAPTERS))
@pytest.mark.parametrize("case_name", list(CASES))
async def test_both_http_paths_see_the_same_fault_the_same_way(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, case_name: str, adapter_name: str
) -> None:
    case, adapter = CASES[case_name], ADAPTERS[adapter_name]
    seen: dict[str, Outcome] = {}
    sent: dict[str, list[dict[str, str]]] = {}
    url = case.url(server) if case.url else server.url
    for path in PATHS:
        monkeypatch.setenv("ADVISORCHAIN_HTTP", "auto" if path == "aiohttp" else "sdk")
        server.reset()
        server.queue(*case.replies(adapter))
        model = adapter.make(url, **{"max_retries": 0, "timeout": TIMEOUT, **case.model_kwargs})
        seen[path] = await _outcome(model, case.kind)
        sent[path] = [r.headers for r in server.requests]
        assert server.pending == 0, f"{path}: {server.pending} queued replies were not asked for"

    assert seen["aiohttp"] == seen["sdk"]
    case.expect(seen["aiohttp"], adapter)
    assert len(sent["aiohttp"]) == len(sent["sdk"]) == case.requests
    for path in PATHS:
        assert all(r.get("x-stainless-retry-count") == str(i) for i, r in enumerate(sent[path]))


async def test_userinfo_is_sent_as_basic_auth_on_both_paths(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = "Basic " + base64.b64encode(b"al@ice:p:ss").decode()
    for path in PATHS:
        monkeypatch.setenv("ADVISORCHAIN_HTTP", "auto" if path == "aiohttp" else "sdk")
        for adapter in ADAPTERS.values():
            server.reset()
            server.queue(adapter.answer("in"))
            model = adapter.make(server.url.replace("http://", "http://al%40ice:p%3Ass@"), max_retries=0)
            await model.call(Prompt([UserMessage("hi")]))
            (request,) = server.requests
            assert request.headers["authorization"] == expected, (path, adapter.name)
            assert request.path == adapter.endpoint


@pytest.mark.parametrize(
    ("body", "status"),
    [
        # vLLM (OpenAI-compatible), the error object at the top level as older versions send it
        (
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. However, you requested 6616 "
                "tokens (568 in the messages, 6048 in the completion). Please reduce the length of the "
                "messages or completion.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
            400,
        ),
        # llama.cpp's server
        (
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 20512,
                    "n_ctx": 16384,
                }
            },
            400,
        ),
        # Ollama's OpenAI-compatible endpoint
        (
            {
                "error": {
                    "message": "prompt too long; exceeded max context length by 4 tokens",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                }
            },
            400,
        ),
        # Ollama's own error shape: the error as a string
        ({"error": "prompt too long; exceeded max context length by 4021 tokens"}, 400),
    ],
)
async def test_an_openai_compatible_servers_context_overflow_is_a_context_length_error_on_both_paths(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, body: dict[str, Any], status: int
) -> None:
    messages = set()
    for path in PATHS:
        monkeypatch.setenv("ADVISORCHAIN_HTTP", "auto" if path == "aiohttp" else "sdk")
        server.queue(json_reply(status, body))
        with pytest.raises(ContextLengthExceededError) as caught:
            await _chat(server.url, max_retries=0).call(Prompt([UserMessage("hi")]))
        assert caught.value.status_code == 400
        messages.add(str(caught.value))
    assert len(messages) == 1


async def test_a_context_overflow_inside_a_responses_stream_is_a_context_length_error(
    server: ScriptedServer,
) -> None:
    failed = {
        "type": "response.failed",
        "response": {
            "id": "resp_1",
            "status": "failed",
            "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window."},
            "output": [],
        },
    }
    server.queue(sse_reply([responses_text_events()[0], failed], done=False, event_names=True))

    with pytest.raises(ContextLengthExceededError) as caught:
        async for _ in _responses(server.url, max_retries=0).stream(Prompt([UserMessage("hi")])):
            pass

    assert caught.value.status_code == 400
