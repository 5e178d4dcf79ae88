"""What the three apps share at the HTTP edge: the bearer token, the Host/Origin checks, the body
limit, a token in a query string refused, and a run cancelled when its client goes away.

Every refusal is answered by the app's own error form (``Refusal`` → a protocol-shaped response),
before anything runs. Nothing here logs a request's URL or headers.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
from collections.abc import AsyncIterator, Callable
from urllib.parse import parse_qsl, urlsplit

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._serving import until_disconnect
from .._streams import closing, ready_batches
from ..errors import AdvisorChainError

__all__ = [
    "MAX_BODY_BYTES",
    "EventStream",
    "Guard",
    "Refusal",
    "check_token",
    "error_line",
    "until_disconnect",
]

MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest request body the apps read (8 MiB); a larger one is answered 413 unread."""

_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_TOKEN_NAMES = frozenset(
    {"token", "access_token", "api_key", "apikey", "key", "auth", "authorization", "bearer"}
)


class Refusal(Exception):
    """A request refused before anything ran: its HTTP status, one line saying why, and the
    offending field (``param``) when there is one. ``code`` is the protocol's error code word."""

    def __init__(
        self, status: int, message: str, code: str = "invalid_request_error", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param


ErrorForm = Callable[[Refusal], Response]
"""How an app answers a refusal: its protocol's error body and the refusal's status."""


def check_token(token: str | None) -> bytes | None:
    """The bearer token as bytes, after checking it is printable text without spaces."""
    if token is None:
        return None
    if not isinstance(token, str) or not token or not token.isprintable() or token.split() != [token]:
        raise ValueError(
            "token must be a non-empty string of printable characters without spaces (clients send it "
            "as 'Authorization: Bearer <token>'), or None"
        )
    return token.encode()


def error_line(exc: BaseException) -> str:
    """``exc`` as one line for a client: the library's errors say what happened; any other error
    shows its type and first line only (never a traceback), cut to 300 characters."""
    lines = str(exc).strip().splitlines()
    text = " ".join(lines[0].split()) if lines else ""
    if not isinstance(exc, AdvisorChainError):
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


class Guard:
    """An ASGI wrapper in front of an app: refuses a token in the query string (400), a Host or
    Origin that is not one of the bound hosts (403), a missing or wrong bearer token (401) unless
    the path is ``open_paths``, and a body over ``MAX_BODY_BYTES`` (413); the body is read here, so
    the app reads it from memory and can then wait for the client's disconnect."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        errors: ErrorForm,
        open_paths: frozenset[str] = frozenset(),
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        self._app = app
        self._token = check_token(token)
        self._errors = errors
        self._open = open_paths
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        try:
            self._check(scope)
            body = await self._body(scope, receive)
        except Refusal as refusal:
            await self._errors(refusal)(scope, receive, send)
            return
        await self._app(scope, _replay(body, receive), send)

    def _check(self, scope: Scope) -> None:
        headers = _headers(scope)
        self._check_query(scope.get("query_string", b""))
        allowed = bound_hosts(scope)
        host = headers.get("host")
        if host is not None and host.lower() not in allowed:
            raise Refusal(403, f"the Host {host!r} is not a host this server is bound to", "forbidden")
        origin = headers.get("origin")
        if origin is not None and _origin_host(origin) not in allowed:
            raise Refusal(403, f"requests from the origin {origin!r} are not allowed", "forbidden")
        if self._token is None or scope.get("path", "") in self._open:
            return
        given = headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self._token):
            raise Refusal(
                401, "missing or wrong bearer token: send 'Authorization: Bearer <token>'", "invalid_api_key"
            )

    def _check_query(self, query: bytes) -> None:
        if not query:
            return
        raw = query.decode("latin-1")
        names = {name.lower() for name, _ in parse_qsl(raw, keep_blank_values=True)}
        if names & _TOKEN_NAMES or (self._token is not None and self._token.decode() in raw):
            raise Refusal(
                400,
                "a token in the URL is refused (URLs end up in logs): send it as 'Authorization: Bearer "
                "<token>'",
                "invalid_request_error",
            )

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        if scope.get("method", "GET") in ("GET", "HEAD", "OPTIONS", "DELETE"):
            return b""
        length = _headers(scope).get("content-length")
        if length is not None and length.isdigit() and int(length) > self._max_body:
            raise Refusal(413, self._too_large(int(length)), "request_too_large")
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max_body:
                raise Refusal(413, self._too_large(size), "request_too_large")
            parts.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(parts)

    def _too_large(self, size: int) -> str:
        return f"the body is {size} bytes; this server reads at most {self._max_body}"


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}


def bound_hosts(scope: Scope) -> frozenset[str]:
    """The Host values a request may carry: the server's address with and without its port, and
    for a loopback address the loopback names too (API.md §20, "Bound hosts")."""
    server = scope.get("server")
    if not server:
        return frozenset()
    host, port = server[0], server[1]
    names = [_shown(host)]
    if _is_loopback(host):
        names += list(_LOOPBACK)
    allowed = set(names)
    if port is not None:
        allowed |= {f"{name}:{port}" for name in names}
    return frozenset(n.lower() for n in allowed)


def _shown(host: str) -> str:
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def _origin_host(origin: str) -> str:
    try:
        parts = urlsplit(origin)
    except ValueError:
        return ""
    return parts.netloc.lower() if parts.scheme in ("http", "https") else ""


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives ``body`` once, then the client's own messages (its disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class EventStream(Response):
    """A ``text/event-stream`` answer fed by ``frames`` (already encoded). A client that goes away is
    noticed at once, not at the next write: the frames' iterator is closed, which cancels the run."""

    media_type = "text/event-stream"

    def __init__(self, frames: AsyncIterator[bytes]) -> None:
        self._frames = frames
        self.status_code = 200
        self.background = None
        self.init_headers({"cache-control": "no-store", "x-accel-buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await until_disconnect(receive, self._pump(send))

    async def _pump(self, send: Send) -> None:
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        producer = asyncio.ensure_future(_produce(self._frames, queue))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async with closing(ready_batches(queue)) as batches:
                async for parts in batches:  # what is ready goes out in one write
                    await send({"type": "http.response.body", "body": b"".join(parts), "more_body": True})
            failure = producer.exception()
            if failure is not None:
                raise failure
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away while we wrote
        finally:
            producer.cancel()
            await asyncio.wait({producer})
            await self._frames.aclose()  # type: ignore[attr-defined]


async def _produce(frames: AsyncIterator[bytes], queue: asyncio.Queue[bytes | None]) -> None:
    try:
        async for frame in frames:
            queue.put_nowait(frame)
    finally:
        queue.put_nowait(None)
