"""Real MCP servers for the MCP tests, each started once per session: mcp-server-time and
mcp-server-git (from PyPI, over stdio), and a small scripted server over stdio and streamable HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from advisorchain.mcp import McpServerHttp, McpServerStdio
from advisorchain.tools import ToolDefinition

HERE = Path(__file__).parent
SCRIPTED = str(HERE / "scripted_server.py")
SERVED = str(HERE / "served_tools.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_pids() -> set[int]:
    """The live (not zombie) child processes of this test process."""
    children: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            children.add(int(entry.name))
    return children


def mcp_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("advisorchain-mcp")]


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """Fails the test when it leaves a server process or session thread behind."""
    processes, threads = child_pids(), mcp_threads()
    yield
    deadline = time.monotonic() + 10
    while (child_pids() - processes or len(mcp_threads()) > len(threads)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_pids() - processes == set()
    assert mcp_threads() == threads


def wait_for_port(port: int, process: subprocess.Popen[bytes] | None = None) -> None:
    """Wait until something listens on ``port`` (and ``process``, if given, is still running)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if (process is not None and process.poll() is not None) or time.monotonic() > deadline:
                raise RuntimeError(f"nothing started listening on port {port}") from None
            time.sleep(0.1)


def start_http(script: str, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, script, *args, str(port)])
    try:
        wait_for_port(port, process)
    except RuntimeError:
        stop(process)
        raise
    return process, f"http://127.0.0.1:{port}/mcp"


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def time_server() -> Iterator[McpServerStdio]:
    server = McpServerStdio(sys.executable, ["-m", "mcp_server_time", "--local-timezone", "UTC"], tool_prefix="time")
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
    with McpServerStdio(sys.executable, args, tool_prefix="repo", requires_approval=ask_unless_read_only) as server:
        yield server


@pytest.fixture(scope="session")
def scripted_server() -> Iterator[McpServerStdio]:
    with McpServerStdio(sys.executable, [SCRIPTED, "stdio"]) as server:
        yield server


@pytest.fixture(scope="session")
def scripted_url() -> Iterator[str]:
    process, url = start_http(SCRIPTED, "http")
    try:
        yield url
    finally:
        stop(process)


@pytest.fixture(scope="session")
def scripted_http(scripted_url: str) -> Iterator[McpServerHttp]:
    with McpServerHttp(scripted_url, headers={"X-Test": "advisorchain"}, tool_prefix="web") as server:
        yield server
