"""Turns over a real server (uvicorn on loopback): a reader that goes away mid-answer cancels the
run and memory keeps nothing of it; two tabs on one conversation never interleave their turns."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx

from advisorchain import AssistantMessage, ChatResponse, MessageWindowChatMemory, Prompt
from advisorchain.model import Generation
from advisorchain.testing import FunctionChatModel, stream_chunks
from advisorchain.web import create_app
from tests.web.web_helpers import AUTH, TOKEN, agent, events, named, serve, wait_for


class _Hanging:
    """A model whose first stream sends one word, then hangs until it is cancelled."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.closed = threading.Event()
        self.cancelled = False

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        if self.started.is_set():  # later turns answer at once
            for chunk in stream_chunks(ChatResponse((Generation(AssistantMessage("Fine."), "stop"),))):
                yield chunk
            return
        try:
            yield ChatResponse((Generation(AssistantMessage("Half an ")),))
            self.started.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        finally:
            self.closed.set()


def test_a_reader_that_goes_away_mid_answer_cancels_the_run_and_nothing_is_stored() -> None:
    hanging = _Hanging()
    model = FunctionChatModel(lambda prompt: "unused", stream_fn=hanging.stream)
    client, memory = agent(model)
    app = create_app(client, token=TOKEN)
    with serve(app) as served, httpx.Client(base_url=served.base, headers=AUTH, timeout=20) as http:
        conversation = http.post("/api/conversations").json()["id"]
        with http.stream("POST", f"/api/conversations/{conversation}/turns", json={"text": "Tell me"}) as r:
            for line in r.iter_lines():
                if line.startswith("event: text"):
                    break  # the answer has begun: close the tab
        wait_for(hanging.closed.is_set)
        assert hanging.cancelled
        wait_for(lambda: not app.state.service.running(conversation))
        assert memory.get(conversation) == []
        after = events(http.post(f"/api/conversations/{conversation}/turns", json={"text": "Again"}).text)
        assert "".join(d["text"] for d in named(after, "text")) == "Fine."
        assert [m.text for m in memory.get(conversation)] == ["Again", "Fine."]


class _Slow:
    """A model that streams its answer slowly, echoing the question."""

    def __init__(self) -> None:
        self.prompts: list[list[str | None]] = []

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        self.prompts.append([getattr(m, "text", None) for m in prompt.instructions])
        question = prompt.last_user_message.text if prompt.last_user_message else ""
        for word in ["re:", *question.split()]:
            await asyncio.sleep(0.05)
            yield ChatResponse((Generation(AssistantMessage(word + " ")),))
        yield ChatResponse((Generation(AssistantMessage(None), "stop"),))


async def _two_turns(bases: list[str], conversation: str) -> list[list[tuple[str, Any]]]:
    async def turn(base: str, text: str, delay: float) -> list[tuple[str, Any]]:
        await asyncio.sleep(delay)
        async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=30) as http:
            response = await http.post(f"/api/conversations/{conversation}/turns", json={"text": text})
            return events(response.text)

    return list(
        await asyncio.gather(turn(bases[0], "one two three", 0), turn(bases[-1], "four five six", 0.1))
    )


def _stored_whole(memory: MessageWindowChatMemory, conversation: str) -> list[str | None]:
    texts = [m.text for m in memory.get(conversation)]
    assert texts in (
        ["one two three", "re: one two three ", "four five six", "re: four five six "],
        ["four five six", "re: four five six ", "one two three", "re: one two three "],
    )
    return texts


def test_two_tabs_on_one_conversation_take_turns_and_the_second_waits_for_the_first() -> None:
    slow = _Slow()
    client, memory = agent(FunctionChatModel(lambda prompt: "unused", stream_fn=slow.stream))
    app = create_app(client, token=TOKEN)
    with serve(app) as served:
        conversation = app.state.service.open("shared")
        first, second = asyncio.run(_two_turns([served.base], conversation))
    assert named(first, "queued") == [] and len(named(second, "queued")) == 1
    texts = _stored_whole(memory, conversation)  # type: ignore[arg-type]
    assert slow.prompts[1][:2] == texts[:2]  # the second turn saw the first one whole


def test_two_pages_serving_one_client_still_never_interleave_turns() -> None:
    """Two apps have two sets of page locks: what keeps the turns apart is the ChatClient's own
    conversation lock (§6)."""
    slow = _Slow()
    client, memory = agent(FunctionChatModel(lambda prompt: "unused", stream_fn=slow.stream))
    first_app, second_app = create_app(client, token=TOKEN), create_app(client, token=TOKEN)
    with serve(first_app) as one, serve(second_app) as two:
        for app in (first_app, second_app):
            app.state.service.open("shared")
        first, second = asyncio.run(_two_turns([one.base, two.base], "shared"))
    assert named(first, "queued") == named(second, "queued") == []  # neither page knew of the other
    texts = _stored_whole(memory, "shared")  # type: ignore[arg-type]
    assert slow.prompts[1][:2] == texts[:2]


def test_a_conversation_cannot_be_deleted_while_a_turn_runs_on_it() -> None:
    hanging = _Hanging()
    client, memory = agent(FunctionChatModel(lambda prompt: "unused", stream_fn=hanging.stream))
    app = create_app(client, token=TOKEN)
    with serve(app) as served, httpx.Client(base_url=served.base, headers=AUTH, timeout=20) as http:
        conversation = http.post("/api/conversations").json()["id"]
        with http.stream("POST", f"/api/conversations/{conversation}/turns", json={"text": "Tell me"}) as r:
            for line in r.iter_lines():
                if line.startswith("event: text"):
                    refused = http.delete(f"/api/conversations/{conversation}")
                    assert refused.status_code == 409 and "a turn is running" in refused.json()["error"]
                    break
        wait_for(lambda: not app.state.service.running(conversation))
        assert memory.get(conversation) == []  # the cancelled turn stored nothing
        assert http.delete(f"/api/conversations/{conversation}").status_code == 204
        assert http.get(f"/api/conversations/{conversation}").status_code == 404
