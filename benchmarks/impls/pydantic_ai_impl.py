"""Pydantic AI: an ``Agent`` on ``OpenAIChatModel`` over an injected ``AsyncOpenAI`` client."""

from __future__ import annotations

from typing import Any

from harness.scenarios import tool_result
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

PACKAGES = ("pydantic-ai-slim", "openai")


async def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return tool_result(city)


class Impl:
    """One Agent shared by every run."""

    def __init__(self, base_url: str, model: str, options: dict[str, Any]) -> None:
        self.client = AsyncOpenAI(base_url=base_url, api_key="bench")
        chat_model = OpenAIChatModel(model, provider=OpenAIProvider(openai_client=self.client))
        self.agent = Agent(chat_model, tools=[get_weather])

    async def run(self, prompt: str) -> str:
        """One agent run; the final answer."""
        result = await self.agent.run(prompt)
        return result.output

    async def stream(self, prompt: str) -> str:
        """One streamed agent run; every text delta (no debouncing), joined."""
        async with self.agent.run_stream(prompt) as result:
            parts = [delta async for delta in result.stream_text(delta=True, debounce_by=None)]
        return "".join(parts)

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self.client.close()
