"""Soak run: many conversations with tools through memory on SQLite, PostgreSQL and Redis, inside
and outside the tool loop, then every stored conversation verified exactly.

    scripts/services.sh run .venv/bin/python benchmarks/soak.py            # full size
    .venv/bin/python benchmarks/soak.py --conversations 500 --backends sqlite

Each conversation runs ``--turns`` turns (each ``--rounds`` tool rounds, then the answer) through a
``MessageChatMemoryAdvisor``; ``--concurrency`` conversations run at once. With ``--overlap 2`` a
conversation's turns are sent two at a time, so the turn lock is what keeps them apart. Afterwards
every conversation is read back and compared with what its turns must have stored: the count,
the order (exact when turns are sequential), and each tool result right after its own call.
Everything stays on loopback (PostgreSQL and Redis from ADVISORCHAIN_TEST_POSTGRES_DSN /
ADVISORCHAIN_TEST_REDIS_URL, as ``scripts/services.sh`` sets them); the model is a scripted
in-process one, so the figures measure the library and the stores, not a provider.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatMemory,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    Ordered,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.messages import Message
from advisorchain.model import Prompt
from advisorchain.testing import FunctionChatModel
from advisorchain.tools import tool

PLACES = {"inside": Ordered.HIGHEST_PRECEDENCE + 400, "outside": MessageChatMemoryAdvisor.DEFAULT_ORDER}
_QUESTION = re.compile(r"(\S+) t(\d+) rounds=(\d+)")


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def _reply(prompt: Prompt) -> AssistantMessage:
    """Question ``<cid> t<i> rounds=<n>``: n tool rounds (call ids ``<cid>.<i>.<round>``), then
    the answer ``done <cid> t<i>``."""
    messages = prompt.instructions
    start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    match = _QUESTION.fullmatch(messages[start].text)
    if match is None:
        raise ValueError(f"unexpected question {messages[start].text!r}")
    cid, turn, rounds = match.group(1), int(match.group(2)), int(match.group(3))
    responses = [m for m in messages[start:] if isinstance(m, ToolResponseMessage)]
    done = int(responses[-1].responses[0].id.rsplit(".", 1)[1]) + 1 if responses else 0
    if done < rounds:
        call_id = f"{cid}.{turn}.{done}"
        return AssistantMessage(None, [ToolCall(call_id, "lookup", f'{{"key": "{call_id}"}}')])
    return AssistantMessage(f"done {cid} t{turn}")


def expected_turn(cid: str, turn: int, rounds: int, place: str) -> list[Message]:
    """What one turn must store."""
    stored: list[Message] = [UserMessage(f"{cid} t{turn} rounds={rounds}")]
    if place == "inside":
        for r in range(rounds):
            call_id = f"{cid}.{turn}.{r}"
            stored.append(AssistantMessage(None, [ToolCall(call_id, "lookup", f'{{"key": "{call_id}"}}')]))
            stored.append(ToolResponseMessage([ToolResponse(call_id, "lookup", f"value of {call_id}")]))
    stored.append(AssistantMessage(f"done {cid} t{turn}"))
    return stored


@dataclass
class Options:
    conversations: int
    turns: int
    rounds: int
    concurrency: int
    overlap: int
    max_seconds: float


@dataclass
class Outcome:
    backend: str
    place: str
    conversations: int
    turns: int
    messages: int
    seconds: float
    verified: int
    failures: list[str]


def open_repository(backend: str, workdir: str, prefix: str = "soak") -> tuple[Any, Callable[[], None]]:
    """A fresh repository on ``backend`` (its table or keys named ``prefix`` and a random part) and
    a function that removes what it stored."""
    unique = f"{prefix}_{uuid.uuid4().hex[:10]}"
    if backend == "sqlite":
        from advisorchain import SQLiteChatMemoryRepository

        path = os.path.join(workdir, f"{unique}.db")
        return SQLiteChatMemoryRepository(path), lambda: None
    if backend == "postgres":
        import psycopg

        from advisorchain import PostgresChatMemoryRepository

        dsn = _env("ADVISORCHAIN_TEST_POSTGRES_DSN")

        def drop() -> None:
            with psycopg.connect(dsn) as conn:
                conn.execute(f"DROP TABLE IF EXISTS {unique}")

        return PostgresChatMemoryRepository(dsn, table_name=unique, max_size=8), drop
    if backend == "redis":
        import redis

        from advisorchain import RedisChatMemoryRepository

        url = _env("ADVISORCHAIN_TEST_REDIS_URL")

        def delete() -> None:
            with redis.Redis.from_url(url) as client:
                for key in client.scan_iter(match=f"*{unique}:*", count=1000):
                    client.delete(key)

        return RedisChatMemoryRepository(url, key_prefix=f"{unique}:"), delete
    raise SystemExit(f"unknown backend {backend!r}: use sqlite, postgres or redis")


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"{name} is not set: run under scripts/services.sh run ... (loopback servers)")
    return value


async def run_one(backend: str, place: str, options: Options, workdir: str) -> Outcome:
    """Run the conversations on one backend and place, then verify every stored conversation."""
    repository, cleanup = open_repository(backend, workdir)
    memory = MessageWindowChatMemory(repository, max_messages=100_000)
    advisor = MessageChatMemoryAdvisor(memory, order=PLACES[place])
    client = ChatClient(FunctionChatModel(_reply), default_advisors=[advisor], default_tools=[lookup])
    gate = asyncio.Semaphore(options.concurrency)
    deadline = time.monotonic() + options.max_seconds
    started: list[str] = []
    failures: list[str] = []

    async def turn(cid: str, t: int) -> None:
        spec = client.prompt(f"{cid} t{t} rounds={options.rounds}").param(ChatMemory.CONVERSATION_ID, cid)
        answer = await spec.acall().content()
        if answer != f"done {cid} t{t}":
            failures.append(f"{cid} t{t}: answered {answer!r}")

    async def conversation(n: int) -> None:
        async with gate:
            if time.monotonic() > deadline:
                return
            cid = f"c{n}"
            started.append(cid)
            for first in range(0, options.turns, options.overlap):
                last = min(first + options.overlap, options.turns)
                await asyncio.gather(*(turn(cid, t) for t in range(first, last)))

    begin = time.perf_counter()
    await asyncio.gather(*(conversation(n) for n in range(options.conversations)))
    seconds = time.perf_counter() - begin
    verified, messages = await asyncio.to_thread(_verify, repository, started, options, place, failures)
    repository.close()
    cleanup()
    return Outcome(
        backend, place, len(started), len(started) * options.turns, messages, seconds, verified, failures
    )


def _verify(
    repository: Any, cids: Sequence[str], options: Options, place: str, failures: list[str]
) -> tuple[int, int]:
    verified = messages = 0
    for cid in cids:
        stored = repository.find_by_conversation_id(cid)
        messages += len(stored)
        turns = [expected_turn(cid, t, options.rounds, place) for t in range(options.turns)]
        if options.overlap == 1:
            ok = stored == [m for turn in turns for m in turn]
        else:  # turns sent together may be stored in either order, each whole
            size = len(turns[0])
            chunks = [stored[i : i + size] for i in range(0, len(stored), size)]
            ok = len(stored) == size * len(turns) and sorted(map(repr, chunks)) == sorted(map(repr, turns))
        if ok:
            verified += 1
        else:
            failures.append(
                f"{cid}: stored {len(stored)} messages that are not its {options.turns} whole turns"
            )
    return verified, messages


def peak_rss_mib() -> float:
    """The process's peak resident set size in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def parse(argv: Sequence[str] | None = None) -> tuple[Options, list[str], list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1, help="tool rounds per turn")
    parser.add_argument("--concurrency", type=int, default=200, help="conversations at once")
    parser.add_argument("--overlap", type=int, default=1, help="turns of one conversation sent at once")
    parser.add_argument("--backends", default="sqlite,postgres,redis")
    parser.add_argument("--places", default="inside,outside")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=300.0,
        help="per backend and place: no conversation starts after it",
    )
    args = parser.parse_args(argv)
    for name in ("conversations", "turns", "concurrency", "overlap"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)!r}")
    options = Options(
        args.conversations, args.turns, args.rounds, args.concurrency, args.overlap, args.max_seconds
    )
    return options, args.backends.split(","), args.places.split(",")


def main(argv: Sequence[str] | None = None) -> int:
    options, backends, places = parse(argv)
    print(
        f"soak: {options.conversations} conversations x {options.turns} turns x {options.rounds} "
        f"tool rounds, {options.concurrency} concurrent, overlap {options.overlap}, "
        f"backends {backends}, places {places}"
    )
    failed = False
    with tempfile.TemporaryDirectory(prefix="advisorchain-soak-") as workdir:
        for backend in backends:
            for place in places:
                outcome = asyncio.run(run_one(backend, place, options, workdir))
                failed |= bool(outcome.failures) or outcome.verified != outcome.conversations
                print(
                    f"{backend:8} {place:7} {outcome.conversations:6} conversations {outcome.turns:7} turns "
                    f"in {outcome.seconds:7.1f} s = {outcome.turns / outcome.seconds:7.0f} turns/s; "
                    f"verified {outcome.verified}/{outcome.conversations} conversations exactly "
                    f"({outcome.messages} messages); peak RSS {peak_rss_mib():.0f} MiB"
                )
                for failure in outcome.failures[:10]:
                    print(f"  FAILED {failure}")
    print("soak: all verified" if not failed else "soak: FAILURES above")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
