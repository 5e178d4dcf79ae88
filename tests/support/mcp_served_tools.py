"""advisorchain tools and a ChatClient served as an MCP server with ``advisorchain.mcp.serve``, for the
MCP tests. Run: ``python served_tools.py stdio`` or ``python served_tools.py streamable-http <port>``."""

from __future__ import annotations

import sys
from typing import Annotated

from pydantic import Field

from advisorchain import AssistantMessage, ChatClient, Prompt, UserMessage, tool
from advisorchain.mcp import agent_tool, serve
from advisorchain.testing import FunctionChatModel


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


if __name__ == "__main__":
    agent = agent_tool(ChatClient(FunctionChatModel(answer)), name="ask_agent")
    if sys.argv[1] == "stdio":
        serve(add, divide, agent, name="served-tools")
    else:
        serve(add, divide, agent, name="served-tools", transport="streamable-http", port=int(sys.argv[2]))
