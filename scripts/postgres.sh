#!/usr/bin/env bash
# A PostgreSQL 15 of the tests' own: `start` makes a fresh cluster in target/pg (initdb, as
# an unprivileged user: `postgres` when run as root), serves it on a loopback port alone,
# and prints the URL the tests take (HERO_TEST_POSTGRES); `stop` stops it and removes it;
# `halt` stops it and `resume` starts it again, keeping everything (a test of PostgreSQL
# going away under a serving Hero); `init` makes it without starting it, and `run` runs it
# in the foreground (for a script whose processes all end together). HERO_PG_DIR puts it
# elsewhere than target/pg; HERO_PG_SSL=1 serves TLS too (its root certificate in data/root.crt).
# Fast and unsafe settings (no fsync): it holds nothing but tests' databases.
# Usage: scripts/postgres.sh start [PORT] | stop | halt | resume | init [PORT] | run
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${HERO_PG_BIN:-/usr/lib/postgresql/15/bin}"
dir="${HERO_PG_DIR:-$PWD/target/pg}"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "${1:-}" in
init | start)
  port="${2:-54329}"
  [ -x "$bin/initdb" ] || { echo "postgres.sh: no PostgreSQL 15 in $bin (scripts/setup.sh installs it)" >&2; exit 1; }
  "$0" stop >/dev/null 2>&1 || true
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  pw="$dir/pw"
  as_pg sh -c "umask 077; echo hero-test > '$pw'"
  as_pg "$bin/initdb" -D "$dir/data" -U hero --pwfile="$pw" --auth-host=scram-sha-256 \
    --auth-local=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  # In its configuration, so that `resume` and `run` start it as it was.
  printf '%s\n' "listen_addresses = '127.0.0.1'" "port = $port" \
    "unix_socket_directories = '$dir'" "fsync = off" "synchronous_commit = off" \
    "full_page_writes = off" "max_connections = 300" |
    as_pg sh -c "cat >> '$dir/data/postgresql.conf'"
  if [ "${HERO_PG_SSL:-}" = 1 ]; then
    # TLS: a certificate authority of its own (data/root.crt, what a client verifies by)
    # and the server's certificate for 127.0.0.1, signed by it.
    as_pg sh -c "cd '$dir/data' && umask 077 &&
      openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=hero-test-ca \
        -addext basicConstraints=critical,CA:TRUE -keyout root.key -out root.crt &&
      openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out server.csr &&
      printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' > server.ext &&
      openssl x509 -req -in server.csr -CA root.crt -CAkey root.key -CAcreateserial -days 2 \
        -extfile server.ext -out server.crt && chmod 644 root.crt" >/dev/null 2>&1
    printf '%s\n' "ssl = on" | as_pg sh -c "cat >> '$dir/data/postgresql.conf'"
  fi
  if [ "$1" = start ]; then
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
  fi
  echo "postgres://hero:hero-test@127.0.0.1:$port/postgres"
  ;;
run)
  # In the foreground, this process: it ends with whoever ends this one.
  if [ "$(id -u)" = 0 ]; then exec runuser -u postgres -- "$bin/postgres" -D "$dir/data"; fi
  exec "$bin/postgres" -D "$dir/data"
  ;;
halt)
  as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
  ;;
resume)
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
  ;;
stop)
  if [ -d "$dir/data" ]; then as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true; fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: scripts/postgres.sh start [PORT] | stop | halt | resume | init [PORT] | run" >&2; exit 2 ;;
esac
