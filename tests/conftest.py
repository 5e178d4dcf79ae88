"""Suite-wide guard: tests never reach a real provider. Every provider adapter refuses requests
that would leave this machine, and any socket connection outside loopback (Unix sockets allowed)
fails at once, so a test that forgot its mock transport cannot spend money
(``advisorchain.testing.forbid_model_requests``).

Hypothesis runs without its per-example deadline and its too-slow health check: both measure time,
so on a busy machine they fail tests whose code is right."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from advisorchain.testing import forbid_model_requests
from tests.support.spans import spans  # noqa: F401 (a fixture: the spans a test finished)

settings.register_profile("advisorchain", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("advisorchain")


@pytest.fixture(autouse=True, scope="session")
def _no_network() -> Iterator[None]:
    with forbid_model_requests(sockets=True):
        yield
