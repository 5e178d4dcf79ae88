"""Cancellation at every point of a 3-round tool loop (2 tool rounds, then the answer), on the call
and the stream path, with memory inside and outside the loop, on all four repositories: no task is
left, every model stream is closed, memory holds whole turns (inside the loop: whole rounds) and
nothing of the cancelled turn's unfinished part, and the conversation goes on with a next turn."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    ChatClientRequest,
    ChatMemory,
    ChatResponse,
    Ordered,
)
from advisorchain.advisors.api import CallAdvisorChain, ChatClientResponse, StreamAdvisorChain
from advisorchain.model import Prompt
from advisorchain.testing import FunctionChatModel, stream_chunks
from advisorchain.tools import tool
from tests.reliability.memory_support import (
    agent_client,
    agent_reply,
    check_whole_turns,
    expected_turn,
    question,
    turns_of,
    window,
)
from tests.support.memory_backends import BACKENDS

CID = ChatMemory.CONVERSATION_ID
POINTS = [
    "before-turn",  # in an advisor outside everything, before memory is read
    "model-1",
    "tool-1",
    "between-2",  # inside the loop, after round 1 was stored, before the second model call
    "model-2",
    "tool-2",
    "between-3",
    "model-3",
]


class Pauses:
    """Named points where the cancelled turn stops for good once it reaches the chosen one."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.reached = asyncio.Event()
        self.counts: dict[str, int] = {}

    async def at(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if f"{kind}-{self.counts[kind]}" == self.target or kind == self.target:
            self.reached.set()
            await asyncio.Event().wait()  # until cancelled


class PauseAdvisor:
    """An advisor that reaches a pause point on every pass, on the call and the stream path."""

    def __init__(self, pauses: Pauses, kind: str, order: int) -> None:
        self.pauses, self.kind, self.order, self.name = pauses, kind, order, f"pause {kind}"

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        await self.pauses.at(self.kind)
        return await chain.next_call(request)

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        await self.pauses.at(self.kind)
        async for chunk in chain.next_stream(request):
            yield chunk


class Streams:
    """Counts the model streams opened and closed."""

    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0


def _paused_client(memory: Any, place: str, pauses: Pauses, streams: Streams) -> Any:
    async def reply(prompt: Prompt) -> AssistantMessage:
        await pauses.at("model")
        return await agent_reply(prompt)

    async def stream(prompt: Prompt) -> AsyncIterator[ChatResponse]:
        streams.opened += 1
        try:
            message = await reply(prompt)
            for chunk in stream_chunks(
                ChatResponse.of(message, "tool_calls" if message.tool_calls else "stop")
            ):
                yield chunk
        finally:
            streams.closed += 1

    @tool(name="lookup")
    async def paused_lookup(key: str) -> str:
        """Look a key up."""
        await pauses.at("tool")
        return f"value of {key}"

    advisors = [
        PauseAdvisor(pauses, "before-turn", Ordered.HIGHEST_PRECEDENCE + 100),
        PauseAdvisor(pauses, "between", Ordered.LOWEST_PRECEDENCE - 1),
    ]
    model = FunctionChatModel(reply, stream_fn=stream)
    client = agent_client(memory, place, model, advisors=advisors, tools=[paused_lookup])
    return client


async def _cancel_at(client: Any, pauses: Pauses, path: str) -> None:
    spec = client.prompt(question("x", 2)).param(CID, "c")

    async def consume() -> None:
        if path == "call":
            await spec.acall().content()
        else:
            async for _ in spec.astream().content():
                pass

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(pauses.reached.wait(), 120)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _no_task_left(seconds: float = 120.0) -> list[asyncio.Task[Any]]:
    """The tasks still running once the others ended (a worker thread of a store may take a while
    to hand its result back on a busy machine: a bound for a hang, not a timing)."""
    me = asyncio.current_task()
    deadline = time.monotonic() + seconds
    while True:
        left = [t for t in asyncio.all_tasks() if t is not me]
        if not left or time.monotonic() > deadline:
            return left
        await asyncio.sleep(0.01)


def _check_memory(stored: list[Any], place: str) -> None:
    """Whole turns before and after; of the cancelled turn, inside the loop only whole rounds."""
    turns = turns_of(stored)
    assert check_whole_turns(turns[0], place) == ["0"]
    assert check_whole_turns(turns[-1], place) == ["n"]
    middle = turns[1:-1]
    if place == "outside" or not middle:
        assert middle == []
        return
    (cancelled,) = middle
    assert len(cancelled) in (3, 5), f"a cancelled turn left {cancelled!r}"
    assert cancelled == expected_turn("x", 2, "inside")[: len(cancelled)]


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("path", ["call", "stream"])
@pytest.mark.parametrize("place", ["inside", "outside"])
@pytest.mark.parametrize("backend_name", BACKENDS)
async def test_a_turn_cancelled_anywhere_leaves_whole_memory_and_the_conversation_goes_on(
    make_backend: Any, backend_name: str, place: str, path: str, point: str
) -> None:
    memory = window(make_backend(backend_name).repository())
    plain = agent_client(memory, place)
    await plain.prompt(question("0", 1)).param(CID, "c").acall().content()
    pauses, streams = Pauses(point), Streams()
    client = _paused_client(memory, place, pauses, streams)

    await _cancel_at(client, pauses, path)

    assert await _no_task_left() == []
    assert streams.opened == streams.closed
    answer = await asyncio.wait_for(plain.prompt(question("n", 1)).param(CID, "c").acall().content(), 120)
    assert answer == "an"
    _check_memory(await memory.aget("c"), place)


@pytest.mark.parametrize("place", ["inside", "outside"])
@pytest.mark.parametrize("backend_name", BACKENDS)
async def test_a_stream_abandoned_after_the_first_words_of_the_answer_stores_no_answer(
    make_backend: Any, backend_name: str, place: str
) -> None:
    memory = window(make_backend(backend_name).repository())
    plain = agent_client(memory, place)
    await plain.prompt(question("0", 1)).param(CID, "c").acall().content()
    client = _paused_client(memory, place, Pauses("never"), Streams())

    stream = client.prompt(question("x", 2)).param(CID, "c").astream().content()
    assert await anext(stream) == "ax"
    await stream.aclose()

    assert await _no_task_left() == []
    await asyncio.wait_for(plain.prompt(question("n", 1)).param(CID, "c").acall().content(), 120)
    stored = await memory.aget("c")
    assert AssistantMessage("ax") not in stored
    _check_memory(stored, place)
