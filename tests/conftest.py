"""Suite-wide guard: tests never reach a real provider. Every provider adapter refuses requests
that would leave this machine, and any socket connection outside loopback (Unix sockets allowed)
fails at once, so a test that forgot its mock transport cannot spend money
(``advisorchain.testing.forbid_model_requests``).

Hypothesis runs without its per-example deadline and its too-slow health check: both measure time,
so on a busy machine they fail tests whose code is right.

Ctrl-C is Ctrl-C in every process a test starts, however the suite itself was started: a shell runs
a background job (``bash scripts/test.sh &``) with SIGINT ignored, every process below inherits that,
and the tests that interrupt a command would wait for an interrupt that never comes. The suite
restores SIGINT's Python handler; a process it starts then gets the default again (a handler,
unlike an ignored signal, does not survive exec)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from advisorchain.testing import forbid_model_requests
from tests.support.spans import spans  # noqa: F401 (a fixture: the spans a test finished)

settings.register_profile("advisorchain", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("advisorchain")

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True, scope="session")
def _no_network() -> Iterator[None]:
    with forbid_model_requests(sockets=True):
        yield
