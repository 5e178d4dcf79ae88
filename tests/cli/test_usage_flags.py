"""§17 on the command line: tokens and cost under each answer of ``chat``, ``demo`` and ``eval``
(``n/a`` when a model cannot be priced), and ``--max-cost`` / ``--max-requests`` on every agent
command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from advisorchain.cli import app
from tests.support.openai_server import ScriptedServer

WEATHER = "weather+k5"


def run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def chat(server_url: str, *args: str) -> Result:
    return run(
        "chat",
        "--model",
        f"openai:{WEATHER}",
        "--base-url",
        server_url,
        "--tools",
        "cli_tools:get_weather",
        *args,
    )


@pytest.mark.parametrize("stream", [[], ["--no-stream"]])
def test_chat_shows_the_answers_tokens_and_cost_under_it(server_url: str, stream: list[str]) -> None:
    result = chat(server_url, *stream, "-p", "weather?")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() in ("w0 w1 w2 w3 w4", "It is sunny everywhere you asked about.")
    last = result.stderr.strip().splitlines()[-1]
    # a local server: its model has no known price
    assert re.fullmatch(r"tokens \d+ in / \d+ out · cost n/a · 2 model calls", last), last


_PYTHON_WORDS = ("UsageLimits", "usage_limits", "ChatClient(", "prices=", "RetryChatModel", "on_unpriced")


def _speaks_of_flags_only(line: str) -> None:
    for word in _PYTHON_WORDS:
        assert word not in line, line


def test_max_requests_stops_an_answer_that_needs_more_calls(server_url: str) -> None:
    result = chat(server_url, "--max-requests", "1", "-p", "weather?")
    assert result.exit_code == 1
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: --max-requests 1 was reached: no model call is left"), error
    assert "1 request" in error and error.endswith("Raise --max-requests N to allow more")
    _speaks_of_flags_only(error)


def test_max_cost_on_a_model_without_a_price_is_refused_before_any_request(
    held: ScriptedServer,
) -> None:
    result = run(
        "chat", "--model", f"openai:{WEATHER}", "--base-url", held.base_url, "--max-cost", "0.05", "-p", "hi"
    )
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"error: --max-cost cannot be enforced: model '{WEATHER}' has no known price; drop --max-cost "
        "(--max-requests N limits an answer without a price)"
    ]
    assert result.stdout == "" and held.requests == []  # nothing was sent, nothing streamed


@pytest.mark.parametrize(
    "command",
    [["eval", "CASES"], ["demo"], ["web", "--port", "0"], ["serve", "--protocol", "openai", "--port", "0"]],
)
def test_every_command_refuses_max_cost_on_an_unpriced_model_before_any_request(
    held: ScriptedServer, tmp_path: Path, command: list[str]
) -> None:
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{"name": "w", "question": "weather?", "expected": "sunny"}]))
    args = [str(cases) if a == "CASES" else a for a in command]
    result = run(*args, "--model", f"openai:{WEATHER}", "--base-url", held.base_url, "--max-cost", "0.05")
    assert result.exit_code == 1
    assert f"--max-cost cannot be enforced: model '{WEATHER}' has no known price" in result.stderr
    assert held.requests == []


def test_a_limit_passed_under_the_cli_names_its_flag_not_python() -> None:
    from decimal import Decimal

    from advisorchain import ChatClient, UsageLimitExceeded, UsageLimits
    from advisorchain.cli._agent import flag_message
    from advisorchain.testing import ScriptedChatModel

    client = ChatClient(ScriptedChatModel(["one"]), usage_limits=UsageLimits(cost_limit=Decimal("0.05")))
    with pytest.raises(UsageLimitExceeded) as raised:
        client.prompt("q").call().content()
    library = str(raised.value)
    assert "UsageLimits(on_unpriced='ignore')" in library  # the library's text stays for library users
    told = flag_message(raised.value)
    assert told is not None and told.startswith("--max-cost 0.05 cannot be enforced: model ")
    assert told.endswith("Drop --max-cost to go on without it")
    _speaks_of_flags_only(told)


def test_a_timeout_under_the_cli_names_timeout_not_retry_chat_model() -> None:
    from advisorchain.cli._agent import flag_message
    from advisorchain.errors import ModelTimeoutError

    library = ModelTimeoutError(
        "openai request timed out: no byte in 1 s; raise the client's timeout or retry "
        "(advisorchain.models.RetryChatModel)",
        error_type="timeout",
        provider="openai",
    )
    assert (
        flag_message(library) == "openai request timed out: no byte in 1 s (--timeout SECONDS waits longer)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-cost", "-1"], "not an amount of USD >= 0"),
        (["--max-cost", "cheap"], "not an amount of USD"),
        (["--max-requests", "0"], "0 is not in the range x>=1"),
    ],
)
def test_a_bad_budget_is_a_usage_error(server_url: str, args: list[str], message: str) -> None:
    result = chat(server_url, *args, "-p", "weather?")
    assert result.exit_code == 2 and message in result.stderr


@pytest.mark.parametrize("command", ["chat", "web", "eval", "demo", "serve"])
def test_every_agent_command_takes_the_budget_flags(command: str) -> None:
    result = run(command, "--help")
    assert "--max-cost USD" in result.stdout and "--max-requests N" in result.stdout


def test_demo_shows_each_answers_tokens_and_cost(tmp_path: Path) -> None:
    result = run("demo", "--db", str(tmp_path / "d.sqlite3"))
    assert result.exit_code == 0, result.stderr
    shown = re.findall(r"\(tokens \d+ in / \d+ out · cost \$[0-9.]+(?: · \d+ model calls)?\)", result.stdout)
    assert len(shown) == 2, result.stdout


def test_demo_keeps_its_budget(tmp_path: Path) -> None:
    result = run("demo", "--db", str(tmp_path / "d.sqlite3"), "--max-requests", "2")
    assert result.exit_code == 1 and "error: --max-requests 2 " in result.output
    result = run("demo", "--db", str(tmp_path / "e.sqlite3"), "--max-cost", "0.00001")
    assert result.exit_code == 1 and "error: --max-cost 0.00001 " in result.output
    _speaks_of_flags_only(result.output)


def test_eval_shows_each_answers_cost_and_keeps_the_budget(server_url: str, tmp_path: Path) -> None:
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{"name": "w", "question": "weather?", "expected": "sunny"}]))
    report = tmp_path / "report.json"
    model = ("--model", "openai:weather", "--base-url", server_url, "--tools", "cli_tools:get_weather")
    args = ("eval", str(cases), *model, "--json", str(report))
    result = run(*args)
    assert result.exit_code == 0, result.stdout
    assert re.search(r"┃ cost ┃", result.stdout) and re.search(r"│\s+n/a │", result.stdout)
    row = json.loads(report.read_text())["rows"][0]
    assert row["usage"]["cost"] is None and row["usage"]["total_tokens"] > 0
    limited = run(*args, "--max-requests", "1")
    assert limited.exit_code == 1
    assert "request_limit=1" in json.loads(report.read_text())["rows"][0]["error"]
