"""Replay recorded provider HTTP traffic to the real SDK clients, for tests without a network.

A cassette is a JSON document holding the request/response pairs of one run (the format of the
cassettes in ``shared/cassettes``)::

    {"provider": "openai-chat", "host": "api.openai.com",
     "interactions": [{"request": {"method": "POST", "path": "/v1/chat/completions", "body": {...}},
                       "response": {"status": 200, "content_type": "application/json", "json": {...}}}]}

(a streamed response has ``"sse": "<raw event-stream text>"`` instead of ``"json"``). The cassette
serves the recorded responses in order to an ``httpx2.MockTransport``, records every request it
received (method, path, parsed JSON body) for assertions, and answers an unexpected extra request —
or one to another path — with an HTTP 418 error naming the problem, which the SDK raises::

    cassette = load_cassette("openai_tool_call_roundtrip.json")
    model = OpenAIChatModel("gpt-4.1-mini", client=replay_openai_client(cassette))
    ...
    assert cassette.requests[1].body["messages"][-1]["role"] == "tool"
    cassette.assert_exhausted()

Streamed bodies are served one SSE event at a time, so closing a stream early really stops it
(``cassette.open_streams`` tells whether every streamed body was closed).

The SDKs (and ``httpx2``) are imported only when a transport or client is built.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import anthropic
    import httpx2
    import openai

__all__ = [
    "Cassette",
    "RecordedRequest",
    "cassette_transport",
    "load_cassette",
    "replay_anthropic_client",
    "replay_openai_client",
]

REPLAY_API_KEY = "replay-dummy-key"
"""The API key replay clients send: never a real one."""

_MISMATCH_STATUS = 418


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the cassette received: method, URL path, and the JSON body (None when empty)."""

    method: str
    path: str
    body: Any


class Cassette:
    """Recorded interactions served in order; the requests received are kept in ``requests``.

    ``headers`` are added to every replayed response (e.g. ``{"retry-after-ms": "1"}`` so that an
    SDK retrying a recorded 429 does not sleep). Use ``load_cassette`` to read one from a file.
    """

    def __init__(
        self,
        interactions: Sequence[Mapping[str, Any]],
        *,
        name: str = "cassette",
        host: str | None = None,
        provider: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.interactions = tuple(_check_interaction(i, n, name) for n, i in enumerate(interactions))
        if not self.interactions:
            raise ValueError(f"cassette {name!r} has no interactions; record at least one request")
        self.name = name
        self.host = host
        self.provider = provider
        self.headers = dict(headers or {})
        self.requests: list[RecordedRequest] = []
        self.failures: list[str] = []
        self._open_streams = 0

    def __repr__(self) -> str:
        return f"Cassette({self.name!r}, {len(self.requests)}/{len(self.interactions)} served)"

    @property
    def remaining(self) -> int:
        """How many recorded interactions have not been served yet."""
        return max(0, len(self.interactions) - len(self.requests))

    @property
    def open_streams(self) -> int:
        """Streamed bodies served and not closed yet (0 once every stream was closed)."""
        return self._open_streams

    def recorded_request(self, index: int) -> RecordedRequest:
        """The request recorded for interaction ``index`` (what the original client sent)."""
        request = self.interactions[index]["request"]
        return RecordedRequest(str(request["method"]), str(request["path"]), request.get("body"))

    @property
    def base_path(self) -> str:
        """The recorded path prefix before the endpoint (``/openai/v1`` for Groq, ``""`` for Anthropic,
        ``/v1`` for OpenAI's Responses API)."""
        path = str(self.interactions[0]["request"]["path"])
        for endpoint in ("/chat/completions", "/responses", "/v1/messages"):
            if path.endswith(endpoint):
                return path[: -len(endpoint)]
        return path

    def assert_exhausted(self) -> None:
        """Fail unless every interaction was served and no request was unexpected."""
        problems = list(self.failures)
        if self.remaining:
            problems.append(
                f"{self.remaining} of {len(self.interactions)} recorded interactions were never requested"
            )
        if problems:
            raise AssertionError(f"cassette {self.name!r}: " + "; ".join(problems))

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        """Serve the next recorded response for ``request`` (the MockTransport handler)."""
        index = len(self.requests)
        received = RecordedRequest(request.method, request.url.path, _json_body(request.content))
        self.requests.append(received)
        if index >= len(self.interactions):
            return self._mismatch(
                f"unexpected request #{index + 1} {received.method} {received.path}: "
                f"the cassette holds only {len(self.interactions)}"
            )
        recorded = self.recorded_request(index)
        if (received.method, received.path) != (recorded.method, recorded.path):
            return self._mismatch(
                f"request #{index + 1} was {received.method} {received.path}, "
                f"the cassette recorded {recorded.method} {recorded.path}"
            )
        return self._response(self.interactions[index]["response"])

    def transport(self) -> httpx2.MockTransport:
        """An ``httpx2.MockTransport`` serving this cassette."""
        import httpx2

        return httpx2.MockTransport(self)

    def _mismatch(self, problem: str) -> httpx2.Response:
        import httpx2

        self.failures.append(problem)
        body = {"error": {"message": f"cassette {self.name!r}: {problem}", "type": "cassette_mismatch"}}
        # x-should-retry: false keeps the SDKs from retrying a request the cassette cannot answer.
        return httpx2.Response(_MISMATCH_STATUS, json=body, headers={"x-should-retry": "false"})

    def _response(self, recorded: Mapping[str, Any]) -> httpx2.Response:
        import httpx2

        headers = {"content-type": str(recorded["content_type"]), **self.headers}
        if "sse" in recorded:
            self._open_streams += 1
            stream = _replay_stream_class()(_sse_events(str(recorded["sse"])), self._stream_closed)
            return httpx2.Response(int(recorded["status"]), headers=headers, stream=stream)
        content = json.dumps(recorded["json"]).encode()
        return httpx2.Response(int(recorded["status"]), headers=headers, content=content)

    def _stream_closed(self) -> None:
        self._open_streams -= 1


def load_cassette(source: str | os.PathLike[str] | Mapping[str, Any] | Cassette, **kwargs: Any) -> Cassette:
    """A Cassette from a file path, a parsed cassette document, or a Cassette (returned as is).

    ``kwargs`` (``headers=...``) go to the Cassette constructor."""
    if isinstance(source, Cassette):
        return source
    if isinstance(source, Mapping):
        data, name = source, str(source.get("source") or "cassette")
    else:
        path = Path(source)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"no cassette at {str(path)!r}; check the path") from None
        except ValueError as exc:
            raise ValueError(f"cassette {str(path)!r} is not valid JSON: {exc}") from exc
        name = path.name
    if not isinstance(data, Mapping) or not isinstance(data.get("interactions"), list):
        raise ValueError(f"cassette {name!r} must be a JSON object with an 'interactions' list")
    return Cassette(
        data["interactions"], name=name, host=data.get("host"), provider=data.get("provider"), **kwargs
    )


