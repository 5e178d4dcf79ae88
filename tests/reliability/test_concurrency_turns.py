"""Turns on one conversation never interleave (API.md §6; issue 11, failure 2): concurrent
requests on one conversation wait for each other — tasks of one loop, a blocking call beside an
async one, and processes sharing SQLite, PostgreSQL or Redis — so every stored turn is whole."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from advisorchain import ChatMemory
from advisorchain.testing import FunctionChatModel
from tests.reliability.memory_support import agent_client, agent_reply, check_whole_turns, question, window
from tests.support.memory_backends import BACKENDS, PERSISTENT_BACKENDS

ROOT = Path(__file__).resolve().parents[2]
CID = ChatMemory.CONVERSATION_ID


@pytest.mark.parametrize("place", ["inside", "outside"])
@pytest.mark.parametrize("backend_name", BACKENDS)
async def test_concurrent_turns_on_one_conversation_are_stored_whole(
    make_backend: Any, backend_name: str, place: str
) -> None:
    memory = window(make_backend(backend_name).repository())
    client = agent_client(memory, place)

    answers = await asyncio.gather(
        *(client.prompt(question(str(t), 2)).param(CID, "c").acall().content() for t in range(6))
    )

    assert answers == [f"a{t}" for t in range(6)]
    assert sorted(check_whole_turns(await memory.aget("c"), place)) == [str(t) for t in range(6)]


def make_backend_in_memory() -> Any:
    from advisorchain import InMemoryChatMemoryRepository

    return InMemoryChatMemoryRepository()


async def test_streams_on_one_conversation_do_not_interleave() -> None:
    memory = window(make_backend_in_memory())
    client = agent_client(memory, "inside")

    async def run(t: int) -> str:
        spec = client.prompt(question(str(t), 2)).param(CID, "c")
        return "".join([d async for d in spec.astream().content()])

    assert await asyncio.gather(*(run(t) for t in range(4))) == [f"a{t}" for t in range(4)]
    assert sorted(check_whole_turns(await memory.aget("c"), "inside")) == ["0", "1", "2", "3"]


def test_a_blocking_call_beside_async_calls_waits_its_turn() -> None:
    memory = window(make_backend_in_memory())
    client = agent_client(memory, "inside")
    errors: list[BaseException] = []

    def blocking(t: int) -> None:
        try:
            client.prompt(question(f"s{t}", 2)).param(CID, "c").call().content()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    async def both() -> None:
        threads = [threading.Thread(target=blocking, args=(t,)) for t in range(3)]
        for thread in threads:
            thread.start()
        await asyncio.gather(
            *(client.prompt(question(f"a{t}", 2)).param(CID, "c").acall().content() for t in range(3))
        )
        for thread in threads:
            await asyncio.to_thread(thread.join)

    asyncio.run(both())

    assert errors == []
    assert len(check_whole_turns(memory.get("c"), "inside")) == 6


def test_different_conversations_do_not_wait_for_each_other() -> None:
    memory = window(make_backend_in_memory())
    release = threading.Event()
    started = threading.Event()

    async def slow_reply(prompt: Any) -> Any:
        started.set()
        await asyncio.to_thread(release.wait, 10)
        return "slow"

    from advisorchain.testing import FunctionChatModel

    slow = agent_client(memory, "outside", FunctionChatModel(slow_reply))
    fast = agent_client(memory, "outside")

    async def run() -> str | None:
        task = asyncio.ensure_future(slow.prompt("hold").param(CID, "busy").acall().content())
        await asyncio.to_thread(started.wait, 10)
        answer = await fast.prompt(question("1", 1)).param(CID, "free").acall().content()
        release.set()
        assert await task == "slow"
        return answer

    assert asyncio.run(run()) == "a1"


def _start(spec: dict[str, Any], place: str, tag: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.turn_runner", json.dumps(spec), place, "shared", tag, "3", "2"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


@pytest.mark.parametrize(
    ("backend_name", "place"), [(name, "inside") for name in PERSISTENT_BACKENDS] + [("sqlite", "outside")]
)
def test_turns_from_three_processes_on_one_conversation_are_stored_whole(
    make_backend: Any, backend_name: str, place: str
) -> None:
    backend = make_backend(backend_name)
    backend.repository().find_conversation_ids()  # creates the schema before the processes race
    runners = [_start(backend.spec, place, f"p{p}") for p in range(3)]
    for runner in runners:
        assert runner.stdin is not None
        runner.stdin.write("go\n")
        runner.stdin.flush()
    for runner in runners:
        _, errors = runner.communicate(timeout=600)  # a bound for a hang
        assert runner.returncode == 0, errors

    tags = check_whole_turns(backend.repository().find_by_conversation_id("shared"), place)
    assert sorted(tags) == sorted(f"p{p}.{i}" for p in range(3) for i in range(3))


@pytest.mark.parametrize("backend_name", BACKENDS)
async def test_a_turn_cancelled_while_waiting_for_its_turn_stores_nothing_and_blocks_no_one(
    make_backend: Any, backend_name: str
) -> None:
    memory = window(make_backend(backend_name).repository())
    release = asyncio.Event()
    holding = asyncio.Event()

    async def slow_then_normal(prompt: Any) -> Any:
        if getattr(prompt.instructions[-1], "text", None) == question("slow", 0):
            holding.set()
            await release.wait()
        return await agent_reply(prompt)

    client = agent_client(memory, "inside", FunctionChatModel(slow_then_normal))
    first = asyncio.ensure_future(client.prompt(question("slow", 0)).param(CID, "c").acall().content())
    await asyncio.wait_for(holding.wait(), 120)
    waiting = asyncio.ensure_future(client.prompt(question("gone", 1)).param(CID, "c").acall().content())
    await asyncio.sleep(0.05)  # it is queued behind the first turn
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()

    assert await asyncio.wait_for(first, 120) == "aslow"
    assert (
        await asyncio.wait_for(client.prompt(question("next", 1)).param(CID, "c").acall().content(), 120)
        == "anext"
    )
    assert check_whole_turns(await memory.aget("c"), "inside") == ["slow", "next"]
