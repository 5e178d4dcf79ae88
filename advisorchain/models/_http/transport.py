"""How the bytes of a provider request travel, once the adapter has built its JSON body.

Two paths, one contract (``send`` → an open 2xx ``Reply``; every failure a ``ModelError`` made by
``failures.model_error`` from the same status, headers and body, so that a failure reads the same
on both):

* ``SdkPath`` posts through the SDK client's own request machinery (``client.post``): its
  credentials, headers, retries and errors, over its httpx2 connection pool. Always available.
* ``AiohttpPath`` sends the same request over ``aiohttp`` (the ``fast`` extra). The SDK client stays
  the source of truth: the URL and headers are the ones the SDK builds for this endpoint
  (``_build_request``: key, organization/project, default and extra headers, query), built once per
  set of request options instead of once per request; the timeouts are the client's; the retry
  policy is the SDK's own (``max_retries``, ``_should_retry``, ``_calculate_retry_timeout``), and
  it covers what the SDK's covers: a refused or reset connection, a timeout, an error status the
  SDK retries and — for a request that is not streamed — a body that breaks or stalls before it is
  read whole. A ``user:password@`` in the base URL is sent as Basic auth, as the SDK's stack sends
  it. Only the HTTP stack differs: aiohttp keeps no per-request Python objects beyond the response
  and scans no pool, which is most of the CPU a request costs on the SDK path (measured in
  ``benchmarks/ISSUE-13.md``).

``aiohttp`` (which the provider extras bring) is chosen automatically when it is installed, the SDK
still has every private attribute this path reads (``internals``), and the client is one it can
stand in for: an SDK client of exactly the SDK's class (not Azure's or a subclass), over the SDK's
default HTTP client (a user's own ``http_client`` — proxies, mounts, a mock transport — is always used as is),
with a plain API key (no key provider, credentials, workload identity, custom auth or middleware,
which hook into the SDK's send) and no proxy (one from the environment included: the SDK's stack
goes through it). ``ADVISORCHAIN_HTTP=sdk`` in the environment keeps every request on the SDK path.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib
import importlib.util
import logging
import os
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import urlsplit, urlunsplit

from ..._urls import split_userinfo
from ...errors import ModelError
from ..clients import SDKS
from . import internals
from .failures import model_error

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "HTTP_ENV",
    "AiohttpPath",
    "HttpPath",
    "Reply",
    "SdkPath",
    "aiohttp_eligible",
    "http_path",
    "pool_of",
    "ssl_context",
]

HTTP_ENV = "ADVISORCHAIN_HTTP"
"""``sdk`` keeps every request on the SDK's own HTTP stack; unset or ``auto``: aiohttp when it can."""


class Reply(Protocol):
    """An open 2xx response: read it whole or in chunks, then ``aclose()`` it."""

    status: int
    headers: Mapping[str, str]

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

    async def send(self, body: bytes, sdk_options: Mapping[str, Any], *, stream: bool) -> Reply:
        """Send ``body``; a 2xx answer as a Reply — read whole already unless ``stream`` — or a
        ModelError."""

    async def aclose(self) -> None: ...


def http_path(
    client: Any, path: str, *, provider: str, sdk_module: str, security: Mapping[str, bool] | None
) -> HttpPath:
    """How requests of ``client`` (an SDK client of package ``sdk_module``) to ``path`` travel:
    aiohttp when it can stand in for the SDK's HTTP stack with the same configuration, else the
    SDK's own."""
    path_class = AiohttpPath if aiohttp_eligible(client, sdk_module) else SdkPath
    return path_class(client, path, provider=provider, sdk_module=sdk_module, security=security)


def _request_fields(sdk_options: Mapping[str, Any], security: Mapping[str, bool] | None) -> dict[str, Any]:
    """The SDK's request options (``FinalRequestOptions`` fields) for the adapter's SDK options."""
    fields: dict[str, Any] = {} if security is None else {"security": security}
    for key, name in (("extra_headers", "headers"), ("extra_query", "params"), ("timeout", "timeout")):
        if key in sdk_options:
            fields[name] = sdk_options[key]
    return fields


