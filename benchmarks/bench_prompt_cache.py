"""What prompt caching saves, and what it costs (API.md §21, issue 40).

Run: ``.venv/bin/python benchmarks/bench_prompt_cache.py`` — prints six figures, each with its goal:

1. the cached share of the prompt tokens over rounds 2-20 of a 20-round tool loop with an 8k-token
   system text and tools (goal ≥ 90 %);
2. that loop's cost against the same loop without the advisor (goal ≤ 0.25x);
3. the cache-read share of the compaction summary requests of a 200-turn conversation compacted
   about every 20 turns (goal ≥ 85 %);
4. ten injected cache busts, each with the advisor that caused it named by ``cache_miss`` (goal 10/10);
5. the error of the budget's pre-request estimate of each call's prompt cost against the actual
   prompt cost (goal ≤ 10 %);
6. the advisor's own CPU cost per model call (goal ≤ 5 µs).

Figures 1-5 use the real ``AnthropicChatModel`` against a loopback server that emulates Anthropic's
prefix caching (``tests/support/anthropic_cache.py``: tokens from characters; a request reads the
longest prefix an earlier request wrote up to a breakpoint, writes up to its last breakpoint, and
reports Anthropic's usage fields), priced at Claude Sonnet's rates: $3 input, $15 output, $0.30 cache
read, $3.75 cache write per million tokens. Figure 6 is process CPU time, best of several repeats
(``_timing.py``), of a tool loop on an in-process model with and without the advisor.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from _timing import best_seconds_per_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support: the emulating server

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    BaseAdvisor,
    ChatClient,
    ChatClientRequest,
    ChatMemory,
    ChatOptions,
    ChatResponse,
    ContextCompactionAdvisor,
    InMemoryChatMemoryRepository,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ModelPrice,
    Prompt,
    PromptCacheAdvisor,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    Usage,
    UsageLimits,
    UserMessage,
)
from advisorchain.models.anthropic import AnthropicChatModel
from advisorchain.testing import stream_chunks
from advisorchain.tools.function import tool
from tests.support.anthropic_cache import CacheEmulator
from tests.support.openai_server import running_server

MODEL = "claude-emulated"
PRICE = ModelPrice(Decimal(3), Decimal(15), Decimal("0.30"), Decimal("3.75"))
PRICES = {MODEL: PRICE}
SYSTEM_8K = "You are the release engineer of a large project. Follow the runbook step by step. " * 390
"""About 8,000 tokens (4 characters a token)."""
ROUNDS = 20

_exporter = InMemorySpanExporter()


def _install_tracing() -> None:
    """Spans on (for ``cache_miss``), once the CPU figure — timed untraced — is taken."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(provider)


@tool
async def read_file(path: str) -> str:
    """Read a file of the repository and return its text."""
    return f"contents of {path}: " + "line of code; " * 20


@tool
async def run_tests(target: str) -> str:
    """Run the test suite for a target and return the summary."""
    return f"{target}: 412 passed"


@tool
async def search(query: str) -> str:
    """Search the issue tracker."""
    return f"3 issues match {query!r}"


TOOLS = [read_file, run_tests, search]


def _loop_reply(rounds: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if done + 1 < rounds:
            return {"tool": "read_file", "input": {"path": f"src/module_{done}.py"}}
        return {"text": "The release is ready."}

    return reply


def _prompt_tokens(usage: dict[str, int]) -> int:
    return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]


def _prompt_cost(usage: dict[str, int]) -> Decimal:
    return (
        PRICE.input_per_mtok * usage["input_tokens"]
        + (PRICE.cache_read_per_mtok or 0) * usage["cache_read_input_tokens"]
        + (PRICE.cache_write_per_mtok or 0) * usage["cache_creation_input_tokens"]
    ) / 1_000_000


# -- 1, 2, 5: the 20-round loop ---------------------------------------------------------------------


