#!/usr/bin/env bash
# Writes a brotli (.br) and a gzip (.gz) copy beside each of the built site's text and wasm
# files, at the strongest settings: Hero serves them to browsers that accept them
# (web::router), so nothing is compressed per request. Usage: compress-site.sh [SITE_DIR]
set -euo pipefail
site="${1:-$(dirname "$0")/../target/site}"
find "$site" -type f \( -name '*.wasm' -o -name '*.js' -o -name '*.css' -o -name '*.svg' \) |
  while read -r f; do
    gzip -9 -k -f -n "$f"
    brotli -q 11 -k -f "$f"
  done
