"""MCP servers as tool sources: real servers' tools in the tool loop, approval over annotations,
parallel calls, the sync form, spans."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisorchain import AssistantMessage, ChatClient, ScriptedChatModel, ToolCall, ToolResponseMessage
from advisorchain.mcp import McpServerHttp, McpServerStdio
from advisorchain.tools import ToolDefinition, tool_callbacks
from tests.support.spans import span_exporter


def _responses(model: ScriptedChatModel, prompt_index: int = 1) -> list[str]:
    last = model.prompts[prompt_index].instructions[-1]
    assert isinstance(last, ToolResponseMessage)
    return [r.response_data for r in last.responses]


def _tool_names(model: ScriptedChatModel, prompt_index: int = 0) -> list[str]:
    options = model.prompts[prompt_index].options
    assert options is not None
    return [cb.definition.name for cb in options.tool_callbacks]


def test_a_model_calls_an_mcp_tool_and_the_real_result_reaches_its_next_prompt(
    time_server: McpServerStdio,
) -> None:
    model = ScriptedChatModel(
        [
            AssistantMessage(None, [ToolCall("c1", "time_get_current_time", '{"timezone": "Asia/Tokyo"}')]),
            "It is morning in Tokyo.",
        ]
    )
    answer = ChatClient(model).prompt("What time is it in Tokyo?").tools(time_server).call().content()
    assert answer == "It is morning in Tokyo."
    result = json.loads(_responses(model)[0])
    assert result["timezone"] == "Asia/Tokyo"
    assert result["datetime"].endswith("+09:00")


async def test_the_async_form_runs_a_real_conversion_on_another_event_loop(
    time_server: McpServerStdio,
) -> None:
    arguments = '{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Kolkata"}'
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "time_convert_time", arguments)]), "done"]
    )
    await ChatClient(model).prompt("Noon UTC in India?").tools(time_server).acall().content()
    result = json.loads(_responses(model)[0])
    assert result["target"]["datetime"].endswith("T17:30:00+05:30")
    assert result["time_difference"] == "+5.5h"


def test_tools_carry_the_prefixed_name_description_and_input_schema_of_the_server(
    time_server: McpServerStdio,
) -> None:
    tools = {cb.definition.name: cb.definition for cb in tool_callbacks(time_server)}
    assert sorted(tools) == ["time_convert_time", "time_get_current_time"]
    current = tools["time_get_current_time"]
    assert current.description == "Get current time in a specific timezone"
    assert current.input_schema["required"] == ["timezone"]
    assert "UTC" in current.input_schema["properties"]["timezone"]["description"]


def test_a_client_with_the_server_in_default_tools_sends_its_tools_to_the_model(
    time_server: McpServerStdio,
) -> None:
    model = ScriptedChatModel(["no tools needed"])
    ChatClient(model, default_tools=[time_server]).prompt("hi").call().content()
    assert _tool_names(model) == ["time_get_current_time", "time_convert_time"]


def test_mcp_server_git_reads_a_throwaway_repository_in_the_tool_loop(
    git_server: McpServerStdio, git_repo: Path
) -> None:
    arguments = json.dumps({"repo_path": str(git_repo)})
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "repo_git_log", arguments)]), "One commit."]
    )
    ChatClient(model).prompt("What happened in the repo?").tools(git_server).call().content()
    log = _responses(model)[0]
    assert "Add notes" in log
    assert "Author: Test" in log


def test_requires_approval_decides_per_tool_from_the_definition_and_annotations(
    git_server: McpServerStdio, approval_rule_calls: Mapping[str, Mapping[str, Any]]
) -> None:
    approval = {cb.definition.name: cb.metadata.requires_approval for cb in tool_callbacks(git_server)}
    assert approval_rule_calls["repo_git_reset"]["destructiveHint"] is True
    assert approval_rule_calls["repo_git_status"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert approval["repo_git_reset"] is True
    assert approval["repo_git_commit"] is True
    assert approval["repo_git_status"] is False


def test_a_tool_without_annotations_is_judged_on_an_empty_mapping(scripted_url: str) -> None:
    seen: dict[str, Mapping[str, Any]] = {}

    def rule(definition: ToolDefinition, annotations: Mapping[str, Any]) -> bool:
        seen[definition.name] = annotations
        return bool(annotations.get("destructiveHint"))

    with McpServerHttp(scripted_url, requires_approval=rule) as server:
        approval = {cb.definition.name: cb.metadata.requires_approval for cb in tool_callbacks(server)}
    assert seen["fail"] == {}
    assert seen["wipe"] == {"title": "Wipe", "destructiveHint": True}
    assert approval["wipe"] is True
    assert approval["echo"] is False


def test_requires_approval_true_marks_every_tool(scripted_url: str) -> None:
    with McpServerHttp(scripted_url, requires_approval=True) as server:
        assert all(cb.metadata.requires_approval for cb in tool_callbacks(server))


def test_parallel_calls_on_one_server_are_answered_in_call_order(scripted_server: McpServerStdio) -> None:
    calls = [
        ToolCall(f"c{i}", "slow", json.dumps({"seconds": seconds, "label": label}))
        for i, (seconds, label) in enumerate([(0.3, "first"), (0.0, "second"), (0.15, "third")])
    ]
    model = ScriptedChatModel([AssistantMessage(None, calls), "done"])
    ChatClient(model).prompt("go").tools(scripted_server).call().content()
    assert _responses(model) == ["first", "second", "third"]


async def test_concurrent_callers_on_several_event_loops_share_one_server(
    scripted_server: McpServerStdio,
) -> None:
    echo = next(cb for cb in tool_callbacks(scripted_server) if cb.definition.name == "echo")
    results: list[str] = []

    def other_loop() -> None:
        results.append(asyncio.run(echo.call('{"text": "from a thread"}', None)))

    thread = threading.Thread(target=other_loop)
    thread.start()
    here = await asyncio.gather(*(echo.call(json.dumps({"text": str(i)}), None) for i in range(5)))
    await asyncio.to_thread(thread.join)
    assert here == ["0", "1", "2", "3", "4"]
    assert results == ["from a thread"]


def test_the_sync_form_works_from_a_plain_thread(time_server: McpServerStdio) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "time_get_current_time", '{"timezone": "UTC"}')]), "ok"]
    )
    answers: list[str | None] = []
    thread = threading.Thread(
        target=lambda: answers.append(ChatClient(model).prompt("now?").tools(time_server).call().content())
    )
    thread.start()
    thread.join()
    assert answers == ["ok"]
    assert json.loads(_responses(model)[0])["timezone"] == "UTC"


def test_a_server_entered_with_async_with_serves_a_blocking_call_from_a_thread(
    scripted_url: str, no_leftovers: None
) -> None:
    async def main() -> str:
        async with McpServerHttp(scripted_url) as server:
            echo = next(cb for cb in tool_callbacks(server) if cb.definition.name == "echo")
            return await asyncio.to_thread(lambda: asyncio.run(echo.call('{"text": "hello"}', None)))

    assert asyncio.run(main()) == "hello"


def test_structured_content_without_text_becomes_its_json(scripted_server: McpServerStdio) -> None:
    model = ScriptedChatModel([AssistantMessage(None, [ToolCall("c1", "structured", "{}")]), "42"])
    ChatClient(model).prompt("answer?").tools(scripted_server).call().content()
    assert json.loads(_responses(model)[0]) == {"answer": 42}


def test_a_server_over_streamable_http_runs_in_the_tool_loop(scripted_http: McpServerHttp) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "web_echo", '{"text": "over http"}')]), "ok"]
    )
    ChatClient(model).prompt("echo").tools(scripted_http).call().content()
    assert _responses(model) == ["over http"]


def test_a_stdio_server_runs_with_the_given_env_and_cwd(
    scripted_server: McpServerStdio, scripted_workdir: Path
) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "environment", '{"name": "ADVISORCHAIN_GREETING"}')]), "ok"]
    )
    ChatClient(model).prompt("env?").tools(scripted_server).call().content()
    assert _responses(model) == [f"hello from the test in {scripted_workdir}"]


def test_headers_go_with_every_request_to_an_http_server(scripted_http: McpServerHttp) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "web_header", '{"name": "x-test"}')]), "ok"]
    )
    ChatClient(model).prompt("header?").tools(scripted_http).call().content()
    assert _responses(model) == ["advisorchain"]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_urls_password_and_query_key_reach_the_server_but_no_logger(
    scripted_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 37: the MCP SDK logs the URL it is given, httpx every request's URL; both get the bare
    URL, and the credentials join the request below their logging."""
    host = scripted_url.removeprefix("http://")
    url = f"http://alice:pa55-w0rd@{host}?api_key=K3Y-s3cret&v=2"
    basic = base64.b64encode(b"alice:pa55-w0rd").decode()
    model = ScriptedChatModel(
        [
            AssistantMessage(
                None,
                [
                    ToolCall("c1", "digest", '{"where": "header", "name": "authorization"}'),
                    ToolCall("c2", "digest", '{"where": "query", "name": "api_key"}'),
                    ToolCall("c3", "digest", '{"where": "query", "name": "v"}'),
                ],
            ),
            "ok",
        ]
    )
    with caplog.at_level(logging.DEBUG):
        for name in ("mcp", "httpx", "httpx2", "httpcore", "advisorchain"):
            logging.getLogger(name).setLevel(logging.DEBUG)
        with McpServerHttp(url) as server:
            assert "pa55-w0rd" not in repr(server) and "K3Y-s3cret" not in repr(server)
            ChatClient(model).prompt("who am I?").tools(server).call().content()

    assert _responses(model) == [_sha256(f"Basic {basic}"), _sha256("K3Y-s3cret"), _sha256("2")]
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert any(r.name.startswith(("mcp", "httpx")) for r in caplog.records)  # the loggers did log
    assert f"{host}" in logged  # the bare URL
    for secret in ("pa55-w0rd", "K3Y-s3cret", basic, "alice"):
        assert secret not in logged


