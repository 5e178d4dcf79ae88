"""LangChain v1: ``create_agent`` with ``ChatOpenAI`` (langchain-openai)."""

from __future__ import annotations

from typing import Any

from harness.scenarios import tool_result
from langchain.agents import create_agent
from langchain_core.messages import AIMessageChunk
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

PACKAGES = ("langchain", "langchain-core", "langchain-openai", "langgraph", "openai")


@tool
async def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return tool_result(city)


class Impl:
    """One compiled agent graph shared by every run."""

    def __init__(self, base_url: str, model: str, options: dict[str, Any]) -> None:
        self.llm = ChatOpenAI(model=model, base_url=base_url, api_key="bench")  # type: ignore[arg-type]
        self.agent = create_agent(self.llm, tools=[get_weather])

    async def run(self, prompt: str) -> str:
        """One agent run; the final answer."""
        state = await self.agent.ainvoke(
            {"messages": [{"role": "user", "content": prompt}]}, {"recursion_limit": 200}
        )
        return str(state["messages"][-1].content)

    async def stream(self, prompt: str) -> str:
        """One streamed agent run (``stream_mode="messages"``); the model's text deltas, joined."""
        parts: list[str] = []
        async for chunk, _meta in self.agent.astream(
            {"messages": [{"role": "user", "content": prompt}]},
            {"recursion_limit": 200},
            stream_mode="messages",
        ):
            if isinstance(chunk, AIMessageChunk) and isinstance(chunk.content, str) and chunk.content:
                parts.append(chunk.content)
        return "".join(parts)

    async def aclose(self) -> None:
        """Nothing to close: langchain-openai caches and shares the SDK client process-wide."""
        # langchain-openai shares its SDK client between ChatOpenAI instances: leave it open.
