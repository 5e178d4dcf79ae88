"""What guardrails cost, on the scripted loopback server (its own process) and in process.

Run: ``.venv/bin/python benchmarks/bench_guardrails.py`` (needs the ``openai`` extra). It prints:

1. Time to first chunk, an input guard that takes 200 ms and a model whose first chunk takes 200 ms
   (the server answers after 200 ms): unguarded, ``parallel=True`` and ``parallel=False``; the median
   of several runs and its ratio to the slower of the two (200 ms) and to their sum (400 ms).
2. ``OutputGuardrailAdvisor(pii_guard(), release="sentence")`` on a 2,000-chunk answer (a sentence
   every 10 chunks): client CPU per chunk against the same stream unguarded (process CPU time, best of
   several repeats), and how many of the model's chunks had arrived when the first sentence reached
   the caller (it must be before the stream's end).
3. ``pii_guard`` throughput on 1 MB of text (MB/s, best of several), and what a 1 MB answer costs in
   sentence mode, where a guard sees the whole text so far at every sentence: with ``pii_guard``
   (incremental) and with ``keyword_guard`` (which reads the whole text each time; about 10
   minutes: ``--no-keyword`` leaves it out).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "harness"))

from scenarios import Scenario

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatResponse,
    FunctionChatModel,
    GuardContext,
    InputGuardrailAdvisor,
    OutputGuardrailAdvisor,
    Prompt,
    keyword_guard,
    pii_guard,
)
from advisorchain.guardrails.pii import redact_pii

SERVER = str(Path(__file__).resolve().parent / "harness" / "server.py")
TTFC_RUNS = 7
CHUNKS = 2_000
SENTENCE_EVERY = 10
CPU_REPEATS = 5


async def start_server() -> tuple[asyncio.subprocess.Process, str]:
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        SERVER,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert server.stdout is not None
    port = int((await server.stdout.readline()).split()[1])
    return server, f"http://127.0.0.1:{port}/v1"


def openai_model(base_url: str, scenario: str) -> Any:
    from advisorchain.models.openai import OpenAIChatModel

    return OpenAIChatModel(scenario, base_url=base_url, api_key="bench")


async def slow_guard(text: str, context: GuardContext) -> bool:
    await asyncio.sleep(0.2)
    return True


# -- 1. time to first chunk -------------------------------------------------------------------------


async def first_chunk_seconds(client: ChatClient) -> float:
    start = time.perf_counter()
    stream = client.prompt("hi").astream().content()
    async for _ in stream:
        elapsed = time.perf_counter() - start
        break
    await stream.aclose()  # type: ignore[attr-defined]
    return elapsed


async def time_to_first_chunk(base_url: str) -> dict[str, float]:
    model = openai_model(base_url, Scenario.name_for("loop-0", 20, 200))
    clients = {
        "unguarded": ChatClient(model),
        "parallel=True": ChatClient(model, default_advisors=[InputGuardrailAdvisor(slow_guard)]),
        "parallel=False": ChatClient(
            model, default_advisors=[InputGuardrailAdvisor(slow_guard, parallel=False)]
        ),
    }
    for client in clients.values():
        await first_chunk_seconds(client)  # warm-up: the connection, imports
    results: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(TTFC_RUNS):  # interleaved
        for name, client in clients.items():
            results[name].append(await first_chunk_seconds(client))
    return {name: statistics.median(times) for name, times in results.items()}


# -- 2. sentence release on a 2,000-chunk answer -----------------------------------------------------


async def stream_cpu_per_chunk(client: ChatClient) -> float:
    async def once() -> None:
        async for _ in client.prompt("hi").astream().chat_client_responses():
            pass

    await once()
    best = float("inf")
    for _ in range(CPU_REPEATS):
        start = time.process_time()
        await once()
        best = min(best, time.process_time() - start)
    return best / CHUNKS


class CountingModel:
    """A model that counts the chunks its stream has yielded so far."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.yielded = 0

    async def call(self, prompt: Prompt) -> ChatResponse:
        return await self.inner.call(prompt)  # type: ignore[no-any-return]

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        self.yielded = 0
        async for chunk in self.inner.stream(prompt):
            self.yielded += 1
            yield chunk


