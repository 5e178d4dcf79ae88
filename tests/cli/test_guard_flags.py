"""§19 on the command line: ``--guard pii`` / ``pii-block`` and ``--guard-words FILE``, given once to
every agent command (``chat``, ``web``, ``eval``, and ``serve`` through the shared flag set)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from advisorchain.cli import app
from advisorchain.cli._agent import guard_kit
from advisorchain.cli._options import AgentOptions, agent_options
from advisorchain.guardrails import InputGuardrailAdvisor, OutputGuardrailAdvisor
from tests.support.openai_server import ScriptedServer, running_server
from tests.support.scripts import scenarios


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with running_server(scenarios) as s:
        yield s


def chat(server: ScriptedServer, *args: str) -> Result:
    argv = [
        "chat",
        "--model",
        "openai:weather+k5",
        "--base-url",
        server.base_url,
        "--tools",
        "cli_tools:get_weather",
    ]
    return CliRunner().invoke(app, [*argv, *args], catch_exceptions=False)


def test_guard_pii_redacts_what_is_sent_to_the_model(server: ScriptedServer) -> None:
    result = chat(server, "--guard", "pii", "--no-stream", "-p", "weather? mail ada@example.com")
    assert result.exit_code == 0, result.stderr
    assert server.bodies and all("ada@example.com" not in str(b) for b in server.bodies)
    assert server.user_texts()[-1] == "weather? mail [EMAIL]"


def test_guard_pii_block_refuses_with_the_guards_message(server: ScriptedServer) -> None:
    result = chat(server, "--guard", "pii-block", "-p", "weather? call +44 20 7946 0958")
    assert result.exit_code == 0, result.stderr
    assert "personal data (phone)" in result.stdout
    assert "7946" not in result.stdout


@pytest.mark.parametrize("stream", [[], ["--no-stream"]])
def test_guard_words_refuse_an_answer_that_holds_one(
    server: ScriptedServer, tmp_path: Path, stream: list[str]
) -> None:
    words = tmp_path / "words.txt"
    words.write_text("# words the agent must not say\nsunny\nw3\n", encoding="utf-8")
    result = chat(server, "--guard-words", str(words), *stream, "-p", "weather?")
    assert result.exit_code == 0, result.stderr
    assert "I can't discuss that." in result.stdout
    assert "sunny" not in result.stdout and "w3" not in result.stdout


def test_guard_words_file_that_holds_no_word_is_a_usage_error(server: ScriptedServer, tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n\n", encoding="utf-8")
    result = chat(server, "--guard-words", str(empty), "-p", "hi")
    assert result.exit_code == 2 and "holds no words" in result.stderr
    missing = chat(server, "--guard-words", str(tmp_path / "nope.txt"), "-p", "hi")
    assert missing.exit_code == 2 and "--guard-words" in missing.stderr


def test_an_unknown_guard_is_a_usage_error_listing_the_choices(server: ScriptedServer) -> None:
    result = chat(server, "--guard", "ssn", "-p", "hi")
    assert result.exit_code == 2 and "'pii'" in result.stderr and "'pii-block'" in result.stderr


def test_every_agent_command_takes_the_flags_and_they_build_the_advisors(tmp_path: Path) -> None:
    seen: list[AgentOptions] = []

    @click.command()
    @agent_options()
    def command(agent: AgentOptions) -> None:
        seen.append(agent)

    words = tmp_path / "w.txt"
    words.write_text("hack\n", encoding="utf-8")
    args = ["--guard", "pii", "--guard", "pii-block", "--guard-words", str(words)]
    assert CliRunner().invoke(command, args, catch_exceptions=False).exit_code == 0
    assert seen[0].guard == ("pii", "pii-block") and seen[0].guard_words == str(words)
    kit = guard_kit(seen[0])
    assert kit is not None
    advisors = kit.advisors()
    assert [type(a) for a in advisors] == [InputGuardrailAdvisor, OutputGuardrailAdvisor]
    assert advisors[1].release == "sentence" and advisors[0].on_trip == "finish"
    assert len(kit.input) == 3 and len(kit.output) == 3 and len(kit.tool_results) == 2
    for name in ("chat", "web", "eval", "serve"):
        help_text = CliRunner().invoke(app, [name, "--help"]).stdout
        assert "--guard [pii|pii-block]" in help_text and "--guard-words FILE" in help_text, name
    assert guard_kit(AgentOptions(seen[0].model, None, (), (), (), None, None, False)) is None
