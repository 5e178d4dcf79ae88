#!/usr/bin/env bash
# Sets up a virtual environment and runs the whole suite: tests (with real PostgreSQL and Redis
# servers on loopback), ruff, mypy --strict on the package and the docs site in strict mode. Every
# check runs, whichever failed before it (a server that did not start too); the script exits
# non-zero when any did, naming them.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
# Headless Chromium from the distribution for the web page's browser tests (Playwright drives it; no
# browser download). Installed when missing and we may; without it those tests skip with the reason.
if [[ ! -x /usr/bin/chromium && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q chromium >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; } \
        || echo "scripts/test.sh: could not install chromium; the browser tests will skip" >&2
fi
# The MCP reference server (@modelcontextprotocol/server-everything) for tests/mcp, when node is here;
# without it those tests skip, saying so.
if command -v npm >/dev/null && [[ ! -e .mcp-everything/node_modules/@modelcontextprotocol/server-everything ]]; then
    npm install --prefix .mcp-everything --no-audit --no-fund --silent \
        @modelcontextprotocol/server-everything@2026.8.31 >&2 \
        || echo "test.sh: could not install @modelcontextprotocol/server-everything; its tests skip" >&2
fi
# The official AG-UI client (@ag-ui/client, its HttpAgent) for tests/serve, driven by a small node
# script; without node those tests skip, saying so.
if command -v npm >/dev/null && [[ ! -e .agui-client/node_modules/@ag-ui/client ]]; then
    npm install --prefix .agui-client --no-audit --no-fund --silent @ag-ui/client@1.0.0 >&2 \
        || echo "test.sh: could not install @ag-ui/client; the AG-UI client tests skip" >&2
fi
failed=()
check() {
    local name=$1 started=$SECONDS
    shift
    if "$@"; then
        echo "test.sh: $name passed ($((SECONDS - started)) s)" >&2
    else
        echo "test.sh: $name FAILED ($((SECONDS - started)) s)" >&2
        failed+=("$name")
    fi
}

# Real PostgreSQL, Redis and PostgreSQL with pgvector on loopback for the memory and retrieval tests
# (unless the caller already points at servers); the trap stops them however the run ends. A server
# that does not start is one line (services.sh says which and why): its tests skip, every other
# check still runs, and the summary names it.
if [[ -z "${ADVISORCHAIN_TEST_POSTGRES_DSN:-}" || -z "${ADVISORCHAIN_TEST_REDIS_URL:-}" || -z "${ADVISORCHAIN_TEST_PGVECTOR_DSN:-}" ]]; then
    trap 'scripts/services.sh stop "${ADVISORCHAIN_SERVICES_DIR:-}"' EXIT
    services_started=0
    services_env=$(scripts/services.sh start) && services_started=1
    eval "$services_env"
    ((services_started)) || failed+=("services(${ADVISORCHAIN_SERVICES_FAILED:-start})")
fi

check pytest .venv/bin/python -m pytest -rs "$@"  # -rs: why each skipped test skipped
check "ruff check" .venv/bin/ruff check advisorchain tests benchmarks examples
check "ruff format" .venv/bin/ruff format --check advisorchain
check mypy .venv/bin/mypy advisorchain
site_dir=$(mktemp -d)
check "mkdocs build --strict" env NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$site_dir"
rm -rf "$site_dir"
if ((${#failed[@]})); then
    echo "test.sh: failed: ${failed[*]}" >&2
    exit 1
fi
echo "test.sh: everything passed" >&2
