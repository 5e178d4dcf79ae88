"""How the bytes of a provider request travel, once the adapter has built its JSON body.

Two paths, one contract (``send`` → an open 2xx ``Reply``; every failure a ``ModelError``):

* ``SdkPath`` posts through the SDK client's own request machinery (``client.post``): its
  credentials, headers, retries and errors, over its httpx2 connection pool. Always available.
* ``AiohttpPath`` sends the same request over ``aiohttp`` (the ``fast`` extra). The SDK client stays
  the source of truth: the URL and headers are the ones the SDK builds for this endpoint
  (``_build_request``: key, organization/project, default and extra headers, query), built once per
  set of request options instead of once per request; the timeouts are the client's; the retry
  policy is the SDK's own (``max_retries``, ``_should_retry``, ``_calculate_retry_timeout``). Only
  the HTTP stack differs: aiohttp keeps no per-request Python objects beyond the response and scans
  no pool, which is most of the CPU a request costs on the SDK path (measured in
  ``benchmarks/ISSUE-13.md``).

``aiohttp`` is chosen automatically when it is installed and the client is one it can stand in for:
an SDK client of exactly the SDK's class (not Azure's or a subclass), over the SDK's default HTTP
client (a user's own ``http_client`` — proxies, mounts, a mock transport — is always used as is),
with a plain API key (no key provider, workload identity or custom auth, which hook into the SDK's
send) and no proxy (one from the environment included: the SDK's stack goes through it).
``ADVISORCHAIN_HTTP=sdk`` in the environment keeps every request on the SDK path.
``uses_default_http_client`` is the part of that test the Anthropic adapter applies to give its
SDK client the SDK's own aiohttp client as its pool (the SDK still builds and sends each request).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import logging
import os
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..errors import ModelError
from ._common import connection_error, error_from_body, retry_after_seconds

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "HTTP_ENV",
    "AiohttpPath",
    "HttpPath",
    "Reply",
    "SdkPath",
    "aiohttp_eligible",
    "dumps",
    "pool_of",
    "ssl_context",
    "uses_default_http_client",
]

HTTP_ENV = "ADVISORCHAIN_HTTP"
"""``sdk`` keeps every request on the SDK's own HTTP stack; unset or ``auto``: aiohttp when it can."""

_orjson: Any
try:
    import orjson as _orjson
except ImportError:
    _orjson = None


def _dumps_stdlib(body: object) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _dumps_fast(body: object) -> bytes:
    try:
        return cast(bytes, _orjson.dumps(body))
    except TypeError:  # what orjson refuses (an int past 64 bits, a str subclass key...)
        return _dumps_stdlib(body)


dumps: Callable[[object], bytes] = _dumps_fast if _orjson is not None else _dumps_stdlib
"""A request body as the SDKs serialize it (compact, UTF-8, no NaN): ``orjson`` when installed."""


class Reply(Protocol):
    """An open 2xx response: read it whole or in chunks, then ``aclose()`` it."""

    async def read(self) -> bytes: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def finish(self) -> None:
        """The answer is complete (its end marker came): read what is left of the response (the
        end of its body), so that its connection can carry the next request."""

    async def aclose(self) -> None: ...


class HttpPath(Protocol):
    """One way to send a request of an adapter (see the module docstring)."""

    client: Any
    """The SDK client whose configuration the requests carry."""
    url: str

    async def send(self, body: bytes, sdk_options: Mapping[str, Any], *, stream: bool) -> Reply: ...

    async def aclose(self) -> None: ...


# -- the SDK's own stack ---------------------------------------------------------------------------


class _Endpoint:
    """One endpoint of one SDK client: what both paths know of where a request goes."""

    def __init__(self, client: Any, path: str, provider: str, security: Mapping[str, bool] | None) -> None:
        self.client = client
        self.path = path
        self.provider = provider
        self.url = str(client.base_url).rstrip("/") + path
        self._security = security


