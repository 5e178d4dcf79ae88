"""The skeleton every HTTP adapter shares: one way to send a request, read an answer and a stream,
and report a failure — a provider's adapter is then only its mapping (messages and options to the
request body, the answer and the stream's events back to ChatResponses).

``HttpChatModel.call`` / ``stream`` take the adapter's body (``_body``), send it on the loop's HTTP
path (aiohttp or the SDK's stack, ``_http.transport``), and hand the JSON answer to ``_parse`` or
the server-sent events to the adapter's ``StreamAssembly``. Everything that goes wrong between the
request and the parsed answer becomes a ModelError in ``_http.failures``: an error status, a
broken connection, a body that is not JSON, a stream that is not an event stream, a stream that
ends before the provider said it was complete.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping
from functools import partial
from typing import Any, ClassVar, Protocol
from urllib.parse import urlsplit

from .._cache_points import check_cache_points
from ..model import ChatResponse, ChatResponseMetadata, Prompt
from ..usage import price_of
from ._common import check_request_allowed
from ._http.failures import model_error, not_an_object
from ._http.json import loads
from ._http.loops import LoopClients
from ._http.sse import SseDecoder
from ._http.transport import HttpPath, Reply, http_path
from .clients import derive_client

__all__ = ["OWN_HOSTS", "HttpChatModel", "StreamAssembly", "own_host_provider"]


class StreamAssembly(Protocol):
    """What an adapter makes of a stream's events (one per request)."""

    @property
    def done(self) -> bool:
        """True once the provider's end-of-answer marker came: nothing more is read."""

    def feed_events(self, events: Iterable[tuple[str, object]]) -> list[str]:
        """Take in decoded events — (event name, parsed JSON or ``sse.DONE``) — in order, up to
        the end marker; return their text deltas. An error event raises its ModelError."""

    def text_chunk(self, text: str) -> ChatResponse:
        """The chunk carrying one text delta."""

    def complete(self) -> ChatResponse:
        """The last chunk (whole tool calls, finish reason, usage), or an IncompleteAnswerError
        when the provider never said the answer was complete."""


OWN_HOSTS: Mapping[str, str] = {"api.openai.com": "openai", "api.anthropic.com": "anthropic"}
"""The providers' own hosts, and the provider whose API is served there: its bundled prices price
an answer from there, and its own request fields apply there."""


def own_host_provider(client: Any) -> str | None:
    """The provider whose own host (``OWN_HOSTS``) ``client`` sends to, or None for any other
    server (a local or proxy server: its models are unpriced)."""
    host = urlsplit(str(getattr(client, "base_url", "") or "")).hostname
    return OWN_HOSTS.get(host or "")


