"""The floor: a hand-written tool loop on the raw ``openai.AsyncOpenAI`` client.

The least any library can do for this agent run: send the conversation, run the requested tools
concurrently, append their results, repeat until the model answers with text.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from harness.scenarios import TOOL_DESCRIPTION, TOOL_NAME, TOOL_PARAMETERS, tool_result
from openai import AsyncOpenAI

PACKAGES = ("openai",)

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": TOOL_PARAMETERS},
    }
]


async def get_weather(city: str) -> str:
    """The tool: an async function, as in every implementation (no thread hop anywhere)."""
    return tool_result(city)


async def _execute(calls: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    results = await asyncio.gather(*(get_weather(**json.loads(args)) for _, _, args in calls))
    pairs = zip(calls, results, strict=True)
    return [{"role": "tool", "tool_call_id": cid, "content": r} for (cid, _, _), r in pairs]


def _assistant(content: str | None, calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    tool_calls = [{"id": c, "type": "function", "function": {"name": n, "arguments": a}} for c, n, a in calls]
    return {"role": "assistant", "content": content, "tool_calls": tool_calls}


class Impl:
    """The hand-written loop; one AsyncOpenAI client shared by every run."""

    def __init__(self, base_url: str, model: str, options: dict[str, Any]) -> None:
        self.client = AsyncOpenAI(base_url=base_url, api_key="bench")
        self.model = model

    async def run(self, prompt: str) -> str:
        """One agent run with blocking model calls; returns the final answer."""
        messages: list[Any] = [{"role": "user", "content": prompt}]
        while True:
            response = await self.client.chat.completions.create(
                model=self.model, messages=messages, tools=TOOLS
            )
            message = response.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            calls = [(tc.id, tc.function.name, tc.function.arguments) for tc in message.tool_calls]  # type: ignore[union-attr]
            messages.append(_assistant(message.content, calls))
            messages.extend(await _execute(calls))

    async def stream(self, prompt: str) -> str:
        """One streamed agent run; returns the joined text deltas."""
        messages: list[Any] = [{"role": "user", "content": prompt}]
        text: list[str] = []
        while True:
            stream = await self.client.chat.completions.create(
                model=self.model,
                messages=messages,
                tools=TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
            content: list[str] = []
            pending: dict[int, list[str]] = {}
            async for chunk in stream:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                if delta.content:
                    content.append(delta.content)
                for tc in delta.tool_calls or ():
                    slot = pending.setdefault(tc.index, ["", "", ""])
                    if tc.id:
                        slot[0] = tc.id
                    if tc.function is not None:
                        slot[1] += tc.function.name or ""
                        slot[2] += tc.function.arguments or ""
            text.extend(content)
            if not pending:
                return "".join(text)
            calls = [(c, n, a) for c, n, a in (pending[i] for i in sorted(pending))]
            messages.append(_assistant("".join(content) or None, calls))
            messages.extend(await _execute(calls))

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self.client.close()
