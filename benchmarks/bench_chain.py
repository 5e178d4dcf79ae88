"""Cost of the advisor chain on the scripted model: one chain hop, and a whole client call with
0 and 5 pass-through advisors (µs of CPU per call, fastest of 5 repeats). Run on demand:

    .venv/bin/python benchmarks/bench_chain.py
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from advisorchain import (
    AssistantMessage,
    BaseAdvisor,
    CallAdvisorChain,
    ChatClient,
    ChatClientRequest,
    ChatResponse,
    Prompt,
    UserMessage,
)

N = 20_000
REPEATS = 5


class PassThrough(BaseAdvisor):
    """Does nothing: what is left is the cost of the hop."""


class FixedModel:
    """Answers instantly with one prebuilt response, so only the library is measured."""

    model_name = "fixed"
    _response = ChatResponse.of(AssistantMessage("ok"), "stop")

    async def call(self, prompt: Prompt) -> ChatResponse:
        return self._response

    async def stream(self, prompt: Prompt):  # type: ignore[no-untyped-def]
        yield self._response


async def _per_call_us(fn: Callable[[], Awaitable[object]]) -> float:
    """CPU time per call of the fastest repeat: other processes on a shared machine only ever slow a
    repeat down, and process time does not count the time they run."""
    runs = []
    for _ in range(REPEATS):
        start = time.process_time()
        for _ in range(N):
            await fn()
        runs.append((time.process_time() - start) / N * 1e6)
    return min(runs)


async def main() -> None:
    model = FixedModel()
    request = ChatClientRequest(Prompt([UserMessage("hi")]))
    rows: list[tuple[str, float]] = []
    rows.append(("model.call (floor)", await _per_call_us(lambda: model.call(request.prompt))))
    for n in (0, 1, 5):
        chain = CallAdvisorChain([PassThrough() for _ in range(n)], model)
        rows.append(
            (f"chain.next_call, {n} advisors", await _per_call_us(lambda c=chain: c.next_call(request)))
        )
    for n in (0, 5):
        client = ChatClient(
            model, default_advisors=[PassThrough() for _ in range(n)], tool_calling_auto_register=False
        )
        rows.append(
            (
                f"client.acall().content(), {n} advisors",
                await _per_call_us(lambda c=client: c.prompt("hi").acall().content()),
            )
        )
    hop = (rows[3][1] - rows[1][1]) / 5
    print("| what | µs per call |\n|---|---:|")
    for name, us in rows:
        print(f"| {name} | {us:.2f} |")
    print(f"| one chain hop (5-advisor chain - 0-advisor chain) / 5 | {hop:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
