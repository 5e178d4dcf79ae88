"""Every command that prints, with a reader that stops early (``| head``): it ends quietly, exit 0.

The harshest form is used: the pipe's read end is closed before the command starts, so its very
first write fails (click's own EPIPE handling would exit 1; rich raises SystemExit(1), on the sync
bridge's loop thread when it prints from a step). ``| head -3`` itself is run for the commands
that print the most.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
WEATHER = ["--model", "openai:weather", "--tools", "cli_tools:get_weather"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}


def _assert_quiet(done: subprocess.CompletedProcess[str]) -> None:
    """Exit 0, and on stderr only what the command writes there anyway (tool calls, notes)."""
    assert done.returncode == 0, done.stderr
    for noise in ("Traceback", "error", "Error", "Exception ignored"):
        assert noise not in done.stderr, done.stderr


def _into_closed_pipe(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    read, write = os.pipe()
    os.close(read)  # nobody will ever read: the first write to stdout fails
    try:
        return subprocess.run(
            [sys.executable, "-m", "advisorchain.cli", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL if stdin is None else None,
            input=stdin,
            text=True,
            env=_env(),
            cwd=ROOT,
            timeout=300,
        )
    finally:
        os.close(write)


def _commands(server_url: str, tmp_path: Path) -> dict[str, list[str]]:
    notes = tmp_path / "notes.md"
    notes.write_text("# Lisbon\n\nThe tram 28 crosses the old town.\n")
    chat = ["chat", *WEATHER, "--base-url", server_url]
    return {
        "help": ["--help"],
        "version": ["--version"],
        "chat --help": ["chat", "--help"],
        "demo": ["demo"],
        "demo --stream": ["demo", "--stream"],
        "chat -p": [*chat, "-p", "weather?"],
        "chat -p --no-stream --trace": [*chat, "-p", "weather?", "--no-stream", "--trace"],
        "chat (lines on stdin)": chat,
        "sessions list": ["sessions", "list"],
        "eval": ["eval", str(ROOT / "examples" / "eval_cases.yaml")],
        "index": ["index", str(notes), "--store", f"sqlite:///{tmp_path / 'kb.db'}"],
        "web": ["web", *WEATHER, "--base-url", server_url],
    }


@pytest.mark.parametrize(
    "name",
    [
        "help",
        "version",
        "chat --help",
        "demo",
        "demo --stream",
        "chat -p",
        "chat -p --no-stream --trace",
        "chat (lines on stdin)",
        "sessions list",
        "eval",
        "index",
        "web",
    ],
)
def test_a_command_whose_reader_is_gone_ends_quietly_with_exit_0(
    name: str, server_url: str, tmp_path: Path
) -> None:
    stdin = "weather?\nweather again?\n" if name == "chat (lines on stdin)" else None
    done = _into_closed_pipe(_commands(server_url, tmp_path)[name], stdin)
    _assert_quiet(done)


def test_sessions_show_into_a_closed_pipe(server_url: str) -> None:
    saved = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisorchain.cli",
            "chat",
            *WEATHER,
            "--base-url",
            server_url,
            "--session",
            "trip",
            "-p",
            "weather?",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=300,
    )
    assert saved.returncode == 0, saved.stderr
    done = _into_closed_pipe(["sessions", "show", "trip"])
    _assert_quiet(done)


@pytest.mark.parametrize("args", [["demo"], ["demo", "--stream"], ["--help"]], ids=" ".join)
def test_piped_into_head_it_ends_quietly(args: list[str]) -> None:
    done = subprocess.run(
        f"{sys.executable} -m advisorchain.cli {' '.join(args)} | head -3; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=300,
    )
    _assert_quiet(done)
    assert len(done.stdout.splitlines()) == 3
