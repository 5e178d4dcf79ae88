"""Output that never interleaves: the demo's streamed answer and its round-by-round narration, a
chat's answer, its progress lines and its trace tree, whether stdout and stderr go to one pipe or
not; and a silent server named while the CLI waits, then given up after ``--timeout``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisorchain.cli import app
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import chat_answer

HERE = Path(__file__).resolve().parent


def test_demo_stream_keeps_the_streamed_answer_off_the_narrators_lines(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["demo", "--stream", "--db", str(tmp_path / "d.db")], catch_exceptions=False
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    streamed = [line for line in lines if "assistant (streamed)" in line]
    assert streamed == [
        "assistant (streamed): Let me plan this.",
        "assistant (streamed): Lisbon is sunny (24°C): Gulbenkian in the morning, MAAT by the river in the "
        "afternoon.",
    ]
    narrated = [line for line in lines if re.match(r"  \[\d+\] ", line)]
    assert [line.split("]")[0] for line in narrated] == [f"  [{i}" for i in range(1, 7)]
    assert all(line.endswith("message(s)") for line in narrated)
    assert lines.index(streamed[0]) == lines.index(narrated[0]) + 1  # the answer of round 1 follows it


def test_chat_trace_in_one_pipe_keeps_every_line_whole(server_url: str) -> None:
    done = subprocess.run(
        f"{sys.executable} -m advisorchain.cli chat --model openai:weather+k5 --base-url {server_url} "
        "--tools cli_tools:get_weather --trace -p weather? 2>&1 | cat",
        shell=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(HERE)},
        cwd=HERE,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        '→ get_weather {"city": "Paris"}',
        '→ get_weather {"city": "London"}',
        "w0 w1 w2 w3 w4 ",
    ]
    assert lines[3] == "trace" and lines[4].startswith("└── advisorchain request")
    assert all(line.startswith(("│", "├", "└", " ")) for line in lines[4:])


def test_a_silent_server_is_named_then_given_up_after_the_timeout(held: ScriptedServer) -> None:
    for _ in range(3):  # the request and the SDK's two retries, none answered
        held.queue(chat_answer(hold=threading.Event()))
    result = CliRunner().invoke(
        app, ["chat", "--model", "openai:m", "--base-url", held.base_url, "--timeout", "1", "-p", "hi"]
    )
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"… no reply from {held.base_url} for ") and "(waiting up to 1 s" in lines[0]
    assert [line for line in lines if line.startswith("↻")] == [
        line for line in lines if line.startswith("↻ retrying in ") and line.endswith(", timeout")
    ]
    assert len([line for line in lines if line.startswith("↻")]) == 2
    assert (
        lines[-1].startswith("error: openai request timed out")
        and "(--timeout SECONDS waits longer)" in lines[-1]
        and "RetryChatModel" not in lines[-1]  # the library's advice, told in the flag here
    )
    assert len(held.requests) == 3


def test_the_timeout_reaches_the_model_and_a_switch_keeps_the_base_url_for_its_provider_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from advisorchain.cli._agent import ModelChoice
    from advisorchain.cli._options import DEFAULT_TIMEOUT, ModelOptions

    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-used")
    choice = ModelChoice.build(ModelOptions("openai:m", "http://127.0.0.1:9/v1", DEFAULT_TIMEOUT))
    assert choice.model.defaults == {"timeout": DEFAULT_TIMEOUT}  # type: ignore[attr-defined]
    assert choice.switched("openai:other").options.base_url == "http://127.0.0.1:9/v1"
    other = choice.switched("anthropic:claude-haiku-4-5")
    assert other.options == ModelOptions("anthropic:claude-haiku-4-5", None, DEFAULT_TIMEOUT)
    assert other.model.defaults == {"timeout": DEFAULT_TIMEOUT}  # type: ignore[attr-defined]
