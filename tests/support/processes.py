"""Ports and processes of the tests: a free loopback port, waiting for a listener, the children a
test left running, stopping a child."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A loopback port nothing listens on now (connections to it are refused until one does)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes] | None = None, timeout: float = 300.0) -> None:
    """Wait until something listens on ``port`` (and ``process``, if given, is still running).
    ``timeout`` bounds a hang: a busy machine starts servers slowly."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if (process is not None and process.poll() is not None) or time.monotonic() > deadline:
                raise RuntimeError(f"nothing started listening on port {port}") from None
            time.sleep(0.1)


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


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate ``process`` (kill it when it does not end within 10 s) and reap it."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
