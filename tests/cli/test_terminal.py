"""``advisorchain chat`` in a real terminal (tmux): the spinner until the first token, never on the
answer's lines; the approval question; the interactive loop."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def _tmux() -> str:
    found = shutil.which("tmux")
    if found is None and shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "tmux"], capture_output=True, timeout=180, check=False
        )
        found = shutil.which("tmux")
    if found is None:
        pytest.skip("tmux is not installed and could not be installed (apt-get install tmux)")
    return found


class Pane:
    """One tmux session on a private server socket, running one command."""

    def __init__(self, tmux: str, command: str) -> None:
        self.tmux = tmux
        self.socket = f"advisorchain-test-{uuid.uuid4().hex[:8]}"
        self._run(
            "new-session", "-d", "-s", "t", "-x", "160", "-y", "40", f"{command}; echo EXIT=$?; sleep 60"
        )

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            [self.tmux, "-L", self.socket, *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    def capture(self) -> list[str]:
        return [line.rstrip() for line in self._run("capture-pane", "-p", "-t", "t").splitlines()]

    def keys(self, *keys: str) -> None:
        self._run("send-keys", "-t", "t", *keys)

    def wait_for(self, seen: Callable[[list[str]], bool], timeout: float = 60.0) -> list[list[str]]:
        """Every frame captured until ``seen`` holds for one (fails after ``timeout``)."""
        frames: list[list[str]] = []
        deadline = time.monotonic() + timeout
        while True:
            frames.append(self.capture())
            if seen(frames[-1]):
                return frames
            assert time.monotonic() < deadline, "\n".join(frames[-1])
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def terminal(server_url: str, _cli_env: Path) -> Iterator[Callable[..., Pane]]:
    tmux = _tmux()
    panes: list[Pane] = []

    def start(args: str, tools: str = "cli_tools:get_weather") -> Pane:
        env = f"PYTHONPATH={shlex.quote(str(HERE))} ADVISORCHAIN_DATA_DIR={shlex.quote(str(_cli_env))}"
        command = (
            f"cd {shlex.quote(str(HERE))} && env {env} {shlex.quote(sys.executable)} -m advisorchain.cli chat "
            f"--base-url {server_url} --tools {tools} {args}"
        )
        panes.append(Pane(tmux, command))
        return panes[-1]

    yield start
    for pane in panes:
        pane.close()


def _exited(frame: list[str]) -> bool:
    return any(line.startswith("EXIT=") for line in frame)


def test_the_spinner_turns_until_the_first_token_and_never_touches_the_answer(
    terminal: Callable[..., Pane],
) -> None:
    pane = terminal("--model openai:weather+k5+lat1500 -p weather?")
    frames = pane.wait_for(_exited)
    assert any("thinking…" in line for frame in frames for line in frame), "the spinner never showed"
    final = frames[-1]
    assert "EXIT=0" in final
    answer = [line for line in final if line.startswith("w0")]
    assert answer == ["w0 w1 w2 w3 w4"]  # the streamed answer alone on its line
    assert not any("thinking" in line or any(c in line for c in SPINNER) for line in final)
    assert '→ get_weather {"city": "Paris"}' in final and '→ get_weather {"city": "London"}' in final
    assert final.index(answer[0]) > final.index('→ get_weather {"city": "London"}')


def test_a_tool_that_needs_approval_is_asked_inline(terminal: Callable[..., Pane]) -> None:
    pane = terminal("--model openai:weather+k5 -p weather?", tools="cli_tools:guarded_weather")
    for asked in (1, 2):
        pane.wait_for(lambda f, n=asked: sum("[y/N/reason]" in line for line in f) == n)
        pane.keys("y", "Enter")
    final = pane.wait_for(_exited)[-1]
    assert "EXIT=0" in final
    assert [line for line in final if "[y/N/reason]" in line] == [
        'Run get_weather {"city": "Paris"}? [y/N/reason] y',
        'Run get_weather {"city": "London"}? [y/N/reason] y',
    ]
    assert [line for line in final if line.startswith("w0")] == ["w0 w1 w2 w3 w4"]


def test_interactive_chat_answers_each_line_until_end_of_input(terminal: Callable[..., Pane]) -> None:
    pane = terminal("--model openai:weather+k5 --session live")
    pane.wait_for(lambda f: any(line.startswith("you>") for line in f))
    pane.keys("weather?", "Enter")
    pane.wait_for(lambda f: "w0 w1 w2 w3 w4" in f)
    pane.wait_for(lambda f: sum(line.startswith("you>") for line in f) == 2)
    pane.keys("C-d")
    final = pane.wait_for(_exited)[-1]
    assert "EXIT=0" in final