class SdkPath(_Endpoint):
    """``client.post(path, body)`` with the SDK options (``extra_headers``, ``extra_query``,
    ``timeout``) as the SDK's request options; SDK errors mapped by ``error``. The body is JSON
    already serialized: the SDK sends bytes as they are."""

    def __init__(
        self,
        client: Any,
        path: str,
        *,
        provider: str,
        security: Mapping[str, bool] | None,
        sdk_error: type[Exception],
        error: Callable[[Exception, str, str], ModelError],
    ) -> None:
        super().__init__(client, path, provider, security)
        self._sdk_error = sdk_error
        self._error = error

    async def send(self, body: bytes, sdk_options: Mapping[str, Any], *, stream: bool) -> Reply:
        import httpx2

        options: dict[str, Any] = {} if self._security is None else {"security": self._security}
        if "extra_headers" in sdk_options:
            options["headers"] = sdk_options["extra_headers"]
        if "extra_query" in sdk_options:
            options["params"] = sdk_options["extra_query"]
        if "timeout" in sdk_options:
            options["timeout"] = sdk_options["timeout"]
        try:
            response = await self.client.post(
                self.path, cast_to=httpx2.Response, content=body, options=options, stream=stream
            )
        except self._sdk_error as exc:
            raise self._error(exc, self.provider, self.url) from exc
        return _HttpxReply(response, self.provider, self.url)

    async def aclose(self) -> None:
        """Nothing of its own: the SDK client's pool is closed with the client."""


class _HttpxReply:
    def __init__(self, response: Any, provider: str, url: str) -> None:
        self._response = response
        self._provider = provider
        self._url = url

    async def read(self) -> bytes:
        import httpx2

        try:
            return cast(bytes, await self._response.aread())
        except httpx2.TransportError as exc:
            raise connection_error(exc, provider=self._provider, url=self._url) from exc

    async def chunks(self) -> AsyncIterator[bytes]:
        import httpx2

        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx2.TransportError as exc:  # the connection broke (or stalled) mid-stream
            raise connection_error(exc, provider=self._provider, url=self._url, mid_stream=True) from exc

    async def finish(self) -> None:
        """Nothing: the SDK's stack closes a response it was not read to its end, as its own
        streams do."""

    async def aclose(self) -> None:
        await self._response.aclose()


# -- aiohttp ---------------------------------------------------------------------------------------


def uses_default_http_client(client: object, sdk_module: str) -> bool:
    """True when aiohttp is installed and allowed (``ADVISORCHAIN_HTTP``) and ``client``, an SDK
    client of package ``sdk_module``, runs on the SDK's default HTTP client with no proxy: its
    connections may then travel over aiohttp with nothing of the user's configuration lost."""
    if os.environ.get(HTTP_ENV, "auto").strip().lower() == "sdk":
        return False
    if importlib.util.find_spec("aiohttp") is None:
        return False
    base = importlib.import_module(f"{sdk_module}._base_client")
    default_http = getattr(base, "AsyncHttpxClientWrapper", None)
    http_client = getattr(client, "_client", None)
    if default_http is None or type(http_client) is not default_http:
        return False
    # A proxy (from the environment): the SDK's stack goes through it.
    return not (getattr(http_client, "_mounts", None) or getattr(pool_of(http_client), "_proxy", None))


def aiohttp_eligible(client: object, sdk_module: str) -> bool:
    """True when requests of ``client`` may be sent by ``AiohttpPath`` — built by the SDK once,
    sent without it — with exactly the SDK's configuration (see the module docstring)."""
    if not uses_default_http_client(client, sdk_module):
        return False
    sdk = importlib.import_module(sdk_module)
    client_class = getattr(sdk, "AsyncOpenAI" if sdk_module == "openai" else "AsyncAnthropic", None)
    if client_class is None or type(client) is not client_class:
        return False
    hooks = ("_provider_runtime", "_workload_identity_auth", "_api_key_provider")
    if any(getattr(client, hook, None) is not None for hook in hooks):
        return False
    try:
        return client.custom_auth is None  # type: ignore[attr-defined]
    except Exception:  # an SDK whose auth hook fails here keeps its own path
        return False


@dataclass(frozen=True, slots=True)
class _Template:
    """What the SDK would send for one set of request options, minus the body."""

    url: str
    headers: dict[str, str]
    timeout: aiohttp.ClientTimeout
    read_timeout: float | None
    max_retries: int
    options: Any  # the SDK's FinalRequestOptions, for its backoff computation
    idempotency_header: str | None


_TEMPLATES_KEPT = 32


