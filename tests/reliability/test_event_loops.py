"""One model object used from several event loops — ``asyncio.run`` twice, ``call()`` beside
``acall()``, a sync sub-agent under ``acall()``, a worker thread with its own loop — never fails with
an event-loop error. The server keeps connections alive, as real providers do, so a pooled
connection of one loop would be reused from another if the adapter let it."""

from __future__ import annotations

import asyncio
import gc
import threading

import openai

from advisorchain import ChatClient, Prompt, UserMessage, tool
from advisorchain.model import ChatModel
from advisorchain.models._http.loops import LoopClients
from advisorchain.models.anthropic import AnthropicChatModel
from advisorchain.models.openai import OpenAIChatModel
from tests.support.openai_server import ScriptedServer, json_reply, sse_reply
from tests.support.payloads import (
    anthropic_text_events,
    openai_completion,
    openai_text_events,
    openai_tool_events,
)


def _openai(server: ScriptedServer) -> OpenAIChatModel:
    return OpenAIChatModel("m", base_url=server.url + "/v1", api_key="k", max_retries=0, timeout=60)


def _anthropic(server: ScriptedServer) -> AnthropicChatModel:
    return AnthropicChatModel("m", base_url=server.url, api_key="k", max_retries=0, timeout=60)


def _anthropic_message(text: str) -> dict[str, object]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


async def _ask(model: ChatModel) -> str | None:
    return (await model.call(Prompt([UserMessage("hi")]))).text


async def _ask_streamed(model: ChatModel) -> str:
    return "".join([c.text or "" async for c in model.stream(Prompt([UserMessage("hi")]))])


def test_openai_model_works_across_two_asyncio_runs(server: ScriptedServer) -> None:
    model = _openai(server)
    server.queue(*(json_reply(200, openai_completion(f"answer {i}")) for i in range(3)))

    answers = [asyncio.run(_ask(model)) for _ in range(3)]

    assert answers == ["answer 0", "answer 1", "answer 2"]


def test_openai_stream_works_across_two_asyncio_runs(server: ScriptedServer) -> None:
    model = _openai(server)
    server.queue(sse_reply(openai_text_events("first")), sse_reply(openai_text_events("second")))

    assert [asyncio.run(_ask_streamed(model)) for _ in range(2)] == ["first", "second"]


def test_anthropic_model_works_across_two_asyncio_runs(server: ScriptedServer) -> None:
    model = _anthropic(server)
    server.queue(json_reply(200, _anthropic_message("one")))
    server.queue(sse_reply(anthropic_text_events("two"), done=False, event_names=True))

    assert [asyncio.run(_ask(model)), asyncio.run(_ask_streamed(model))] == ["one", "two"]


def test_a_user_client_keeps_its_configuration_on_every_loop(server: ScriptedServer) -> None:
    client = openai.AsyncOpenAI(
        api_key="user-key",
        base_url=server.url + "/v1",
        organization="org-1",
        project="proj-1",
        default_headers={"x-team": "search"},
        max_retries=0,
    )
    model = OpenAIChatModel("m", client=client)
    server.queue(*(json_reply(200, openai_completion("ok")) for _ in range(2)))

    for _ in range(2):
        asyncio.run(_ask(model))

    for request in server.requests:
        headers = request.headers
        assert headers["authorization"] == "Bearer user-key"
        assert (headers["openai-organization"], headers["openai-project"]) == ("org-1", "proj-1")
        assert headers["x-team"] == "search"


async def test_sync_call_beside_acall_on_one_model(server: ScriptedServer) -> None:
    model = _openai(server)
    client = ChatClient(model)
    server.queue(*(json_reply(200, openai_completion("same")) for _ in range(8)))

    def blocking() -> list[str | None]:
        return [client.prompt("hi").call().content() for _ in range(4)]

    async def concurrent() -> list[str | None]:
        return [await client.prompt("hi").acall().content() for _ in range(4)]

    sync_answers, async_answers = await asyncio.gather(asyncio.to_thread(blocking), concurrent())

    assert sync_answers + async_answers == ["same"] * 8


async def test_a_worker_thread_with_its_own_loop_shares_the_model(server: ScriptedServer) -> None:
    model = _openai(server)
    server.queue(*(json_reply(200, openai_completion("ok")) for _ in range(3)))

    first = await _ask(model)
    in_thread = await asyncio.to_thread(lambda: asyncio.run(_ask(model)))
    again = await _ask(model)

    assert [first, in_thread, again] == ["ok", "ok", "ok"]


async def test_a_sync_sub_agent_tool_under_acall_uses_the_same_model(server: ScriptedServer) -> None:
    model = _openai(server)
    helper = ChatClient(model)

    @tool
    def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        return helper.prompt(question).call().content() or ""

    server.queue(
        sse_reply(openai_tool_events("ask_helper", ['{"question": "capital?"}'])),
        json_reply(200, openai_completion("Paris")),
        sse_reply(openai_text_events("The helper says Paris.")),
    )
    chunks = ChatClient(model).prompt("capital of France?").tools(ask_helper).astream().content()

    assert "".join([c async for c in chunks]) == "The helper says Paris."
    assert server.requests[2].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Paris",
    }


def test_a_finished_loop_frees_its_client() -> None:
    clients = LoopClients(
        openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"), lambda c, h: c.copy(http_client=h)
    )

    async def use() -> openai.AsyncOpenAI:
        return await clients.current()

    made = [asyncio.run(use()) for _ in range(2)]
    gc.collect()

    assert made[0] is not made[1]
    assert made[0].api_key == made[1].api_key == "k"
    assert clients.loops == 0


async def test_one_loop_gets_one_client() -> None:
    clients = LoopClients(
        openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"), lambda c, h: c.copy(http_client=h)
    )

    first, second = await clients.current(), await clients.current()

    assert first is second
    assert first is not clients.template
    assert first._client is not clients.template._client


def test_concurrent_loops_in_threads_each_get_their_own_client() -> None:
    clients = LoopClients(
        openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"), lambda c, h: c.copy(http_client=h)
    )
    made: list[openai.AsyncOpenAI] = []
    barrier = threading.Barrier(4)

    def run() -> None:
        async def use() -> None:
            made.append(await clients.current())
            await asyncio.to_thread(barrier.wait, 5)

        asyncio.run(use())

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert len({id(c) for c in made}) == 4


async def test_a_derived_client_keeps_timeouts_retries_and_headers() -> None:
    template = openai.AsyncOpenAI(
        api_key="k",
        base_url="http://127.0.0.1:9/v1",
        timeout=12.5,
        max_retries=4,
        default_headers={"x-app": "a"},
        default_query={"api-version": "1"},
    )
    clients = LoopClients(template, lambda c, h: c.copy(http_client=h))

    derived = await clients.current()

    assert (derived.timeout, derived.max_retries, derived.base_url) == (12.5, 4, template.base_url)
    assert derived.default_headers["x-app"] == "a"
    assert derived.default_query == template.default_query
