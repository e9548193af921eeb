#!/usr/bin/env bash
# Installs what a fresh machine lacks to build (and, with `browser`, to test) Hero, and
# nothing that is already there at the right version: a warm machine passes through in
# seconds. Versions are those in ../shared/TOOLCHAIN.md.
set -euo pipefail
cd "$(dirname "$0")/.."
want_browser="${1:-}"

# Tools are built without the project's RUSTFLAGS: those are for the workspace only.
unset RUSTFLAGS
export PATH="$HOME/.cargo/bin:$PATH"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ "$want_browser" = browser ] && [ ! -x /usr/bin/chromium ]; then
  echo "setup: installing Debian's chromium for the browser tests"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# nginx: the base-path browser tests serve Hero under /hero behind it (reference 000's layout).
if [ "$want_browser" = browser ] && [ ! -x /usr/sbin/nginx ]; then
  echo "setup: installing Debian's nginx-light for the base-path browser tests"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
fi

# PostgreSQL 15: the store's tests run on it too (scripts/postgres.sh starts a cluster of
# their own); openssl makes the certificate of the one a TLS test connects to.
if [ "$want_browser" = browser ] && { [ ! -x /usr/lib/postgresql/15/bin/initdb ] || ! command -v openssl >/dev/null; }; then
  echo "setup: installing Debian's PostgreSQL 15 and openssl for the tests"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 openssl >/dev/null
fi

# bubblewrap: the sandbox `bash` runs in (without it, bash is refused).
if ! command -v bwrap >/dev/null; then
  echo "setup: installing Debian's bubblewrap (the sandbox of bash)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
fi

# brotli: scripts/compress-site.sh precompresses the release site with it.
if ! command -v brotli >/dev/null; then
  echo "setup: installing Debian's brotli (precompresses the site)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq brotli >/dev/null
fi

# rustfmt and clippy: the test command checks style with both.
for component in rustfmt clippy; do
  if ! rustup component list --installed | grep -q "^$component"; then
    echo "setup: adding the $component component"
    rustup component add "$component"
  fi
done

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "setup: adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# wasm-bindgen-cli must match the wasm-bindgen in Cargo.lock exactly.
wbg="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
if ! wasm-bindgen --version 2>/dev/null | grep -qF " $wbg"; then
  echo "setup: installing wasm-bindgen-cli $wbg (about 3 minutes)"
  # Not --locked: its lock pins a webpki-roots version the registry lacks (TOOLCHAIN.md).
  CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo install -q wasm-bindgen-cli --version "$wbg"
fi

if ! cargo leptos --version 2>/dev/null | grep -qF "0.3.10"; then
  echo "setup: installing cargo-leptos 0.3.10 (about 10 minutes)"
  # no_downloads: a missing tool is a clear error instead of a failing download.
  # --debug: unoptimised, it builds in 9.5 minutes on two cores against 18 (its release
  # profile, even without its LTO), and a build with it takes no longer: it mostly runs
  # cargo and wasm-bindgen (docs/perf.md).
  cargo install -q cargo-leptos@0.3.10 --locked --features no_downloads --debug
fi

# @playwright/test and binaryen's wasm-opt (Debian's binaryen breaks hydration).
if [ ! -f end2end/node_modules/.package-lock.json ] || [ end2end/package-lock.json -nt end2end/node_modules/.package-lock.json ]; then
  echo "setup: installing npm packages in end2end/"
  (cd end2end && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
