"""Every command and option of ``advisorchain`` through click's test runner, offline or against the
scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from advisorchain.cli import app, main
from tests.support.openai_server import ScriptedServer, running_server
from tests.support.scripts import chat_answer, failing

WEATHER = "weather+k5"
STREAMED = "w0 w1 w2 w3 w4 "
FINAL = "It is sunny everywhere you asked about."


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def chat(server_url: str, *args: str, input: str | None = None) -> Result:
    return run("chat", "--model", f"openai:{WEATHER}", "--base-url", server_url, *args, input=input)


def one_error_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


# -- top level -----------------------------------------------------------------------------------


def test_version_prints_the_package_version() -> None:
    from importlib.metadata import version

    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"advisorchain, version {version('advisorchain')}"


def test_help_lists_every_command() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for command in ("chat", "sessions", "demo"):
        assert command in result.stdout


def test_an_unknown_command_is_a_usage_error_in_one_line() -> None:
    result = run("nope")
    assert result.exit_code == 2
    assert "No such command 'nope'" in one_error_line(result)


def test_main_returns_the_exit_code_instead_of_exiting() -> None:
    assert main(["--version"]) == 0
    assert main(["chat", "--model", "nope"]) == 2


def test_the_console_script_module_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "advisorchain.cli", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("advisorchain, version ")


# -- demo ------------------------------------------------------------------------------------------


def test_demo_says_first_that_a_scripted_model_plays_the_llm(tmp_path: Path) -> None:
    result = run("demo", "--db", str(tmp_path / "d.sqlite3"))
    assert result.exit_code == 0
    first = result.stdout.splitlines()[0]
    assert (
        "scripted model plays the LLM" in first and "--model openai:" in first and "OPENAI_API_KEY" in first
    )
    assert "structured: DayPlan(city='Lisbon'" in result.stdout


def test_demo_with_a_model_runs_live_and_needs_its_key() -> None:
    result = run("demo", "--model", "anthropic:claude-haiku-4-5")
    assert result.exit_code == 1
    assert "ANTHROPIC_API_KEY is not set" in one_error_line(result)


def test_demo_with_a_model_runs_live_against_the_given_server(server_url: str, tmp_path: Path) -> None:
    # the scripted server only knows its scenarios: a live run reaches it and reports its answer
    result = run(
        "demo", "--model", "openai:planner", "--base-url", server_url, "--db", str(tmp_path / "d.db")
    )
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == "Running live on openai:planner."
    assert "unknown scenario 'planner'" in one_error_line(result)


def test_demo_rejects_a_provider_twice() -> None:
    result = run("demo", "--model", "openai:gpt-4o", "--provider", "anthropic")
    assert result.exit_code == 2
    assert "names its provider already" in one_error_line(result)


def test_demo_rejects_base_url_without_a_model() -> None:
    result = run("demo", "--base-url", "http://127.0.0.1:1/v1")
    assert result.exit_code == 2
    assert "--base-url needs --model" in one_error_line(result)


# -- chat: usage errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "gpt-4o"], "'gpt-4o' is not provider:name"),
        (["--model", "mistral:large"], "'mistral:large' is not provider:name"),
        (["--tools", "no_colon"], "'no_colon' is not module:object"),
        (["--tools", "no_such_module_xyz:f"], "cannot import 'no_such_module_xyz'"),
        (["--tools", "cli_tools:missing"], "'cli_tools' has no 'missing'"),
        (["--memory", "mysql://x"], "'mysql://x' is not a store URL"),
        (["--memory", "sqlite:///"], "'sqlite:///' names no file"),
        (["--session", " "], "a session needs a name"),
        (["-p", " "], "the question is empty"),
        (["--no-such-flag"], "No such option .--no-such-flag"),
    ],
)
def test_chat_usage_errors_exit_2_with_one_line(args: list[str], message: str) -> None:
    result = run("chat", "-p", "hi", *args) if "-p" not in args else run("chat", *args)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert re.search(message, line) and "advisorchain chat --help" in line


def test_chat_with_nothing_piped_in_is_a_usage_error() -> None:
    result = run("chat", "--base-url", "http://127.0.0.1:1/v1", input="")
    assert result.exit_code == 2
    assert "nothing to ask" in one_error_line(result)


# -- chat: runtime failures ------------------------------------------------------------------------


def test_chat_without_a_key_says_which_variable_to_set() -> None:
    result = run("chat", "-p", "hi", "--model", "openai:gpt-4o-mini")
    assert result.exit_code == 1
    assert one_error_line(result) == (
        "error: OPENAI_API_KEY is not set: export it for openai:gpt-4o-mini, "
        "or pass --base-url for a server that needs no key"
    )


def test_an_unreachable_server_shows_the_retries_and_one_error_line() -> None:
    result = run("chat", "-p", "hi", "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[:-1] == ["↻ retrying in 0.4 s, ConnectError", "↻ retrying in 0.8 s, ConnectError"] or all(
        line.startswith("↻ retrying in ") for line in lines[:-1]
    )
    assert len(lines) == 3
    assert lines[-1] == (
        "error: openai connection failed (http://127.0.0.1:9/v1/chat/completions): connection refused "
        "(is the server running, and is the URL right?)"
    )


def test_debug_shows_the_traceback() -> None:
    result = run("chat", "-p", "hi", "--model", "openai:m", "--debug")
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "CliError: OPENAI_API_KEY is not set" in result.stderr


def test_ctrl_c_during_a_one_shot_question_exits_130_in_one_line(held: ScriptedServer) -> None:
    held.queue(chat_answer(hold=threading.Event()))  # the server never answers: the CLI is waiting when Ctrl-C comes
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "advisorchain.cli",
            "chat",
            "--model",
            "openai:m",
            "--base-url",
            held.base_url,
            "-p",
            "hi",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        held.wait_for_requests(1)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 130
    assert err == "error: interrupted\n"


def test_a_closed_pipe_ends_quietly(server_url: str) -> None:
    done = subprocess.run(
        f"{sys.executable} -m advisorchain.cli chat --model openai:weather+k2000 --base-url {server_url}"
        " --tools cli_tools:get_weather -p weather | head -c 9",
        shell=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
    )
    assert done.stdout == "w0 w1 w2 "
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr and "error" not in done.stderr


def test_mcp_flags_say_in_one_line_that_mcp_is_missing() -> None:
    if importlib.util.find_spec("advisorchain.mcp") is not None:
        pytest.skip("advisorchain.mcp is installed here: the missing-module message cannot show")
    result = run("chat", "-p", "hi", "--base-url", "http://127.0.0.1:1/v1", "--mcp", "python -m server")
    assert result.exit_code == 1
    assert "pip install 'advisorchain[mcp]'" in one_error_line(result)


# -- chat: answers -----------------------------------------------------------------------------------


def test_chat_streams_the_answer_after_both_tool_calls(server_url: str) -> None:
    result = chat(server_url, "-p", "weather?", "--tools", "cli_tools:get_weather")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == STREAMED + "\n"
    assert '→ get_weather {"city": "Paris"}' in result.stderr
    assert '→ get_weather {"city": "London"}' in result.stderr


def test_no_stream_prints_the_whole_answer(server_url: str) -> None:
    result = chat(server_url, "-p", "weather?", "--no-stream", "--tools", "cli_tools:ALL")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == FINAL + "\n"


def test_a_question_piped_on_stdin_is_asked(server_url: str) -> None:
    result = chat(server_url, "--no-stream", "--tools", "cli_tools:get_weather", input="weather?\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == FINAL + "\n"


def test_a_tool_the_user_cannot_approve_without_a_terminal_is_denied(server_url: str) -> None:
    # the scripted server answers a wrong tool result with a 400 quoting it: the denial reached the model
    result = chat(server_url, "-p", "weather?", "--tools", "cli_tools:guarded_weather")
    assert result.exit_code == 1
    assert "denied: no terminal to ask (pass --yes to approve tools)" in result.stderr
    assert "Error: the user denied this tool call: no terminal to ask" in result.stderr


def test_yes_approves_tools_that_need_approval(server_url: str) -> None:
    result = chat(server_url, "-p", "weather?", "--yes", "--tools", "cli_tools:guarded_weather")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == STREAMED + "\n"
    assert result.stderr.count("✓ get_weather approved (--yes)") == 2


def test_system_message_is_sent(server_url: str) -> None:
    result = chat(server_url, "-p", "weather?", "--system", "Be brief.", "--tools", "cli_tools:get_weather")
    assert result.exit_code == 0, result.stderr


# -- sessions ----------------------------------------------------------------------------------------


def test_a_session_keeps_the_conversation_in_the_data_directory(server_url: str, _cli_env: Path) -> None:
    for _ in range(2):
        result = chat(server_url, "-p", "weather?", "--session", "trip", "--tools", "cli_tools:get_weather")
        assert result.exit_code == 0, result.stderr
    assert (_cli_env / "sessions.sqlite3").exists()
    listed = run("sessions", "list")
    assert listed.exit_code == 0
    assert "trip" in listed.stdout and "4" in listed.stdout
    shown = run("sessions", "show", "trip")
    assert shown.stdout.splitlines() == [
        "user: weather?",
        f"assistant: {STREAMED}",
        "user: weather?",
        f"assistant: {STREAMED}",
    ]


def test_sessions_list_says_when_there_are_none() -> None:
    result = run("sessions", "list")
    assert result.exit_code == 0
    assert "No sessions yet" in result.stdout


def test_sessions_delete_removes_only_that_session(server_url: str) -> None:
    for name in ("a", "b"):
        chat(server_url, "-p", "q", "--session", name, "--tools", "cli_tools:get_weather")
    result = run("sessions", "delete", "a")
    assert result.exit_code == 0
    assert result.stdout.strip() == "Deleted session 'a' (2 messages)."
    assert run("sessions", "show", "b").stdout.splitlines()[0] == "user: q"
    assert run("sessions", "show", "a").exit_code == 1


@pytest.mark.parametrize("command", ["show", "delete"])
def test_an_unknown_session_is_one_error_line_naming_the_store(command: str, _cli_env: Path) -> None:
    result = run("sessions", command, "nope")
    assert result.exit_code == 1
    assert one_error_line(result) == (
        f"error: no session 'nope' in {_cli_env / 'sessions.sqlite3'}; "
        "'advisorchain sessions list' shows the saved ones"
    )


def test_memory_url_picks_a_sqlite_file(server_url: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    result = chat(server_url, "-p", "q", "--memory", url, "--session", "s", "--tools", "cli_tools:ALL")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "chat.db").exists()
    assert run("sessions", "show", "s", "--memory", url).stdout.splitlines()[0] == "user: q"
    assert "No sessions yet" in run("sessions", "list").stdout  # the default store is untouched


def test_memory_without_session_uses_the_default_conversation(server_url: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    assert chat(server_url, "-p", "q", "--memory", url, "--tools", "cli_tools:ALL").exit_code == 0
    assert "default" in run("sessions", "list", "--memory", url).stdout


@pytest.mark.parametrize("env", ["ADVISORCHAIN_TEST_POSTGRES_DSN", "ADVISORCHAIN_TEST_REDIS_URL"])
def test_sessions_live_in_postgres_and_redis(server_url: str, env: str) -> None:
    url = os.environ.get(env)
    if not url:
        pytest.skip(f'{env} is not set; start the servers with: eval "$(scripts/services.sh start)"')
    name = f"cli-{uuid.uuid4().hex[:8]}"
    result = chat(server_url, "-p", "q", "--memory", url, "--session", name, "--tools", "cli_tools:ALL")
    assert result.exit_code == 0, result.stderr
    assert run("sessions", "show", name, "--memory", url).stdout.splitlines() == [
        "user: q",
        f"assistant: {STREAMED}",
    ]
    assert run("sessions", "delete", name, "--memory", url).exit_code == 0
    assert name not in run("sessions", "list", "--memory", url).stdout


@pytest.fixture
def always_429() -> Iterator[str]:
    """A loopback server that answers every request 429 (asking for a 10 ms wait)."""
    with running_server(failing(429, "slow down", "rate_limit_error", {"retry-after-ms": "10"})) as server:
        yield server.base_url


def test_provider_retries_show_one_line_each_with_the_status(always_429: str) -> None:
    result = run("chat", "-p", "hi", "--model", "openai:m", "--base-url", always_429, "--no-stream")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[:2] == ["↻ retrying in 0.0 s, 429", "↻ retrying in 0.0 s, 429"]
    assert lines[2].startswith("error: ") and "slow down" in lines[2]
    assert len(lines) == 3
