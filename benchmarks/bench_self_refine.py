"""The SelfRefineEvaluationAdvisor's own cost per attempt, against a bare sub-chain call (the model
link alone, on an instant model), in one run: µs of CPU per call (fastest of 5 repeats) and the
ratio to the bare call. Run on demand:

    .venv/bin/python benchmarks/bench_self_refine.py

Rows:
- the bare sub-chain call (the floor), call and stream;
- the advisor with an async evaluator that passes at once (one attempt) and one that rejects twice
  (three attempts; the overhead is per attempt: (advisor run - attempts x floor) / attempts);
- the same with a plain (sync) evaluator, which runs in a worker thread;
- a whole client call with and without the advisor (one passing attempt), for scale.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from advisorchain import (
    AssistantMessage,
    CallAdvisorChain,
    ChatClient,
    ChatClientRequest,
    ChatResponse,
    EvaluationRequest,
    EvaluationResult,
    Prompt,
    SelfRefineEvaluationAdvisor,
    StreamAdvisorChain,
    Usage,
    UserMessage,
)
from advisorchain._streams import collect

REPEATS = 5
PASS = EvaluationResult(True, score=4.0)
FAIL = EvaluationResult(False, score=1.0, feedback="Be more specific.")


class FixedModel:
    """Answers instantly with one prebuilt response (three chunks when streamed)."""

    model_name = "fixed"
    _response = ChatResponse.of(AssistantMessage("Paris."), "stop", usage=Usage(10, 2))
    _chunks = (
        ChatResponse.of(AssistantMessage("Par")),
        ChatResponse.of(AssistantMessage("is.")),
        ChatResponse.of(AssistantMessage(None), "stop", usage=Usage(10, 2)),
    )

    async def call(self, prompt: Prompt) -> ChatResponse:
        return self._response

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for chunk in self._chunks:
            yield chunk


class AsyncJudge:
    """Rejects the first ``rejections`` answers of each run, then passes."""

    def __init__(self, rejections: int) -> None:
        self.rejections, self.seen = rejections, 0

    async def evaluate(self, request: EvaluationRequest) -> EvaluationResult:
        self.seen += 1
        if self.seen > self.rejections:
            self.seen = 0
            return PASS
        return FAIL


class SyncJudge(AsyncJudge):
    def evaluate(self, request: EvaluationRequest) -> EvaluationResult:  # type: ignore[override]
        self.seen += 1
        if self.seen > self.rejections:
            self.seen = 0
            return PASS
        return FAIL


async def _per_call_us(fn: Callable[[], Awaitable[object]], n: int) -> float:
    """CPU time per call of the fastest repeat (other processes only ever slow a repeat down)."""
    runs = []
    for _ in range(REPEATS):
        start = time.process_time()
        for _ in range(n):
            await fn()
        runs.append((time.process_time() - start) / n * 1e6)
    return min(runs)


def _call(
    advisors: list[object], model: FixedModel, request: ChatClientRequest
) -> Callable[[], Awaitable[object]]:
    chain = CallAdvisorChain(advisors, model)  # type: ignore[arg-type]
    return lambda: chain.next_call(request)


def _stream(
    advisors: list[object], model: FixedModel, request: ChatClientRequest
) -> Callable[[], Awaitable[object]]:
    chain = StreamAdvisorChain(advisors, model)  # type: ignore[arg-type]
    return lambda: collect(chain.next_stream(request))


async def main() -> None:
    model = FixedModel()
    request = ChatClientRequest(Prompt([UserMessage("What is the capital of France?")]))
    floors = {
        "call": await _per_call_us(_call([], model, request), 20_000),
        "stream": await _per_call_us(_stream([], model, request), 20_000),
    }
    rows: list[tuple[str, str, int, float]] = []
    for path, make in (("call", _call), ("stream", _stream)):
        for kind, judge_type, n in (("async", AsyncJudge, 20_000), ("sync", SyncJudge, 2_000)):
            for attempts in (1, 3):
                advisor = SelfRefineEvaluationAdvisor(judge_type(attempts - 1), max_attempts=3)
                us = await _per_call_us(make([advisor], model, request), n)
                rows.append((path, kind, attempts, us))
    plain = ChatClient(model, tool_calling_auto_register=False)
    judged = ChatClient(
        model, default_advisors=[SelfRefineEvaluationAdvisor(AsyncJudge(0))], tool_calling_auto_register=False
    )
    whole = [
        (
            name,
            await _per_call_us(
                lambda c=client: c.prompt("What is the capital of France?").acall().content(), 20_000
            ),
        )
        for name, client in (("without the advisor", plain), ("with the advisor, 1 attempt", judged))
    ]
    print(
        "| path | evaluator | attempts | µs per run | floor (bare sub-chain) µs "
        "| overhead per attempt µs | ratio per attempt |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for path, kind, attempts, us in rows:
        floor = floors[path]
        overhead = (us - attempts * floor) / attempts
        ratio = us / (attempts * floor)
        print(f"| {path} | {kind} | {attempts} | {us:.2f} | {floor:.2f} | {overhead:.2f} | {ratio:.2f}x |")
    print(
        "\n| whole client call (acall().content(), async evaluator) | µs per call | ratio |\n|---|---:|---:|"
    )
    for name, us in whole:
        print(f"| {name} | {us:.2f} | {us / whole[0][1]:.2f}x |")


if __name__ == "__main__":
    asyncio.run(main())