class _Estimates(BaseAdvisor):
    """Innermost: notes the run meter's estimate of each call's prompt cost, as the budget makes it
    before the call (``RunMeter`` internals: the benchmark reads what the limits check)."""

    order = PromptCacheAdvisor.DEFAULT_ORDER + 10

    def __init__(self) -> None:
        self.estimates: list[Decimal | None] = []

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        meter = _meter_of(chain)
        rates = getattr(meter, "_rates", None)
        if meter is None or rates is None:
            self.estimates.append(None)
            return request
        prompt = _model_prompt(request)
        tokens = meter._estimate(prompt)
        self.estimates.append(meter._estimated_cost(rates, prompt, tokens))
        return request


def _meter_of(chain: Any) -> Any:
    return chain.run.meter


def _model_prompt(request: ChatClientRequest) -> Prompt:
    from advisorchain.chain import model_prompt

    return model_prompt(request)


async def _loop(cached: bool) -> tuple[list[dict[str, int]], list[Decimal | None], Decimal | None]:
    emulator = CacheEmulator(_loop_reply(ROUNDS), model=MODEL)
    estimates = _Estimates()
    with running_server(emulator) as server:
        model = AnthropicChatModel(MODEL, base_url=server.url, api_key="k")
        advisors: list[Any] = [estimates, *([PromptCacheAdvisor()] if cached else [])]
        client = ChatClient(
            model,
            default_system=SYSTEM_8K,
            default_advisors=advisors,
            default_tools=TOOLS,
            prices=PRICES,
            usage_limits=UsageLimits(cost_limit=Decimal(1_000)),
        )
        response = await client.prompt("Prepare release 4.2.").acall().chat_client_response()
    run = response.context[AdvisorParams.RUN_USAGE]
    assert run.requests == ROUNDS, run
    return emulator.usages, estimates.estimates, run.usage.cost


# -- 3: a long conversation, compacted ---------------------------------------------------------------

_SUMMARY_END = ContextCompactionAdvisor.ALIGNED_INSTRUCTION_SUFFIX.strip()


def _is_summary(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]["content"][-1]
    return last.get("type") == "text" and last.get("text", "").endswith(_SUMMARY_END)


def _chat_reply(body: dict[str, Any]) -> dict[str, Any]:
    if _is_summary(body):
        return {"text": "Summary: the user asked about releases; every question was answered. " * 3}
    return {"text": "Here is what I found about that release, step by step. " * 6}


async def _conversation(turns: int = 200) -> tuple[list[dict[str, int]], int]:
    emulator = CacheEmulator(_chat_reply, model=MODEL)
    memory = MessageChatMemoryAdvisor(
        MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=10_000)
    )
    # Each turn adds about 165 tokens; the system text about 2,000: over 5,300 about every 20 turns.
    compaction = ContextCompactionAdvisor(max_tokens=5_300)
    with running_server(emulator) as server:
        model = AnthropicChatModel(MODEL, base_url=server.url, api_key="k")
        client = ChatClient(
            model,
            default_system=SYSTEM_8K[:8_000],
            default_advisors=[memory, compaction, PromptCacheAdvisor()],
            default_tools=TOOLS,
        )
        for turn in range(turns):
            question = (
                f"Turn {turn}: what changed in release {turn // 10}.{turn % 10}? " + "Details please. " * 10
            )
            await client.prompt(question).param(ChatMemory.CONVERSATION_ID, "long").acall().content()
    summaries = [u for u, b in zip(emulator.usages, emulator.bodies, strict=True) if _is_summary(b)]
    return summaries, turns


# -- 4: ten injected busts ------------------------------------------------------------------------------


class _Busting(BaseAdvisor):
    """An advisor that changes the prompt from its ``at``-th call on (``change(request, call)``)."""

    def __init__(
        self, name: str, at: int, change: Callable[[ChatClientRequest, int], ChatClientRequest], order: int
    ) -> None:
        self._name, self.at, self.change, self._order, self.calls = name, at, change, order, 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def order(self) -> int:
        return self._order

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        self.calls += 1
        return self.change(request, self.calls) if self.calls >= self.at else request


def _with_messages(request: ChatClientRequest, messages: Sequence[Any]) -> ChatClientRequest:
    return request.copy(prompt=request.prompt.copy(instructions=tuple(messages)))


