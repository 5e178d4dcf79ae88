"""MCP servers as tool sources: ``McpServerStdio`` (a subprocess) and ``McpServerHttp`` (streamable
HTTP). Entered, a server lists its tools once and hands them out as ToolCallbacks; a
``notifications/tools/list_changed`` from the server refreshes the list."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shlex
import sys
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TextIO
from urllib.parse import urlsplit, urlunsplit

import httpx2
import mcp
import mcp.types as mcp_types
import pydantic
from mcp.client.session import MessageHandlerFnT
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from opentelemetry import trace

from .. import _sync
from .._checks import check_int
from .._tool_types import ToolText
from .._urls import redact_url, split_userinfo
from ..errors import ChainConfigurationError, ToolError
from ..tools import InvalidToolArgumentsError, ToolCallback, ToolContext, ToolDefinition, ToolMetadata
from ..tools.callbacks import FixedTool
from ._connection import Connection, ConnectionClosed
from ._results import result_size, tool_text

__all__ = ["ApprovalRule", "McpServerHttp", "McpServerStdio", "McpToolError"]

ApprovalRule = bool | Callable[[ToolDefinition, Mapping[str, Any]], bool]
"""``requires_approval``: for every tool, or decided per tool from its definition and annotations."""

# The span attribute naming the server a tool call went to.
SERVER_NAME_ATTRIBUTE = "mcp.server.name"

_PREFIX = re.compile(r"^[A-Za-z0-9_-]{1,63}$")
_SSE_READ_TIMEOUT = 300.0


DEFAULT_MAX_RESULT_BYTES = 1_000_000
"""The largest tool result taken from an MCP server unless told otherwise (``max_result_bytes``)."""


class McpToolError(ToolError):
    """A call of an MCP tool failed: the tool answered ``isError``, the server answered with a
    protocol error, did not answer within ``timeout``, sent a result over ``max_result_bytes``, or
    is no longer running.

    A ToolError: the ToolCallingManager hands its message to the model as it is
    (``Error: <message>``); with ``raise_on_error=True`` it is the ``__cause__`` of the
    ToolExecutionError.
    """


class _McpServer:
    """What the stdio and HTTP servers share: entering, the tool list, calls, approval."""

    def __init__(
        self,
        label: str,
        *,
        tool_prefix: str | None,
        requires_approval: ApprovalRule,
        timeout: float,
        max_result_bytes: int,
    ) -> None:
        if tool_prefix is not None and not (isinstance(tool_prefix, str) and _PREFIX.match(tool_prefix)):
            raise ValueError(
                f"tool_prefix must be 1 to 63 letters, digits, '_' or '-', got {tool_prefix!r}; "
                "the tools are named '<tool_prefix>_<tool name>'"
            )
        if not (isinstance(requires_approval, bool) or callable(requires_approval)):
            raise TypeError(
                f"requires_approval must be a bool or a function (definition, annotations) -> bool, "
                f"got {requires_approval!r}"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.max_result_bytes = check_int(max_result_bytes, "max_result_bytes", minimum=1)
        self.tool_prefix = tool_prefix
        self.requires_approval = requires_approval
        self.timeout = float(timeout)
        self._label = label  # the command line or the URL (credentials redacted), for messages
        self._connection: Connection | None = None
        self._closed = False
        self._tools: tuple[_McpTool, ...] = ()
        self._server_name: str | None = None

    # -- what the subclasses provide --------------------------------------------------------------

    def _open_client(self, on_message: MessageHandlerFnT) -> AbstractAsyncContextManager[mcp.Client]:
        raise TypeError(f"{type(self).__name__} does not say how to connect")  # pragma: no cover

    def _start_hint(self, error: BaseException) -> str:
        return ""

    # -- entering and leaving ---------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._connection is not None:
            raise ChainConfigurationError(
                f"MCP server {self!r} is already entered; leave it before entering again"
            )
        connection = Connection(self._client_with_info, self._set_tools, f"advisorchain-mcp {self._label}")
        try:
            async with asyncio.timeout(self.timeout):
                await connection.start()
        except BaseException as exc:
            await connection.close()
            if not isinstance(exc, Exception):
                raise
            raise self._start_error(exc) from exc
        self._connection = connection
        self._closed = False
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        connection, self._connection = self._connection, None
        self._closed = True
        self._tools = ()
        if connection is not None:
            await connection.close()

    def __enter__(self) -> Self:
        name = type(self).__name__
        return _sync.run(self.__aenter__(), f"with {name}(...)", f"async with {name}(...)")

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        name = type(self).__name__
        _sync.run(self.__aexit__(exc_type, exc, tb), f"with {name}(...)", f"async with {name}(...)")

    @asynccontextmanager
    async def _client_with_info(self, on_message: MessageHandlerFnT) -> AsyncIterator[mcp.Client]:
        async with self._open_client(on_message) as client:
            info = client.server_info
            self._server_name = info.name if info is not None and info.name else None
            yield client

    def _start_error(self, exc: Exception) -> ChainConfigurationError:
        leaf = _leaf(exc)
        if isinstance(leaf, TimeoutError) and leaf is exc:
            detail = f"it did not finish starting within timeout={self.timeout:g} seconds"
        else:
            detail = f"{type(leaf).__name__}: {_message(leaf)}"
        hint = self._start_hint(leaf)
        return ChainConfigurationError(f"MCP server {self!r} could not start: {detail}{hint}")

    # -- the tool source --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The server's own name once entered (its ``serverInfo``), else its command or URL."""
        return self._server_name or self._label

    def get_tool_callbacks(self) -> list[ToolCallback]:
        """The server's tools as ToolCallbacks (the list as last fetched); raises
        ChainConfigurationError when the server is not entered."""
        if self._connection is None:
            state = "was closed" if self._closed else "is not entered"
            raise ChainConfigurationError(
                f"MCP server {self!r} {state}: use its tools inside `async with server:` (or `with server:`)"
            )
        return list(self._tools)

    def _set_tools(self, tools: Sequence[mcp_types.Tool]) -> None:
        # A task-only tool answers only calls made as tasks, which a model's tool call is not.
        self._tools = tuple(self._tool(t) for t in tools if not _task_only(t))

    def _tool(self, tool: mcp_types.Tool) -> _McpTool:
        name = f"{self.tool_prefix}_{tool.name}" if self.tool_prefix else tool.name
        definition = ToolDefinition(
            name, tool.description or tool.title or tool.name, dict(tool.input_schema)
        )
        annotations: dict[str, Any] = (
            tool.annotations.model_dump(by_alias=True, exclude_none=True)
            if tool.annotations is not None
            else {}
        )
        rule = self.requires_approval
        approval = rule if isinstance(rule, bool) else rule(definition, dict(annotations))
        if not isinstance(approval, bool):
            raise TypeError(
                f"requires_approval of MCP server {self!r} returned {approval!r} for tool {name!r}; "
                "it must return True or False"
            )
        return _McpTool(self, tool.name, definition, ToolMetadata(requires_approval=approval), annotations)

    # -- calls ------------------------------------------------------------------------------------

    async def _call(self, remote_name: str, tool_name: str, arguments: str) -> str:
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute(SERVER_NAME_ATTRIBUTE, self.name)
        args = _arguments(arguments, tool_name)
        connection = self._connection
        if connection is None:
            raise McpToolError(
                f"MCP server {self.name!r} is closed, so tool {tool_name!r} cannot run; answer without it"
            )
        try:
            async with asyncio.timeout(self.timeout) as scope:
                result = await connection.submit(lambda client: client.call_tool(remote_name, args))
        except TimeoutError as exc:
            if not scope.expired():
                raise
            raise McpToolError(
                f"MCP server {self.name!r} did not answer tool {tool_name!r} within timeout={self.timeout:g} "
                "seconds; the call was cancelled. Try a smaller request or answer without it"
            ) from exc
        except ConnectionClosed as exc:
            raise McpToolError(self._gone_text(tool_name)) from exc
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise McpToolError(self._gone_text(tool_name)) from exc
            raise McpToolError(exc.message) from exc
        except pydantic.ValidationError as exc:
            raise McpToolError(
                f"MCP server {self.name!r} sent a malformed result for tool {tool_name!r}: {exc}"
            ) from exc
        return self._result(result, tool_name)

    def _result(self, result: mcp_types.CallToolResult, tool_name: str) -> ToolText:
        size = result_size(result)
        if size > self.max_result_bytes:
            raise McpToolError(
                f"the result of tool {tool_name!r} of MCP server {self.name!r} is {size:,} bytes, over "
                f"max_result_bytes={self.max_result_bytes:,}; ask for less (a narrower query, a page), "
                "or give the server a larger max_result_bytes"
            )
        text = tool_text(result)
        if result.is_error:
            raise McpToolError(
                str(text) or f"tool {tool_name!r} of MCP server {self.name!r} failed without a message"
            )
        return text

    def _gone_text(self, tool_name: str) -> str:
        return (
            f"MCP server {self.name!r} is no longer running (its connection closed) and cannot answer "
            f"tool {tool_name!r}; answer without it"
        )


