"""The ``--trace`` picture of the documentation is made by this test: a tool-calling turn with
memory, its span tree rendered by rich as SVG. ``ADVISORCHAIN_DOCS_IMAGES=docs/images`` writes it
there (that is how ``docs/images/trace.svg`` was made)."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from advisorchain import (
    AssistantMessage,
    ChatClient,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ScriptedChatModel,
    ToolCall,
    Usage,
    tool,
)
from advisorchain.cli._trace import SpanCollector, render_tree
from advisorchain.model import ChatResponse


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_the_trace_picture_shows_the_rounds_model_calls_and_tool_calls(tmp_path: Path) -> None:
    calls = [ToolCall("c1", "get_weather", '{"city": "Lisbon"}'), ToolCall("c2", "get_weather", '{"city": "Porto"}')]
    model = ScriptedChatModel(
        [
            ChatResponse.of(AssistantMessage(None, calls), "tool_calls", Usage(41, 18)),
            ChatResponse.of(AssistantMessage("Sunny in both."), "stop", Usage(77, 6)),
        ]
    )
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(MessageWindowChatMemory())])
    collector = SpanCollector.install()
    collector.start()
    assert client.prompt("Weather in Lisbon and Porto?").tools(get_weather).call().content() == "Sunny in both."

    console = Console(width=100, record=True, file=open(os.devnull, "w"))  # noqa: SIM115 — closed below
    console.print(render_tree(collector.take()))
    console.file.close()
    text = console.export_text(clear=False)
    for part in ("advisorchain request", "advisor MessageChatMemoryAdvisor", "round 1", "round 2", "execute_tool get_weather"):
        assert part in text
    svg = console.export_svg(title="advisorchain chat --trace")
    assert svg.startswith("<svg") and "execute_tool" in svg
    target = Path(os.environ.get("ADVISORCHAIN_DOCS_IMAGES") or tmp_path)
    (target / "trace.svg").write_text(svg, encoding="utf-8")
