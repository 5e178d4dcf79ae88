"""Nothing of a failed provider answer is stored: a ChatClient with MessageChatMemoryAdvisor over
InMemoryChatMemoryRepository, the real OpenAI adapter, and a server that fails in each way —
after the failed turn the stored conversation is exactly what it was before."""

from __future__ import annotations

import pytest

from advisorchain import (
    ChatClient,
    InMemoryChatMemoryRepository,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ModelError,
    tool,
)
from advisorchain.models.openai import OpenAIChatModel
from tests.support.openai_server import Reset, ScriptedServer, Stall, json_reply, sse_reply
from tests.support.payloads import openai_completion, openai_text_events, openai_tool_events

FAILURES = {
    "text cut short": sse_reply(openai_text_events("The answer is f", finish_reason=None), done=False),
    "tool arguments cut short": sse_reply(
        openai_tool_events("lookup", ['{"key": "a'], finish_reason=None), done=False
    ),
    "no choices": sse_reply([{"id": "x", "choices": []}]),
    "reset mid-stream": [*sse_reply(openai_text_events("par"), finished=False)[:2], Reset()],
    "stall mid-stream": [*sse_reply(openai_text_events("par"), finished=False)[:2], Stall()],
    "server error": json_reply(500, {"error": {"message": "down"}}),
}
CALL_FAILURES = {
    "no choices": json_reply(200, {"id": "x", "choices": []}),
    "reset": [Reset()],
    "stall": [Stall()],
    "rate limited": json_reply(429, {"error": {"message": "slow down"}}),
}


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _client(server: ScriptedServer) -> tuple[ChatClient, MessageWindowChatMemory]:
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    model = OpenAIChatModel(
        "fault-model", base_url=server.url + "/v1", api_key="k", max_retries=0, timeout=2.0
    )
    return ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)]), memory


async def _first_turn(server: ScriptedServer, client: ChatClient) -> None:
    server.queue(json_reply(200, openai_completion("Hello Ada.")))
    assert await client.prompt("I'm Ada.").acall().content() == "Hello Ada."


FAILED_TURNS = [
    *(pytest.param("stream", failure, id=f"stream, {name}") for name, failure in FAILURES.items()),
    *(pytest.param("call", failure, id=f"call, {name}") for name, failure in CALL_FAILURES.items()),
]


@pytest.mark.parametrize(("path", "failure"), FAILED_TURNS)
async def test_a_failed_turn_leaves_the_stored_conversation_unchanged(
    server: ScriptedServer, path: str, failure: list  # type: ignore[type-arg]
) -> None:
    """No part of the failed answer is stored, nor the question: the conversation is as before."""
    client, memory = _client(server)
    await _first_turn(server, client)
    before = memory.get("default")
    server.queue(failure)

    with pytest.raises(ModelError):
        if path == "stream":
            async for _ in client.prompt("What is my name?").tools(lookup).astream().content():
                pass
        else:
            await client.prompt("What is my name?").acall().content()

    assert memory.get("default") == before


async def test_the_conversation_continues_after_a_failed_turn(server: ScriptedServer) -> None:
    client, _memory = _client(server)
    await _first_turn(server, client)
    server.queue(FAILURES["text cut short"])
    with pytest.raises(ModelError):
        await client.prompt("What is my name?").acall().content()
    server.queue(json_reply(200, openai_completion("You are Ada.")))

    assert await client.prompt("What is my name?").acall().content() == "You are Ada."
    sent = server.requests[-1].body["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "I'm Ada."),
        ("assistant", "Hello Ada."),
        ("user", "What is my name?"),
    ]
