#!/usr/bin/env bash
# A throwaway MariaDB for the central lease store tests (`--sql-driver mysql`), from Debian's
# `mariadb-server` package.
#
#   eval "$(.ci/mariadb.sh start [DIR])"    # installs if missing, starts, prints two export lines:
#                                          #   BERTH_TEST_MYSQL_DSN (mysql://berth:<pw>@127.0.0.1:<port>/berth)
#                                          #   BERTH_TEST_MYSQL_DIR (pass it to stop)
#   .ci/mariadb.sh stop DIR                 # stops the server and deletes DIR
#
# The server lives in DIR (default: a new temp dir), runs as an unprivileged user (the package's `mysql`
# user when invoked as root, else the caller), listens on 127.0.0.1 at a random free port and on a Unix
# socket in DIR. The account `berth` (all privileges, so tests can create a database each) gets a random
# password through an init file that is deleted once the server is up. The DSN is also written to
# DIR/dsn (mode 0600). Durability is switched off (InnoDB log flush and doublewrite): the data is thrown
# away. Only the export lines go to stdout, so the password never reaches a log; progress goes to stderr.
# BERTH_MYSQL_NO_INSTALL=1 skips the apt-get install (the test helper sets it).
set -euo pipefail

log() { echo "mariadb.sh: $*" >&2; }
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

server_bin() {
  local b
  for b in /usr/sbin/mariadbd /usr/sbin/mysqld; do
    if [ -x "$b" ] && command -v mariadb-install-db >/dev/null 2>&1; then
      echo "$b"
      return 0
    fi
  done
  return 1
}

# The OS user owning the data directory and running the server.
owner() {
  if [ "$(id -u)" -eq 0 ]; then echo mysql; else id -un; fi
}

# Waits until the server answers a ping on its socket (0) or its process has gone (1).
wait_up() {
  local dir=$1 pid=$2 i
  for i in $(seq 1 300); do
    if mariadb-admin --no-defaults --socket="$dir/mysqld.sock" --connect-timeout=1 ping >/dev/null 2>&1; then
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

start() {
  local bin dir password port tries pid user
  bin=$(server_bin) || true
  if [ -z "${bin:-}" ]; then
    apt_install MariaDB BERTH_MYSQL_NO_INSTALL mariadb-server || exit 1
    bin=$(server_bin) || {
      log "mariadbd not found after installing"
      exit 1
    }
  fi
  dir=${1:-$(mktemp -d "${TMPDIR:-/tmp}/berth-mariadb.XXXXXX")}
  user=$(owner)
  mkdir -p "$dir/data"
  chmod 700 "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown -R mysql: "$dir"; fi

  mariadb-install-db --no-defaults --user="$user" --datadir="$dir/data" --auth-root-authentication-method=socket \
    --skip-test-db >"$dir/install.log" 2>&1 || {
    log "mariadb-install-db failed:"
    cat "$dir/install.log" >&2
    exit 1
  }

  password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  (umask 077 && cat >"$dir/init.sql" <<SQL
CREATE USER IF NOT EXISTS 'berth'@'127.0.0.1' IDENTIFIED BY '$password';
CREATE USER IF NOT EXISTS 'berth'@'localhost' IDENTIFIED BY '$password';
GRANT ALL PRIVILEGES ON *.* TO 'berth'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'berth'@'localhost' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS berth;
SQL
  )
  if [ "$(id -u)" -eq 0 ]; then chown mysql: "$dir/init.sql"; fi

  for tries in 1 2 3 4 5; do
    port=$(random_port)
    "$bin" --no-defaults --user="$user" --datadir="$dir/data" --socket="$dir/mysqld.sock" \
      --pid-file="$dir/mysqld.pid" --log-error="$dir/server.log" --init-file="$dir/init.sql" \
      --bind-address=127.0.0.1 --port="$port" --skip-name-resolve \
      --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
      --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --innodb-buffer-pool-size=64M \
      --max-connections=300 </dev/null >/dev/null 2>&1 &
    pid=$!
    if wait_up "$dir" "$pid"; then
      break
    fi
    log "start on port $port failed (attempt $tries)"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    port=
  done
  rm -f "$dir/init.sql"
  if [ -z "$port" ]; then
    tail -n 20 "$dir/server.log" >&2 || true
    exit 1
  fi
  local dsn="mysql://berth:${password}@127.0.0.1:${port}/berth"
  (umask 077 && printf '%s\n' "$dsn" >"$dir/dsn")
  log "MariaDB $("$bin" --version | awk '{print $3}') on 127.0.0.1:$port (data in $dir)"
  printf "export BERTH_TEST_MYSQL_DSN='%s'\n" "$dsn"
  printf "export BERTH_TEST_MYSQL_DIR='%s'\n" "$dir"
}

stop() {
  local dir=${1:?usage: mariadb.sh stop DIR} pid i
  if [ -f "$dir/mysqld.pid" ]; then
    pid=$(cat "$dir/mysqld.pid")
    # The data is thrown away: no clean shutdown needed, only the process gone before DIR is.
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
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
