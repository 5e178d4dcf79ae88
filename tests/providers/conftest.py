"""Provider tests never reach a real API: no provider key is visible to them, and httpx2's real
transports refuse to send, so an SDK client built without the cassette transport fails at once
(the suite-wide socket guard in tests/conftest.py is a second net)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

_KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
)


def _refuse(self: object, request: httpx2.Request, *args: Any, **kwargs: Any) -> Any:
    raise RuntimeError(
        f"provider tests may not reach the network ({request.method} {request.url}); "
        "give the SDK client a cassette transport (advisorchain.replay)"
    )


@pytest.fixture(autouse=True)
def _no_real_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in _KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(httpx2.AsyncHTTPTransport, "handle_async_request", _refuse)
    monkeypatch.setattr(httpx2.HTTPTransport, "handle_request", _refuse)
    yield