@dataclass(eq=False, repr=False)
class _Endpoint:
    """One endpoint of one SDK client (of the package ``sdk_module``): what both paths know of where
    a request goes. A path sets up what it needs besides in ``__post_init__``."""

    client: Any
    path: str
    _: KW_ONLY
    provider: str
    sdk_module: str
    security: Mapping[str, bool] | None
    """The SDK's security option for the endpoint (how it authenticates), when it has one."""
    url: str = field(init=False)
    """The endpoint's URL, as errors name it (redacted there)."""

    def __post_init__(self) -> None:
        self.url = _endpoint_url(str(self.client.base_url), self.path)


def _endpoint_url(base_url: str, path: str) -> str:
    """``path`` under ``base_url``, its query kept after it (``.../v1/chat/completions?x=1``)."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


# -- the SDK's own stack ---------------------------------------------------------------------------


class SdkPath(_Endpoint):
    """``client.post(path, body)`` with the SDK options (``extra_headers``, ``extra_query``,
    ``timeout``) as the SDK's request options. The body is JSON already serialized: the SDK sends
    bytes as they are."""

    def __post_init__(self) -> None:
        super().__post_init__()
        sdk = importlib.import_module(self.sdk_module)
        self._sdk_error: type[Exception] = getattr(sdk, SDKS[self.sdk_module].error_class)
        """The SDK's root error (``openai.OpenAIError``...): what a failed ``post`` raises."""

    async def send(self, body: bytes, sdk_options: Mapping[str, Any], *, stream: bool) -> Reply:
        import httpx2

        options = _request_fields(sdk_options, self.security)
        try:
            response = await self.client.post(
                self.path, cast_to=httpx2.Response, content=body, options=options, stream=stream
            )
        except (self._sdk_error, httpx2.TransportError) as exc:
            # (An error body that breaks while the SDK reads it escapes as httpx2's own error.)
            raise model_error(self.provider, url=self.url, exception=exc) from exc
        return _HttpxReply(response, self.provider, self.url)

    async def aclose(self) -> None:
        """Nothing of its own: the SDK client's pool is closed with the client."""


class _HttpxReply:
    def __init__(self, response: Any, provider: str, url: str) -> None:
        self._response = response
        self._provider = provider
        self._url = url
        self.status: int = response.status_code
        self.headers: Mapping[str, str] = response.headers

    async def read(self) -> bytes:
        import httpx2

        try:
            return cast(bytes, await self._response.aread())
        except httpx2.TransportError as exc:
            raise model_error(self._provider, url=self._url, exception=exc) from exc

    async def chunks(self) -> AsyncIterator[bytes]:
        import httpx2

        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx2.TransportError as exc:  # the connection broke (or stalled) mid-stream
            raise model_error(self._provider, url=self._url, exception=exc, mid_stream=True) from exc

    async def finish(self) -> None:
        """Nothing: the SDK's stack closes a response it was not read to its end, as its own
        streams do."""

    async def aclose(self) -> None:
        await self._response.aclose()


# -- aiohttp ---------------------------------------------------------------------------------------


def _uses_default_http_client(client: object, sdk_module: str) -> bool:
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


_SEND_HOOKS = ("_provider_runtime", "_workload_identity_auth", "_api_key_provider", "_token_cache")
"""Client attributes that, when set, take part in sending each request (keys minted per request)."""


def aiohttp_eligible(client: object, sdk_module: str) -> bool:
    """True when requests of ``client`` may be sent by ``AiohttpPath`` — built by the SDK once,
    sent without it — with exactly the SDK's configuration (see the module docstring)."""
    if not _uses_default_http_client(client, sdk_module):
        return False
    spec = SDKS.get(sdk_module)
    client_class = getattr(importlib.import_module(sdk_module), spec.client_class) if spec else None
    if client_class is None or type(client) is not client_class:
        return False
    if internals.missing(client, sdk_module):  # an SDK release moved what this path reads
        return False
    if any(getattr(client, hook, None) is not None for hook in _SEND_HOOKS):
        return False
    if getattr(client, "_middleware", None):
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


@dataclass(frozen=True, slots=True)
class _Sending:
    """A template as one session sends it: the headers given per request are only those that the
    session's own (its default headers, the first template's) do not already carry."""

    template: _Template
    session: aiohttp.ClientSession
    first_headers: dict[str, str]
    """The headers of a first attempt (``x-stainless-retry-count: 0``)."""


_TEMPLATES_KEPT = 32


