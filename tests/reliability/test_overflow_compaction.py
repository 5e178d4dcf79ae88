"""End to end: a provider's real context-overflow answer, on both HTTP paths of each adapter, makes a
ContextCompactionAdvisor summarize the earlier turns once and retry (API.md §7, §14); memory stores
the compacted conversation; a second overflow is raised with the first chained."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fault_server import FaultServer, json_reply
from test_fault_parity import ADAPTERS, Adapter

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatMemory,
    ContextCompactionAdvisor,
    ContextLengthExceededError,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    UserMessage,
)

SUMMARY = "Ada asked about Paris and Rome; both are sunny."
EARLIER = [
    UserMessage("I'm Ada. How is Paris?"),
    AssistantMessage("Paris is sunny."),
    UserMessage("And Rome?"),
    AssistantMessage("Rome is sunny too."),
]


def _client(adapter: Adapter, server: FaultServer) -> tuple[ChatClient, MessageWindowChatMemory]:
    memory = MessageWindowChatMemory(max_messages=100)
    memory.add("ada", EARLIER)
    model = adapter.make(server.url, max_retries=0)
    advisors = [MessageChatMemoryAdvisor(memory), ContextCompactionAdvisor(max_tokens=100_000)]
    return ChatClient(model, default_advisors=advisors), memory


async def _ask(client: ChatClient, stream: bool) -> str | None:
    spec = client.prompt("How is Oslo?").param(ChatMemory.CONVERSATION_ID, "ada")
    if stream:
        return "".join([delta async for delta in spec.astream().content()])
    return await spec.acall().content()


def _final(adapter: Adapter, stream: bool) -> Any:
    return adapter.stream("Oslo is ", "cold.") if stream else adapter.answer("Oslo is cold.")


def _context_chain(error: BaseException) -> list[BaseException]:
    """The exceptions ``error`` was raised while handling (an SDK's own error may sit between)."""
    chain, current = [], error.__context__
    while current is not None:
        chain.append(current)
        current = current.__context__
    return chain


def _text(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False)


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("name", list(ADAPTERS))
async def test_a_real_overflow_answer_compacts_once_and_the_retry_answers(
    server: FaultServer, http_path: str, name: str, stream: bool
) -> None:
    adapter = ADAPTERS[name]
    client, memory = _client(adapter, server)
    server.queue(json_reply(400, adapter.overflow_body))
    server.queue(adapter.answer(SUMMARY))  # the summarizer: the chain's own model, called once
    server.queue(_final(adapter, stream))

    assert await _ask(client, stream) == "Oslo is cold."

    first, summary, retry = (_text(r.body) for r in server.requests)
    assert "Paris is sunny." in first and "Summary of the earlier conversation" not in first
    assert "Paris is sunny." in summary and '"tools"' not in summary  # the summarizer gets no tools
    assert f"Summary of the earlier conversation: {SUMMARY}" in retry
    assert "Paris is sunny." not in retry and "How is Oslo?" in retry
    assert [m.text for m in memory.get("ada")] == [
        f"Summary of the earlier conversation: {SUMMARY}",
        "How is Oslo?",
        "Oslo is cold.",
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("name", list(ADAPTERS))
async def test_a_second_overflow_is_raised_with_the_first_chained_and_nothing_stored(
    server: FaultServer, http_path: str, name: str, stream: bool
) -> None:
    adapter = ADAPTERS[name]
    client, memory = _client(adapter, server)
    server.queue(json_reply(400, adapter.overflow_body))
    server.queue(adapter.answer(SUMMARY))
    server.queue(json_reply(400, adapter.overflow_body))

    with pytest.raises(ContextLengthExceededError) as caught:
        await _ask(client, stream)

    assert any(isinstance(e, ContextLengthExceededError) for e in _context_chain(caught.value))
    assert caught.value.status_code == 400
    assert len(server.requests) == 3
    assert memory.get("ada") == EARLIER  # the failed turn stored nothing, not even the summary
