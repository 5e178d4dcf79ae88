"""Fixtures of the CLI tests: the scripted server playing the benchmarks' scenarios on loopback (one
per test session), one whose answers the test holds (``held``), a private data directory,
``cli_tools`` importable for ``--tools``, and ``terminal``: the command in tmux."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.openai_server import ScriptedServer, running_server
from tests.support.panes import Pane, find_tmux
from tests.support.scripts import chat_answer, scenarios


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """The base URL of a running scripted server (scenario named by the model: ``weather``...)."""
    with running_server(scenarios) as server:
        yield server.base_url


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
def held() -> Iterator[ScriptedServer]:
    """A loopback OpenAI-compatible server whose answers this test queues, holds and lets go
    (``held.queue(chat_answer(..., hold=event))``); unqueued requests are answered ``ok``."""
    with running_server(chat_answer()) as server:
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
