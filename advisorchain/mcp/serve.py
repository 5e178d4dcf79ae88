"""The other direction: advisorchain tools, or a whole ChatClient as one tool, served as an MCP server
(stdio or streamable HTTP), so other agents can call an advisorchain agent."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import mcp.types as mcp_types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from .. import _sync
from ..client import ChatClient
from ..errors import ChainConfigurationError
from ..tools import (
    InvalidToolArgumentsError,
    ToolCallback,
    ToolContext,
    ToolDefinition,
    ToolMetadata,
    tool_callbacks,
)

__all__ = ["Transport", "agent_tool", "aserve", "mcp_server", "serve"]

Transport = Literal["stdio", "streamable-http"]

_AGENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "description": "The question or task for the agent."}},
    "required": ["question"],
    "additionalProperties": False,
}


class _AgentTool:
    """A ChatClient as a tool: the question goes to ``client.prompt(question)``, the answer back."""

    def __init__(self, client: ChatClient, name: str, description: str) -> None:
        self._client = client
        self._definition = ToolDefinition(name, description, _AGENT_SCHEMA)
        self._metadata = ToolMetadata()

    @property
    def definition(self) -> ToolDefinition:
        """``{"question": str}`` in, the agent's text answer out."""
        return self._definition

    @property
    def metadata(self) -> ToolMetadata:
        """Default metadata."""
        return self._metadata

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        """Ask the agent the ``question`` and return its answer."""
        try:
            value = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            raise InvalidToolArgumentsError(
                f"the arguments of {self._definition.name!r} are not JSON: {exc}"
            ) from exc
        question = value.get("question") if isinstance(value, dict) else None
        if not isinstance(question, str) or not question.strip():
            raise InvalidToolArgumentsError(
                f"{self._definition.name!r} needs a non-empty string 'question', got {arguments!r}"
            )
        answer = await self._client.prompt(question).acall().content()
        return answer or ""

    def __repr__(self) -> str:
        return f"agent_tool({self._definition.name!r})"


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

    return Server(name, instructions=instructions, on_list_tools=list_tools, on_call_tool=call_tool)


async def aserve(
    *tools: object,
    transport: Transport = "stdio",
    name: str = "advisorchain",
    instructions: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
) -> None:
    """Serve ``tools`` (``@tool`` functions, ToolCallbacks, objects with tools, or ChatClients) as an
    MCP server until cancelled: over this process's stdin/stdout, or over streamable HTTP at
    ``http://<host>:<port><path>``."""
    server = mcp_server(*tools, name=name, instructions=instructions)
    if transport == "stdio":
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    elif transport == "streamable-http":
        app = server.streamable_http_app(streamable_http_path=path, host=host)
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
) -> None:
    """Blocking form of ``aserve``: serve ``tools`` as an MCP server until interrupted.

    >>> serve(get_weather, ChatClient(model), transport="streamable-http", port=8000)
    """
    _sync.run(
        aserve(
            *tools, transport=transport, name=name, instructions=instructions, host=host, port=port, path=path
        ),
        "serve(...)",
        "await aserve(...)",
    )


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
    except InvalidToolArgumentsError as exc:
        return _error(str(exc))
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return _error(f"tool {callback.definition.name!r} failed with {detail}")
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)])


def _error(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)], is_error=True)
