"""``create_app``: the page and its API as a Starlette app, for any ChatClient.

Every request — the page, its files, the API, a turn's event stream — must carry the app's token
(``?token=`` in the URL, or the ``X-Advisorchain-Token`` header the page sends); without it the
answer is 403 and nothing runs.

The API (JSON; errors are ``{"error": "one line"}`` with a 4xx status):

- ``GET /api/info``: the model, whether it is scripted, the tools.
- ``GET /api/conversations``; ``POST /api/conversations`` (``{"id": name}`` optional) opens one.
- ``GET`` / ``DELETE /api/conversations/{id}``: its turns, the tool calls it waits on / forget it.
- ``POST /api/conversations/{id}/turns`` with ``{"text": ...}`` or ``{"approvals": {call_id:
  {"approved": bool, "reason": str}}}``: the turn, as a ``text/event-stream`` of events named
  ``queued``, ``run``, ``text``, ``tool``, ``approval``, ``done``, ``error``, ``trace``. Closing it
  cancels the turn; memory stores nothing of a cancelled turn.
- ``GET /api/version``: a number that grows with every change (other tabs refresh on it).

Every answer, the page's static files included, carries ``Cache-Control: no-store`` and
``Referrer-Policy: no-referrer`` (their URLs carry the token). A body is at most 1 MB
(``Content-Length`` or chunked: 413 past it, and a chunked body is never read past it); JSON that
does not parse, or nests too deep to parse, is a 400. The app hides the token in what uvicorn logs.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from html import escape
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._serving import until_disconnect
from ..client import ChatClient
from ..memory import ChatMemory
from ._service import Refused, WebService, check_id, parse_turn
from ._views import error_line

__all__ = ["TOKEN_HEADER", "create_app"]

TOKEN_HEADER = "x-advisorchain-token"
_MAX_BODY = 1_000_000
_log = logging.getLogger("advisorchain.web")
_SECURITY_HEADERS = {
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "content-security-policy": "frame-ancestors 'none'",
}


def create_app(
    client: ChatClient, *, memory: ChatMemory | None = None, token: str | None = None
) -> Starlette:
    """The web page for ``client``: conversations (from ``memory``, else the memory the client's
    ``MessageChatMemoryAdvisor`` keeps, else a new in-memory one), streamed turns, tool calls as
    they run, approvals, and a trace tree per turn.

    ``token`` (a random one when None; read it back from ``app.state.token``) must come with every
    request. Serve the app with uvicorn, on loopback:

    >>> app = create_app(client)
    >>> print(f"http://127.0.0.1:8000/?token={app.state.token}")
    >>> uvicorn.run(app, host="127.0.0.1", port=8000)
    """
    if not isinstance(client, ChatClient):
        raise TypeError(f"create_app serves a ChatClient, got {client!r}")
    if token is not None and (
        not isinstance(token, str) or not token.isprintable() or token.split() != [token]
    ):
        raise ValueError(
            "token must be a non-empty string of printable characters without spaces (it travels in a URL "
            "and a header), or None for a random one"
        )
    secret = token if token is not None else secrets.token_urlsafe(24)
    service = WebService(client, memory)
    routes = _Routes(service, secret)
    static = resources.files("advisorchain.web") / "static"
    app = Starlette(
        routes=[
            Route("/", _answers(routes.page), methods=["GET"]),
            Route("/api/info", _answers(routes.info), methods=["GET"]),
            Route("/api/version", _answers(routes.version), methods=["GET"]),
            Route("/api/conversations", _answers(routes.listing), methods=["GET"]),
            Route("/api/conversations", _answers(routes.open), methods=["POST"]),
            Route("/api/conversations/{conversation_id:path}/turns", _answers(routes.turn), methods=["POST"]),
            Route(
                "/api/conversations/{conversation_id:path}", _answers(routes.conversation), methods=["GET"]
            ),
            Route("/api/conversations/{conversation_id:path}", _answers(routes.delete), methods=["DELETE"]),
            Mount("/static", StaticFiles(directory=str(static)), name="static"),
        ],
    )
    app.add_middleware(_TokenGuard, token=secret)
    _hide_token_in_logs(secret)
    app.state.token = secret
    app.state.service = service
    return app


class _TokenGuard:
    """Refuses (403) every request without the token, before anything else runs, and gives every
    answer (the static files' too) the security headers that keep the token out of caches and
    ``Referer`` headers."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if not self._allowed(scope):
            response = JSONResponse(
                {"error": "forbidden: open the URL advisorchain web printed (it carries the token)"},
                status_code=403,
                headers=_SECURITY_HEADERS,
            )
            await response(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or ())
                present = {name.lower() for name, _ in headers}
                headers.extend(
                    (name.encode(), value.encode())
                    for name, value in _SECURITY_HEADERS.items()
                    if name.encode() not in present
                )
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, send_with_headers)

    def _allowed(self, scope: Scope) -> bool:
        given = dict(scope.get("headers") or ()).get(TOKEN_HEADER.encode())
        if given is None:
            given = _query_token(scope.get("query_string", b""))
        return given is not None and hmac.compare_digest(given, self._token)


_TOKEN_IN_QUERY = re.compile(r"([?&]token=)[^&#\s\"]*")