class HttpChatModel(ABC):
    """The ChatModel skeleton of the HTTP adapters (see the module docstring). A subclass sets the
    endpoint (``_ENDPOINT``, ``_SDK_MODULE``, ``_SECURITY``), calls ``_connect(...)`` in its
    constructor, and implements ``_body``, ``_parse`` and ``_assembly``."""

    _ENDPOINT: ClassVar[str]
    """The request path under the client's base URL (``/chat/completions``)."""
    _SDK_MODULE: ClassVar[str]
    """The package of the SDK client (``openai``, ``anthropic``)."""
    _SECURITY: ClassVar[Mapping[str, bool] | None] = None
    """The SDK's security option for the endpoint (how it authenticates), when it has one."""

    provider: str
    model_name: str
    defaults: dict[str, Any]
    client: Any

    def _connect(self, model: str, provider: str, defaults: Mapping[str, Any], client: Any) -> None:
        """Set what every adapter holds: the model's name, the provider's name (for spans and
        errors), the request fields sent with every call, the SDK client — and, per event loop,
        the HTTP path of its requests."""
        self.model_name = model
        self.provider = provider
        self.defaults = dict(defaults)
        self.client = client
        self._own_host = own_host_provider(client)
        self._clients: LoopClients[Any] = LoopClients(
            client,
            derive_client,
            partial(
                http_path,
                path=self._ENDPOINT,
                provider=self.provider,
                sdk_module=self._SDK_MODULE,
                security=self._SECURITY,
            ),
        )

    # -- what an adapter maps --------------------------------------------------------------------

    @abstractmethod
    def _body(self, prompt: Prompt, *, stream: bool) -> tuple[bytes, dict[str, Any]]:
        """(the JSON body, the SDK request options) for ``prompt``."""

    @abstractmethod
    def _parse(self, data: dict[str, Any], url: str) -> ChatResponse:
        """The ChatResponse of a whole answer (a JSON object); an error in it raises."""

    @abstractmethod
    def _assembly(self, url: str) -> StreamAssembly:
        """A new assembly for one stream's events."""

    # -- the skeleton ----------------------------------------------------------------------------

    async def _path(self) -> HttpPath:
        """The running loop's HTTP path (made on the loop's first request), once the request guard
        let the request through. Awaited only for a loop's first request: the rest find it at once."""
        path: HttpPath | None = self._clients.ready_companion()
        if path is None:
            path = await self._clients.current_companion()
        check_request_allowed(self.provider, path.client)
        return path

    async def call(self, prompt: Prompt) -> ChatResponse:
        """One request; the whole answer as a ChatResponse."""
        check_cache_points(prompt.instructions)
        body, options = self._body(prompt, stream=False)
        path = await self._path()
        reply = await path.send(body, options, stream=False)
        return self._priced(
            self._parse(self._json_object(await reply.read(), reply, path.url), path.url), prompt
        )

    def _priced(self, response: ChatResponse, prompt: Prompt) -> ChatResponse:
        """``response`` with its cost, from the bundled prices of the provider on its own host, by
        the model name the response reports (else the request's); unpriced elsewhere (§17)."""
        provider = self._own_host
        meta = response.metadata
        usage = meta.usage
        if provider is None or usage is None:
            return response  # another server's answer: unpriced (its usage has no cost)
        options = prompt.options
        requested = options.model if options is not None and options.model else self.model_name
        usage = price_of(usage, provider, meta.model or requested)
        metadata = ChatResponseMetadata(meta.id, meta.model, usage, meta.finish_reason, provider)
        return ChatResponse(response.generations, metadata)

    def _json_object(self, content: bytes, reply: Reply, url: str) -> dict[str, Any]:
        try:
            data = loads(content)
        except ValueError:
            error = model_error(
                self.provider, url=url, status=reply.status, headers=reply.headers, content=content
            )
            raise error from None
        if not isinstance(data, dict):
            raise not_an_object(self.provider, "the response body", data)
        return data

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """A streamed request: text deltas as they come, then one last chunk with the whole tool
        calls, the finish reason and usage. Closing the iterator closes the response."""
        check_cache_points(prompt.instructions)
        body, options = self._body(prompt, stream=True)
        path = await self._path()
        url = path.url
        reply = await path.send(body, options, stream=True)
        assembly = self._assembly(url)
        decoder = SseDecoder(self.provider, url)
        try:
            # Each read's events are decoded at once, in this loop: a delta costs no generator
            # hop of its own between the socket and the caller.
            async for block in reply.chunks():
                for text in assembly.feed_events(decoder.feed(block)):
                    yield assembly.text_chunk(text)
                if assembly.done:
                    await reply.finish()
                    break
            else:
                for text in assembly.feed_events(decoder.close()):
                    yield assembly.text_chunk(text)
                if decoder.not_a_stream:
                    raise model_error(
                        self.provider,
                        url=url,
                        status=reply.status,
                        headers=reply.headers,
                        content=decoder.head or b"",
                        expected="an event stream",
                    )
        finally:
            await reply.aclose()
        yield self._priced(assembly.complete(), prompt)
