#!/bin/sh
# Hero under /hero behind Debian's nginx, as reference 000 lays it out, for the base-path
# browser tests. One Hero (`--base-path /hero`) behind two proxies of one nginx:
#   $1      nginx, location /hero/ proxied to Hero with the prefix stripped (reference 000's);
#   $1 + 1  nginx, location /hero/ proxied with the prefix passed on as it came;
#   $1 + 2  Hero itself, on loopback, its site inside its binary.
# Its own data directory under target/, emptied at each start (as serve-for-tests.sh's).
# nginx runs in the foreground as this script's last process, Hero in the background of
# the same process group: Playwright ends both with it.
set -eu
strip="$1"
pass=$((strip + 1))
port=$((strip + 2))
mock="${2:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${HERO_BIN:-$root/target/debug/hero}"
nginx="${HERO_NGINX:-/usr/sbin/nginx}"
data="$root/target/e2e-data-base"
conf="$root/target/e2e-nginx"
chmod -R u+rwx "$data" 2>/dev/null || true
rm -rf "$data" "$conf"
mkdir -m 700 -p "$data"
mkdir -p "$conf"

export HERO_DATA_DIR="$data" HERO_CONFIG=/dev/null HERO_BASE_PATH=/hero
if [ -n "$mock" ]; then
  # The mock LLM is the search service of `websearch`, the one non-public address allowed.
  export HERO_EGRESS_ALLOW="$mock" HERO_SEARCH_URL="http://$mock"
fi
unset HERO_MASTER_KEY || true
printf 'alice-password\n' | "$bin" user add alice --admin
printf 'bob-password\n' | "$bin" user add bob

# Headers both proxies set: the browser's host (Hero checks Origin against it), the
# WebSocket's upgrade, the client's address; no buffering, so events leave as they come.
cat > "$conf/proxy.conf" <<CONF
proxy_http_version 1.1;
proxy_set_header Host \$http_host;
proxy_set_header Upgrade \$http_upgrade;
proxy_set_header Connection \$connection_upgrade;
proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
proxy_set_header X-Forwarded-Proto \$scheme;
proxy_buffering off;
proxy_read_timeout 1h;
CONF
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
  server {
    listen 127.0.0.1:$strip;
    # Reference 000: https://host/hero/ ... strips /hero/ prefix.
    location /hero/ {
      proxy_pass http://127.0.0.1:$port/;
      include $conf/proxy.conf;
    }
  }
  server {
    listen 127.0.0.1:$pass;
    location /hero/ {
      proxy_pass http://127.0.0.1:$port;
      include $conf/proxy.conf;
    }
  }
}
CONF

# This Hero carries the site inside its binary (what `scripts/run.sh` serves): a copy of the
# built binary with the site embedded, run with no site directory named.
"$bin" embed-site --site "$root/target/site" --hashes "$(dirname "$bin")/hash.txt" --out "$data/hero"
unset HERO_SITE_ROOT || true
"$data/hero" serve --addr "127.0.0.1:$port" &
exec "$nginx" -e "$conf/error.log" -p "$conf" -c "$conf/nginx.conf"
