#!/usr/bin/env bash
# Builds Hero in release mode and serves it. Extra arguments go to `hero serve`
# (for example --addr 0.0.0.0:8080); settings are listed in the README.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/env.sh
cargo leptos build --release --split
scripts/compress-site.sh target/site
# The site goes inside the binary: target/release/hero alone serves it, copied anywhere.
target/release/hero embed-site --site target/site
exec target/release/hero serve "$@"