class AiohttpPath(_Endpoint):
    """Requests of one SDK client over one aiohttp session, on the event loop that made it."""

    def __post_init__(self) -> None:
        import aiohttp

        super().__post_init__()
        sdk_module = self.sdk_module
        self._options_class = importlib.import_module(f"{sdk_module}._models").FinalRequestOptions
        # The SDK's own retry log lines, on its logger: what watches them (advisorchain chat's
        # "retrying" lines, a user's logging setup) sees the same on either path.
        self._log = logging.getLogger(f"{sdk_module}._base_client")
        pool = pool_of(self.client._client)
        connector = aiohttp.TCPConnector(
            limit=_pool_size(pool),
            limit_per_host=0,
            ssl=ssl_context(pool),
            keepalive_timeout=_keepalive(pool),
        )
        # No ``trust_env``: a proxy from the environment keeps the SDK path (see aiohttp_eligible),
        # and aiohttp would look for one, and for a .netrc, in a thread on every request.
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
        self._bare: aiohttp.ClientSession | None = None
        """A session with no default headers (same connections), for a template that lacks one
        of the session's (a header removed with ``extra_headers``)."""
        self._templates: dict[str, _Sending] = {}
        weakref.finalize(self, _close_abandoned, self._session)

    async def aclose(self) -> None:
        """Close the session's connections (at the end of its event loop)."""
        if self._bare is not None:
            await self._bare.close()
        await self._session.close()

    async def send(self, body: bytes, sdk_options: Mapping[str, Any], *, stream: bool) -> Reply:
        import aiohttp

        sending = self._templates.get(repr(sorted(sdk_options.items())) if sdk_options else "")
        if sending is None:
            sending = await self._sending(sdk_options)
        template, session, headers = sending.template, sending.session, sending.first_headers
        if template.idempotency_header:
            headers = {**headers, template.idempotency_header: self.client._idempotency_key()}
        most = template.max_retries
        for retries_taken in range(most + 1):
            sent = (
                headers if not retries_taken else {**headers, "x-stainless-retry-count": str(retries_taken)}
            )
            raw: bytes | None = None
            try:
                response = await session.post(template.url, data=body, headers=sent, timeout=template.timeout)
                if response.status < 400 and stream:
                    return _AiohttpReply(response, self.provider, self.url, template.read_timeout)
                if not stream:
                    # Read inside the attempt: a body that breaks or stalls is retried, as the SDK's
                    # stack (which reads a whole answer before it returns) retries it. (A streamed
                    # error body is read after the retries, as the SDK reads it.)
                    try:
                        raw = await response.read()
                    finally:
                        response.release()
                    if response.status < 400:
                        return _ReadReply(response.status, response.headers, raw)
            except (aiohttp.ClientError, TimeoutError) as exc:
                what = "a timeout exception" if isinstance(exc, TimeoutError) else "exception"
                self._log.debug("Encountered %s: %s", what, type(exc).__name__)
                if retries_taken < most:
                    await self._sleep(retries_taken, template, None)
                    continue
                raise model_error(
                    self.provider, url=self.url, exception=exc, read_timeout=template.read_timeout
                ) from exc
            self._log.debug("Encountered an HTTP status error: %i", response.status)
            if retries_taken < most and self.client._should_retry(_StatusView(response)):
                response.release()
                await self._sleep(retries_taken, template, response.headers)
                continue
            raise await self._status_error(response, template, raw)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _sleep(self, retries_taken: int, template: _Template, headers: Any) -> None:
        remaining = template.max_retries - retries_taken
        seconds = self.client._calculate_retry_timeout(remaining, template.options, headers)
        attempt, most = retries_taken + 1, template.max_retries
        self._log.info("Retrying request in %f seconds (retry %i of %s)", seconds, attempt, most)
        await asyncio.sleep(seconds)

    async def _status_error(
        self, response: aiohttp.ClientResponse, template: _Template, raw: bytes | None
    ) -> ModelError:
        """The provider's error for a 4xx/5xx answer, made from what the SDK path reads too."""
        import aiohttp

        if raw is None:
            try:
                raw = await _read(response)
            except (aiohttp.ClientError, TimeoutError) as exc:
                return model_error(
                    self.provider, url=self.url, exception=exc, read_timeout=template.read_timeout
                )
        return model_error(
            self.provider, url=self.url, status=response.status, headers=response.headers, content=raw
        )

    async def _sending(self, sdk_options: Mapping[str, Any]) -> _Sending:
        """The template for ``sdk_options`` (built once, by the SDK) and how it is sent."""
        template = await self._build_template(sdk_options)
        session, defaults = self._session, self._session.headers
        if not defaults:
            # The first template's headers become the session's: requests then give only what
            # differs (aiohttp merges what a request gives into its defaults one by one).
            defaults.update(template.headers)
        own = {k: v for k, v in template.headers.items() if defaults.get(k) != v}
        names = {k.lower() for k in template.headers}
        if any(k.lower() not in names for k in defaults):  # a header of the session's removed
            session, own = self._bare_session(), dict(template.headers)
        sending = _Sending(template, session, {**own, "x-stainless-retry-count": "0"})
        key = repr(sorted(sdk_options.items())) if sdk_options else ""
        if len(self._templates) >= _TEMPLATES_KEPT:
            self._templates.pop(next(iter(self._templates)))
        self._templates[key] = sending
        return sending

    def _bare_session(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._bare is None:
            self._bare = aiohttp.ClientSession(
                connector=self._session.connector, connector_owner=False, auto_decompress=True
            )
        return self._bare

    async def _build_template(self, sdk_options: Mapping[str, Any]) -> _Template:
        """The SDK's own request for this endpoint and these options, built once (its key,
        headers, query and validation), with an empty body."""
        import aiohttp

        client = self.client
        fields = _request_fields(sdk_options, self.security)
        options = self._options_class.construct(method="post", url=self.path, json_data={}, **fields)
        try:
            if getattr(client, "_platform", True) is None:
                base = importlib.import_module(f"{self.sdk_module}._base_client")
                client._platform = await asyncio.to_thread(base.get_platform)
            options = await client._prepare_options(options)
            request = client._build_request(options, retries_taken=0)
        except Exception as exc:
            message = f"{self.provider} request could not be built: {exc}"
            raise ModelError(message, provider=self.provider) from exc
        url, headers = _with_basic_auth(str(request.url), dict(request.headers.items()))
        timeout = _timeouts(request.extensions.get("timeout"))
        return _Template(
            url=url,
            headers={k: v for k, v in headers.items() if k.lower() not in _PER_REQUEST_HEADERS},
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


def _with_basic_auth(url: str, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
    """A URL carrying ``user:password@`` without it, and the headers with that userinfo as Basic
    auth in place of any other ``Authorization`` — what httpx2 (the SDK's stack) sends for such a
    URL. aiohttp refuses a URL with credentials beside an ``Authorization`` header."""
    bare, user, password = split_userinfo(url)
    if user is None:
        return url, headers
    token = base64.b64encode(f"{user}:{password or ''}".encode()).decode("ascii")
    kept = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    return bare, {**kept, "Authorization": f"Basic {token}"}


async def _read(response: aiohttp.ClientResponse) -> bytes:
    try:
        return await response.read()
    finally:
        response.release()


class _StatusView:
    """What the SDK's ``_should_retry`` reads of a response."""

    __slots__ = ("headers", "status_code")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.status_code = response.status
        self.headers = response.headers


class _ReadReply:
    """A 2xx answer read whole (a request that was not streamed)."""

    __slots__ = ("_content", "headers", "status")

    def __init__(self, status: int, headers: Mapping[str, str], content: bytes) -> None:
        self.status = status
        self.headers = headers
        self._content = content

    async def read(self) -> bytes:
        return self._content

    async def chunks(self) -> AsyncIterator[bytes]:
        yield self._content

    async def finish(self) -> None:
        """Nothing left to read."""

    async def aclose(self) -> None:
        """Nothing held open."""


class _AiohttpReply:
    def __init__(
        self, response: aiohttp.ClientResponse, provider: str, url: str, read_timeout: float | None
    ) -> None:
        self._response = response
        self._provider = provider
        self._url = url
        self._read_timeout = read_timeout
        self.status = response.status
        self.headers: Mapping[str, str] = response.headers

    def _error(self, exc: BaseException, *, mid_stream: bool) -> ModelError:
        return model_error(
            self._provider,
            url=self._url,
            exception=exc,
            mid_stream=mid_stream,
            read_timeout=self._read_timeout,
        )

    async def read(self) -> bytes:
        import aiohttp

        try:
            return await _read(self._response)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._error(exc, mid_stream=False) from exc

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
                async with asyncio.timeout(_FINISH_WAIT_S):  # no task of its own, as wait_for makes
                    await content.wait_eof()

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
