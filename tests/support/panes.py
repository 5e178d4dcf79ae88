"""A command in a real terminal: one tmux session on a private server socket, its screen captured."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
WAIT = 120.0
"""Seconds a pane may take to show what a test waits for: a bound for a hang, never a timing."""


def find_tmux() -> str:
    """The tmux binary (installed with apt-get when missing and allowed); skips without it."""
    found = shutil.which("tmux")
    if found is None and shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "tmux"], capture_output=True, timeout=600, check=False
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
            "new-session", "-d", "-s", "t", "-x", "160", "-y", "50", f"{command}; echo EXIT=$?; sleep 600"
        )
        self.socket_path = self._run("display-message", "-p", "#{socket_path}").strip()

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            [self.tmux, "-L", self.socket, *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    def capture(self) -> list[str]:
        return [line.rstrip() for line in self._run("capture-pane", "-p", "-t", "t").splitlines()]

    def keys(self, *keys: str) -> None:
        self._run("send-keys", "-t", "t", *keys)

    def type(self, text: str) -> None:
        """Type ``text`` literally (no key names) without pressing Enter."""
        self._run("send-keys", "-t", "t", "-l", text)

    def wait_for(self, seen: Callable[[list[str]], bool], timeout: float = WAIT) -> list[list[str]]:
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
        """End the session and its server, and remove the server's socket file."""
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True, check=False)
        if self.socket_path:
            Path(self.socket_path).unlink(missing_ok=True)


def exited(frame: list[str]) -> bool:
    """True once the command has ended (its exit code is on screen)."""
    return any(line.startswith("EXIT=") for line in frame)


def prompts(frame: list[str]) -> int:
    """How many ``you>`` prompts the screen shows."""
    return sum(line.startswith("you>") for line in frame)
