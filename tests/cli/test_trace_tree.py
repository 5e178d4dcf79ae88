"""The ``--trace`` tree built from spans collected in memory, on scripted models."""

from __future__ import annotations

import pytest
from rich.console import Console

from advisorchain import AssistantMessage, ChatClient, ScriptedChatModel, ToolCall, tool
from advisorchain.cli._trace import SpanCollector, render_tree, shorten


def _render(collector: SpanCollector) -> list[str]:
    console = Console(width=200, record=True)
    console.print(render_tree(collector.take()))
    return console.export_text().splitlines()


def test_the_collector_keeps_only_spans_that_end_while_collecting() -> None:
    collector = SpanCollector.install()
    ChatClient(ScriptedChatModel(["before"])).prompt("q").call().content()
    collector.start()
    ChatClient(ScriptedChatModel(["during"])).prompt("q").call().content()
    spans = collector.take()
    ChatClient(ScriptedChatModel(["after"])).prompt("q").call().content()
    assert [s.name for s in spans].count("advisorchain request") == 1
    assert collector.take() == []


def test_install_returns_the_one_collector_of_the_process() -> None:
    assert SpanCollector.install() is SpanCollector.install()


def test_a_failed_model_call_shows_its_error_in_the_tree() -> None:
    collector = SpanCollector.install()
    collector.start()
    with pytest.raises(RuntimeError):
        ChatClient(ScriptedChatModel([RuntimeError("model down")])).prompt("q").call().content()
    chat = next(line for line in _render(collector) if "chat scripted" in line)
    assert "error: RuntimeError" in chat
    assert "model down" not in chat  # the message may quote content: only its type, unless opted in


def test_each_tool_round_groups_its_model_call_and_tool_calls() -> None:
    @tool
    def ping(n: int) -> str:
        """Ping."""
        return "pong"

    calls = [ToolCall("a", "ping", '{"n": 1}'), ToolCall("b", "ping", '{"n": 2}')]
    model = ScriptedChatModel([AssistantMessage(None, calls), AssistantMessage(None, calls[:1]), "done"])
    collector = SpanCollector.install()
    collector.start()
    assert ChatClient(model).prompt("q").tools(ping).call().content() == "done"
    names = [line.lstrip("│├└─ ") for line in _render(collector)]
    rounds = [i for i, name in enumerate(names) if name.startswith("round ")]
    assert [names[i] for i in rounds] == ["round 1", "round 2", "round 3"]
    assert sum(n.startswith("execute_tool ping") for n in names[rounds[0] : rounds[1]]) == 2
    assert sum(n.startswith("execute_tool ping") for n in names[rounds[1] : rounds[2]]) == 1
    assert names[rounds[2] + 1].startswith("chat scripted")


@pytest.mark.parametrize(
    ("text", "width", "shown"),
    [("short", 10, "short"), ("a  b\nc", 10, "a b c"), ("abcdefghijkl", 5, "abcd…")],
)
def test_shorten_puts_text_on_one_line_within_the_width(text: str, width: int, shown: str) -> None:
    assert shorten(text, width) == shown
