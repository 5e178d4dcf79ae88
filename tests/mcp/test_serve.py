"""serve(): advisorchain tools and a ChatClient served as an MCP server, reached with the project's
own McpServerStdio (a subprocess running serve over stdio) and McpServerHttp (streamable HTTP)."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Iterator

import pytest

from advisorchain import (
    AssistantMessage,
    ChainConfigurationError,
    ChatClient,
    ScriptedChatModel,
    ToolCall,
    ToolResponseMessage,
    tool,
)
from advisorchain.mcp import McpServerHttp, McpServerStdio, McpToolError, agent_tool, aserve, mcp_server
from advisorchain.tools import ToolCallback, ToolDefinition, ToolMetadata, tool_callbacks
from tests.support.mcp_helpers import serving, stdio_args


@pytest.fixture(scope="module")
def served() -> Iterator[McpServerStdio]:
    with McpServerStdio(sys.executable, stdio_args("served"), tool_prefix="served") as server:
        yield server


def _by_name(server: object) -> dict[str, ToolCallback]:
    return {cb.definition.name: cb for cb in tool_callbacks(server)}


def test_served_tools_keep_their_names_descriptions_and_schemas(served: McpServerStdio) -> None:
    tools = _by_name(served)
    assert sorted(tools) == ["served_add", "served_ask_agent", "served_divide"]
    add = tools["served_add"].definition
    assert add.description == "Add two integers."
    assert add.input_schema["properties"]["a"] == {"description": "first addend", "type": "integer"}
    assert add.input_schema["required"] == ["a", "b"]
    assert served.name == "served-tools"


def test_a_served_tool_runs_in_another_agents_tool_loop(served: McpServerStdio) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "served_add", '{"a": 2, "b": 40}')]), "42"]
    )
    assert ChatClient(model).prompt("2 + 40?").tools(served).call().content() == "42"
    last = model.prompts[1].instructions[-1]
    assert isinstance(last, ToolResponseMessage)
    assert last.responses[0].response_data == "42"


async def test_a_served_chat_client_answers_as_one_tool(served: McpServerStdio) -> None:
    answer = await _by_name(served)["served_ask_agent"].call('{"question": "Who are you?"}', None)
    assert answer == "The agent heard: Who are you?"


async def test_an_exception_in_a_served_tool_comes_back_as_an_error(served: McpServerStdio) -> None:
    with pytest.raises(McpToolError, match="tool 'divide' failed with ZeroDivisionError"):
        await _by_name(served)["served_divide"].call('{"a": 1, "b": 0}', None)


async def test_bad_arguments_for_a_served_tool_come_back_naming_the_argument(served: McpServerStdio) -> None:
    with pytest.raises(
        McpToolError, match="invalid arguments for tool 'add': a: Input should be a valid integer"
    ):
        await _by_name(served)["served_add"].call('{"a": "two", "b": 1}', None)


def test_a_chat_client_served_over_streamable_http_answers_an_mcp_client(no_leftovers: None) -> None:
    agent = ChatClient(ScriptedChatModel(["pong"]))
    with (
        serving(lambda port: aserve(agent, transport="streamable-http", port=port, name="agent")) as url,
        McpServerHttp(url) as server,
    ):
        answer = asyncio.run(_by_name(server)["ask_agent"].call('{"question": "ping"}', None))
        name = server.name
    assert answer == "pong"
    assert name == "agent"


def test_agent_tool_needs_a_chat_client() -> None:
    with pytest.raises(TypeError, match="agent_tool needs a ChatClient"):
        agent_tool("not a client")  # type: ignore[arg-type]


def test_serving_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one tool"):
        mcp_server()


def test_two_served_tools_with_one_name_are_refused() -> None:
    @tool(name="same")
    def first() -> str:
        """One."""
        return "1"

    @tool(name="same")
    def second() -> str:
        """Two."""
        return "2"

    with pytest.raises(ValueError, match="two tools are named 'same'"):
        mcp_server(first, second)


async def test_serving_on_a_port_in_use_is_a_clear_error(add_tool: ToolCallback) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            ChainConfigurationError, match=f"could not serve MCP at http://127.0.0.1:{port}/mcp"
        ):
            await aserve(add_tool, transport="streamable-http", port=port)


async def test_an_unknown_transport_is_refused_naming_it(add_tool: ToolCallback) -> None:
    with pytest.raises(ValueError, match="'sse'"):
        await aserve(add_tool, transport="sse")  # type: ignore[arg-type]


@pytest.fixture
def add_tool() -> ToolCallback:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return add


def test_a_tool_that_requires_approval_is_not_served(add_tool: ToolCallback) -> None:
    class Guarded:
        definition = ToolDefinition("delete_all", "Delete everything.")
        metadata = ToolMetadata(requires_approval=True)

        async def call(self, arguments: str, context: object) -> str:
            return "deleted"

    with pytest.raises(ValueError, match="tool 'delete_all' requires approval"):
        mcp_server(add_tool, Guarded())
