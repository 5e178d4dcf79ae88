"""Cost of the tool loop per iteration, on an in-process model (no network, no tokens).

Run: ``.venv/bin/python benchmarks/bench_tool_loop.py`` — prints a markdown table per path (call,
stream): microseconds per request and per loop iteration, with 0, 1 and 5 pass-through advisors
inside the loop and 1, 5, 10 and 20 iterations (model calls). Figures are process CPU time, the
best of several repeats (as ``timeit`` reports), so other processes on a shared machine inflate them
least; the tool is async, so no worker thread hides time from the count.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from _timing import best_seconds_per_run

from advisorchain import (
    AssistantMessage,
    BaseAdvisor,
    CallAdvisorChain,
    ChatClientRequest,
    ChatOptions,
    ChatResponse,
    Prompt,
    StreamAdvisorChain,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.advisors.tool_calling import ToolCallingAdvisor
from advisorchain.testing import stream_chunks
from advisorchain.tools.function import tool

ADVISOR_COUNTS = (0, 1, 5)
ITERATIONS = (1, 5, 10, 20)


@tool
async def echo(text: str) -> str:
    """Return the text."""
    return text


class LoopModel:
    """Asks for one tool call per round until ``iterations - 1`` tool rounds are in the prompt."""

    model_name = "bench"

    def __init__(self, iterations: int) -> None:
        self.iterations = iterations

    def _reply(self, prompt: Prompt) -> ChatResponse:
        last = prompt.instructions[-1]
        rounds = int(last.responses[0].id.split("-")[1]) + 1 if isinstance(last, ToolResponseMessage) else 0
        if rounds + 1 < self.iterations:
            call = ToolCall(f"call-{rounds}", "echo", '{"text": "hi"}')
            return ChatResponse.of(AssistantMessage(None, (call,)), "tool_calls")
        return ChatResponse.of(AssistantMessage("done"), "stop")

    async def call(self, prompt: Prompt) -> ChatResponse:
        return self._reply(prompt)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for chunk in stream_chunks(self._reply(prompt)):
            yield chunk


class PassThrough(BaseAdvisor):
    """An advisor inside the loop that changes nothing."""

    order = ToolCallingAdvisor.DEFAULT_ORDER + 100


def _request() -> ChatClientRequest:
    return ChatClientRequest(Prompt([UserMessage("go")], ChatOptions(tool_callbacks=[echo])))


def _runner(path: str, advisors: int, iterations: int) -> Callable[[], Coroutine[Any, Any, None]]:
    chain_advisors = [ToolCallingAdvisor(), *(PassThrough() for _ in range(advisors))]
    model = LoopModel(iterations)
    request = _request()
    if path == "call":
        call_chain = CallAdvisorChain(chain_advisors, model)

        async def run_call() -> None:
            response = await call_chain.next_call(request)
            assert response.chat_response is not None and response.chat_response.text == "done"

        return run_call
    stream_chain = StreamAdvisorChain(chain_advisors, model)

    async def run_stream() -> None:
        async for _ in stream_chain.next_stream(request):
            pass

    return run_stream


async def _table(path: str) -> list[str]:
    lines = [
        f"### {path} path",
        "",
        "| inner advisors | iterations | µs per run | µs per iteration |",
        "|---:|---:|---:|---:|",
    ]
    for advisors in ADVISOR_COUNTS:
        for iterations in ITERATIONS:
            seconds = await best_seconds_per_run(_runner(path, advisors, iterations))
            micros = seconds * 1e6
            lines.append(f"| {advisors} | {iterations} | {micros:,.0f} | {micros / iterations:,.1f} |")
    return lines


async def main() -> None:
    for path in ("call", "stream"):
        print("\n".join(await _table(path)))
        print()


if __name__ == "__main__":
    asyncio.run(main())
