"""A small MCP server over the official ``mcp`` SDK (stdio, or streamable HTTP on the port given as
the first argument) serving the scripted server's weather tool, for the ``--mcp`` tests."""

from __future__ import annotations

import sys

from mcp.server.fastmcp import FastMCP

server = FastMCP("weather", host="127.0.0.1")


@server.tool()
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: sunny, 21C"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        server.settings.port = int(sys.argv[1])
        server.run("streamable-http")
    else:
        server.run()
