#!/usr/bin/env bash
# What the chat page's first load sends: builds the release site (unless --no-build),
# precompresses it and puts it inside the binary, serves it on a free loopback port with a fresh data directory, signs
# in, opens a session with the offline demo's reply in it, and asks for the page and each
# file it loads (HTML, wasm, JS, CSS) as a browser does (Accept-Encoding: br, gzip). Prints
# each file's raw, gzip and brotli size, the bytes actually sent, and the total; then the
# bytes a repeat visit sends (the files answer from cache by their immutable names).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = "--no-build" ] || { scripts/setup.sh; source scripts/env.sh; cargo leptos build --release --split; }
scripts/compress-site.sh target/site
target/release/hero embed-site --site target/site >/dev/null

data="$(mktemp -d)"; jar="$data/cookies"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
export HERO_DATA_DIR="$data/hero" HERO_CONFIG=/dev/null HERO_LOG=warn
unset HERO_MASTER_KEY || true
printf 'measure-password\n' | target/release/hero user add measure >/dev/null
target/release/hero serve --addr "127.0.0.1:$port" >/dev/null &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do curl -s -o /dev/null "$base/login" && break; sleep 0.1; done

curl -s -c "$jar" -H 'content-type: application/json' \
  -d '{"username":"measure","password":"measure-password"}' "$base/api/auth/login" >/dev/null
sid="$(curl -s -b "$jar" -H 'content-type: application/json' -d '{"name":"First load"}' \
  "$base/api/sessions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
curl -s -b "$jar" -H 'content-type: application/json' -d '{"content":"Hello"}' \
  "$base/api/sessions/$sid/messages" >/dev/null

page="$data/page.html"
sent() { curl -s -b "$jar" -H 'accept-encoding: br, gzip' -o /dev/null -w '%{size_download}' "$base$1"; }
printf '%-34s %9s %9s %9s %9s\n' file raw gzip brotli sent
total=0
html_sent="$(sent "/s/$sid")"
curl -s -b "$jar" -o "$page" "$base/s/$sid"
# HERO_FIRST_LOAD_PAGE=FILE keeps a copy of the page, to look at what it holds.
[ -z "${HERO_FIRST_LOAD_PAGE:-}" ] || cp "$page" "$HERO_FIRST_LOAD_PAGE"
printf '%-34s %9d %9d %9d %9d\n' "/s/$sid (HTML)" "$(wc -c <"$page")" \
  "$(gzip -9 -c "$page" | wc -c)" "$(brotli -q 11 -c "$page" | wc -c)" "$html_sent"
total=$((total + html_sent))
# What the page links, and the modules its scripts import (the split wasm's loader): the
# parts of the wasm loaded on demand (split_*.wasm) are not part of the first load.
files="$(grep -oE '/pkg/[^"]+\.(wasm|js|css)' "$page" | sort -u)"
for js in $(printf '%s\n' $files | grep '\.js$'); do
  files="$files $(grep -oE 'from ?"\./[^"]+\.js"' "target/site$js" | sed -E 's|.*"\./(.*)"|/pkg/\1|' || true)"
done
for path in $(printf '%s\n' $files | sort -u); do
  f="target/site$path"
  s="$(sent "$path")"
  printf '%-34s %9d %9d %9d %9d\n' "$path" "$(wc -c <"$f")" "$(wc -c <"$f.gz")" "$(wc -c <"$f.br")" "$s"
  total=$((total + s))
done
printf '%-34s %39d\n' "first load, on the wire" "$total"
cache="$(curl -s -o /dev/null -D - "$base$(grep -oE '/pkg/[^"]+\.wasm' "$page" | head -1)" | tr -d '\r' | grep -i '^cache-control' || true)"
echo "repeat visit: the HTML again ($html_sent bytes); the files: $cache"
