#!/usr/bin/env bash
# Sets up a virtual environment and runs the whole suite: tests (with real PostgreSQL and Redis
# servers on loopback), ruff, and mypy --strict on the package.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
.venv/bin/python -m pytest "$@"
.venv/bin/ruff check advisorchain tests benchmarks examples
.venv/bin/ruff format --check advisorchain
.venv/bin/mypy advisorchain
