#!/usr/bin/env bash
# A throw-away PostgreSQL server for the store tests, on 127.0.0.1 and a free port.
#
#   eval "$(scripts/ci_postgres.sh start)"   # exports PRIVACY_CI_TEST_PG_URL=postgresql://...
#   .venv/bin/pytest tests/store tests/service tests/assistant
#   scripts/ci_postgres.sh stop
#
# start: installs PostgreSQL with apt-get when no server binaries are found (needs root),
# creates a cluster in $PRIVACY_CI_PG_DIR (default: a fresh temporary folder, remembered
# in /tmp/privacy-ci-pg.dir), starts it on 127.0.0.1 only, with trust authentication
# for local connections and durability off (fsync=off: test data only), creates the
# database privacy_ci_test, and prints the export line on stdout (everything else goes
# to stderr). As root it runs the server as the `postgres` user (created if missing),
# since PostgreSQL refuses to run as root.
# stop: stops that server and removes its folder. status: prints the URL if running.
set -euo pipefail

STATE_FILE=/tmp/privacy-ci-pg.dir
DB_NAME=privacy_ci_test
PG_USER=postgres

log() { echo "ci_postgres: $*" >&2; }

find_bindir() {
    local dir
    if command -v pg_config >/dev/null 2>&1; then
        dir="$(pg_config --bindir 2>/dev/null || true)"
        if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return 0; fi
    fi
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) /usr/local/pgsql/bin /usr/local/bin /usr/bin; do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ]; then
            echo "$dir"; return 0
        fi
    done
    return 1
}

install_postgres() {
    if [ "$(id -u)" != 0 ]; then
        log "no PostgreSQL server binaries found and not root: install postgresql first"
        exit 1
    fi
    log "installing PostgreSQL with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    # The package's own cluster is not needed; policy-rc.d keeps apt from starting it.
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    apt-get install -y -qq --no-install-recommends postgresql >&2 || {
        rm -f /usr/sbin/policy-rc.d; exit 1; }
    rm -f /usr/sbin/policy-rc.d
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Run a command as the server's user (PostgreSQL refuses to run as root).
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$PG_USER" -- "$@"
    else
        "$@"
    fi
}

start() {
    local bindir dir port url
    bindir="$(find_bindir)" || { install_postgres; bindir="$(find_bindir)"; }
    if [ "$(id -u)" = 0 ]; then
        id -u "$PG_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
    else
        PG_USER="$(id -un)"
    fi
    if [ -f "$STATE_FILE" ] && [ -f "$(cat "$STATE_FILE")/url" ]; then
        dir="$(cat "$STATE_FILE")"
        if as_pg "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
            log "already running ($dir)"
            echo "export PRIVACY_CI_TEST_PG_URL=$(cat "$dir/url")"
            return 0
        fi
        rm -rf "$dir"
    fi
    dir="${PRIVACY_CI_PG_DIR:-$(mktemp -d /tmp/privacy-ci-pg.XXXXXX)}"
    mkdir -p "$dir"
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown "$PG_USER" "$dir"
    port="$(free_port)"
    log "initdb in $dir/data ($bindir)"
    as_pg "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2; exit 1; }
    log "starting on 127.0.0.1:$port"
    as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
        start >&2 || { cat "$dir/server.log" >&2; exit 1; }
    as_pg "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres "$DB_NAME"
    url="postgresql://postgres@127.0.0.1:$port/$DB_NAME"
    echo "$url" > "$dir/url"
    echo "$bindir" > "$dir/bindir"
    echo "$dir" > "$STATE_FILE"
    log "ready: $url"
    echo "export PRIVACY_CI_TEST_PG_URL=$url"
}

stop() {
    local dir bindir
    [ -f "$STATE_FILE" ] || { log "nothing to stop"; return 0; }
    dir="$(cat "$STATE_FILE")"
    if [ -d "$dir/data" ]; then
        bindir="$(cat "$dir/bindir" 2>/dev/null || find_bindir)"
        [ "$(id -u)" = 0 ] || PG_USER="$(id -un)"
        as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
    fi
    case "$dir" in /tmp/privacy-ci-pg.*|"${PRIVACY_CI_PG_DIR:-/nonexistent}") rm -rf "$dir" ;; esac
    rm -f "$STATE_FILE"
    log "stopped"
}

status() {
    [ -f "$STATE_FILE" ] && [ -f "$(cat "$STATE_FILE")/url" ] || { log "not running"; return 1; }
    echo "export PRIVACY_CI_TEST_PG_URL=$(cat "$(cat "$STATE_FILE")/url")"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