def _stamp(request: ChatClientRequest, call: int) -> ChatClientRequest:
    return _with_messages(
        request,
        [
            SystemMessage(f"{m.text}\nNow: 2026-11-29T04:{call:02d}Z") if isinstance(m, SystemMessage) else m
            for m in request.prompt.instructions
        ],
    )


def _persona(request: ChatClientRequest, call: int) -> ChatClientRequest:
    return _with_messages(
        request,
        [
            SystemMessage("Answer in French. " + m.text) if isinstance(m, SystemMessage) else m
            for m in request.prompt.instructions
        ],
    )


def _reorder_tools(request: ChatClientRequest, call: int) -> ChatClientRequest:
    options = request.prompt.options or ChatOptions()
    reordered = options.copy(tool_callbacks=tuple(reversed(options.tool_callbacks)))
    return request.copy(prompt=request.prompt.copy(options=reordered))


def _tool_choice(request: ChatClientRequest, call: int) -> ChatClientRequest:
    options = request.prompt.options or ChatOptions()
    changed = options.copy(extra={**options.extra, "tool_choice": {"type": "any"}})
    return request.copy(prompt=request.prompt.copy(options=changed))


def _describe_tools(request: ChatClientRequest, call: int) -> ChatClientRequest:
    @tool(name="search", description=f"Search the issue tracker ({call} searches so far).")
    async def counted(query: str) -> str:
        return query

    options = request.prompt.options or ChatOptions()
    others = tuple(t for t in options.tool_callbacks if t.definition.name != "search")
    changed = options.copy(tool_callbacks=(*others, counted))
    return request.copy(prompt=request.prompt.copy(options=changed))


def _retrieval(request: ChatClientRequest, call: int) -> ChatClientRequest:
    return request.copy(
        context={**request.context, AdvisorParams.RETRIEVAL_CONTEXT: f"Context: document #{call}."}
    )


def _reminder(request: ChatClientRequest, call: int) -> ChatClientRequest:
    messages = list(request.prompt.instructions)
    at = 1 if messages and isinstance(messages[0], SystemMessage) else 0
    return _with_messages(
        request, [*messages[:at], UserMessage(f"Reminder {call}: keep it short."), *messages[at:]]
    )


def _prune_tools(request: ChatClientRequest, call: int) -> ChatClientRequest:
    messages = list(request.prompt.instructions)
    outputs = [i for i, m in enumerate(messages) if isinstance(m, ToolResponseMessage)]
    for i in outputs[:-1]:
        responses = messages[i].responses
        messages[i] = ToolResponseMessage(tuple(replace(r, response_data="[pruned]") for r in responses))
    return _with_messages(request, messages)


def _redact(request: ChatClientRequest, call: int) -> ChatClientRequest:
    messages = [
        AssistantMessage((m.text or "").replace("release", "[redacted]"), m.tool_calls, m.metadata)
        if isinstance(m, AssistantMessage) and m.text
        else m
        for m in request.prompt.instructions
    ]
    return _with_messages(request, messages)


_INSIDE = PromptCacheAdvisor.DEFAULT_ORDER - 500  # inside the tool loop and memory
_OUTSIDE = -100  # outside memory (an input rewriter)


def _busts() -> list[tuple[str, str, dict[str, Any]]]:
    """(what, the advisor to be named, the scenario). A scenario: turns of a conversation (memory
    with a window of ``window`` messages), each with ``rounds`` tool rounds; the busting advisor."""
    return [
        ("a timestamp in the system text", "Timestamp", {"bust": _Busting("Timestamp", 4, _stamp, _OUTSIDE)}),
        (
            "the system text's persona switched",
            "Persona",
            {"bust": _Busting("Persona", 4, _persona, _OUTSIDE)},
        ),
        ("reordered tools", "Tool Order", {"bust": _Busting("Tool Order", 4, _reorder_tools, _OUTSIDE)}),
        (
            "the tool choice changed",
            "Tool Choice",
            {"bust": _Busting("Tool Choice", 4, _tool_choice, _INSIDE)},
        ),
        (
            "a tool description with a counter",
            "Tool Docs",
            {"bust": _Busting("Tool Docs", 4, _describe_tools, _INSIDE)},
        ),
        ("a memory window drops the oldest turn", "MessageChatMemoryAdvisor", {"window": 6}),
        (
            "a retrieval context that changes",
            "Retrieval",
            {"bust": _Busting("Retrieval", 2, _retrieval, _INSIDE), "memory": False},
        ),
        (
            "a reminder inserted before the history",
            "Reminder",
            {"bust": _Busting("Reminder", 4, _reminder, _INSIDE)},
        ),
        (
            "old tool outputs pruned",
            "Pruner",
            {"bust": _Busting("Pruner", 3, _prune_tools, _INSIDE), "rounds": 3, "memory": False},
        ),
        ("earlier answers redacted", "Redactor", {"bust": _Busting("Redactor", 4, _redact, _INSIDE)}),
    ]