class _McpTool(FixedTool):
    """One tool of an MCP server as a ToolCallback (its name prefixed when the server has a
    ``tool_prefix``; ``requires_approval`` as the server's rule decided it); calls go to the
    server's session."""

    __slots__ = ("_remote_name", "_server", "annotations")

    def __init__(
        self,
        server: _McpServer,
        remote_name: str,
        definition: ToolDefinition,
        metadata: ToolMetadata,
        annotations: Mapping[str, Any],
    ) -> None:
        super().__init__(definition, metadata)
        self._server = server
        self._remote_name = remote_name
        self.annotations = annotations

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        """Call the tool on its server with the model's JSON ``arguments``; the result's text, with
        its images and audio as media (a ``ToolText``)."""
        return await self._server._call(self._remote_name, self._definition.name, arguments)

    def __repr__(self) -> str:
        return f"<MCP tool {self._definition.name!r} of {self._server!r}>"


class McpServerStdio(_McpServer):
    """An MCP server run as a subprocess, spoken to over its stdin and stdout.

    The process gets a minimal environment (``HOME``, ``PATH``, ``USER``... as the SDK chooses) plus
    ``env``; pass the variables the server needs (an API token, say) there. ``timeout`` bounds the
    start and each tool call; ``max_result_bytes`` the size of a tool's result.

    >>> async with McpServerStdio("uvx", ["mcp-server-time"]) as time_server:
    ...     await client.prompt("What time is it in Tokyo?").tools(time_server).acall().content()
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        tool_prefix: str | None = None,
        requires_approval: ApprovalRule = False,
        timeout: float = 30.0,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        if not isinstance(command, str) or not command.strip():
            raise ValueError(f"command must be the program that starts the MCP server, got {command!r}")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise ValueError(f"args must be a sequence of strings (one per argument), got {args!r}")
        super().__init__(
            shlex.join([command, *args]),
            tool_prefix=tool_prefix,
            requires_approval=requires_approval,
            timeout=timeout,
            max_result_bytes=max_result_bytes,
        )
        self.command = command
        self.args = tuple(args)
        self.env = _string_map(env, "env", "variable names")
        self.cwd = cwd

    def __repr__(self) -> str:
        return f"McpServerStdio({self.command!r}, {list(self.args)!r})"

    def _open_client(self, on_message: MessageHandlerFnT) -> AbstractAsyncContextManager[mcp.Client]:
        params = mcp.StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=self.env,
            cwd=None if self.cwd is None else os.fspath(self.cwd),
        )
        # The SDK's default errlog is whatever sys.stderr was when it was first imported (a test
        # runner's or a redirect's stream, perhaps): the server's stderr goes to the real one now.
        transport = stdio_client(params, errlog=_server_stderr())
        return mcp.Client(transport, mode="legacy", message_handler=on_message, cache=None)

    def _start_hint(self, error: BaseException) -> str:
        if isinstance(error, FileNotFoundError):
            return f"; check that the command {self.command!r} is installed and on PATH"
        if isinstance(error, MCPError) and error.code == mcp_types.CONNECTION_CLOSED:
            return (
                "; the server process exited before the session started. "
                f"Run `{self._label}` in a shell to see why"
            )
        return ""


def _server_stderr() -> TextIO:
    """Where a stdio server's stderr goes: this process's stderr when it is a real file, else the
    interpreter's original one (a subprocess needs a file descriptor)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (OSError, ValueError, AttributeError):
            continue
    return open(os.devnull, "w")  # the server process keeps it for its lifetime


