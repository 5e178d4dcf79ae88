"""The other direction: advisorchain tools, or a whole ChatClient as one tool, served as an MCP server
(stdio or streamable HTTP), so other agents can call an advisorchain agent."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import ipaddress
import json
import socket
from collections.abc import Sequence
from typing import Any, Literal

import mcp.types as mcp_types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError

from .. import __version__, _sync
from ..advisors import AdvisorParams, ToolCallingAdvisor
from ..client import ChatClient
from ..errors import ChainConfigurationError, ToolError
from ..messages import Media, ToolCall
from ..tools import (
    ToolCallback,
    ToolContext,
    ToolDefinition,
    tool_callbacks,
)
from ..tools.callbacks import FixedTool
from ..tools.schema import string_argument

__all__ = ["Transport", "agent_tool", "aserve", "mcp_server", "serve"]

Transport = Literal["stdio", "streamable-http"]

_AGENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "description": "The question or task for the agent."}},
    "required": ["question"],
    "additionalProperties": False,
}


class _AgentTool(FixedTool):
    """A ChatClient as a tool: the question (``{"question": str}``) goes to
    ``client.prompt(question)``, the agent's text answer back."""

    def __init__(self, client: ChatClient, name: str, description: str) -> None:
        super().__init__(ToolDefinition(name, description, _AGENT_SCHEMA))
        self._client = client

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        """Ask the agent the ``question`` and return its answer."""
        question = string_argument(arguments, self.definition.name, "question")
        answer = await self._client.prompt(question).acall().chat_client_response()
        response = answer.chat_response
        if response is not None and response.metadata.finish_reason == ToolCallingAdvisor.APPROVAL_REQUIRED:
            pending: Sequence[ToolCall] = answer.context.get(AdvisorParams.PENDING_TOOL_CALLS, ())
            raise ToolError(self._approval_text(pending))
        return (response.text if response is not None else None) or ""

    def _approval_text(self, pending: Sequence[ToolCall]) -> str:
        """What the MCP caller is told when the agent's run stopped for a person's approval."""
        calls = ", ".join(f"{c.id!r} (tool {c.name!r})" for c in pending) or "(none named)"
        text = (
            f"the agent {self._definition.name!r} did not answer: its tool call {calls} waits for a "
            "person's approval, which an MCP caller cannot give; nothing of that call ran."
        )
        conversation = _memory_conversation(self._client)
        if conversation is None:
            return text + (
                " Give the served agent's ToolCallingManager an approver, or a memory advisor so that "
                "the run can be resumed."
            )
        decisions = ", ".join(f"{c.id!r}: Approved()" for c in pending)
        return text + (
            f" The conversation {conversation!r} keeps the pending call: whoever runs the agent can "
            f"resume it with client.prompt().param(ChatMemory.CONVERSATION_ID, {conversation!r})"
            f".tool_approvals({{{decisions}}}).call() (or Denied('why') for a call)."
        )

    def __repr__(self) -> str:
        return f"agent_tool({self._definition.name!r})"


def _memory_conversation(client: ChatClient) -> str | None:
    """The conversation a memory advisor of ``client`` keeps by default, or None without memory."""
    for advisor in client.default_advisors:
        conversation = getattr(advisor, "conversation_id", None)
        if getattr(advisor, "chat_memory", None) is not None and isinstance(conversation, str):
            return conversation
    return None


def agent_tool(
    client: ChatClient,
    *,
    name: str = "ask_agent",
    description: str = "Ask an AI agent a question or give it a task; it answers in text.",
) -> ToolCallback:
    """A ChatClient as one tool taking ``{"question": "..."}``: each call is one request through the
    client's whole chain (its advisors, tools and memory); the tool's result is the answer text."""
    if not isinstance(client, ChatClient):
        raise TypeError(f"agent_tool needs a ChatClient, got {client!r}")
    return _AgentTool(client, name, description)


