#!/usr/bin/env bash
# Runs every check and test: rustfmt and clippy, Rust unit and integration tests (real SQLite files, real loopback HTTP,
# and again on a PostgreSQL 15 of their own),
# the wasm32 build of the shared core, and the browser tests (Playwright + Debian's Chromium)
# against the built `hero`. Installs what a fresh machine lacks first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh browser
source scripts/env.sh

step() { printf '\n== %s\n' "$*"; }

step "style: rustfmt and clippy (warnings are errors)"
cargo fmt --all --check
cargo clippy --workspace --exclude frontend --all-targets -- -D warnings
cargo clippy -p frontend --target wasm32-unknown-unknown -- -D warnings

step "build (cargo leptos build: server binary, wasm, site)"
# cargo-leptos exits 0 even when the build fails (TOOLCHAIN.md), so check what it made.
# --split: the parts of the wasm loaded on demand (`wasm_split`, app::markdown) are files of
# their own; without it the wasm would ask for a module that does not exist.
cargo leptos build --split
cargo build -p mock-llm
# The site's files are named by their content (hero.<hash>.wasm), the hashes in hash.txt.
test -x target/debug/hero && test -f target/debug/hash.txt &&
  wasm="target/site/pkg/hero.$(sed -n 's/^wasm: //p' target/debug/hash.txt).wasm" && test -f "$wasm" ||
  { echo "build failed"; exit 1; }
ls target/site/pkg/__wasm_split.*.js >/dev/null || { echo "the wasm was not split"; exit 1; }

step "the shared core builds for the browser"
cargo build -p hero-shared --target wasm32-unknown-unknown

step "PostgreSQL 15 for the tests (a cluster of their own, stopped at the end)"
HERO_TEST_POSTGRES="$(scripts/postgres.sh start)"
export HERO_TEST_POSTGRES
# An absolute path: the browser tests run from end2end/.
trap "$PWD/scripts/postgres.sh stop" EXIT

step "Rust tests (on SQLite)"
cargo test --workspace --exclude frontend

step "the tests of the store and of the server again, on PostgreSQL"
HERO_TEST_BACKEND=postgres cargo test -p hero-backend --lib
HERO_TEST_BACKEND=postgres cargo test -p server --tests

step "browser tests"
cd end2end
npx playwright test
