"""The tests' one scripted MCP server, run as its own process (by path: it imports nothing from the
tests, so it runs from any working directory with any environment; ``tests.support.mcp_helpers``
starts it). No module beside it may be named like a package it imports (``mcp``...): the folder of
a script run by path comes first on ``sys.path``::

    python tests/support/mcp_server.py KIND stdio
    python tests/support/mcp_server.py KIND http PORT

KIND is one of:

* ``scripted``: the MCP SDK's own MCPServer with tools that fail, hang, crash, change the tool list,
  carry annotations, answer with images, audio and resources, answer too much, and storm the client
  with notifications (for the client side, ``advisorchain.mcp``'s McpServerStdio/McpServerHttp);
* ``served``: advisorchain tools and a ChatClient served with ``advisorchain.mcp.serve``;
* ``weather``: one weather tool served with ``advisorchain.mcp.serve`` (for the CLI's ``--mcp``).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import sys
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from pydantic import Field

from advisorchain import AssistantMessage, ChatClient, Prompt, UserMessage, tool
from advisorchain.mcp import agent_tool, serve
from advisorchain.testing import FunctionChatModel

PATH = str(Path(__file__).resolve())
"""This script, to run with ``sys.executable``."""

# Media the scripted server returns: bytes that are not text, so that a base64 copy of them would
# show in a text if one leaked.
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(range(200))
PDF = b"%PDF-1.4\n" + bytes(range(100))

# -- scripted: the SDK's MCPServer -----------------------------------------------------------------

server = MCPServer("scripted", version="1.0", log_level="WARNING")


@server.tool(description="Echo the text back.", annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    return text


@server.tool(
    description="Delete every record.", annotations=ToolAnnotations(destructive_hint=True, title="Wipe")
)
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


@server.tool(
    description="The SHA-256 of a request header's or query parameter's value (over streamable HTTP), "
    "so that a secret can be checked without echoing it."
)
def digest(where: str, name: str, ctx: Context) -> str:
    request = ctx.request_context.request
    values = getattr(request, "headers" if where == "header" else "query_params", {})
    value = values.get(name)
    return "<none>" if value is None else hashlib.sha256(value.encode()).hexdigest()


@server.tool(description="An environment variable of the server process, and its working directory.")
def environment(name: str) -> str:
    return f"{os.environ.get(name, '<unset>')} in {os.getcwd()}"


@server.tool(description="Removes a tool without telling the client.")
def forget_tool(name: str) -> str:
    server.remove_tool(name)
    return f"forgot {name}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@server.tool(description="A chart: an image between two texts.")
def picture() -> CallToolResult:
    return CallToolResult(
        content=[
            TextContent(type="text", text="Here is the chart:"),
            ImageContent(type="image", data=_b64(PNG), mime_type="image/png"),
            TextContent(type="text", text="It shows growth."),
        ]
    )


@server.tool(description="A large image and nothing else.")
def image_only(kilobytes: int) -> CallToolResult:
    data = (PNG * (kilobytes * 1024 // len(PNG) + 1))[: kilobytes * 1024]
    return CallToolResult(content=[ImageContent(type="image", data=_b64(data), mime_type="image/png")])


@server.tool(description="An image mirrored in structuredContent, as server-filesystem's read_media_file.")
def media_file() -> CallToolResult:
    image = {"type": "image", "data": _b64(PNG), "mimeType": "image/png"}
    return CallToolResult(
        content=[ImageContent(type="image", data=_b64(PNG), mime_type="image/png")],
        structured_content={"content": [image]},
    )


@server.tool(description="Structured content holding an image of its own beside other fields.")
def structured_media() -> CallToolResult:
    return CallToolResult(
        content=[],
        structured_content={
            "name": "chart.png",
            "preview": {"type": "image", "data": _b64(PNG), "mimeType": "image/png"},
        },
    )


@server.tool(description="A short sound.")
def sound() -> CallToolResult:
    return CallToolResult(
        content=[
            TextContent(type="text", text="Listen:"),
            AudioContent(type="audio", data=_b64(WAV), mime_type="audio/wav"),
        ]
    )


@server.tool(description="Resources of every kind: a link, a text, a text blob, a PDF and a binary blob.")
def resources() -> CallToolResult:
    return CallToolResult(
        content=[
            ResourceLink(
                type="resource_link",
                name="Design notes",
                uri="file:///docs/design.md",
                mime_type="text/markdown",
            ),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="memo://1", mime_type="text/plain", text="The memo text."),
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="memo://2", mime_type="text/plain", blob=_b64(b"A text blob.")
                ),
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="file:///report.pdf", mime_type="application/pdf", blob=_b64(PDF)
                ),
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="file:///data.bin", mime_type="application/octet-stream", blob=_b64(bytes(300))
                ),
            ),
        ]
    )


@server.tool(description="An embedded text resource and nothing else.")
def resource_only() -> CallToolResult:
    return CallToolResult(
        content=[
            EmbeddedResource(
                type="resource", resource=TextResourceContents(uri="memo://only", text="Only this.")
            )
        ]
    )


@server.tool(description="Answers with this many bytes of text.")
def big(size: int) -> str:
    return "x" * size


@server.tool(description="Tells the client the tool list changed, this many times.")
async def storm(times: int, ctx: Context) -> str:
    for _ in range(times):
        await ctx.request_context.session.send_tool_list_changed()
    return f"sent {times}"


# -- served and weather: advisorchain.mcp.serve ----------------------------------------------------


@tool
def add(a: Annotated[int, Field(description="first addend")], b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


def answer(prompt: Prompt) -> AssistantMessage:
    question = next(m.text for m in reversed(prompt.instructions) if isinstance(m, UserMessage))
    return AssistantMessage(f"The agent heard: {question}")


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: sunny, 21C"


def main(kind: str, transport: str = "stdio", port: str | None = None) -> None:
    if kind == "scripted":
        if transport == "http":
            server.run("streamable-http", port=int(port or 0), host="127.0.0.1")
        else:
            server.run("stdio")
        return
    tools, name = (
        ([get_weather], "weather")
        if kind == "weather"
        else (
            [add, divide, agent_tool(ChatClient(FunctionChatModel(answer)), name="ask_agent")],
            "served-tools",
        )
    )
    if transport == "http":
        serve(*tools, name=name, transport="streamable-http", port=int(port or 0))
    else:
        serve(*tools, name=name)


if __name__ == "__main__":
    main(*sys.argv[1:])