def mcp_server(*tools: object, name: str = "advisorchain", instructions: str | None = None) -> Server[Any]:
    """The SDK's low-level MCP ``Server`` serving ``tools`` (anything ``tool_callbacks`` takes; a
    ChatClient becomes ``agent_tool(client)``); run it on any transport the SDK offers."""
    callbacks = tool_callbacks(*(agent_tool(t) if isinstance(t, ChatClient) else t for t in tools))
    if not callbacks:
        raise ValueError("serve() needs at least one tool (or a ChatClient) to serve")
    for callback in callbacks:
        if callback.metadata.requires_approval:
            # An MCP client calls tools directly: nobody would be asked before this one runs.
            raise ValueError(
                f"tool {callback.definition.name!r} requires approval, which an MCP server cannot ask "
                "for; serve it without requires_approval, or serve an agent (a ChatClient) that uses it"
            )
    by_name = {cb.definition.name: cb for cb in callbacks}
    listing = mcp_types.ListToolsResult(tools=[_mcp_tool(cb.definition) for cb in callbacks])

    async def list_tools(
        ctx: Any, params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return listing

    async def call_tool(ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
        callback = by_name.get(params.name)
        if callback is None:
            available = ", ".join(repr(n) for n in by_name)
            raise MCPError(
                mcp_types.INVALID_PARAMS, f"Unknown tool: {params.name!r}; available tools: {available}"
            )
        return await _run(callback, params.arguments or {})

    return Server(
        name, version=__version__, instructions=instructions, on_list_tools=list_tools, on_call_tool=call_tool
    )


async def aserve(
    *tools: object,
    transport: Transport = "stdio",
    name: str = "advisorchain",
    instructions: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    auth_token: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Serve ``tools`` (``@tool`` functions, ToolCallbacks, objects with tools, or ChatClients) as an
    MCP server until cancelled: over this process's stdin/stdout, or over streamable HTTP at
    ``http://<host>:<port><path>``.

    Over HTTP, ``auth_token`` makes every request carry ``Authorization: Bearer <auth_token>`` (else
    it is answered 401 and nothing runs), and the Host and Origin headers of a request must name
    the host the server is bound to — its address, or for ``0.0.0.0``/``::`` this machine's names
    and addresses — or one of ``allowed_hosts`` (the name clients use behind a proxy, say), which
    keeps a web page from reaching the server through DNS rebinding."""
    server = mcp_server(*tools, name=name, instructions=instructions)
    token = _check_token(auth_token, transport)
    if transport == "stdio":
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    elif transport == "streamable-http":
        app: Any = server.streamable_http_app(
            streamable_http_path=path, host=host, transport_security=_host_checks(host, allowed_hosts)
        )
        if token is not None:
            app = _BearerAuth(app, token)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        await _serve_until_cancelled(uvicorn.Server(config), f"http://{host}:{port}{path}")
    else:
        raise ValueError(f"transport must be 'stdio' or 'streamable-http', got {transport!r}")


def serve(
    *tools: object,
    transport: Transport = "stdio",
    name: str = "advisorchain",
    instructions: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    auth_token: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Blocking form of ``aserve``: serve ``tools`` as an MCP server until interrupted.

    >>> serve(get_weather, ChatClient(model), transport="streamable-http", port=8000)
    """
    _sync.run(
        aserve(
            *tools,
            transport=transport,
            name=name,
            instructions=instructions,
            host=host,
            port=port,
            path=path,
            auth_token=auth_token,
            allowed_hosts=allowed_hosts,
        ),
        "serve(...)",
        "await aserve(...)",
    )


def _check_token(auth_token: str | None, transport: str) -> bytes | None:
    if auth_token is None:
        return None
    if not isinstance(auth_token, str) or not auth_token.strip():
        raise ValueError(
            f"auth_token must be a non-empty str (the bearer token clients send), got {auth_token!r}"
        )
    if transport == "stdio":
        raise ValueError(
            "auth_token applies to transport='streamable-http': a stdio server talks only to the "
            "process that started it"
        )
    return auth_token.encode()


class _BearerAuth:
    """An ASGI wrapper: an HTTP request without ``Authorization: Bearer <token>`` is answered 401."""

    def __init__(self, app: Any, token: bytes) -> None:
        self._app = app
        self._expected = b"Bearer " + token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"), b"")
            if not hmac.compare_digest(given, self._expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="mcp"'),
                        ],
                    }
                )
                body = b'{"error": "unauthorized: send Authorization: Bearer <the server\'s auth_token>"}'
                await send({"type": "http.response.body", "body": body})
                return
        await self._app(scope, receive, send)


_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_EVERY_INTERFACE = ("0.0.0.0", "::", "")


def _host_checks(host: str, allowed_hosts: Sequence[str]) -> TransportSecuritySettings:
    """Host/Origin checks for the names a server bound to ``host`` is reached by."""
    if isinstance(allowed_hosts, str) or not all(isinstance(h, str) and h for h in allowed_hosts):
        raise ValueError(f"allowed_hosts must be a sequence of host names, got {allowed_hosts!r}")
    names = [*_LOOPBACK_NAMES, *_bound_names(host), *allowed_hosts]
    hosts: list[str] = []
    origins: list[str] = []
    for name in dict.fromkeys(names):
        shown = f"[{name}]" if _is_ipv6(name) else name
        hosts += [shown, f"{shown}:*"]
        origins += [f"{scheme}://{shown}{port}" for scheme in ("http", "https") for port in ("", ":*")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def _bound_names(host: str) -> list[str]:
    if host not in _EVERY_INTERFACE:
        return [host]
    names = [socket.gethostname(), socket.getfqdn()]
    with contextlib.suppress(OSError):  # a host name that does not resolve: its name is all there is
        names += socket.gethostbyname_ex(socket.gethostname())[2]
    return names


def _is_ipv6(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).version == 6
    except ValueError:
        return False


async def _serve_until_cancelled(server: uvicorn.Server, url: str) -> None:
    """Run ``server``; when cancelled, let it shut down (close its socket and connections) first."""
    running = asyncio.ensure_future(_uvicorn(server))
    try:
        started = await asyncio.shield(running)
    except asyncio.CancelledError:
        server.should_exit = True
        await running
        raise
    if not started:
        raise ChainConfigurationError(
            f"could not serve MCP at {url}: the HTTP server did not start (its log above says why: "
            "a port in use, say); pick another host or port"
        )


async def _uvicorn(server: uvicorn.Server) -> bool:
    """False when uvicorn gave up at its start; it does so with sys.exit, which must not reach the loop."""
    try:
        await server.serve()
    except SystemExit:
        return False
    return True


def _mcp_tool(definition: ToolDefinition) -> mcp_types.Tool:
    return mcp_types.Tool(
        name=definition.name, description=definition.description, input_schema=dict(definition.input_schema)
    )


async def _run(callback: ToolCallback, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
    """One tool call; a failure is an ``isError`` result whose text says what went wrong."""
    try:
        text = await callback.call(json.dumps(arguments), ToolContext())
    except ToolError as exc:  # bad arguments, an agent waiting for approval: said as it is
        return _error(str(exc))
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return _error(f"tool {callback.definition.name!r} failed with {detail}")
    media: Sequence[Media] = getattr(text, "media", ())
    blocks: list[mcp_types.ContentBlock] = [mcp_types.TextContent(type="text", text=str(text))]
    return mcp_types.CallToolResult(content=[*blocks, *(_media_block(m, i) for i, m in enumerate(media))])


def _media_block(media: Media, index: int) -> mcp_types.ContentBlock:
    """What a tool returned besides text, as an MCP content block."""
    if media.data is None:
        return mcp_types.ResourceLink(
            type="resource_link",
            name=f"attachment {index + 1}",
            uri=media.url or "",
            mime_type=media.mime_type,
        )
    data = base64.b64encode(media.data).decode("ascii")
    if media.mime_type.startswith("image/"):
        return mcp_types.ImageContent(type="image", data=data, mime_type=media.mime_type)
    if media.mime_type.startswith("audio/"):
        return mcp_types.AudioContent(type="audio", data=data, mime_type=media.mime_type)
    resource = mcp_types.BlobResourceContents(
        uri=f"attachment:{index + 1}", mime_type=media.mime_type, blob=data
    )
    return mcp_types.EmbeddedResource(type="resource", resource=resource)


def _error(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)], is_error=True)
