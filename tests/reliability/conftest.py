"""Fixtures shared by the reliability tests: the scripted server (``tests.support.openai_server``),
both ways a request travels, and every chat-memory repository (``tests.support.memory_backends``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.memory_backends import make_backend  # noqa: F401 (a fixture)
from tests.support.openai_server import ScriptedServer, running_server


@pytest.fixture(scope="module")
def _server() -> Iterator[ScriptedServer]:
    """One scripted server per test module (started once: it is cheap to reset, not to start)."""
    with running_server() as server:
        yield server


@pytest.fixture
def server(_server: ScriptedServer) -> ScriptedServer:
    """The module's scripted server with no queued replies and no recorded requests."""
    _server.reset()
    return _server


@pytest.fixture(params=["aiohttp", "sdk"])
def http_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test once with aiohttp carrying the requests (chosen when installed) and once on the
    SDK's own httpx2 stack (``ADVISORCHAIN_HTTP=sdk``)."""
    monkeypatch.setenv("ADVISORCHAIN_HTTP", "auto" if request.param == "aiohttp" else "sdk")
    return str(request.param)