async def sentence_release(base_url: str) -> dict[str, float]:
    scenario = f"loop-0+k{CHUNKS}+s{SENTENCE_EVERY}"
    model = openai_model(base_url, scenario)
    plain = ChatClient(model)
    guarded = ChatClient(model, default_advisors=[OutputGuardrailAdvisor(pii_guard(), release="sentence")])
    expected = Scenario.parse(scenario).expected_text(stream=True)
    got = "".join([t async for t in guarded.prompt("hi").astream().content()])
    assert got == expected, "the guarded stream must deliver the whole answer"
    unguarded_cpu = await stream_cpu_per_chunk(plain)
    guarded_cpu = await stream_cpu_per_chunk(guarded)
    counting = CountingModel(model)
    client = ChatClient(counting, default_advisors=[OutputGuardrailAdvisor(pii_guard(), release="sentence")])
    stream = client.prompt("hi").astream().content()
    async for _ in stream:
        seen_at_first = counting.yielded
        break
    await stream.aclose()  # type: ignore[attr-defined]
    return {
        "unguarded_us": unguarded_cpu * 1e6,
        "guarded_us": guarded_cpu * 1e6,
        "model_chunks_at_first_sentence": float(seen_at_first),
        "model_chunks": float(CHUNKS + 2),  # the role chunk, the deltas, the finish chunk
    }


# -- 3. pii_guard throughput and a 1 MB answer in sentence mode --------------------------------------


def megabyte_of_text(seed: int = 1) -> str:
    rng = random.Random(seed)
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "a",
        "lazy",
        "dog",
        "while",
        "it",
        "rains",
        "in",
        "spring",
        "and",
        "summer",
    ]
    pii = [
        "ada@example.com",
        "+44 20 7946 0958",
        "4111 1111 1111 1111",
        "DE89 3704 0044 0532 0130 00",
        "10.0.0.1",
    ]
    parts: list[str] = []
    size = 0
    while size < 1_000_000:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(6, 14)))
        if rng.random() < 0.05:
            sentence += " " + rng.choice(pii)
        sentence = sentence.capitalize() + ". "
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts)


def pii_throughput(text: str) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        redact_pii(text)
        best = min(best, time.perf_counter() - start)
    return len(text.encode()) / 1e6 / best


async def sentence_mode_on(text: str, guard: Any) -> tuple[float, int]:
    words = text.split(" ")
    deltas = [w + " " for w in words[:-1]] + [words[-1]]

    async def chunks(prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for delta in deltas:
            yield ChatResponse.of(AssistantMessage(delta))
        yield ChatResponse.of(AssistantMessage(None), "stop")

    model = FunctionChatModel(lambda prompt: AssistantMessage(text), chunks)
    client = ChatClient(model, default_advisors=[OutputGuardrailAdvisor(guard, release="sentence")])
    start = time.perf_counter()
    released = 0
    async for _ in client.prompt("q").astream().content():
        released += 1
    return time.perf_counter() - start, released


async def main() -> None:
    server, base_url = await start_server()
    try:
        ttfc = await time_to_first_chunk(base_url)
        release = await sentence_release(base_url)
    finally:
        server.terminate()
        await server.wait()
    text = megabyte_of_text()
    mbps = pii_throughput(text)
    pii_seconds, sentences = await sentence_mode_on(text, pii_guard())
    keyword_seconds = None
    if "--no-keyword" not in sys.argv:  # the slow one: about 10 minutes on 2 busy cores
        keyword_seconds, _ = await sentence_mode_on(text, keyword_guard(["forbidden"]))

    print("1. time to first chunk: input guard 200 ms, first chunk 200 ms (median of", TTFC_RUNS, "runs)")
    print("| client | first chunk | / slower (200 ms) | / sum (400 ms) |")
    print("|---|---:|---:|---:|")
    for name, seconds in ttfc.items():
        print(f"| {name} | {seconds * 1e3:.0f} ms | {seconds / 0.2:.2f}x | {seconds / 0.4:.2f}x |")
    print()
    print(f"2. release='sentence' + pii_guard, {CHUNKS} chunks, a sentence every {SENTENCE_EVERY}")
    print("| stream | client CPU per chunk | ratio |")
    print("|---|---:|---:|")
    print(f"| unguarded | {release['unguarded_us']:.1f} us | 1.00x |")
    ratio = release["guarded_us"] / release["unguarded_us"]
    print(f"| guarded | {release['guarded_us']:.1f} us | {ratio:.2f}x |")
    print(
        f"first sentence reached the caller after {release['model_chunks_at_first_sentence']:.0f} of the "
        f"model's {release['model_chunks']:.0f} chunks"
    )
    print()
    print(f"3. pii_guard on {len(text.encode()) / 1e6:.2f} MB: {mbps:.1f} MB/s")
    keyword = "not run (--no-keyword)" if keyword_seconds is None else f"{keyword_seconds:.2f} s"
    print(
        f"   a 1 MB answer in sentence mode ({sentences} sentences released): pii_guard {pii_seconds:.2f} s, "
        f"keyword_guard (reads the whole text at each sentence) {keyword}"
    )


if __name__ == "__main__":
    asyncio.run(main())