class AiohttpPath(_Endpoint):
    """Requests of one SDK client over one aiohttp session, on the event loop that made it."""

    def __init__(
        self,
        client: Any,
        path: str,
        *,
        provider: str,
        security: Mapping[str, bool] | None,
        sdk_module: str,
    ) -> None:
        import aiohttp

        super().__init__(client, path, provider, security)
        self._options_class = importlib.import_module(f"{sdk_module}._models").FinalRequestOptions
        # The SDK's own retry log lines, on its logger: what watches them (advisorchain chat's
        # "retrying" lines, a user's logging setup) sees the same on either path.
        self._log = logging.getLogger(f"{sdk_module}._base_client")
        pool = pool_of(client._client)
        connector = aiohttp.TCPConnector(
            limit=_pool_size(pool),
            limit_per_host=0,
            ssl=ssl_context(pool),
            keepalive_timeout=_keepalive(pool),
        )
        # No ``trust_env``: a proxy from the environment keeps the SDK path (see aiohttp_eligible),
        # and aiohttp would look for one, and for a .netrc, in a thread on every request.
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
        self._templates: dict[str, _Template] = {}
        weakref.finalize(self, _close_abandoned, self._session)

    async def aclose(self) -> None:
        """Close the session's connections (at the end of its event loop)."""
        await self._session.close()

    async def send(self, body: bytes, sdk_options: Mapping[str, Any], *, stream: bool) -> Reply:
        import aiohttp

        template = await self._template(sdk_options)
        headers = template.headers
        if template.idempotency_header:
            headers = {**headers, template.idempotency_header: self.client._idempotency_key()}
        for retries_taken in range(template.max_retries + 1):
            remaining = template.max_retries - retries_taken
            sent = {**headers, "x-stainless-retry-count": str(retries_taken)}
            try:
                response = await self._session.post(
                    template.url, data=body, headers=sent, timeout=template.timeout
                )
            except (aiohttp.ClientError, TimeoutError) as exc:
                timed_out = isinstance(exc, TimeoutError)
                what = "a timeout exception" if timed_out else "exception"
                self._log.debug("Encountered %s: %s", what, type(exc).__name__)
                if remaining > 0:
                    await self._sleep(retries_taken, template, None)
                    continue
                raise connection_error(
                    exc, provider=self.provider, url=template.url, read_timeout=template.read_timeout
                ) from exc
            if response.status < 400:
                return _AiohttpReply(response, self.provider, template)
            self._log.debug("Encountered an HTTP status error: %i", response.status)
            if remaining > 0 and self.client._should_retry(_StatusView(response)):
                response.release()
                await self._sleep(retries_taken, template, response.headers)
                continue
            raise await self._status_error(response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _sleep(self, retries_taken: int, template: _Template, headers: Any) -> None:
        remaining = template.max_retries - retries_taken
        seconds = self.client._calculate_retry_timeout(remaining, template.options, headers)
        attempt, most = retries_taken + 1, template.max_retries
        self._log.info("Retrying request in %f seconds (retry %i of %s)", seconds, attempt, most)
        await asyncio.sleep(seconds)

    async def _status_error(self, response: aiohttp.ClientResponse) -> ModelError:
        """The provider's error for a 4xx/5xx answer, as the SDK path reports it."""
        import aiohttp

        try:
            raw = await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            raw = f"(the error body could not be read: {exc})".encode()
        finally:
            response.release()
        text = raw.decode("utf-8", "replace").strip()
        body: object = text
        with contextlib.suppress(ValueError):
            body = json.loads(text)
        error = body.get("error", body) if isinstance(body, dict) else body
        return error_from_body(
            error,
            provider=self.provider,
            status_code=response.status,
            fallback=f"Error code: {response.status} - {body}",
            retry_after=retry_after_seconds(response.headers),
        )

    async def _template(self, sdk_options: Mapping[str, Any]) -> _Template:
        key = repr(sorted(sdk_options.items())) if sdk_options else ""
        template = self._templates.get(key)
        if template is None:
            template = await self._build_template(sdk_options)
            if len(self._templates) >= _TEMPLATES_KEPT:
                self._templates.pop(next(iter(self._templates)))
            self._templates[key] = template
        return template

    async def _build_template(self, sdk_options: Mapping[str, Any]) -> _Template:
        """The SDK's own request for this endpoint and these options, built once (its key,
        headers, query and validation), with an empty body."""
        import aiohttp

        client = self.client
        fields: dict[str, Any] = {"method": "post", "url": self.path, "json_data": {}}
        if self._security is not None:
            fields["security"] = self._security
        if "extra_headers" in sdk_options:
            fields["headers"] = sdk_options["extra_headers"]
        if "extra_query" in sdk_options:
            fields["params"] = sdk_options["extra_query"]
        if "timeout" in sdk_options:
            fields["timeout"] = sdk_options["timeout"]
        options = self._options_class.construct(**fields)
        try:
            if getattr(client, "_platform", True) is None:
                client._platform = await asyncio.to_thread(
                    importlib.import_module(
                        f"{type(client).__module__.split('.')[0]}._base_client"
                    ).get_platform
                )
            options = await client._prepare_options(options)
            request = client._build_request(options, retries_taken=0)
        except Exception as exc:
            message = f"{self.provider} request could not be built: {exc}"
            raise ModelError(message, provider=self.provider) from exc
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _PER_REQUEST_HEADERS}
        timeout = _timeouts(request.extensions.get("timeout"))
        return _Template(
            url=str(request.url),
            headers=headers,
            timeout=aiohttp.ClientTimeout(
                total=None,
                connect=timeout.get("pool"),
                sock_connect=timeout.get("connect"),
                sock_read=timeout.get("read"),
            ),
            read_timeout=timeout.get("read"),
            max_retries=int(client.max_retries),
            options=options,
            idempotency_header=client._idempotency_header,
        )