class _HideToken(logging.Filter):
    """Replaces the token (and any ``token=`` query value) in a log record's message and arguments."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._secrets = {token, quote(token, safe="")}

    def _hide(self, value: object) -> object:
        if not isinstance(value, str):
            return value
        value = _TOKEN_IN_QUERY.sub(r"\1[hidden]", value)
        for secret in self._secrets:
            value = value.replace(secret, "[hidden]")
        return value

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._hide(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(self._hide(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: self._hide(v) for k, v in record.args.items()}
        return True


def _hide_token_in_logs(token: str, loggers: tuple[str, ...] = ("uvicorn.access", "uvicorn.error")) -> None:
    """Hide ``token`` in what ``loggers`` log (uvicorn's access log prints every URL, query string
    included). ``create_app`` does it for its token; once per token and logger."""
    for name in loggers:
        if (token, name) in _hidden_pairs:
            continue
        _hidden_pairs.add((token, name))
        logging.getLogger(name).addFilter(_HideToken(token))


_hidden_pairs: set[tuple[str, str]] = set()


def _query_token(query: bytes) -> bytes | None:
    values = parse_qs(query.decode("latin-1")).get("token")
    return values[0].encode() if values else None


Handler = Callable[[Request], Awaitable[Response]]


def _answers(handler: Handler) -> Handler:
    """A route whose refusals and failures are one line of JSON, never a traceback."""

    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except Refused as refused:
            return _json({"error": refused.message}, refused.status)
        except Exception as exc:
            _log.warning("%s %s failed: %s", request.method, request.url.path, error_line(exc))
            _log.debug("the failure's traceback", exc_info=True)
            return _json({"error": error_line(exc)}, 500)

    return answer


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers=_SECURITY_HEADERS)


async def _body(request: Request, *, optional: bool = False) -> Any:
    """The request's JSON body, read chunk by chunk and refused (413) as soon as it passes
    ``_MAX_BODY`` bytes, whether it comes with a ``Content-Length`` or chunked."""
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > _MAX_BODY:
        raise Refused(413, f"the body is {size} bytes; the page sends at most {_MAX_BODY}")
    chunks: list[bytes] = []
    read = 0
    async for chunk in request.stream():
        read += len(chunk)
        if read > _MAX_BODY:
            raise Refused(413, f"the body is over {_MAX_BODY} bytes; the page sends at most {_MAX_BODY}")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip() and optional:
        return {}
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refused(400, f"the body is not JSON ({error_line(exc)}); send a JSON object") from None
    except RecursionError:
        raise Refused(400, "the body's JSON nests too deep to read; send a flat JSON object") from None


class _Routes:
    def __init__(self, service: WebService, token: str) -> None:
        self.service = service
        self.token = token

    async def page(self, request: Request) -> Response:
        html = (resources.files("advisorchain.web") / "static" / "index.html").read_text(encoding="utf-8")
        html = html.replace("__TOKEN_QUERY__", escape(quote(self.token, safe=""))).replace(
            "__TOKEN__", escape(self.token)
        )
        return Response(html, media_type="text/html", headers=_SECURITY_HEADERS)

    async def info(self, request: Request) -> Response:
        return _json(model_info(self.service))

    async def version(self, request: Request) -> Response:
        return _json({"version": self.service.version})

    async def listing(self, request: Request) -> Response:
        return _json({"conversations": await self.service.listing()})

    async def open(self, request: Request) -> Response:
        body = await _body(request, optional=True)
        name = body.get("id") if isinstance(body, dict) else None
        if name is not None and not isinstance(name, str):
            raise Refused(400, '"id" must be a string: the name of the conversation')
        return _json({"id": self.service.open(name)}, 201)

    async def conversation(self, request: Request) -> Response:
        return _json(await self.service.conversation(request.path_params["conversation_id"]))

    async def delete(self, request: Request) -> Response:
        await self.service.delete(request.path_params["conversation_id"])
        return Response(status_code=204, headers=_SECURITY_HEADERS)

    async def turn(self, request: Request) -> Response:
        conversation_id = check_id(request.path_params["conversation_id"])
        turn = parse_turn(await _body(request))
        await self.service.check_turn(conversation_id, turn)  # refusals get their status before the stream
        return _EventStream(self.service.turn_events(conversation_id, turn))


def model_info(service: WebService) -> dict[str, Any]:
    """What the page says about the agent: its model (whether it is a scripted one, and the questions
    it suggests when it has ``examples``), its system text, its tools."""
    model = service.client.model
    provider = getattr(model, "provider", None)
    name = getattr(model, "model_name", None)
    scripted = provider == "advisorchain.testing"
    label = f"{provider}:{name}" if provider and name and not scripted else (name or type(model).__name__)
    tools = [
        {
            "name": t.definition.name,
            "description": t.definition.description,
            "requires_approval": t.metadata.requires_approval,
        }
        for t in service.tools().values()
    ]
    examples = getattr(model, "examples", ())
    return {
        "model": label,
        "scripted": scripted,
        "examples": [e for e in examples if isinstance(e, str)] if isinstance(examples, list | tuple) else [],
        "notice": (
            "A scripted model plays the LLM here: offline, no key, no real answers. "
            "Start advisorchain web --model provider:name (e.g. openai:gpt-4o-mini) for a real one."
            if scripted
            else None
        ),
        "system": service.client.default_system,
        "tools": tools,
    }


class _EventStream(Response):
    """A turn's events as ``text/event-stream``. A reader that goes away (a closed tab) is noticed
    at once, not at the next write: the events' iterator is closed, which cancels the turn."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[list[tuple[str, Any]]]) -> None:
        self._events = events
        self.status_code = 200
        self.background = None
        self.init_headers({**_SECURITY_HEADERS, "x-accel-buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await until_disconnect(receive, self._pump(send))

    async def _pump(self, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for batch in self._events:  # what is ready goes out in one write
                frames = "".join(f"event: {name}\ndata: {_dumps(data)}\n\n" for name, data in batch)
                await send({"type": "http.response.body", "body": frames.encode(), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the reader went away while we wrote
        finally:
            await self._events.aclose()  # type: ignore[attr-defined]


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
