#!/usr/bin/env bash
# Sets up a virtual environment and runs the whole suite: tests (with real PostgreSQL and Redis
# servers on loopback), ruff, and mypy --strict on the package.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
# The MCP reference server (@modelcontextprotocol/server-everything) for tests/mcp, when node is here;
# without it those tests skip, saying so.
if command -v npm >/dev/null && [[ ! -e .mcp-everything/node_modules/@modelcontextprotocol/server-everything ]]; then
    npm install --prefix .mcp-everything --no-audit --no-fund --silent \
        @modelcontextprotocol/server-everything@2026.8.31 >&2 \
        || echo "test.sh: could not install @modelcontextprotocol/server-everything; its tests skip" >&2
fi
# Real PostgreSQL and Redis on loopback for the memory tests (unless the caller already points at
# servers); the trap stops them however the run ends.
if [[ -z "${ADVISORCHAIN_TEST_POSTGRES_DSN:-}" || -z "${ADVISORCHAIN_TEST_REDIS_URL:-}" ]]; then
    services_env=$(scripts/services.sh start)
    eval "$services_env"
    trap 'scripts/services.sh stop "$ADVISORCHAIN_SERVICES_DIR"' EXIT
fi
.venv/bin/python -m pytest "$@"
.venv/bin/ruff check advisorchain tests benchmarks examples
.venv/bin/ruff format --check advisorchain
.venv/bin/mypy advisorchain
