"""Cache-aligned compaction (API.md §14, §21): with a PromptCacheAdvisor in the chain, the summary
request is the conversation's own prefix — the same system message, tools and tool choice, the
summarized messages with the same cache points — plus one instruction, so it reads the cache; on the
real Anthropic adapter against a loopback server that emulates prefix caching, call and stream."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import (
    AdvisorParams,
    ChatClient,
    ChatClientMessageAggregator,
    ChatMemory,
    ChatOptions,
    ContextCompactionAdvisor,
    InMemoryChatMemoryRepository,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    PromptCacheAdvisor,
)
from advisorchain.tools.function import tool
from tests.support.anthropic_cache import CacheEmulator
from tests.support.openai_server import running_server

pytest.importorskip("anthropic", reason="the anthropic extra is not installed")
from advisorchain.models.anthropic import AnthropicChatModel

SYSTEM = "You are the release assistant. " * 200
INSTRUCTION_END = ContextCompactionAdvisor.ALIGNED_INSTRUCTION_SUFFIX.strip()


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key} " * 10


def _is_summary_request(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]["content"][-1]
    return last.get("type") == "text" and last["text"].endswith(INSTRUCTION_END)


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    if _is_summary_request(body):
        return {"text": "The user asked several questions; each was looked up."}
    last = body["messages"][-1]["content"][-1]
    if last.get("type") == "tool_result":
        return {"text": "Here is the answer, in some detail. " * 5}
    return {"tool": "lookup", "input": {"key": "release"}}


async def _turn(client: ChatClient, text: str, *, stream: bool) -> Any:
    spec = client.prompt(text).tools(lookup).param(ChatMemory.CONVERSATION_ID, "c1")
    if stream:
        return ChatClientMessageAggregator.aggregate_responses(
            [c async for c in spec.astream().chat_client_responses()]
        )
    return await spec.acall().chat_client_response()


@pytest.mark.parametrize("stream", [False, True])
async def test_the_summary_request_is_the_conversations_own_prefix_and_reads_the_cache(stream: bool) -> None:
    emulator = CacheEmulator(_reply)
    memory = MessageChatMemoryAdvisor(
        MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=1000)
    )
    compaction = ContextCompactionAdvisor(max_tokens=2300)
    with running_server(emulator) as server:
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k")
        client = ChatClient(
            model,
            default_system=SYSTEM,
            default_advisors=[memory, compaction, PromptCacheAdvisor()],
            default_options=ChatOptions(extra={"tool_choice": {"type": "auto"}}),
        )
        responses = [
            await _turn(client, f"question {i}: " + "tell me more " * 20, stream=stream) for i in range(8)
        ]
    bodies, usages = emulator.bodies, emulator.usages
    summaries = [i for i, b in enumerate(bodies) if _is_summary_request(b)]
    assert summaries, "the conversation never went over max_tokens"
    first = summaries[0]
    summary, before = bodies[first], bodies[first - 1]
    # The same system blocks (marked), the same tools and tool choice as the conversation's calls.
    assert summary["system"] == before["system"] and summary["system"][0]["cache_control"] == {
        "type": "ephemeral"
    }
    assert summary["tools"] == before["tools"] and summary["tool_choice"] == {"type": "auto"}

    # The conversation's messages in their order (memory keeps each turn's question and answer),
    # then one instruction: the previous turn's first request is a prefix of it.
    def blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [
            (m["role"], {k: v for k, v in b.items() if k != "cache_control"})
            for m in body["messages"]
            for b in m["content"]
        ]

    asked, earlier = blocks(summary), blocks(bodies[first - 2])
    assert asked[: len(earlier)] == earlier
    assert asked[len(earlier)][0] == "assistant" and len(asked) == len(earlier) + 2
    marks = [b.get("cache_control") for m in summary["messages"] for b in m["content"]]
    assert marks[-2:] == [{"type": "ephemeral"}, None]  # the prefix's last message; the instruction
    assert marks.count(None) == len(marks) - 1
    # It reads what the conversation wrote: nearly all of its prompt comes from the cache.
    usage = usages[first]
    prompt = sum(usage[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
    assert usage["cache_read_input_tokens"] / prompt > 0.85
    # The request after it begins with the summary message; the system message is sent as it was.
    after = bodies[first + 1]
    assert after["system"] == before["system"]
    assert after["messages"][0]["content"][0]["text"].startswith(ContextCompactionAdvisor.SUMMARY_PREFIX)
    # The summary counts in the run (§17).
    compacted_turn = next(r for r in responses if r.context[AdvisorParams.RUN_USAGE].requests == 3)
    assert compacted_turn is not None


@pytest.mark.parametrize("stream", [False, True])
async def test_without_the_cache_advisor_the_summary_request_is_as_before(stream: bool) -> None:
    emulator = CacheEmulator(lambda body: {"text": "short"} if "tools" not in body else _reply(body))
    memory = MessageChatMemoryAdvisor(
        MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=1000)
    )
    with running_server(emulator) as server:
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k")
        client = ChatClient(
            model, default_system=SYSTEM, default_advisors=[memory, ContextCompactionAdvisor(max_tokens=2300)]
        )
        for i in range(8):
            await _turn(client, f"question {i}: " + "tell me more " * 20, stream=stream)
    plain = [b for b in emulator.bodies if "tools" not in b]
    assert plain, "the conversation never went over max_tokens"
    assert plain[0]["system"].startswith("You compact a conversation")
    assert "cache_control" not in str(plain[0])
