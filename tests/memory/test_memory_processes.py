"""Stores shared by processes: concurrent appends from several processes, and a writer killed with
SIGKILL mid-write (SQLite) losing nothing it had committed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from advisorchain.messages import UserMessage

WRITER = str(Path(__file__).with_name("memory_writer.py"))


def _start_writer(spec: dict[str, Any], conversation_id: str, tag: str, count: int) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, WRITER, json.dumps(spec), conversation_id, tag, str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


def _go(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("\n")
    process.stdin.flush()


@pytest.mark.parametrize("backend_name", ["sqlite", "postgres", "redis"])
def test_three_processes_appending_to_one_conversation_keep_every_message_in_order(
    make_backend: Any, backend_name: str
) -> None:
    backend = make_backend(backend_name)
    backend.repository().save_all("shared", [UserMessage("start")])  # creates the schema first
    writers = [_start_writer(backend.spec, "shared", f"p{w}", 40) for w in range(3)]
    for writer in writers:
        _go(writer)
    for writer in writers:
        _, errors = writer.communicate(timeout=600)  # a bound for a hang
        assert writer.returncode == 0, errors

    texts = [m.text for m in backend.repository().find_by_conversation_id("shared")]
    assert len(texts) == 1 + 3 * 40
    for w in range(3):
        assert [t for t in texts if t.startswith(f"p{w}:")] == [f"p{w}:{i}" for i in range(40)]


def test_a_sqlite_writer_killed_mid_write_loses_nothing_it_committed(make_backend: Any) -> None:
    backend = make_backend("sqlite")
    spec = {**backend.spec, "payload": 100_000, "max_messages": 20}
    last_acknowledged = -1
    for attempt in range(3):
        writer = _start_writer(spec, "crash", f"run{attempt}", -1)
        _go(writer)
        assert writer.stdout is not None
        for _ in range(30):
            last_acknowledged = int(writer.stdout.readline().split(":")[1])
        os.kill(writer.pid, signal.SIGKILL)  # the writer is still appending: the kill lands mid-run
        writer.communicate(timeout=120)
        assert writer.returncode == -signal.SIGKILL

        texts = [m.text for m in backend.repository().find_by_conversation_id("crash")]
        numbers = [int(t.split(":")[1]) for t in texts]
        assert all(t.startswith(f"run{attempt}:") for t in texts)
        assert len(numbers) == 20
        assert numbers == list(range(numbers[0], numbers[0] + 20))
        assert numbers[-1] >= last_acknowledged

    with sqlite3.connect(backend.spec["path"]) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
