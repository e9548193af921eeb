#!/bin/sh
# Two Heros on one PostgreSQL behind one nginx, for the browser test of several instances
# (instances.spec.ts):
#   $1      nginx, balancing every request between the two (round robin, nothing sticky);
#   $1 + 1  nginx, to the first Hero only;   $1 + 2  nginx, to the second only
#           (so that a test can put a tab on each);
#   $1 + 3, $1 + 4  the two Heros, on loopback, each with its own data directory;
#   $1 + 5  a PostgreSQL of their own (scripts/postgres.sh, under target/e2e-pg).
# Everything is made fresh at each start and ends with this script's process group (which
# Playwright ends): PostgreSQL, the Heros and nginx all run in it.
set -eu
lb="$1"
one=$((lb + 1))
two=$((lb + 2))
hero1=$((lb + 3))
hero2=$((lb + 4))
pgport=$((lb + 5))
mock="${2:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${HERO_BIN:-$root/target/debug/hero}"
nginx="${HERO_NGINX:-/usr/sbin/nginx}"
conf="$root/target/e2e-nginx-two"
export HERO_PG_DIR="$root/target/e2e-pg"
rm -rf "$conf" "$root/target/e2e-data-1" "$root/target/e2e-data-2"
mkdir -p "$conf"
mkdir -m 700 -p "$root/target/e2e-data-1" "$root/target/e2e-data-2"

# PostgreSQL in the foreground of this process group, so that it ends with the rest.
url="$("$root/scripts/postgres.sh" init "$pgport")"
"$root/scripts/postgres.sh" run >"$root/target/e2e-pg.log" 2>&1 &
tries=0
until /usr/lib/postgresql/15/bin/pg_isready -q -h 127.0.0.1 -p "$pgport"; do
  tries=$((tries + 1))
  [ "$tries" -lt 100 ] || { echo "PostgreSQL did not start"; cat "$root/target/e2e-pg.log"; exit 1; }
  sleep 0.1
done

export HERO_DATABASE_URL="$url" HERO_CONFIG=/dev/null
# One master key for both, as several instances need.
export HERO_MASTER_KEY="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
unset HERO_BASE_PATH || true
if [ -n "$mock" ]; then
  export HERO_EGRESS_ALLOW="$mock" HERO_SEARCH_URL="http://$mock"
fi
HERO_DATA_DIR="$root/target/e2e-data-1"
export HERO_DATA_DIR
printf 'alice-password\n' | "$bin" user add alice --admin

cat > "$conf/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $conf/nginx.pid;
error_log $conf/error.log warn;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path $conf/body;
  proxy_temp_path $conf/proxy;
  fastcgi_temp_path $conf/fastcgi;
  uwsgi_temp_path $conf/uwsgi;
  scgi_temp_path $conf/scgi;
  client_max_body_size 4m;
  map \$http_upgrade \$connection_upgrade { default upgrade; '' close; }
  upstream both { server 127.0.0.1:$hero1; server 127.0.0.1:$hero2; }
  upstream first { server 127.0.0.1:$hero1; }
  upstream second { server 127.0.0.1:$hero2; }
  proxy_http_version 1.1;
  proxy_set_header Host \$http_host;
  proxy_set_header Upgrade \$http_upgrade;
  proxy_set_header Connection \$connection_upgrade;
  proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
  proxy_buffering off;
  proxy_read_timeout 1h;
  server { listen 127.0.0.1:$lb; location / { proxy_pass http://both; } }
  server { listen 127.0.0.1:$one; location / { proxy_pass http://first; } }
  server { listen 127.0.0.1:$two; location / { proxy_pass http://second; } }
}
CONF

HERO_DATA_DIR="$root/target/e2e-data-1" "$bin" serve --addr "127.0.0.1:$hero1" --site-root "$root/target/site" &
HERO_DATA_DIR="$root/target/e2e-data-2" "$bin" serve --addr "127.0.0.1:$hero2" --site-root "$root/target/site" &
"$nginx" -e "$conf/error.log" -p "$conf" -c "$conf/nginx.conf" &
wait
