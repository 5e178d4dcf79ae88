"""``scripts/test.sh`` runs every check whichever failed before it, and exits non-zero naming the
ones that failed: run here on a copy of the script whose tools are stand-ins that log their call and
exit as told (no environment is built, no server started)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _stand_in(path: Path, name: str, log: Path) -> None:
    path.write_text(
        f'#!/bin/sh\necho "{name} $*" >> {log}\n'
        f'case " $* " in *" -m pytest "*) exit "${{FAIL_PYTEST:-0}}";; esac\n'
        f'[ "{name}" = "mypy" ] && exit "${{FAIL_MYPY:-0}}"\nexit 0\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "test.sh", tmp_path / "scripts" / "test.sh")
    bin_dir, tools = tmp_path / "fakebin", tmp_path / ".venv" / "bin"
    bin_dir.mkdir()
    tools.mkdir(parents=True)
    log = tmp_path / "calls.log"
    _stand_in(bin_dir / "python3", "python3", log)
    for name in ("python", "pip", "ruff", "mypy", "mkdocs"):
        _stand_in(tools / name, name, log)
    return tmp_path


def _run(repo: Path, **env: str) -> tuple[int, list[str], str]:
    done = subprocess.run(
        ["bash", str(repo / "scripts" / "test.sh"), "-q"],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            "PATH": f"{repo / 'fakebin'}:{os.environ['PATH']}",
            "ADVISORCHAIN_TEST_POSTGRES_DSN": "postgresql://unused",
            "ADVISORCHAIN_TEST_REDIS_URL": "redis://unused",
            "ADVISORCHAIN_TEST_PGVECTOR_DSN": "postgresql://unused",
            **env,
        },
    )
    return done.returncode, (repo / "calls.log").read_text().splitlines(), done.stderr


def test_every_check_runs_and_success_exits_0(repo: Path) -> None:
    code, calls, err = _run(repo)
    assert code == 0, err
    assert [c.split()[0] for c in calls] == ["python3", "pip", "python", "ruff", "ruff", "mypy", "mkdocs"]
    assert "test.sh: everything passed" in err


def test_a_failing_pytest_still_runs_ruff_and_mypy_and_exits_1(repo: Path) -> None:
    code, calls, err = _run(repo, FAIL_PYTEST="1")
    assert code == 1
    assert calls[-4:-1] == [
        "ruff check advisorchain tests benchmarks examples",
        "ruff format --check advisorchain",
        "mypy advisorchain",
    ]
    assert calls[-1].startswith("mkdocs build --strict")
    assert "test.sh: failed: pytest" in err


def test_every_failure_is_named(repo: Path) -> None:
    code, _, err = _run(repo, FAIL_PYTEST="1", FAIL_MYPY="1")
    assert code == 1
    assert "test.sh: failed: pytest mypy" in err
