"""A small MCP server serving one weather tool with the project's own ``advisorchain.mcp.serve``
(stdio, or streamable HTTP on the port given as the first argument), for the ``--mcp`` tests."""

from __future__ import annotations

import sys

from advisorchain import tool
from advisorchain.mcp import serve


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: sunny, 21C"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        serve(get_weather, transport="streamable-http", name="weather", port=int(sys.argv[1]))
    else:
        serve(get_weather, name="weather")
