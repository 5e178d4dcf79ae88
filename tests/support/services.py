"""The real servers the tests use (PostgreSQL, Redis, PostgreSQL with pgvector), named by
environment variables that ``scripts/services.sh start`` prints and ``scripts/test.sh`` sets."""

from __future__ import annotations

import os

import pytest

POSTGRES_ENV = "ADVISORCHAIN_TEST_POSTGRES_DSN"
REDIS_ENV = "ADVISORCHAIN_TEST_REDIS_URL"


def service_url(env: str) -> str:
    """The server named by ``env``; skip (or fail under CI=true: CI must run them) when it is not set."""
    value = os.environ.get(env)
    if value:
        return value
    reason = f'{env} is not set; start the servers with: eval "$(scripts/services.sh start)"'
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true requires the real server: {reason}")
    pytest.skip(reason)
