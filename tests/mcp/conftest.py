"""Real MCP servers for the MCP tests, each started once per session: mcp-server-time and
mcp-server-git (from PyPI, over stdio), and a small scripted server over stdio and streamable HTTP."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from advisorchain.mcp import McpServerHttp, McpServerStdio
from advisorchain.tools import ToolDefinition
from tests.support.mcp_helpers import http_server, mcp_threads, stdio_args
from tests.support.processes import child_pids


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """Fails the test when it leaves a server process or session thread behind."""
    processes, threads = child_pids(), Counter(mcp_threads())
    yield
    deadline = time.monotonic() + 120  # a bound for a hang: they usually end at once

    def new_threads() -> Counter[str]:
        # A thread of an earlier test may still have been ending when this one began: gone now, fine.
        return Counter(mcp_threads()) - threads

    while (child_pids() - processes or new_threads()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_pids() - processes == set()
    assert new_threads() == Counter()


@pytest.fixture(scope="session")
def time_server() -> Iterator[McpServerStdio]:
    server = McpServerStdio(
        sys.executable, ["-m", "mcp_server_time", "--local-timezone", "UTC"], tool_prefix="time"
    )
    with server:
        yield server


@pytest.fixture(scope="session")
def git_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("repo")
    git = ["git", "-C", str(repo), "-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "notes.txt").write_text("first line\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Add notes"], check=True)
    return repo


@pytest.fixture(scope="session")
def approval_rule_calls() -> dict[str, Mapping[str, Any]]:
    """What the git server's requires_approval rule was asked: tool name -> annotations."""
    return {}


@pytest.fixture(scope="session")
def git_server(git_repo: Path, approval_rule_calls: dict[str, Mapping[str, Any]]) -> Iterator[McpServerStdio]:
    def ask_unless_read_only(definition: ToolDefinition, annotations: Mapping[str, Any]) -> bool:
        approval_rule_calls[definition.name] = annotations
        return not annotations.get("readOnlyHint", False)

    args = ["-m", "mcp_server_git", "--repository", str(git_repo)]
    with McpServerStdio(
        sys.executable, args, tool_prefix="repo", requires_approval=ask_unless_read_only
    ) as server:
        yield server


@pytest.fixture(scope="session")
def scripted_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scripted-cwd")


@pytest.fixture(scope="session")
def scripted_server(scripted_workdir: Path) -> Iterator[McpServerStdio]:
    env = {"ADVISORCHAIN_GREETING": "hello from the test"}
    with McpServerStdio(sys.executable, stdio_args("scripted"), env=env, cwd=scripted_workdir) as server:
        yield server


@pytest.fixture(scope="session")
def scripted_url() -> Iterator[str]:
    with http_server("scripted") as url:
        yield url


@pytest.fixture(scope="session")
def scripted_http(scripted_url: str) -> Iterator[McpServerHttp]:
    with McpServerHttp(scripted_url, headers={"X-Test": "advisorchain"}, tool_prefix="web") as server:
        yield server
