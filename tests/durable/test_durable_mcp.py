"""A durable run covers MCP tools: a call on a real MCP server is one recorded step (DBOS) or
activity (Temporal), like any other tool."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import pytest

from advisorchain import AssistantMessage, ChatClient, ToolCall, ToolResponseMessage
from advisorchain.testing import ScriptedChatModel

dbos = pytest.importorskip("dbos")
pytest.importorskip("mcp")

from advisorchain.durable.dbos import DBOSAgent  # noqa: E402
from advisorchain.mcp import McpServerStdio  # noqa: E402

DBOS = dbos.DBOS




async def test_a_call_on_a_real_mcp_server_is_one_recorded_step_of_a_durable_run(
    launch: Callable[..., None],
) -> None:
    model = ScriptedChatModel(
        [
            AssistantMessage(None, [ToolCall("c1", "time_get_current_time", '{"timezone": "UTC"}')]),
            "It is noon.",
        ]
    )
    server = McpServerStdio(
        sys.executable, ["-m", "mcp_server_time", "--local-timezone", "UTC"], tool_prefix="time"
    )
    async with server:
        agent = DBOSAgent(ChatClient(model, default_tools=[server]), name="clock")
        launch()
        result = await agent.run("What time is it in UTC?", workflow_id="mcp-1")
        steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async("mcp-1")]

    assert result.output == "It is noon."
    assert steps == ["clock.model", "clock.tool.time_get_current_time", "clock.model"]
    answered = model.prompts[1].instructions[-1]
    assert isinstance(answered, ToolResponseMessage)
    assert json.loads(answered.responses[0].response_data)["timezone"] == "UTC"
