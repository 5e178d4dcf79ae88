"""The repositories' turn locks (what keeps turns of one conversation apart across processes): one
owner at a time, released by its owner only, and never stuck behind an owner that is gone."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from typing import Any

import pytest

from advisorchain.memory.locks import new_owner_token


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.mark.parametrize("backend_name", ["sqlite", "postgres", "redis"])
def test_a_held_turn_lock_refuses_a_second_owner_until_its_owner_unlocks(
    make_backend: Any, backend_name: str
) -> None:
    backend = make_backend(backend_name)
    first, second = backend.repository(), backend.repository()  # two processes' worth of objects
    a, b = new_owner_token(), new_owner_token()

    assert first.try_lock("c", a)
    assert not second.try_lock("c", b)
    assert second.try_lock("other", b)  # other conversations are free
    second.unlock("c", b)  # not its lock: changes nothing
    assert not second.try_lock("c", b)
    first.unlock("c", a)
    assert second.try_lock("c", b)


@pytest.mark.parametrize("backend_name", ["sqlite", "redis"])
def test_a_lease_that_ran_out_is_taken_over_and_cannot_be_renewed_by_its_old_owner(
    make_backend: Any, backend_name: str
) -> None:
    backend = make_backend(backend_name)
    backend.repository()
    spec = dict(backend.spec)
    repository = _open(spec, lock_lease=0.05)
    later = _open(spec, lock_lease=300)  # b's lease outlasts any pause of a busy machine
    a, b = new_owner_token(), new_owner_token()
    assert repository.try_lock("c", a)

    time.sleep(0.1)

    assert later.try_lock("c", b)
    assert not repository.renew_lock("c", a)
    assert later.renew_lock("c", b)
    repository.close()
    later.close()


def test_a_sqlite_lock_of_a_process_that_died_is_taken_over_at_once(make_backend: Any) -> None:
    backend = make_backend("sqlite")
    repository = backend.repository()
    host = new_owner_token().split(":")[0]
    with sqlite3.connect(backend.spec["path"]) as conn:
        conn.execute(
            "INSERT INTO chat_memory_turns VALUES (?, ?, ?)",
            ("c", f"{host}:{_dead_pid()}:x.0", time.time() + 3600),
        )
    conn.close()

    assert repository.try_lock("c", new_owner_token())


def test_a_postgres_lock_is_released_when_its_connection_ends(make_backend: Any) -> None:
    backend = make_backend("postgres")
    holder, other = backend.repository(), backend.repository()
    assert holder.try_lock("c", new_owner_token())
    assert not other.try_lock("c", new_owner_token())

    holder.close()  # as when the process holding it dies

    assert _eventually(lambda: other.try_lock("c", new_owner_token()))  # the server ends the session


def _eventually(attempt: Any, seconds: float = 120.0) -> bool:
    deadline = time.monotonic() + seconds
    while not attempt():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_lock_lease_must_be_positive(tmp_path: Any) -> None:
    from advisorchain import SQLiteChatMemoryRepository

    with pytest.raises(ValueError, match="lock_lease must be a positive number of seconds, got 0"):
        SQLiteChatMemoryRepository(tmp_path / "x.db", lock_lease=0)


def _open(spec: dict[str, Any], lock_lease: float) -> Any:
    if spec["kind"] == "sqlite":
        from advisorchain import SQLiteChatMemoryRepository

        return SQLiteChatMemoryRepository(spec["path"], lock_lease=lock_lease)
    from advisorchain import RedisChatMemoryRepository

    return RedisChatMemoryRepository(spec["url"], key_prefix=spec["key_prefix"], lock_lease=lock_lease)