def _turn_reply(rounds: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]["content"][-1]
        since = 0
        for message in reversed(body["messages"]):
            if message["role"] == "assistant":
                since += 1
            elif any(
                b.get("type") == "text" and not b.get("text", "").startswith("Reminder")
                for b in message["content"]
            ):
                break
        if last.get("type") == "tool_result" and since >= rounds:
            return {"text": "The release notes are ready; release 4.2 is fine."}
        if rounds and since < rounds:
            return {"tool": "search", "input": {"query": f"release blocker {since}"}}
        return {"text": "The release notes are ready; release 4.2 is fine."}

    return reply


async def _bust(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    # Memory keeps each turn's question and answer, not its tool rounds: turns with rounds would
    # miss the cache on their own at every new turn (rightly named: memory). Busts are injected
    # into turns answered at once; the scenarios without memory run tool rounds.
    rounds = scenario.get("rounds", 0 if scenario.get("memory", True) else 1)
    emulator = CacheEmulator(_turn_reply(rounds), model=MODEL)
    advisors: list[Any] = [PromptCacheAdvisor()]
    if scenario.get("memory", True):
        window = scenario.get("window", 1_000)
        advisors.append(
            MessageChatMemoryAdvisor(
                MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=window)
            )
        )
    if "bust" in scenario:
        advisors.append(scenario["bust"])
    _exporter.clear()
    with running_server(emulator) as server:
        model = AnthropicChatModel(MODEL, base_url=server.url, api_key="k")
        client = ChatClient(
            model, default_system=SYSTEM_8K[:8_000], default_advisors=advisors, default_tools=TOOLS
        )
        for turn in range(6 if scenario.get("memory", True) else 2):
            question = f"Question {turn} about release 4.2. " + "Details please. " * (
                4 * turn
            )  # growing turns
            await client.prompt(question).param(ChatMemory.CONVERSATION_ID, "b").acall().content()
    return [
        dict(e.attributes or {})
        for s in _exporter.get_finished_spans()
        if s.name.startswith("chat ")
        for e in s.events
        if e.name == "cache_miss"
    ]


# -- 6: the advisor's own cost --------------------------------------------------------------------------


class _LoopModel:
    """A tool loop of ``rounds`` model calls, in process; every answer reports cache usage."""

    model_name = "bench"

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds

    def _reply(self, prompt: Prompt) -> ChatResponse:
        done = sum(1 for m in prompt.instructions if isinstance(m, AssistantMessage))
        usage = Usage(8_000 + 50 * done, 10, 8_000 + 50 * max(0, done - 1), 50)
        if done + 1 < self.rounds:
            return ChatResponse.of(
                AssistantMessage(None, (ToolCall(f"c{done}", "search", '{"query": "q"}'),)),
                "tool_calls",
                usage=usage,
            )
        return ChatResponse.of(AssistantMessage("done"), "stop", usage=usage)

    async def call(self, prompt: Prompt) -> ChatResponse:
        return self._reply(prompt)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for chunk in stream_chunks(self._reply(prompt)):
            yield chunk


