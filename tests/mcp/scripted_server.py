"""A small MCP server (the SDK's MCPServer) for the MCP tests: tools that fail, hang, crash, change the
tool list and carry annotations. Run: ``python scripted_server.py stdio`` or ``... http <port>``."""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, ToolAnnotations

server = MCPServer("scripted", version="1.0", log_level="WARNING")


@server.tool(description="Echo the text back.", annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    return text


@server.tool(description="Delete every record.", annotations=ToolAnnotations(destructive_hint=True, title="Wipe"))
def wipe() -> str:
    return "wiped"


@server.tool(description="Always fails.")
def fail(reason: str) -> str:
    raise ToolError(f"cannot do it: {reason}")


@server.tool(description="Sleeps, then answers.")
async def slow(seconds: float, label: str) -> str:
    await asyncio.sleep(seconds)
    return label


@server.tool(description="Exits the server process.")
def crash() -> str:
    os._exit(3)


@server.tool(description="Structured content only.")
def structured() -> CallToolResult:
    return CallToolResult(content=[], structured_content={"answer": 42})


@server.tool(description="Answers with a JSON-RPC error instead of a result.")
def protocol_error() -> str:
    raise MCPError(INVALID_PARAMS, "the server rejects this request")


@server.tool(description="Adds a tool of the given name and tells the client the tool list changed.")
async def add_tool(name: str, ctx: Context) -> str:
    def added() -> str:
        return f"{name} answers"

    server.add_tool(added, name=name, description="A tool added while the server runs.")
    await ctx.request_context.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(description="The value of an HTTP request header (over streamable HTTP).")
def header(name: str, ctx: Context) -> str:
    request = ctx.request_context.request
    headers = getattr(request, "headers", {})
    return str(headers.get(name, "<none>"))


@server.tool(description="An environment variable of the server process, and its working directory.")
def environment(name: str) -> str:
    return f"{os.environ.get(name, '<unset>')} in {os.getcwd()}"


@server.tool(description="Removes a tool without telling the client.")
def forget_tool(name: str) -> str:
    server.remove_tool(name)
    return f"forgot {name}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", port=int(sys.argv[2]), host="127.0.0.1")
    else:
        server.run("stdio")
