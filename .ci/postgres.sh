#!/usr/bin/env bash
# A throwaway PostgreSQL for the central lease store tests, from Debian's `postgresql` package.
#
#   eval "$(.ci/postgres.sh start [DIR])"   # installs if missing, starts, prints two export lines:
#                                          #   BERTH_TEST_PG_DSN (postgresql://berth:<pw>@127.0.0.1:<port>/postgres)
#                                          #   BERTH_TEST_PG_DIR (pass it to stop)
#   .ci/postgres.sh stop DIR                # stops the cluster and deletes DIR
#
# The cluster lives in DIR (default: a new temp dir), runs as an unprivileged user (the package's
# `postgres` user when invoked as root, else the caller), listens on 127.0.0.1 at a random free port and
# on a Unix socket in DIR, with a random password (scram-sha-256). The DSN is also written to DIR/dsn
# (mode 0600). Durability is switched off (fsync, synchronous_commit): the data is thrown away.
# Only the export lines go to stdout, so the password never reaches a log; progress goes to stderr.
# BERTH_PG_NO_INSTALL=1 skips the apt-get install (the test helper sets it).
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pg_bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$d" ] && [ -x "$d/initdb" ] && echo "$d"
}

# Runs a command as the cluster's owner.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start() {
  local bindir dir password port tries
  bindir=$(pg_bindir) || true
  if [ -z "${bindir:-}" ]; then
    apt_install PostgreSQL BERTH_PG_NO_INSTALL postgresql || exit 1
    bindir=$(pg_bindir) || {
      log "initdb not found after installing"
      exit 1
    }
  fi
  dir=${1:-$(mktemp -d "${TMPDIR:-/tmp}/berth-pg.XXXXXX")}
  mkdir -p "$dir"
  chmod 700 "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi

  password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  (umask 077 && printf '%s\n' "$password" >"$dir/pwfile")
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir/pwfile"; fi
  as_owner "$bindir/initdb" -D "$dir/data" -U berth --pwfile="$dir/pwfile" --auth=scram-sha-256 \
    -E UTF8 --locale=C --no-sync --no-instructions >"$dir/initdb.log" 2>&1 || {
    log "initdb failed:"
    cat "$dir/initdb.log" >&2
    exit 1
  }
  rm -f "$dir/pwfile"

  for tries in 1 2 3 4 5; do
    port=$(random_port)
    if as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 -s \
      -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
          -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 \
          -c shared_buffers=64MB" start >&2; then
      break
    fi
    log "start on port $port failed (attempt $tries)"
    port=
  done
  if [ -z "$port" ]; then
    tail -n 20 "$dir/server.log" >&2 || true
    exit 1
  fi
  local dsn="postgresql://berth:${password}@127.0.0.1:${port}/postgres"
  (umask 077 && printf '%s\n' "$dsn" >"$dir/dsn")
  log "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $dir)"
  printf "export BERTH_TEST_PG_DSN='%s'\n" "$dsn"
  printf "export BERTH_TEST_PG_DIR='%s'\n" "$dir"
}

stop() {
  local dir=${1:?usage: postgres.sh stop DIR} bindir
  bindir=$(pg_bindir) || true
  if [ -n "${bindir:-}" ] && [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -s stop >&2 || true
  fi
  rm -rf "$dir"
}

case "${1:-}" in
start) start "${2:-}" ;;
stop) stop "${2:-}" ;;
*)
  echo "usage: $0 start [DIR] | stop DIR" >&2
  exit 2
  ;;
esac
