"""MCP (Model Context Protocol) for advisorchain, over the official ``mcp`` SDK (extra ``mcp``).

* ``McpServerStdio`` / ``McpServerHttp``: an MCP server's tools as tools of a request;
* ``serve(...)``: advisorchain tools, or a whole ChatClient, served as an MCP server.

>>> async with McpServerStdio("python", ["-m", "mcp_server_time"]) as time_server:
...     await ChatClient(model).prompt("Time in Tokyo?").tools(time_server).acall().content()
"""

from .serve import Transport, agent_tool, aserve, mcp_server, serve
from .servers import ApprovalRule, McpServerHttp, McpServerStdio, McpToolError

__all__ = [
    "ApprovalRule",
    "McpServerHttp",
    "McpServerStdio",
    "McpToolError",
    "Transport",
    "agent_tool",
    "aserve",
    "mcp_server",
    "serve",
]
