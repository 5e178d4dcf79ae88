"""Compaction soak: one conversation of many turns with tool rounds under a small ``max_tokens``,
through ``ContextCompactionAdvisor`` and a ``MessageChatMemoryAdvisor`` outside and inside the tool
loop, on the call and the stream path, then everything it sent and stored checked.

    .venv/bin/python benchmarks/soak_compaction.py                 # 200 turns, SQLite
    scripts/services.sh run .venv/bin/python benchmarks/soak_compaction.py --backends sqlite,postgres,redis

Each turn asks a question, the model calls a tool 0 to 3 times (tool results of varied size), then
answers. The model is an in-process provider that counts prompt tokens as the library's estimate
(4 characters a token) plus ``--per-message`` tokens a message (a provider's per-message overhead,
which the estimate of newly added messages does not see; 0 by default) and writes summaries of at
most 60 % of the words it is allowed. Checked, for every run:

* every prompt the provider counted is within ``max_tokens`` (with ``--per-message`` above 0 the
  prompts over it are counted and reported instead: the estimate cannot see that overhead);
* no round is split in any prompt or in the stored conversation (each tool response right after
  its own call, every call answered), so no tool response is ever an orphan;
* the stored conversation stays bounded: never over twice ``max_tokens`` (its largest size is
  reported);
* each message is summarized at most once, and every question and answer (and, inside the loop,
  every tool round) is in the final stored conversation or in exactly one summary: nothing lost.

For scale, the same conversation also runs through a plain window memory (``--window`` messages, no
compaction), and the table gives compaction's time per turn as a ratio to it (each run ``--repeat``
times, interleaved, the fastest kept). The figures measure the library and the store, not a provider.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import soak

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatMemory,
    ChatResponse,
    ContextCompactionAdvisor,
    Message,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    Ordered,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    Usage,
    UserMessage,
    tool,
)
from advisorchain._tokens import estimate_tokens
from advisorchain.testing import FunctionChatModel

PLACES = {"outside": MessageChatMemoryAdvisor.DEFAULT_ORDER, "inside": Ordered.HIGHEST_PRECEDENCE + 400}
SUMMARY = ContextCompactionAdvisor.SUMMARY_PREFIX
PER_MESSAGE = [0]  # the provider's per-message overhead (--per-message), unseen by the estimate
CONVERSATION = "soak"
_WORDS = re.compile(r"at most about (\d+) words")
_PART = re.compile(r"\b([QA]\d+|T\d+\.\d+):")


@tool
def lookup(key: str) -> str:
    """Look a key up; ``key`` is ``T<turn>.<round>:<size>`` and the result has ``size`` tokens."""
    name, size = key.split(":")
    return _filled(f"D{name[1:]}: result of {name}", int(size))


def _filled(head: str, tokens: int) -> str:
    return head + " " + "lorem ipsum " * max(0, (tokens * 4 - len(head)) // 12)


@dataclass(frozen=True)
class Turn:
    """One turn of the scripted conversation: its question, its tool rounds' result sizes, its answer."""

    n: int
    question: str
    sizes: tuple[int, ...]
    answer: str


def script(turns: int, seed: int) -> list[Turn]:
    rng = random.Random(seed)
    return [
        Turn(
            n,
            _filled(f"Q{n}: question number {n}", rng.randint(10, 40)),
            tuple(rng.randint(10, 60) for _ in range(rng.choice([0, 1, 1, 2, 3]))),
            _filled(f"A{n}: answer number {n}", rng.randint(10, 40)),
        )
        for n in range(turns)
    ]


@dataclass
class Provider:
    """The in-process provider: answers each turn from the script, writes summaries, records all."""

    turns: list[Turn]
    prompts: list[Prompt] = field(default_factory=list)
    transcripts: list[str] = field(default_factory=list)
    rounds_made: dict[int, int] = field(default_factory=dict)

    def reply(self, prompt: Prompt) -> ChatResponse:
        first = prompt.instructions[0] if prompt.instructions else None
        if isinstance(first, SystemMessage) and first.text.startswith(
            ContextCompactionAdvisor.SUMMARY_INSTRUCTION[:30]
        ):
            return self._summary(prompt)
        self.prompts.append(prompt)
        turn = self._current_turn(prompt)
        done = self.rounds_made.get(turn.n, 0)
        if done < len(turn.sizes):
            self.rounds_made[turn.n] = done + 1
            key = f"T{turn.n}.{done}:{turn.sizes[done]}"
            message = AssistantMessage(None, [ToolCall(f"T{turn.n}.{done}", "lookup", f'{{"key": "{key}"}}')])
        else:
            message = AssistantMessage(turn.answer)
        finish = "tool_calls" if message.tool_calls else "stop"
        return ChatResponse.of(message, finish, usage=Usage(provider_tokens(prompt.instructions), 20))

    def _current_turn(self, prompt: Prompt) -> Turn:
        for m in reversed(prompt.instructions):
            if isinstance(m, UserMessage) and not m.text.startswith(SUMMARY):
                return self.turns[int(m.text.split(":")[0][1:])]
        raise AssertionError("a prompt without a question")

    def _summary(self, prompt: Prompt) -> ChatResponse:
        instruction, transcript = prompt.instructions[0].text, prompt.instructions[-1].text or ""
        self.transcripts.append(transcript)
        words = int(_WORDS.search(instruction).group(1))  # type: ignore[union-attr]
        parts = sorted(set(_PART.findall(transcript)), key=lambda p: (int(re.sub(r"\D.*", "", p[1:])), p))
        text = " ".join(["Covered:", *parts])
        budget = max(1, int(words * 0.6))
        kept = text.split()[:budget]
        return ChatResponse.of(
            AssistantMessage(" ".join(kept)), "stop", usage=Usage(estimate_tokens(prompt.instructions), 50)
        )