def cassette_transport(
    source: str | os.PathLike[str] | Mapping[str, Any] | Cassette, **kwargs: Any
) -> httpx2.MockTransport:
    """An ``httpx2.MockTransport`` serving ``source`` in order (its ``handler`` is the Cassette)."""
    return load_cassette(source, **kwargs).transport()


def replay_openai_client(
    source: str | os.PathLike[str] | Mapping[str, Any] | Cassette, *, max_retries: int = 2
) -> openai.AsyncOpenAI:
    """A real ``openai.AsyncOpenAI`` whose HTTP traffic is the cassette (dummy key, no network);
    its base URL carries the recorded path prefix, so recorded paths match."""
    import openai

    return openai.AsyncOpenAI(**_client_options(source, max_retries))


def replay_anthropic_client(
    source: str | os.PathLike[str] | Mapping[str, Any] | Cassette, *, max_retries: int = 2
) -> anthropic.AsyncAnthropic:
    """A real ``anthropic.AsyncAnthropic`` whose HTTP traffic is the cassette (dummy key, no network)."""
    import anthropic

    return anthropic.AsyncAnthropic(**_client_options(source, max_retries))


def _client_options(
    source: str | os.PathLike[str] | Mapping[str, Any] | Cassette, max_retries: int
) -> dict[str, Any]:
    """What a replay SDK client is built with: the dummy key, a base URL of the recorded host and
    path prefix (so recorded paths match), and an HTTP client whose transport is the cassette."""
    import httpx2

    cassette = load_cassette(source)
    return {
        "api_key": REPLAY_API_KEY,
        "base_url": f"https://{cassette.host or 'replay.invalid'}{cassette.base_path}",
        "max_retries": max_retries,
        "http_client": httpx2.AsyncClient(transport=cassette.transport()),
    }


def _check_interaction(interaction: Mapping[str, Any], index: int, name: str) -> Mapping[str, Any]:
    request = interaction.get("request") if isinstance(interaction, Mapping) else None
    response = interaction.get("response") if isinstance(interaction, Mapping) else None
    if not isinstance(request, Mapping) or not {"method", "path"} <= request.keys():
        raise ValueError(f"cassette {name!r}, interaction {index}: 'request' needs 'method' and 'path'")
    if not isinstance(response, Mapping) or not {"status", "content_type"} <= response.keys():
        raise ValueError(
            f"cassette {name!r}, interaction {index}: 'response' needs 'status' and 'content_type'"
        )
    if "json" not in response and "sse" not in response:
        raise ValueError(
            f"cassette {name!r}, interaction {index}: 'response' needs a 'json' or an 'sse' body"
        )
    return interaction


def _json_body(content: bytes) -> Any:
    if not content:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "replace")


def _sse_events(text: str) -> list[bytes]:
    """The event-stream text cut after each blank line; the pieces join back to ``text`` exactly."""
    parts = text.split("\n\n")
    events = [part + "\n\n" for part in parts[:-1]]
    if parts[-1]:
        events.append(parts[-1])
    return [event.encode() for event in events]


@functools.cache
def _replay_stream_class() -> type:
    import httpx2

    class ReplayStream(httpx2.AsyncByteStream, httpx2.SyncByteStream):
        """A response body served one SSE event per read; tells the cassette when it is closed."""

        def __init__(self, events: list[bytes], on_close: Any) -> None:
            self._events = events
            self._on_close = on_close
            self._closed = False

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for event in self._events:
                if self._closed:
                    return
                yield event

        def __iter__(self) -> Iterator[bytes]:
            yield from self._events

        def _close(self) -> None:
            if not self._closed:
                self._closed = True
                self._on_close()

        async def aclose(self) -> None:
            self._close()

        def close(self) -> None:
            self._close()

    return ReplayStream
