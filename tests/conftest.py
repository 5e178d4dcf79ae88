"""Suite-wide guard: tests never reach a real provider. Every provider adapter refuses requests
that would leave this machine, and any socket connection outside loopback (Unix sockets allowed)
fails at once, so a test that forgot its mock transport cannot spend money
(``advisorchain.testing.forbid_model_requests``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from advisorchain.testing import forbid_model_requests


@pytest.fixture(autouse=True, scope="session")
def _no_network() -> Iterator[None]:
    with forbid_model_requests(sockets=True):
        yield