class McpServerHttp(_McpServer):
    """An MCP server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8000/mcp``),
    sending ``headers`` (an ``Authorization`` header, say) with every request. ``timeout`` bounds the
    connection, the start and each tool call; ``max_result_bytes`` the size of a tool's result.

    >>> async with McpServerHttp("http://127.0.0.1:8000/mcp", tool_prefix="docs") as docs:
    ...     await client.prompt("Find the install guide").tools(docs).acall().content()
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        tool_prefix: str | None = None,
        requires_approval: ApprovalRule = False,
        timeout: float = 30.0,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(
                f"url must be an http:// or https:// URL of a streamable-HTTP MCP endpoint, got {url!r}"
            )
        super().__init__(
            redact_url(url),
            tool_prefix=tool_prefix,
            requires_approval=requires_approval,
            timeout=timeout,
            max_result_bytes=max_result_bytes,
        )
        self.url = url
        self.headers = _string_map(headers, "headers", "header names")

    def __repr__(self) -> str:
        return f"McpServerHttp({self._label!r})"

    def _open_client(self, on_message: MessageHandlerFnT) -> AbstractAsyncContextManager[mcp.Client]:
        return mcp.Client(self._transport(), mode="legacy", message_handler=on_message, cache=None)

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        timeout = httpx2.Timeout(self.timeout, read=max(self.timeout, _SSE_READ_TIMEOUT))
        bare, secrets = _without_secrets(self.url)
        if secrets is None:
            http = httpx2.AsyncClient(headers=self.headers, timeout=timeout)
        else:  # the SDK and httpx get (and log) the bare URL; the secrets join below their logging
            transport = _UrlSecrets(httpx2.AsyncHTTPTransport(proxy=_env_proxy(bare)), bare, secrets)
            http = httpx2.AsyncClient(
                headers=self.headers, timeout=timeout, transport=transport, trust_env=False
            )
        async with http, streamable_http_client(bare, http_client=http) as streams:
            yield streams

    def _start_hint(self, error: BaseException) -> str:
        if isinstance(error, httpx2.ConnectError):
            return f"; is the server running and listening at {redact_url(self.url)!r}?"
        return ""


@dataclass(frozen=True)
class _Secrets:
    """What a URL carries that must not be logged: its raw query and its ``Authorization`` header."""

    query: bytes
    authorization: bytes | None


def _without_secrets(url: str) -> tuple[str, _Secrets | None]:
    """``url`` without its userinfo and query, and those two as a ``_Secrets`` (None when it has
    neither): the MCP SDK logs the URL it is given, and httpx logs every request's URL."""
    parts = urlsplit(url)
    if "@" not in parts.netloc and not parts.query:
        return url, None
    bare, user, password = split_userinfo(urlunsplit(parts._replace(query="", fragment="")))
    authorization = None
    if user is not None:
        pair = f"{user}:{password or ''}".encode()
        authorization = b"Basic " + base64.b64encode(pair)
    return bare, _Secrets(httpx2.URL(url).query, authorization)