def provider_tokens(messages: Sequence[Message]) -> int:
    return estimate_tokens(messages) + PER_MESSAGE[0] * len(messages)


# -- checks ------------------------------------------------------------------------------------------


def whole_rounds(messages: Sequence[Message]) -> str | None:
    """None when every tool response follows its own call and every call is answered; else why not."""
    for i, m in enumerate(messages):
        if isinstance(m, ToolResponseMessage):
            before = messages[i - 1] if i else None
            ids = [r.id for r in m.responses]
            if not isinstance(before, AssistantMessage) or [c.id for c in before.tool_calls] != ids:
                return f"tool response {ids} at {i} does not follow its call"
        answered = i + 1 < len(messages) and isinstance(messages[i + 1], ToolResponseMessage)
        if isinstance(m, AssistantMessage) and m.tool_calls and not answered:
            return f"tool call {[c.id for c in m.tool_calls]} at {i} is not answered"
    return None


def fresh_parts(transcript: str) -> list[str]:
    """The parts (Q12, A12, T12.0) a transcript summarizes for the first time (not inside an old summary)."""
    parts: list[str] = []
    for line in transcript.splitlines():
        if line.startswith(SUMMARY):
            continue
        parts.extend(_PART.findall(line))
    return parts


def stored_parts(messages: Sequence[Message]) -> set[str]:
    found: set[str] = set()
    for m in messages:
        if isinstance(m, UserMessage) and m.text.startswith(SUMMARY):
            continue
        if isinstance(m, ToolResponseMessage):
            found.update(r.id for r in m.responses)
        elif isinstance(m, AssistantMessage) and m.tool_calls:
            continue
        else:
            found.update(_PART.findall(m.text or ""))
    return found


# -- one run -----------------------------------------------------------------------------------------


@dataclass
class Outcome:
    label: str
    turns: int
    model_calls: int
    summaries: int
    seconds: float
    max_prompt: int
    mean_prompt: float
    over_budget: int
    max_stored: int
    final_stored: int
    max_stored_tokens: int
    failures: list[str]


def open_repository(backend: str, workdir: str) -> tuple[Any, Callable[[], None]]:
    """A fresh repository on ``backend`` and a function that removes what it stored (as soak.py's)."""
    return soak.open_repository(backend, workdir, prefix="compaction")


async def run_one(
    turns: list[Turn],
    *,
    backend: str,
    place: str,
    path: str,
    max_tokens: int,
    window: int | None,
    workdir: str,
) -> Outcome:
    """Run the conversation once; ``window`` set: a window memory of that size and no compaction."""
    repository, cleanup = open_repository(backend, workdir)
    memory = MessageWindowChatMemory(repository, max_messages=window or 1_000_000)
    provider = Provider(turns)
    advisors: list[Any] = [MessageChatMemoryAdvisor(memory, order=PLACES[place])]
    if window is None:
        advisors.append(ContextCompactionAdvisor(max_tokens=max_tokens))
    client = ChatClient(FunctionChatModel(provider.reply), default_advisors=advisors, default_tools=[lookup])
    failures: list[str] = []
    sizes: list[tuple[int, int]] = []
    seconds = 0.0
    for turn in turns:
        spec = client.prompt(turn.question).param(ChatMemory.CONVERSATION_ID, CONVERSATION)
        start = time.perf_counter()
        if path == "stream":
            answer = "".join([chunk async for chunk in spec.astream().content()])
        else:
            answer = await spec.acall().content()
        seconds += time.perf_counter() - start
        if answer != turn.answer:
            failures.append(f"turn {turn.n}: answered {answer!r:.60}")
        stored = await asyncio.to_thread(memory.get, CONVERSATION)
        sizes.append((len(stored), provider_tokens(stored)))
        why = whole_rounds(stored)
        if why:
            failures.append(f"after turn {turn.n}, stored: {why}")
    final = await asyncio.to_thread(memory.get, CONVERSATION)
    repository.close()
    cleanup()
    label = f"{backend} {place} {path}" + (f" window={window}" if window else "")
    failures.extend(
        _prompt_failures(provider, max_tokens, check_budget=window is None and not PER_MESSAGE[0])
    )
    if window is None:
        failures.extend(_coverage_failures(provider, turns, final, place))
        largest = max(t for _, t in sizes)
        if largest > 2 * max_tokens:
            failures.append(f"the stored conversation grew to {largest} tokens (> 2 x max_tokens)")
    counts = [provider_tokens(p.instructions) for p in provider.prompts]
    return Outcome(
        label,
        len(turns),
        len(provider.prompts),
        len(provider.transcripts),
        seconds,
        max(counts),
        sum(counts) / len(counts),
        sum(1 for c in counts if c > max_tokens),
        max(n for n, _ in sizes),
        len(final),
        max(t for _, t in sizes),
        failures,
    )


