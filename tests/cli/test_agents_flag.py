"""``--agents FILE`` (API.md §18) on ``chat``, ``web`` and ``serve``: a YAML file of agents; the chat
shows ``[<agent>]`` before each answer and a handoff as one line; a bad file is one error line."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from advisorchain.cli import app
from tests.support.openai_server import Received, ScriptedServer, Step, json_reply, running_server, sse_reply
from tests.support.panes import Pane, exited, prompts
from tests.support.payloads import chat_call, openai_calls_events, openai_completion, openai_text_events

AGENTS = """\
agents:
  - name: triage
    instructions: You are triage.
    handoffs: [billing]
  - name: billing
    description: Invoices and the weather of payments
    instructions: You are billing.
    tools: [cli_tools:get_weather]
    handoffs: [triage]
"""


def _script(request: Received) -> list[Step]:
    """triage hands to billing; billing calls get_weather, then answers."""
    body: dict[str, Any] = request.body
    system = body["messages"][0]["content"]
    results = [m for m in body["messages"] if m.get("role") == "tool"]
    if system == "You are triage.":
        call = chat_call("h1", "transfer_to_billing", "{}")
    elif len(results) < 2:
        call = chat_call("w1", "get_weather", '{"city": "Oslo"}')
    else:
        text = f"Billing: {results[-1]['content']}"
        if body.get("stream"):
            return sse_reply(openai_text_events(*re.findall(r"\S+\s*", text)))
        return json_reply(200, openai_completion(text))
    if body.get("stream"):
        return sse_reply(openai_calls_events([call]))
    return json_reply(200, openai_completion(None, tool_calls=[call], finish_reason="tool_calls"))


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with running_server(_script) as scripted:
        yield scripted


def _chat(server: ScriptedServer, path: Path, *args: str) -> Result:
    return CliRunner().invoke(
        app,
        ["chat", "--model", "openai:agents", "--base-url", server.base_url, "--agents", str(path), *args],
        catch_exceptions=False,
    )


@pytest.mark.parametrize("stream", [[], ["--no-stream"]])
def test_chat_names_the_answering_agent_and_shows_the_handoff(
    server: ScriptedServer, tmp_path: Path, stream: list[str]
) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(AGENTS)
    result = _chat(server, path, *stream, "-p", "weather of my invoice?")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "[billing] Billing: Oslo: sunny, 21C"
    assert "↪ handoff triage -> billing" in result.stderr
    systems = [b["messages"][0]["content"] for b in server.bodies]
    assert systems == ["You are triage.", "You are billing.", "You are billing."]
    tools = [t["function"]["name"] for t in server.bodies[1]["tools"]]
    assert tools == ["get_weather", "transfer_to_triage"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("agents:\n  - name: a\n    colour: red\n", "agent 'a': unknown key 'colour'"),
        (
            "agents:\n  - name: a\n    tools: [cli_tools:nothing_here]\n",
            "agent 'a': tool 'cli_tools:nothing_here'",
        ),
        ("agents:\n  - name: a\n    tools: [no_such_module:x]\n", "agent 'a': tool 'no_such_module:x'"),
        (
            "agents:\n  - name: a\n    handoffs: [b]\n",
            "agent 'a' hands off to 'b', which the file does not define",
        ),
        ("agents:\n  - name: bad name\n", "agent 'bad name'"),
        ("agents:\n  - name: a\n  - name: a\n", "two agents are named 'a'"),
        ("agent:\n  - name: a\n", "unknown key 'agent'"),
        ("agents: []\n", "holds no agents"),
        ("agents: [\n", "is not YAML"),
    ],
)
def test_a_bad_agents_file_is_one_error_line_naming_it(
    server: ScriptedServer, tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(text)
    result = _chat(server, path, "-p", "hi")
    assert result.exit_code == 2
    assert message in result.stderr
    error_lines = [line for line in result.stderr.splitlines() if "--agents" in line]
    assert len(error_lines) == 1, result.stderr
    assert server.bodies == []


def test_a_missing_agents_file_is_an_error(server: ScriptedServer, tmp_path: Path) -> None:
    result = _chat(server, tmp_path / "nope.yaml", "-p", "hi")
    assert result.exit_code == 2 and "cannot read it" in result.stderr


@pytest.mark.parametrize("command", ["chat", "web"])
def test_the_agent_commands_take_the_agents_flag(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"])
    assert "--agents FILE" in result.stdout


def test_the_repl_names_each_answers_agent_and_shows_the_handoff_once(
    terminal: Callable[..., Pane], server: ScriptedServer, tmp_path: Path
) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(AGENTS)
    pane = terminal(
        f"--model openai:agents --agents {path} --session s1", tools=None, base_url=server.base_url
    )
    pane.wait_for(lambda f: prompts(f) == 1)
    pane.keys("weather of my invoice?", "Enter")
    first = pane.wait_for(lambda f: prompts(f) == 2)[-1]
    assert "[billing] Billing: Oslo: sunny, 21C" in first
    assert sum("↪ handoff triage -> billing" in line for line in first) == 1
    assert first.index(next(line for line in first if "↪ handoff" in line)) < first.index(
        "[billing] Billing: Oslo: sunny, 21C"
    )
    pane.keys("C-d")
    assert "EXIT=0" in pane.wait_for(exited)[-1]


def test_web_reads_the_agents_file_before_it_serves(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text("agents:\n  - name: a\n    colour: red\n")
    result = CliRunner().invoke(app, ["web", "--agents", str(path), "--port", "0"], catch_exceptions=False)
    assert result.exit_code == 2
    assert "agent 'a': unknown key 'colour'" in result.stderr
