"""Shared by the provider tests: where the recorded cassettes are, how a recorded request becomes a
Prompt, and how a request the adapter sent is compared with the recorded one (on the fields that
matter — roles, text, tool calls and their ids, tool-result pairing, order — not byte equality)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from advisorchain.errors import ModelError
from advisorchain.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.model import ChatClientMessageAggregator, ChatOptions, ChatResponse, Prompt
from advisorchain.models.anthropic import AnthropicChatModel
from advisorchain.models.openai import OpenAIChatModel
from advisorchain.replay import Cassette, load_cassette, replay_anthropic_client, replay_openai_client
from advisorchain.tools.api import ToolContext, ToolDefinition, ToolMetadata

REPO_ROOT = Path(__file__).resolve().parents[2]
_THINK = re.compile(r"^<think>\n?(.*?)\n?</think>\s*(.*)$", re.DOTALL)


def cassette_dir() -> Path:
    """``$ADVISORCHAIN_CASSETTES``, else ``<repo>/../shared/cassettes``."""
    return Path(os.environ.get("ADVISORCHAIN_CASSETTES") or REPO_ROOT.parent / "shared" / "cassettes")


def cassette_names(provider: str) -> list[str]:
    """The cassette files recorded for ``provider`` ("openai-chat" / "anthropic-messages")."""
    folder = cassette_dir()
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.glob("*.json") if read(p.name)["provider"] == provider)


def read(name: str) -> dict[str, Any]:
    """A cassette document; skips the test when the cassette folder is absent."""
    path = cassette_dir() / name
    if not cassette_dir().is_dir():
        pytest.skip(f"no cassette folder at {cassette_dir()} (set ADVISORCHAIN_CASSETTES to its path)")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def recorded_body(name: str, index: int) -> dict[str, Any]:
    body: dict[str, Any] = read(name)["interactions"][index]["request"]["body"]
    return body


def recorded_response(name: str, index: int) -> dict[str, Any]:
    response: dict[str, Any] = read(name)["interactions"][index]["response"]
    return response


# -- tools -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedTool:
    """A ToolCallback with a recorded definition. Adapters must never run tools: calling it fails."""

    definition: ToolDefinition
    metadata: ToolMetadata = field(default_factory=ToolMetadata)

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        raise AssertionError(f"a ChatModel executed tool {self.definition.name!r}; only the tool loop may")


def recorded_tools(body: Mapping[str, Any]) -> tuple[list[RecordedTool], list[dict[str, Any]]]:
    """The recorded client tools as ToolCallbacks, and the provider's own (server) tools as raw dicts."""
    client: list[RecordedTool] = []
    server: list[dict[str, Any]] = []
    for tool in body.get("tools") or []:
        spec = tool.get("function", tool)
        schema = spec.get("parameters", spec.get("input_schema"))
        if schema is None:
            server.append(tool)
        else:
            client.append(RecordedTool(ToolDefinition(spec["name"], spec.get("description", ""), schema)))
    return client, server


# -- prompts from recorded requests ------------------------------------------------------------------

_OPENAI_OWN = {"messages", "tools", "model", "stream", "stream_options", "top_p"}
_ANTHROPIC_OWN = {"messages", "tools", "model", "stream", "system", "max_tokens"}


def recorded_options(body: Mapping[str, Any], provider: str) -> ChatOptions:
    """ChatOptions that make the adapter send ``body``: recorded tools as tool callbacks, the
    OpenAI ``json_schema`` response format or Anthropic ``output_config.format`` as output_schema
    when the adapter builds exactly that, and every other recorded field as ``extra``."""
    tools, server_tools = recorded_tools(body)
    own = _OPENAI_OWN if provider == "openai-chat" else _ANTHROPIC_OWN
    extra = {k: v for k, v in body.items() if k not in own}
    if server_tools:
        extra["tools"] = server_tools
    if provider == "openai-chat" and body.get("stream") and "stream_options" not in body:
        extra["stream_options"] = None  # recorded without it: the adapter must leave it out
    schema = _native_schema(extra)
    if schema is not None:
        extra.pop("response_format", None)
        extra.pop("output_config", None)
    return ChatOptions(
        max_tokens=body.get("max_tokens") if provider != "openai-chat" else None,
        top_p=body.get("top_p"),
        tool_callbacks=tools,
        output_schema=schema,
        extra=extra,
    )


