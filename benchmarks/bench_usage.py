"""What usage limits and pricing cost per model call, on an in-process model (no network).

Run: ``.venv/bin/python benchmarks/bench_usage.py`` — prints, per path (call, stream) and loop size,
the microseconds per model call of a ChatClient tool loop three ways: ``plain`` (no limits, no
prices: what every request pays for its run totals), ``priced`` (``prices=`` a ModelPrice: each
answer repriced at the model link) and ``budget`` (prices and every limit set: the checks before
and after each call, the prompt estimate, ``max_tokens`` lowered, the tool-call check), and the
extra µs per call of the last two over ``plain``; then the price lookup itself (genai-prices, once
per model) against the cached price. Figures are process CPU time, best of several repeats, as in
``bench_tool_loop.py``. On a checkout without ``advisorchain.usage`` only ``plain`` runs (the
baseline of a before/after comparison).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from decimal import Decimal
from typing import Any

from _timing import best_seconds_per_run

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatResponse,
    Prompt,
    ToolCall,
    ToolResponseMessage,
    Usage,
)
from advisorchain.testing import stream_chunks
from advisorchain.tools.function import tool

ITERATIONS = (1, 5, 20)


@tool
async def echo(text: str) -> str:
    """Return the text."""
    return text


class LoopModel:
    """Asks for one tool call per round until ``iterations - 1`` rounds are in the prompt; every
    answer reports usage, as a provider's does."""

    model_name = "bench"

    def __init__(self, iterations: int) -> None:
        self.iterations = iterations

    def _reply(self, prompt: Prompt) -> ChatResponse:
        last = prompt.instructions[-1]
        rounds = int(last.responses[0].id.split("-")[1]) + 1 if isinstance(last, ToolResponseMessage) else 0
        usage = Usage(100 + 20 * rounds, 10)
        if rounds + 1 < self.iterations:
            call = ToolCall(f"call-{rounds}", "echo", '{"text": "hi"}')
            return ChatResponse.of(AssistantMessage(None, (call,)), "tool_calls", usage=usage)
        return ChatResponse.of(AssistantMessage("done"), "stop", usage=usage)

    async def call(self, prompt: Prompt) -> ChatResponse:
        return self._reply(prompt)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for chunk in stream_chunks(self._reply(prompt)):
            yield chunk


def _configs() -> dict[str, dict[str, Any]]:
    try:
        from advisorchain import ModelPrice, UsageLimits
    except ImportError:  # a checkout from before §17: the baseline only
        return {"plain": {}}
    price = {"bench": ModelPrice(Decimal("0.15"), Decimal("0.60"))}
    limits = UsageLimits(
        request_limit=1_000,
        input_tokens_limit=10**9,
        output_tokens_limit=10**9,
        total_tokens_limit=10**9,
        tool_calls_limit=1_000,
        cost_limit=Decimal(1_000),
    )
    return {"plain": {}, "priced": {"prices": price}, "budget": {"prices": price, "usage_limits": limits}}


def _runner(path: str, iterations: int, settings: dict[str, Any]) -> Callable[[], Coroutine[Any, Any, None]]:
    client = ChatClient(LoopModel(iterations), default_tools=[echo], **settings)

    async def run_call() -> None:
        assert await client.prompt("go").acall().content() == "done"

    async def run_stream() -> None:
        async for _ in client.prompt("go").astream().chat_client_responses():
            pass

    return run_call if path == "call" else run_stream


async def _table(path: str) -> list[str]:
    configs = _configs()
    names = list(configs)
    header = " | ".join(f"µs per call, {n}" for n in names)
    extra = " | ".join(f"+µs per call, {n}" for n in names[1:])
    lines = [f"### {path} path", "", f"| model calls | {header} |" + (f" {extra} |" if extra else "")]
    lines.append("|---:|" + "---:|" * (len(names) + len(names) - 1))
    for iterations in ITERATIONS:
        per_call = {
            name: await best_seconds_per_run(_runner(path, iterations, settings)) * 1e6 / iterations
            for name, settings in configs.items()
        }
        cells = " | ".join(f"{per_call[n]:,.1f}" for n in names)
        extras = " | ".join(f"{per_call[n] - per_call['plain']:+.1f}" for n in names[1:])
        lines.append(f"| {iterations} | {cells} |" + (f" {extras} |" if extras else ""))
    return lines


def _lookups() -> list[str]:
    try:
        from advisorchain.usage import Usage as PricedUsage
        from advisorchain.usage import _look_up, price_of
    except ImportError:
        return []
    usage = PricedUsage(1_000, 100, cache_read_tokens=400)
    n = 200
    start = time.perf_counter()
    for _ in range(n):
        _look_up("openai", "gpt-4o-mini")
    looked_up = (time.perf_counter() - start) / n * 1e6
    price_of(usage, "openai", "gpt-4o-mini")
    n = 20_000
    start = time.perf_counter()
    for _ in range(n):
        price_of(usage, "openai", "gpt-4o-mini")
    cached = (time.perf_counter() - start) / n * 1e6
    return [
        "### pricing one answer",
        "",
        "| genai-prices lookup (once per model) | cached price, per answer |",
        "|---:|---:|",
        f"| {looked_up:,.1f} µs | {cached:,.2f} µs |",
    ]


async def main() -> None:
    for path in ("call", "stream"):
        print("\n".join(await _table(path)))
        print()
    print("\n".join(_lookups()))


if __name__ == "__main__":
    asyncio.run(main())
