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
    for name in ("npm", "apt-get"):  # the optional installs: never the network from this test
        _stand_in(bin_dir / name, name, log)
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
    calls = (repo / "calls.log").read_text().splitlines()
    return done.returncode, [c for c in calls if not c.startswith(("npm", "apt-get"))], done.stderr


def test_every_check_runs_and_success_exits_0(repo: Path) -> None:
    code, calls, err = _run(repo)
    assert code == 0, err
    assert [c.split()[0] for c in calls] == ["python3", "pip", "python", "ruff", "ruff", "mypy", "mkdocs"]
    assert "test.sh: everything passed" in err


def test_a_failing_pytest_still_runs_ruff_and_mypy_and_exits_1(repo: Path) -> None:
    code, calls, err = _run(repo, FAIL_PYTEST="1")
    assert code == 1
    assert [c for c in calls if not c.startswith("mkdocs")][-3:] == [
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


def _services_stand_in(repo: Path, start: str) -> None:
    """scripts/services.sh as a stand-in: ``start`` is the body of its start command."""
    log = repo / "calls.log"
    script = repo / "scripts" / "services.sh"
    script.write_text(
        f'#!/bin/bash\necho "services.sh $*" >> {log}\n'
        f'case "$1" in\n  start)\n{start}\n  ;;\n  stop) exit 0;;\nesac\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def _without_servers() -> dict[str, str]:
    return {
        "ADVISORCHAIN_TEST_POSTGRES_DSN": "",
        "ADVISORCHAIN_TEST_REDIS_URL": "",
        "ADVISORCHAIN_TEST_PGVECTOR_DSN": "",
    }


def test_a_server_that_does_not_start_is_one_line_every_check_still_runs_and_the_summary_names_it(
    repo: Path,
) -> None:
    _services_stand_in(
        repo,
        "    echo \"export ADVISORCHAIN_SERVICES_DIR='/nowhere'\"\n"
        "    echo \"export ADVISORCHAIN_TEST_REDIS_URL='redis://127.0.0.1:1/0'\"\n"
        "    echo 'services.sh: postgres did not start: initdb: Permission denied' >&2\n"
        "    echo \"export ADVISORCHAIN_SERVICES_FAILED='postgres'\"\n"
        "    exit 1",
    )
    code, calls, err = _run(repo, **_without_servers())
    assert code == 1
    assert [c.split()[0] for c in calls] == [
        "python3",
        "pip",
        "services.sh",
        "python",
        "ruff",
        "ruff",
        "mypy",
        "mkdocs",
        "services.sh",
    ]
    assert calls[-1] == "services.sh stop /nowhere"  # what did start is stopped at the end
    assert [line for line in err.splitlines() if "postgres" in line] == [
        "services.sh: postgres did not start: initdb: Permission denied",
        "test.sh: failed: services(postgres)",
    ]


def test_started_servers_reach_pytest_and_are_stopped(repo: Path) -> None:
    _services_stand_in(
        repo,
        "    echo \"export ADVISORCHAIN_SERVICES_DIR='/here'\"\n"
        "    echo \"export ADVISORCHAIN_TEST_REDIS_URL='redis://127.0.0.1:2/0'\"",
    )
    code, calls, err = _run(repo, **_without_servers())
    assert code == 0, err
    assert calls[-1] == "services.sh stop /here"


def test_the_docs_build_is_strict_and_shows_what_strict_mode_counts(repo: Path) -> None:
    _, calls, _ = _run(repo)
    (mkdocs,) = [c for c in calls if c.startswith("mkdocs")]
    assert "--strict" in mkdocs.split()
    assert (
        "--quiet" not in mkdocs.split() and "-q" not in mkdocs.split()
    )  # it drops the warnings strict counts