_PER_REQUEST_HEADERS = frozenset({"content-length", "x-stainless-retry-count", "host"})


class _StatusView:
    """What the SDK's ``_should_retry`` reads of a response."""

    __slots__ = ("headers", "status_code")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.status_code = response.status
        self.headers = response.headers


class _AiohttpReply:
    def __init__(self, response: aiohttp.ClientResponse, provider: str, template: _Template) -> None:
        self._response = response
        self._provider = provider
        self._template = template

    def _error(self, exc: BaseException, *, mid_stream: bool) -> ModelError:
        return connection_error(
            exc,
            provider=self._provider,
            url=self._template.url,
            mid_stream=mid_stream,
            read_timeout=self._template.read_timeout,
        )

    async def read(self) -> bytes:
        import aiohttp

        try:
            return await self._response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._error(exc, mid_stream=False) from exc
        finally:
            self._response.release()

    async def chunks(self) -> AsyncIterator[bytes]:
        import aiohttp

        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:  # the connection broke (or stalled)
            raise self._error(exc, mid_stream=True) from exc

    async def finish(self) -> None:
        # The body's end is usually on its way with the end marker; a server that never ends the
        # body gets a moment, not the read timeout: then the connection is closed instead.
        content = self._response.content
        if not content.is_eof():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(content.wait_eof(), _FINISH_WAIT_S)

    async def aclose(self) -> None:
        # A response read to its end gives its connection back to the pool; one left half-read
        # (a caller that stopped early) is closed, as nothing else can be sent on it.
        if self._response.content.is_eof():
            self._response.release()
        else:
            self._response.close()


_FINISH_WAIT_S = 0.25


def _close_abandoned(session: aiohttp.ClientSession) -> None:
    """At garbage collection, a session its loop never closed (a loop closed without shutting
    down its async generators, as some frameworks' loops are): its connections are closed here,
    or, when the loop is gone, left to close their sockets as they are collected."""
    if session.closed:
        return
    connector = session.connector
    with contextlib.suppress(Exception):  # nothing to report to at garbage collection
        if connector is not None:
            connector._close()
    session._connector = None  # closed: nothing of it is usable, nothing to warn about


def _timeouts(value: object) -> dict[str, float | None]:
    """The SDK's normalized timeouts (httpx2's ``{"connect", "read", "write", "pool"}``)."""
    if isinstance(value, Mapping):
        return {k: (float(v) if isinstance(v, int | float) else None) for k, v in value.items()}
    return {}


def pool_of(http_client: object) -> object:
    """The connection pool under an httpx2 client's default transport (None when it has none)."""
    return getattr(getattr(http_client, "_transport", None), "_pool", None)


def _pool_size(pool: object) -> int:
    """aiohttp's connection limit: the SDK pool's ``max_connections`` (0, no limit, for None)."""
    size = getattr(pool, "_max_connections", None)
    return int(size) if isinstance(size, int) and size > 0 else 0


def _keepalive(pool: object) -> float:
    """How long an idle connection is kept: the SDK pool's keep-alive expiry."""
    expiry = getattr(pool, "_keepalive_expiry", None)
    return float(expiry) if isinstance(expiry, int | float) and expiry > 0 else 15.0


def ssl_context(pool: object) -> Any:
    """The SSL context of the SDK's connection pool (its CA bundle and verification), if any."""
    context = getattr(pool, "_ssl_context", None)
    return context if context is not None else True
