"""ToolCallbackProvider: a tool source whose tools can change is asked on every request."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

from advisorchain import ChatClient, ScriptedChatModel, tool
from advisorchain.tools import ToolCallback, ToolCallbackProvider, tool_callbacks


@tool
def alpha() -> str:
    """Alpha."""
    return "a"


@tool
def beta() -> str:
    """Beta."""
    return "b"


class Shelf:
    """A provider whose tools the test changes between requests."""

    def __init__(self) -> None:
        self.tools: list[ToolCallback] = [alpha]

    def get_tool_callbacks(self) -> Sequence[ToolCallback]:
        return self.tools


def test_an_object_with_get_tool_callbacks_is_a_provider() -> None:
    assert isinstance(Shelf(), ToolCallbackProvider)
    assert tool_callbacks(Shelf()) == [alpha]


def test_a_provider_in_default_tools_is_asked_again_on_every_request() -> None:
    shelf = Shelf()
    model = ScriptedChatModel(["one", "two"])
    client = ChatClient(model, default_tools=[shelf])
    client.prompt("first").call().content()
    shelf.tools = [alpha, beta]
    client.prompt("second").call().content()
    names = [[cb.definition.name for cb in p.options.tool_callbacks] for p in model.prompts if p.options]
    assert names == [["alpha"], ["alpha", "beta"]]


def test_importing_the_core_never_loads_the_mcp_sdk() -> None:
    code = "import sys, advisorchain, advisorchain.tools, advisorchain.client; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