def _env_proxy(url: str) -> str | None:
    """The proxy the environment (``HTTP_PROXY``, ``NO_PROXY``, ...) names for ``url``, as httpx
    would use it."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy:
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


class _UrlSecrets(httpx2.AsyncBaseTransport):
    """Adds the endpoint URL's query and Basic credentials to each request for the endpoint, below
    httpx's request logging, so no logger sees them; a request elsewhere goes as it is."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, endpoint: str, secrets: _Secrets) -> None:
        self._inner = inner
        self._endpoint = httpx2.URL(endpoint)
        self._secrets = secrets

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url, endpoint = request.url, self._endpoint
        if (url.scheme, url.host, url.port, url.path) == (
            endpoint.scheme,
            endpoint.host,
            endpoint.port,
            endpoint.path,
        ):
            query = self._secrets.query if not url.query else url.query + b"&" + self._secrets.query
            headers = request.headers.copy()
            if self._secrets.authorization is not None and "authorization" not in headers:
                headers["authorization"] = self._secrets.authorization.decode("ascii")
            request = httpx2.Request(
                request.method,
                url.copy_with(query=query or None),
                headers=headers,
                stream=request.stream,
                extensions=request.extensions,
            )
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _string_map(value: Mapping[str, str] | None, name: str, keys: str) -> dict[str, str] | None:
    """A copy of ``value`` (None stays None), refused unless it maps ``keys`` to strings."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{name} must map {keys} to string values, got {value!r}")
    return dict(value)


def _arguments(arguments: str, tool_name: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise InvalidToolArgumentsError(
            f"the arguments of tool {tool_name!r} are not valid JSON: {exc}"
        ) from exc
    if not isinstance(value, dict):
        raise InvalidToolArgumentsError(
            f"the arguments of tool {tool_name!r} must be a JSON object, got {arguments!r}"
        )
    return value


def _task_only(tool: mcp_types.Tool) -> bool:
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups from the SDK's task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _message(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return exc.message
    return str(exc) or type(exc).__name__
