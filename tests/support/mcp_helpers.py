"""Helpers for the MCP tests: the test servers' scripts, free ports, and what a test leaves running."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).parent
SCRIPTED = str(HERE / "mcp_scripted_server.py")
SERVED = str(HERE / "mcp_served_tools.py")


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


def wait_for_port(port: int, process: subprocess.Popen[bytes] | None = None) -> None:
    """Wait until something listens on ``port`` (and ``process``, if given, is still running)."""
    deadline = time.monotonic() + 300  # a bound for a hang: a busy machine starts servers slowly
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