async def _advisor_cost(rounds: int = 20) -> dict[str, tuple[float, float]]:
    results: dict[str, tuple[float, float]] = {}
    for path in ("call", "stream"):
        per_round: list[float] = []
        for cached in (False, True):
            client = ChatClient(
                _LoopModel(rounds),
                default_system=SYSTEM_8K,
                default_tools=TOOLS,
                default_advisors=[PromptCacheAdvisor()] if cached else [],
            )

            async def run_call(client: ChatClient = client) -> None:
                await client.prompt("go").acall().content()

            async def run_stream(client: ChatClient = client) -> None:
                async for _ in client.prompt("go").astream().chat_client_responses():
                    pass

            seconds = await best_seconds_per_run(run_call if path == "call" else run_stream)
            per_round.append(seconds * 1e6 / rounds)
        results[path] = (per_round[0], per_round[1])
    return results


# -- the table -------------------------------------------------------------------------------------------


async def main() -> None:
    costs = await _advisor_cost()
    _install_tracing()
    cached_usages, estimates, cached_cost = await _loop(cached=True)
    plain_usages, _, plain_cost = await _loop(cached=False)
    later = cached_usages[1:]
    share = sum(u["cache_read_input_tokens"] for u in later) / sum(_prompt_tokens(u) for u in later)
    ratio = (cached_cost or Decimal(0)) / (plain_cost or Decimal(1))

    errors = [
        abs(float(e) - float(_prompt_cost(u))) / float(_prompt_cost(u))
        for e, u in zip(estimates, cached_usages, strict=True)
        if e is not None
    ]
    summaries, turns = await _conversation()
    summary_share = sum(u["cache_read_input_tokens"] for u in summaries) / sum(
        _prompt_tokens(u) for u in summaries
    )

    named = 0
    bust_rows: list[str] = []
    for what, expected, scenario in _busts():
        events = await _bust(scenario)
        names = [e.get("advisorchain.cache.changed_by") for e in events]
        ok = bool(events) and names[0] == expected
        named += ok
        where = events[0].get("advisorchain.cache.index") if events else None
        shown = names[0] if events else "(no miss)"
        bust_rows.append(f"| {what} | {expected} | {shown} | {where} | {'yes' if ok else 'NO'} |")

    prompt_total = sum(_prompt_tokens(u) for u in cached_usages)
    read_total = sum(u["cache_read_input_tokens"] for u in cached_usages)
    rows = [
        (
            f"cached share of prompt tokens, rounds 2-{ROUNDS} ({ROUNDS}-round loop, 8k-token system "
            f"text, {len(TOOLS)} tools)",
            f"{share:.1%}",
            ">= 90 %",
        ),
        (
            f"cost of that loop against the same loop uncached (${cached_cost} / ${plain_cost})",
            f"{ratio:.3f}x",
            "<= 0.25x",
        ),
        (
            f"cache-read share of the compaction requests ({turns} turns, {len(summaries)} compactions)",
            f"{summary_share:.1%}",
            ">= 85 %",
        ),
        ("injected cache busts with the right advisor named", f"{named}/10", "10/10"),
        (
            f"pre-request estimate of the prompt cost, error against the actual (rounds 2-{ROUNDS}: "
            "mean / max)",
            f"{sum(errors) / len(errors):.1%} / {max(errors):.1%}",
            "<= 10 %",
        ),
    ]
    for path, (plain, cached) in costs.items():
        rows.append(
            (
                f"the advisor's own CPU per model call, {path} path "
                f"({plain:,.1f} -> {cached:,.1f} us a round)",
                f"{cached - plain:+.2f} us",
                "<= 5 us",
            )
        )
    print("## Prompt caching (`benchmarks/bench_prompt_cache.py`)\n")
    print("| figure | measured | goal |")
    print("|---|---:|---:|")
    for figure, measured, goal in rows:
        print(f"| {figure} | {measured} | {goal} |")
    print("\n| injected bust | advisor expected | `changed_by` | `.index` | right |")
    print("|---|---|---|---:|---|")
    print("\n".join(bust_rows))
    uncached = sum(_prompt_tokens(u) for u in plain_usages)
    print(
        f"\nUncached loop: {uncached:,} prompt tokens; cached: {read_total:,} of {prompt_total:,} "
        "read from the cache."
    )


if __name__ == "__main__":
    asyncio.run(main())
