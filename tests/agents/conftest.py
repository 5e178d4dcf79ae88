"""Agent-test fixtures: the memory backends (SQLite, and PostgreSQL and Redis when
``scripts/services.sh`` runs them)."""

from __future__ import annotations

from tests.support.memory_backends import (  # noqa: F401 (fixtures)
    make_backend,
    persistent_backend,
)
