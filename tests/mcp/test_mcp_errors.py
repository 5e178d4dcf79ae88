"""What goes wrong with MCP servers, and how it is reported: error results and protocol errors as
``Error:`` texts, a dead server, a hanging tool, servers that cannot start, servers not entered."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable

import pytest

from advisorchain import (
    AssistantMessage,
    ChainConfigurationError,
    ChatClient,
    ScriptedChatModel,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolExecutionError,
    ToolResponseMessage,
)
from advisorchain.errors import SyncInAsyncContextError
from advisorchain.mcp import McpServerHttp, McpServerStdio, McpToolError
from advisorchain.tools import tool_callbacks
from tests.support.mcp_helpers import stdio_args
from tests.support.processes import free_port


def _run(server: object, *calls: ToolCall) -> list[str]:
    """One request whose model makes ``calls``; the tool responses the model got back."""
    model = ScriptedChatModel([AssistantMessage(None, list(calls)), "done"])
    ChatClient(model).prompt("go").tools(server).call().content()
    last = model.prompts[1].instructions[-1]
    assert isinstance(last, ToolResponseMessage)
    return [r.response_data for r in last.responses]


def test_an_is_error_result_is_an_error_text_for_the_model(scripted_server: McpServerStdio) -> None:
    [text] = _run(scripted_server, ToolCall("c1", "fail", '{"reason": "no disk"}'))
    assert text.startswith("Error: ")
    assert "cannot do it: no disk" in text


def test_a_protocol_error_is_an_error_text_with_its_message(scripted_server: McpServerStdio) -> None:
    [text] = _run(scripted_server, ToolCall("c1", "protocol_error", "{}"))
    assert text == "Error: the server rejects this request"


def test_a_bad_argument_for_a_real_server_is_its_error_text(time_server: McpServerStdio) -> None:
    [text] = _run(time_server, ToolCall("c1", "time_get_current_time", '{"timezone": "Mars/Olympus_Mons"}'))
    assert text.startswith("Error: ")
    assert "Mars/Olympus_Mons" in text


def test_a_tool_name_the_server_does_not_offer_gets_the_list_of_its_tools(
    time_server: McpServerStdio,
) -> None:
    [text] = _run(time_server, ToolCall("c1", "time_now", "{}"))
    assert text.startswith("Error: there is no tool named 'time_now'")
    assert "'time_get_current_time'" in text


def test_a_tool_the_server_dropped_without_notice_is_an_error_text(scripted_server: McpServerStdio) -> None:
    _run(scripted_server, ToolCall("c1", "add_tool", '{"name": "ephemeral"}'))
    [stale] = [cb for cb in tool_callbacks(scripted_server) if cb.definition.name == "ephemeral"]
    _run(scripted_server, ToolCall("c2", "forget_tool", '{"name": "ephemeral"}'))
    [text] = _run(stale, ToolCall("c3", "ephemeral", "{}"))
    assert text.startswith("Error: ")
    assert "ephemeral" in text


def test_with_raise_on_error_an_error_result_raises_tool_execution_error(
    scripted_server: McpServerStdio,
) -> None:
    manager = ToolCallingManager(raise_on_error=True)
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "fail", '{"reason": "nope"}')]), "done"]
    )
    client = ChatClient(model, default_advisors=[ToolCallingAdvisor(tool_calling_manager=manager)])
    with pytest.raises(ToolExecutionError) as caught:
        client.prompt("go").tools(scripted_server).call().content()
    assert caught.value.tool_name == "fail"
    assert isinstance(caught.value.__cause__, McpToolError)
    assert "cannot do it: nope" in str(caught.value)


def test_a_tool_hanging_past_timeout_is_an_error_naming_the_server_and_tool(scripted_url: str) -> None:
    with McpServerHttp(scripted_url, timeout=10) as server:  # the start and the echo end well within it
        [text] = _run(server, ToolCall("c1", "slow", json.dumps({"seconds": 60, "label": "late"})))
        [after] = _run(server, ToolCall("c2", "echo", '{"text": "still serving"}'))
    assert text.startswith("Error: MCP server 'scripted' did not answer tool 'slow' within timeout=10 seconds")
    assert after == "still serving"


async def test_a_call_running_when_the_server_is_left_ends_with_an_error(scripted_url: str) -> None:
    async with McpServerHttp(scripted_url) as server:
        slow = next(cb for cb in tool_callbacks(server) if cb.definition.name == "slow")
        running = asyncio.create_task(slow.call('{"seconds": 600, "label": "never"}', None))
        await _in_flight(server)
    with pytest.raises(McpToolError, match="MCP server 'scripted'"):
        await running


async def test_a_server_process_that_died_gives_error_texts_and_closes_cleanly(no_leftovers: None) -> None:
    model = ScriptedChatModel(
        [
            AssistantMessage(None, [ToolCall("c1", "crash", "{}")]),
            AssistantMessage(None, [ToolCall("c2", "echo", '{"text": "anyone?"}')]),
            "done",
        ]
    )
    async with McpServerStdio(sys.executable, stdio_args("scripted")) as server:
        assert await ChatClient(model).prompt("go").tools(server).acall().content() == "done"
    texts = [
        m.responses[0].response_data
        for m in model.prompts[2].instructions
        if isinstance(m, ToolResponseMessage)
    ]
    assert texts == [
        "Error: MCP server 'scripted' is no longer running (its connection closed) and cannot answer tool "
        f"{name!r}; answer without it"
        for name in ("crash", "echo")
    ]


def test_a_command_that_does_not_exist_is_a_clear_error(no_leftovers: None) -> None:
    server = McpServerStdio("advisorchain-no-such-mcp-server", ["--flag"])
    with pytest.raises(ChainConfigurationError) as caught, server:
        pass
    message = str(caught.value)
    assert "McpServerStdio('advisorchain-no-such-mcp-server', ['--flag']) could not start" in message
    assert "FileNotFoundError" in message
    assert "installed and on PATH" in message


def test_a_server_that_exits_at_start_is_a_clear_error(no_leftovers: None) -> None:
    server = McpServerStdio(sys.executable, ["-c", "import sys; sys.exit(3)"])
    with pytest.raises(ChainConfigurationError, match="exited before the session started"), server:
        pass


def test_a_url_that_refuses_connections_is_a_clear_error(no_leftovers: None) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(ChainConfigurationError) as caught, McpServerHttp(url, timeout=5):
        pass
    assert f"McpServerHttp({url!r}) could not start: ConnectError" in str(caught.value)


async def test_a_server_that_never_answers_its_start_fails_after_timeout(no_leftovers: None) -> None:
    server = McpServerStdio(sys.executable, ["-c", "import time; time.sleep(120)"], timeout=1)
    with pytest.raises(ChainConfigurationError, match="did not finish starting within timeout=1 seconds"):
        async with server:
            pass


def test_tools_of_a_server_not_entered_are_refused_naming_it() -> None:
    server = McpServerStdio("uvx", ["mcp-server-time"])
    with pytest.raises(
        ChainConfigurationError, match=r"McpServerStdio\('uvx', \['mcp-server-time'\]\) is not entered"
    ):
        tool_callbacks(server)


def test_a_request_with_a_server_not_entered_is_refused_before_the_model_runs() -> None:
    model = ScriptedChatModel(["never"])
    client = ChatClient(model, default_tools=[McpServerHttp("http://127.0.0.1:1/mcp")])
    with pytest.raises(ChainConfigurationError, match="is not entered"):
        client.prompt("hi").call().content()
    assert model.prompts == []


async def test_a_request_after_the_server_was_closed_is_refused(
    scripted_url: str, no_leftovers: None
) -> None:
    server = McpServerHttp(scripted_url)
    client = ChatClient(ScriptedChatModel(["fine", "never"]), default_tools=[server])
    async with server:
        assert await client.prompt("hi").acall().content() == "fine"
    with pytest.raises(ChainConfigurationError, match="was closed"):
        await client.prompt("again").acall().content()


def test_entering_a_server_twice_is_refused(scripted_server: McpServerStdio) -> None:
    with pytest.raises(ChainConfigurationError, match="already entered"), scripted_server:
        pass


async def test_a_blocking_with_inside_an_event_loop_names_the_async_form() -> None:
    with pytest.raises(SyncInAsyncContextError, match="async with McpServerStdio"), McpServerStdio("python"):
        pass


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"requires_approval": "yes"}, "requires_approval must be a bool or a function"),
    ],
)
def test_bad_options_are_refused_naming_the_value(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        McpServerStdio("python", **kwargs)  # type: ignore[arg-type]


def test_args_given_as_one_string_are_refused() -> None:
    with pytest.raises(ValueError, match="args must be a sequence of strings"):
        McpServerStdio("python", "-m mcp_server_time")


def test_a_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(ValueError, match="'localhost:8000/mcp'"):
        McpServerHttp("localhost:8000/mcp")


@pytest.mark.parametrize(
    ("server", "match"),
    [
        (
            lambda: McpServerStdio("python", env={"TOKEN": 42}),
            r"env must map variable names to string values.*42",
        ),
        (lambda: McpServerStdio("python", env=["TOKEN=x"]), r"env must map .*\['TOKEN=x'\]"),
        (
            lambda: McpServerHttp("http://127.0.0.1:1/mcp", headers={"Authorization": None}),
            "headers must map header names to string values.*None",
        ),
    ],
)
def test_env_and_headers_that_are_not_strings_by_name_are_refused_naming_the_value(
    server: Callable[[], object], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        server()


def test_env_and_headers_are_kept_as_copies_of_what_was_given() -> None:
    env, headers = {"TOKEN": "x"}, {"Authorization": "Bearer t"}
    stdio, http = McpServerStdio("python", env=env), McpServerHttp("http://127.0.0.1:1/mcp", headers=headers)
    env["TOKEN"], headers["Authorization"] = "changed", "changed"
    assert (stdio.env, http.headers) == ({"TOKEN": "x"}, {"Authorization": "Bearer t"})
    assert (McpServerStdio("python").env, McpServerHttp("http://127.0.0.1:1/mcp").headers) == (None, None)


async def _in_flight(server: McpServerHttp, seconds: float = 120.0) -> None:
    """Until a call runs on the server's session (a bound for a hang, not a timing)."""
    deadline = time.monotonic() + seconds
    while server._connection is None or not server._connection._requests:
        assert time.monotonic() < deadline, "the call never started"
        await asyncio.sleep(0.01)