def _prompt_failures(provider: Provider, max_tokens: int, *, check_budget: bool) -> list[str]:
    failures = []
    for i, prompt in enumerate(provider.prompts):
        why = whole_rounds(prompt.instructions)
        if why:
            failures.append(f"prompt {i}: {why}")
        count = provider_tokens(prompt.instructions)
        if check_budget and count > max_tokens:
            failures.append(f"prompt {i}: {count} tokens > max_tokens {max_tokens}")
    return failures


def _coverage_failures(
    provider: Provider, turns: list[Turn], final: Sequence[Message], place: str
) -> list[str]:
    """Each part summarized at most once; every question and answer (inside: every tool round) kept
    or summarized."""
    failures: list[str] = []
    summarized: dict[str, int] = {}
    for transcript in provider.transcripts:
        for part in set(fresh_parts(transcript)):
            summarized[part] = summarized.get(part, 0) + 1
    failures.extend(f"{part} summarized {n} times" for part, n in summarized.items() if n > 1)
    kept = stored_parts(final)
    for turn in turns:
        parts = [f"Q{turn.n}", f"A{turn.n}"]
        if place == "inside":
            parts.extend(f"T{turn.n}.{r}" for r in range(len(turn.sizes)))
        failures.extend(f"{part} is lost" for part in parts if part not in kept and part not in summarized)
    return failures


# -- the table ---------------------------------------------------------------------------------------


def _fastest(turns: list[Turn], window: int, repeat: int, common: dict[str, Any]) -> tuple[Outcome, Outcome]:
    """The window run and the compaction run, each the fastest of ``repeat`` interleaved runs (each
    run is checked; the failures of all are kept)."""
    bases: list[Outcome] = []
    outcomes: list[Outcome] = []
    for _ in range(repeat):
        bases.append(asyncio.run(run_one(turns, window=window, **common)))
        outcomes.append(asyncio.run(run_one(turns, window=None, **common)))
    base = min(bases, key=lambda o: o.seconds)
    outcome = min(outcomes, key=lambda o: o.seconds)
    base.failures = sorted({f for o in bases for f in o.failures})
    outcome.failures = sorted({f for o in outcomes for f in o.failures})
    return base, outcome


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--max-tokens", type=int, default=600)
    parser.add_argument("--window", type=int, default=20, help="the window memory's size for the comparison")
    parser.add_argument("--backends", default="sqlite")
    parser.add_argument("--places", default="outside,inside")
    parser.add_argument("--paths", default="call,stream")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--per-message", type=int, default=0, help="the provider's tokens per message")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each cell; the fastest is kept")
    args = parser.parse_args(argv)
    PER_MESSAGE[0] = args.per_message
    if min(args.turns, args.max_tokens, args.repeat) < 1:
        parser.error("--turns, --max-tokens and --repeat must be at least 1")
    turns = script(args.turns, args.seed)
    rounds = sum(len(t.sizes) for t in turns)
    print(
        f"compaction soak: 1 conversation, {args.turns} turns, {rounds} tool rounds, max_tokens "
        f"{args.max_tokens}; provider count = estimate + {args.per_message}/message"
    )
    header = (
        "| run | turns/s | model calls | summaries | prompt tokens max / mean | over budget | "
        "stored msgs max / final | stored tokens max | time vs window |"
    )
    print(header)
    print("|" + "---|" * 9)
    failed = False
    with tempfile.TemporaryDirectory(prefix="advisorchain-compaction-soak-") as workdir:
        for backend in args.backends.split(","):
            for place in args.places.split(","):
                for path in args.paths.split(","):
                    common: dict[str, Any] = {
                        "backend": backend,
                        "place": place,
                        "path": path,
                        "max_tokens": args.max_tokens,
                        "workdir": workdir,
                    }
                    base, outcome = _fastest(turns, args.window, args.repeat, common)
                    for o in (outcome, base):
                        ratio = f"{o.seconds / base.seconds:.2f}x" if o is outcome else "1.00x"
                        print(
                            f"| {o.label} | {o.turns / o.seconds:.0f} | {o.model_calls} | {o.summaries} | "
                            f"{o.max_prompt} / {o.mean_prompt:.0f} | {o.over_budget} | {o.max_stored} / "
                            f"{o.final_stored} | {o.max_stored_tokens} | {ratio} |"
                        )
                    failed |= bool(outcome.failures or base.failures)
                    for failure in [*outcome.failures, *base.failures][:10]:
                        print(f"  FAILED {failure}")
    print("compaction soak: all checks passed" if not failed else "compaction soak: FAILURES above")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
