"""Streaming through the tool loop: the preamble of each round streams live; tool calls never reach you.

Run: python examples/streaming.py
"""

import asyncio

from advisorchain import AssistantMessage, ChatClient, ToolCall, tool
from advisorchain.testing import ScriptedChatModel


@tool
async def get_time(city: str) -> str:
    """The local time in a city."""
    return "14:05"


async def main() -> None:
    model = ScriptedChatModel(
        [
            AssistantMessage("Let me check the clock. ", [ToolCall("t", "get_time", '{"city": "Oslo"}')]),
            "It is 14:05.",
        ]
    )
    async for delta in ChatClient(model).prompt("Time in Oslo?").tools(get_time).astream().content():
        print(delta, end="", flush=True)
    print()


asyncio.run(main())