def test_a_url_without_credentials_is_handed_over_as_it_is(scripted_url: str) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "digest", '{"where": "query", "name": "v"}')]), "ok"]
    )
    with McpServerHttp(scripted_url) as server:
        ChatClient(model).prompt("v?").tools(server).call().content()
    assert _responses(model) == ["<none>"]


def test_a_tool_call_span_names_the_server_and_holds_the_sdk_span(time_server: McpServerStdio) -> None:
    exporter = span_exporter()
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "time_get_current_time", '{"timezone": "UTC"}')]), "ok"]
    )
    ChatClient(model).prompt("now?").tools(time_server).call().content()
    finished = exporter.get_finished_spans()
    [span] = [s for s in finished if s.name == "execute_tool time_get_current_time"]
    assert span.attributes is not None
    assert span.attributes["mcp.server.name"] == "mcp-time"
    assert span.attributes["gen_ai.tool.name"] == "time_get_current_time"
    [sdk_span] = [s for s in finished if s.name == "MCP send tools/call get_current_time"]
    assert sdk_span.parent is not None
    assert sdk_span.parent.span_id == span.context.span_id


def test_a_tool_list_change_reaches_the_next_request(scripted_server: McpServerStdio) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "add_tool", '{"name": "late_tool"}')]), "added", "bye"]
    )
    client = ChatClient(model, default_tools=[scripted_server])
    client.prompt("add a tool").call().content()
    client.prompt("again").call().content()
    assert "late_tool" not in _tool_names(model, 0)
    assert "late_tool" in _tool_names(model, 2)
    late = next(cb for cb in tool_callbacks(scripted_server) if cb.definition.name == "late_tool")
    assert asyncio.run(late.call("{}", None)) == "late_tool answers"


@pytest.mark.parametrize("prefix", ["", "has space", "x" * 64, 3])
def test_a_bad_tool_prefix_is_refused_naming_it(prefix: object) -> None:
    with pytest.raises(ValueError, match="tool_prefix"):
        McpServerStdio("python", tool_prefix=prefix)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(text=st.text())
def test_any_text_survives_the_round_trip_to_a_server_and_back(
    scripted_http: McpServerHttp, text: str
) -> None:
    echo = next(cb for cb in tool_callbacks(scripted_http) if cb.definition.name == "web_echo")
    assert asyncio.run(echo.call(json.dumps({"text": text}), None)) == text