def _native_schema(extra: Mapping[str, Any]) -> dict[str, Any] | None:
    fmt = extra.get("response_format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        spec = fmt["json_schema"]
        if (
            spec.get("name") == "result"
            and spec.get("strict") is False
            and set(spec) == {"name", "schema", "strict"}
        ):
            return dict(spec["schema"])
    config = extra.get("output_config")
    if (
        isinstance(config, Mapping)
        and set(config) == {"format"}
        and config["format"].get("type") == "json_schema"
    ):
        return dict(config["format"]["schema"])
    return None


def openai_messages(wire: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Recorded Chat Completions messages as advisorchain messages (tool messages of a round join)."""
    messages: list[Message] = []
    names: dict[str, str] = {}
    for m in wire:
        role = m["role"]
        if role == "system":
            messages.append(SystemMessage(_text(m.get("content")) or ""))
        elif role == "user":
            messages.append(UserMessage(_text(m.get("content")) or ""))
        elif role == "assistant":
            messages.append(_openai_assistant(m, names))
        elif role == "tool":
            response = ToolResponse(
                m["tool_call_id"], names.get(m["tool_call_id"], ""), _text(m["content"]) or ""
            )
            if messages and isinstance(messages[-1], ToolResponseMessage):
                messages[-1] = ToolResponseMessage([*messages[-1].responses, response])
            else:
                messages.append(ToolResponseMessage([response]))
    return messages


def _openai_assistant(m: Mapping[str, Any], names: dict[str, str]) -> AssistantMessage:
    calls = [
        ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in m.get("tool_calls") or []
    ]
    names.update({c.id: c.name for c in calls})
    text, reasoning = _split_think(_text(m.get("content")))
    metadata: dict[str, Any] = {}
    for wire_field in ("reasoning_content", "reasoning"):
        if wire_field in m:
            metadata = {"reasoning": m[wire_field], "reasoning_field": wire_field}
    if reasoning is not None:
        metadata = {"reasoning": reasoning, "reasoning_field": "reasoning"}
    return AssistantMessage(text, calls, metadata)


def anthropic_messages(body: Mapping[str, Any]) -> list[Message]:
    """A recorded Messages-API request as advisorchain messages."""
    messages: list[Message] = []
    system = body.get("system")
    if isinstance(system, str):
        messages.append(SystemMessage(system))
    names: dict[str, str] = {}
    for turn in body["messages"]:
        blocks = (
            turn["content"]
            if isinstance(turn["content"], list)
            else [{"type": "text", "text": turn["content"]}]
        )
        if turn["role"] == "assistant":
            messages.append(_anthropic_assistant(blocks, names))
            continue
        results = [
            ToolResponse(b["tool_use_id"], names.get(b["tool_use_id"], ""), _text(b["content"]) or "")
            for b in blocks
            if b["type"] == "tool_result"
        ]
        if results:
            messages.append(ToolResponseMessage(results))
        messages.extend(UserMessage(b["text"]) for b in blocks if b["type"] == "text")
    return messages


def _anthropic_assistant(blocks: list[dict[str, Any]], names: dict[str, str]) -> AssistantMessage:
    calls = [ToolCall(b["id"], b["name"], json.dumps(b["input"])) for b in blocks if b["type"] == "tool_use"]
    names.update({c.id: c.name for c in calls})
    text = "".join(b["text"] for b in blocks if b["type"] == "text") or None
    keep = any(b["type"] not in ("text", "tool_use") for b in blocks)
    return AssistantMessage(text, calls, {"anthropic_content": blocks} if keep else {})


def _text(content: object) -> str | None:
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if p.get("type") == "text")
    return content if isinstance(content, str) else None


def _split_think(text: str | None) -> tuple[str | None, str | None]:
    """pydantic-ai sends Groq's reasoning back as a ``<think>`` prefix; split it off."""
    match = _THINK.match(text or "")
    if match is None:
        return text, None
    return match.group(2) or None, match.group(1)


# -- comparing requests ------------------------------------------------------------------------------


def openai_view(wire: Sequence[Mapping[str, Any]], *, relabel_ids: bool = False) -> list[tuple[Any, ...]]:
    """The fields of Chat Completions messages that must survive a round trip."""
    ids = _IdLabels(relabel_ids)
    view: list[tuple[Any, ...]] = []
    for m in wire:
        text, think = _split_think(_text(m.get("content")))
        reasoning = m.get("reasoning_content") or m.get("reasoning") or think or None
        calls = tuple(
            (ids(c["id"]), c["function"]["name"], c["function"]["arguments"])
            for c in m.get("tool_calls") or []
        )
        call_id = ids(m["tool_call_id"]) if "tool_call_id" in m else None
        view.append((m["role"], text or None, reasoning, calls, call_id))
    return view


def anthropic_view(turns: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """The fields of Messages-API turns that must survive a round trip."""
    return [(t["role"], tuple(_block_view(b) for b in t["content"])) for t in turns]


def _block_view(block: Mapping[str, Any]) -> tuple[Any, ...]:
    kind = block["type"]
    if kind == "text":
        return (kind, block["text"])
    if kind in ("tool_use", "server_tool_use"):
        return (kind, block["id"], block["name"], json.dumps(block["input"], sort_keys=True))
    if kind == "tool_result":
        return (kind, block["tool_use_id"], _text(block["content"]))
    if kind == "thinking":
        return (kind, block["thinking"], block["signature"])
    if kind == "redacted_thinking":
        return (kind, block["data"])
    return (kind, block.get("tool_use_id"), json.dumps(block.get("content"), sort_keys=True))


def tools_view(body: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Each tool's name, description and schema (client tools) or its whole spec (server tools)."""
    view: list[tuple[Any, ...]] = []
    for tool in body.get("tools") or []:
        spec = tool.get("function", tool)
        schema = spec.get("parameters", spec.get("input_schema"))
        if schema is None:
            view.append(("server", json.dumps(tool, sort_keys=True)))
        else:
            view.append((spec["name"], spec.get("description", ""), json.dumps(schema, sort_keys=True)))
    return view


def top_level(body: Mapping[str, Any]) -> dict[str, Any]:
    """Every request field other than the messages and the tools."""
    return {k: v for k, v in body.items() if k not in ("messages", "tools")}


class _IdLabels:
    """Replaces tool-call ids by the order they first appear in, to compare pairing only."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.labels: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        if not self.active:
            return value
        return self.labels.setdefault(value, f"id#{len(self.labels)}")


# -- replaying a whole recorded run through an adapter ------------------------------------------------


@dataclass
class Round:
    """One model call of a replayed run: the answer (aggregated when streamed) or the error."""

    streamed: bool
    response: ChatResponse | None = None
    chunks: list[ChatResponse] = field(default_factory=list)
    error: ModelError | None = None


def make_model(provider: str, model: str, cassette: Cassette) -> OpenAIChatModel | AnthropicChatModel:
    """The adapter for ``provider`` on a real SDK client that talks to ``cassette``."""
    if provider == "openai-chat":
        return OpenAIChatModel(model, client=replay_openai_client(cassette))
    return AnthropicChatModel(model, client=replay_anthropic_client(cassette))


def decode(provider: str, body: Mapping[str, Any]) -> list[Message]:
    if provider == "openai-chat":
        return openai_messages(body["messages"])
    return anthropic_messages(body)


async def replay_run(name: str) -> tuple[list[Round], Cassette]:
    """Drive the adapter through every recorded request of ``name``, as a client would: each next
    prompt is the previous one plus the adapter's own parsed answer plus the messages the recording
    added after it (tool results, a retry prompt); after an error, the recorded request as is."""
    doc = read(name)
    provider = doc["provider"]
    cassette = load_cassette(cassette_dir() / name, headers={"retry-after-ms": "1"})
    model = make_model(provider, recorded_body(name, 0)["model"], cassette)
    rounds: list[Round] = []
    messages: list[Message] = []
    while cassette.remaining:
        index = len(cassette.requests)
        body = recorded_body(name, index)
        if not rounds or rounds[-1].response is None:
            messages = decode(provider, body)
        else:
            before = recorded_body(name, index - 1)["messages"]
            answer = rounds[-1].response.result
            assert answer is not None
            added = decode(provider, {"messages": body["messages"][len(before) + 1 :]})
            recorded_answer = decode(provider, {"messages": body["messages"][len(before) : len(before) + 1]})
            messages = [*messages, answer.output, *_rename_results(added, recorded_answer, answer.output)]
        rounds.append(await _one_round(model, Prompt(messages, recorded_options(body, provider)), body))
    return rounds, cassette


def _rename_results(added: list[Message], recorded: list[Message], answer: AssistantMessage) -> list[Message]:
    """The recorded tool results, answering the ids of the adapter's own tool calls (a made-up id
    differs from the one the recording client made up)."""
    calls = recorded[0].tool_calls if recorded and isinstance(recorded[0], AssistantMessage) else ()
    ids = {old.id: new.id for old, new in zip(calls, answer.tool_calls, strict=False)}
    return [
        ToolResponseMessage([ToolResponse(ids.get(r.id, r.id), r.name, r.response_data) for r in m.responses])
        if isinstance(m, ToolResponseMessage)
        else m
        for m in added
    ]


async def _one_round(
    model: OpenAIChatModel | AnthropicChatModel, prompt: Prompt, body: Mapping[str, Any]
) -> Round:
    result = Round(streamed=bool(body.get("stream")))
    try:
        if result.streamed:
            async for chunk in model.stream(prompt):
                result.chunks.append(chunk)
            result.response = ChatClientMessageAggregator.aggregate(result.chunks)
        else:
            result.response = await model.call(prompt)
    except ModelError as exc:
        result.error = exc
    return result
