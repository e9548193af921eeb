#!/usr/bin/env bash
# A PostgreSQL 15 of the tests' own: `start` makes a fresh cluster in target/pg (initdb, as
# an unprivileged user: `postgres` when run as root), serves it on a loopback port alone,
# and prints the URL the tests take (HERO_TEST_POSTGRES); `stop` stops it and removes it.
# Fast and unsafe settings (no fsync): it holds nothing but tests' databases.
# Usage: scripts/postgres.sh start [PORT] | stop
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${HERO_PG_BIN:-/usr/lib/postgresql/15/bin}"
dir="$PWD/target/pg"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "${1:-}" in
start)
  port="${2:-54329}"
  [ -x "$bin/initdb" ] || { echo "postgres.sh: no PostgreSQL 15 in $bin (scripts/setup.sh installs it)" >&2; exit 1; }
  "$0" stop >/dev/null 2>&1 || true
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  pw="$dir/pw"
  as_pg sh -c "umask 077; echo hero-test > '$pw'"
  as_pg "$bin/initdb" -D "$dir/data" -U hero --pwfile="$pw" --auth-host=scram-sha-256 \
    --auth-local=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -o "-c listen_addresses=127.0.0.1 -p $port \
    -c unix_socket_directories='$dir' -c fsync=off -c synchronous_commit=off \
    -c full_page_writes=off -c max_connections=300" start >/dev/null
  echo "postgres://hero:hero-test@127.0.0.1:$port/postgres"
  ;;
stop)
  if [ -d "$dir/data" ]; then as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true; fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: scripts/postgres.sh start [PORT] | stop" >&2; exit 2 ;;
esac
