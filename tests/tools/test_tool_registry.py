"""One tool registry: one uniqueness check with one error type, definitions resolved once,
arguments parsed once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    ChainConfigurationError,
    ChatClient,
    ChatOptions,
    ToolCall,
    ToolCallingManager,
    ToolContext,
    ToolDefinition,
    ToolMetadata,
    tool,
    tool_callbacks,
)
from advisorchain.testing import ScriptedChatModel


@tool
def ping(host: str) -> str:
    """Ping a host."""
    return f"pong {host}"


@tool(name="ping")
def other_ping(host: str) -> str:
    """Another ping."""
    return host


class Raw:
    """A ToolCallback that takes only the raw argument text."""

    definition = ToolDefinition("raw", "raw", {"type": "object", "properties": {"x": {"type": "integer"}}})
    metadata = ToolMetadata()

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        self.seen.append(arguments)
        return "ok"


class Parsed(Raw):
    """A ToolCallback that also takes parsed arguments (the manager prefers that)."""

    definition = ToolDefinition(
        "parsed", "parsed", {"type": "object", "properties": {"x": {"type": "integer"}}}
    )

    def __init__(self) -> None:
        super().__init__()
        self.parsed: list[Mapping[str, Any]] = []

    async def call_parsed(self, arguments: Mapping[str, Any], context: ToolContext | None) -> str:
        self.parsed.append(arguments)
        return "ok"


@pytest.mark.parametrize(
    "make",
    [
        lambda: tool_callbacks(ping, other_ping),
        lambda: ChatOptions(tool_callbacks=[ping, other_ping]),
        lambda: (
            ChatClient(ScriptedChatModel(["x"])).prompt("q").tools(ping).tools(other_ping).call().content()
        ),
        lambda: (
            ChatClient(ScriptedChatModel(["x"]), default_tools=[ping])
            .prompt("q")
            .tools(other_ping)
            .call()
            .content()
        ),
    ],
    ids=["tool_callbacks", "ChatOptions", "request", "defaults+request"],
)
def test_duplicate_tool_names_are_one_error_everywhere(make: Any) -> None:
    with pytest.raises(ChainConfigurationError, match="two tools are named 'ping'"):
        make()


def test_the_options_registry_resolves_definitions_once_in_order() -> None:
    options = ChatOptions(tool_callbacks=[ping, Raw()])
    assert [d.name for d in options.tool_registry.definitions] == ["ping", "raw"]
    assert options.tool_registry.get("ping") is ping
    assert [d.name for d in ToolCallingManager().resolve_tool_definitions(options)] == ["ping", "raw"]


def test_something_that_is_not_a_tool_callback_is_refused_by_name() -> None:
    with pytest.raises(ChainConfigurationError, match="is not a ToolCallback"):
        ChatOptions(tool_callbacks=[lambda: None])  # type: ignore[list-item]


async def test_arguments_are_parsed_once_and_handed_over_parsed_when_the_tool_takes_them() -> None:
    raw, parsed = Raw(), Parsed()
    model = ScriptedChatModel(
        [
            AssistantMessage(None, [ToolCall("1", "raw", '{"x": 1}'), ToolCall("2", "parsed", '{"x": 2}')]),
            "done",
        ]
    )
    assert await ChatClient(model).prompt("q").tools(raw, parsed).acall().content() == "done"
    assert raw.seen == ['{"x": 1}']
    assert parsed.parsed == [{"x": 2}] and parsed.seen == []
