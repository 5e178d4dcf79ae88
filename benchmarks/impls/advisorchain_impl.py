"""advisorchain: a ``ChatClient`` on ``OpenAIChatModel`` over an injected ``AsyncOpenAI`` client; the
auto-registered ``ToolCallingAdvisor`` runs the loop. Option ``advisors=N`` adds N pass-through
advisors inside the loop (each runs once per model call); option ``budget`` — or
``ADVISORCHAIN_BENCH_BUDGET=1`` in the environment — gives the client a price for the model and
every usage limit (far from reached), so every call is priced and checked (§17); option
``http="sdk"`` keeps every request on the SDK's own httpx2 stack (``ADVISORCHAIN_HTTP=sdk``), else
the install's default path is taken — and checked to be the aiohttp path when the cell ends, so a
default install that lost its fast path fails the cell instead of measuring the wrong thing."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

from harness.scenarios import tool_result
from openai import AsyncOpenAI

from advisorchain import AssistantMessage, BaseAdvisor, ChatClient, Message, UserMessage
from advisorchain.advisors.tool_calling import ToolCallingAdvisor
from advisorchain.models.openai import OpenAIChatModel
from advisorchain.tools import tool

PACKAGES = ("advisorchain", "openai", "httpx2", "aiohttp", "orjson", "pydantic")


@tool
async def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return tool_result(city)


class PassThrough(BaseAdvisor):
    """An advisor that changes nothing, inside the tool loop: the cost of one hop."""

    order = ToolCallingAdvisor.DEFAULT_ORDER + 1


def _budget(model: str) -> dict[str, Any]:
    """A price for ``model`` and every usage limit, none of them reached by a benchmark run."""
    from advisorchain import ModelPrice, UsageLimits

    limits = UsageLimits(
        request_limit=10_000,
        input_tokens_limit=10**9,
        output_tokens_limit=10**9,
        total_tokens_limit=10**9,
        tool_calls_limit=10_000,
        cost_limit=Decimal(1_000),
    )
    return {"prices": {model: ModelPrice(Decimal("0.15"), Decimal("0.60"))}, "usage_limits": limits}


class Impl:
    """One ChatClient shared by every run; the tool given per request, as users write it."""

    def __init__(self, base_url: str, model: str, options: dict[str, Any]) -> None:
        # One worker process runs one implementation: the variable is this process's.
        self.http = str(options.get("http", "auto"))
        os.environ["ADVISORCHAIN_HTTP"] = self.http
        self.client = AsyncOpenAI(base_url=base_url, api_key="bench")
        advisors = [PassThrough() for _ in range(int(options.get("advisors", 0)))]
        budget = (
            _budget(model) if options.get("budget") or os.environ.get("ADVISORCHAIN_BENCH_BUDGET") else {}
        )
        self.model = OpenAIChatModel(model, client=self.client)
        self.chat = ChatClient(self.model, default_advisors=advisors, **budget)

    async def run(self, prompt: str) -> str:
        """One agent run; the final answer."""
        return await self.chat.prompt(prompt).tools(get_weather).acall().content() or ""

    async def stream(self, prompt: str) -> str:
        """One streamed agent run; the text deltas, joined."""
        return "".join([t async for t in self.chat.prompt(prompt).tools(get_weather).astream().content()])

    def deltas(self, prompt: str) -> AsyncIterator[str]:
        """One streamed agent run; the text deltas as they arrive (the streaming probe)."""
        return self.chat.prompt(prompt).tools(get_weather).astream().content()

    def prepare_history(self, history: list[dict[str, str]]) -> list[Message]:
        """Wire dicts (``role``, ``content``) as the messages a user would hold (a memory's)."""
        return [
            UserMessage(m["content"]) if m["role"] == "user" else AssistantMessage(m["content"])
            for m in history
        ]

    async def run_with_history(self, prompt: str, history: list[Message]) -> str:
        """One agent run after ``history`` (the history probe); the final answer."""
        spec = self.chat.prompt().messages(history).user(prompt).tools(get_weather)
        return await spec.acall().content() or ""

    async def aclose(self) -> None:
        """Close the HTTP connection pool, once the requests were checked to have taken the path
        this implementation stands for."""
        path = type(await self.model._clients.current_companion()).__name__
        await self.client.close()
        expected = "SdkPath" if self.http == "sdk" else "AiohttpPath"
        if path != expected:
            raise RuntimeError(
                f"advisorchain's requests took {path}, not {expected} (ADVISORCHAIN_HTTP={self.http})"
            )
