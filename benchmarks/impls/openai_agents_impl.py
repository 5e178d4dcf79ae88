"""OpenAI Agents SDK: an ``Agent`` on ``OpenAIChatCompletionsModel``, tracing off (it exports to a
remote service otherwise)."""

from __future__ import annotations

from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from harness.scenarios import tool_result
from openai import AsyncOpenAI
from openai.types.responses import ResponseTextDeltaEvent

PACKAGES = ("openai-agents", "openai")
MAX_TURNS = 200

set_tracing_disabled(True)


@function_tool
async def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return tool_result(city)


class Impl:
    """One Agent shared by every run."""

    def __init__(self, base_url: str, model: str, options: dict[str, Any]) -> None:
        self.client = AsyncOpenAI(base_url=base_url, api_key="bench")
        chat_model = OpenAIChatCompletionsModel(model, openai_client=self.client)
        self.agent: Agent[Any] = Agent(name="bench", model=chat_model, tools=[get_weather])

    async def run(self, prompt: str) -> str:
        """One agent run; the final answer."""
        result = await Runner.run(self.agent, prompt, max_turns=MAX_TURNS)
        return str(result.final_output)

    async def stream(self, prompt: str) -> str:
        """One streamed agent run; the raw text delta events, joined."""
        result = Runner.run_streamed(self.agent, prompt, max_turns=MAX_TURNS)
        parts: list[str] = []
        async for event in result.stream_events():
            if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
                parts.append(event.data.delta)
        return "".join(parts)

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self.client.close()
