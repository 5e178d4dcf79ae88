"""A real MCP server's tools in the tool loop: mcp-server-time (pip install mcp-server-time) runs
over stdio; a model (here a function standing in for one) asks it to convert noon UTC to Tokyo time
and answers from the real result. An approval rule reads the tools' MCP annotations.

Run: python examples/mcp_tools.py   (needs the extra: pip install 'advisorchain[mcp]' mcp-server-time)
"""

import json
import sys
from collections.abc import Mapping
from typing import Any

from advisorchain import AssistantMessage, ChatClient, Prompt, ToolCall, ToolResponseMessage
from advisorchain.mcp import McpServerStdio
from advisorchain.testing import FunctionChatModel
from advisorchain.tools import ToolDefinition, tool_callbacks


def model(prompt: Prompt) -> AssistantMessage:
    last = prompt.instructions[-1]
    if isinstance(last, ToolResponseMessage):
        target = json.loads(last.responses[0].response_data)["target"]
        return AssistantMessage(f"Noon UTC is {target['datetime'][11:16]} in {target['timezone']}.")
    noon = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    return AssistantMessage(None, [ToolCall("c1", "time_convert_time", json.dumps(noon))])


def ask_unless_read_only(definition: ToolDefinition, annotations: Mapping[str, Any]) -> bool:
    return not annotations.get("readOnlyHint", False)


server = McpServerStdio(
    sys.executable, ["-m", "mcp_server_time"], tool_prefix="time", requires_approval=ask_unless_read_only
)
with server:
    print([(t.definition.name, t.metadata.requires_approval) for t in tool_callbacks(server)])
    print(ChatClient(FunctionChatModel(model)).prompt("Noon UTC in Tokyo?").tools(server).call().content())
