"""Fixtures of the CLI tests: the benchmarks' scripted OpenAI-compatible server on loopback (one per
test session), a server whose answers the test holds (``held``), a private data directory,
``cli_tools`` importable for ``--tools``, and ``terminal``: the command in tmux."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.held_server import HeldServer, held_server
from tests.support.panes import Pane, find_tmux

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "benchmarks" / "harness" / "server.py"


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """The base URL of a running scripted server (scenario named by the model: ``weather``...)."""
    process = subprocess.Popen(
        [sys.executable, str(SERVER)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), f"the scripted server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture(autouse=True)
def _cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("ADVISORCHAIN_DATA_DIR", str(data))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ADVISORCHAIN_MODEL", raising=False)
    monkeypatch.delenv("ADVISORCHAIN_DEBUG", raising=False)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))
    return data


@pytest.fixture
def held() -> Iterator[HeldServer]:
    """A loopback OpenAI-compatible server whose answers this test holds and lets go."""
    with held_server() as server:
        yield server


@pytest.fixture
def terminal(server_url: str, _cli_env: Path) -> Iterator[Callable[..., Pane]]:
    """Starts ``advisorchain chat --base-url URL --tools TOOLS ARGS`` in tmux (the scripted server
    unless ``base_url`` is given); every pane is closed at the end."""
    tmux = find_tmux()
    panes: list[Pane] = []
    here = Path(__file__).resolve().parent

    def start(args: str, tools: str | None = "cli_tools:get_weather", base_url: str | None = None) -> Pane:
        env = f"PYTHONPATH={shlex.quote(str(here))} ADVISORCHAIN_DATA_DIR={shlex.quote(str(_cli_env))}"
        offered = f"--tools {tools} " if tools else ""
        command = (
            f"cd {shlex.quote(str(here))} && env {env} {shlex.quote(sys.executable)} -m advisorchain.cli chat "
            f"--base-url {base_url or server_url} {offered}{args}"
        )
        panes.append(Pane(tmux, command))
        return panes[-1]

    yield start
    for pane in panes:
        pane.close()
