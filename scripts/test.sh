#!/usr/bin/env bash
# Runs every check and test: rustfmt and clippy, Rust unit and integration tests (real SQLite files, real loopback HTTP,
# and again on a PostgreSQL 15 of their own),
# the wasm32 build of the shared core, and the browser tests (Playwright + Debian's Chromium)
# against the built `hero`. Installs what a fresh machine lacks first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh browser
source scripts/env.sh

# Each step's minutes, printed again at the very end (CI shows the end of the log): what a
# fresh machine spends where.
started=$SECONDS
last=$SECONDS
timings=""
step() {
  [ -n "${current:-}" ] && timings+="$(printf '%5ss  %s' $((SECONDS - last)) "$current")"$'\n'
  current="$*"
  last=$SECONDS
  printf '\n== %s\n' "$*"
}
summary() {
  step "end"
  printf '\n== time by step (setup included in the first)\n%s%5ss  in all\n' "$timings" $((SECONDS - started))
}

current="setup (tools a fresh machine lacks)"
step "style: rustfmt and clippy (warnings are errors)"
cargo fmt --all --check
cargo clippy --workspace --exclude frontend --all-targets -- -D warnings
cargo clippy -p frontend --target wasm32-unknown-unknown -- -D warnings

step "build the site (cargo leptos build: the wasm, its split parts, CSS and JS)"
# Only the front end: the `hero` and `mock-llm` the browser tests run are those
# `cargo test --workspace` builds below (into target/debug/), with the same features as the
# tests. A `hero` built by cargo-leptos alone (`-p server`, no dev-dependencies) resolves
# other features for half the dependency tree, so a fresh machine compiled it all twice, only
# for `cargo test` to write over it (docs/perf.md).
# cargo-leptos exits 0 even when the build fails (TOOLCHAIN.md), so check what it made.
# --split: the parts of the wasm loaded on demand (`wasm_split`, app::markdown) are files of
# their own; without it the wasm would ask for a module that does not exist.
cargo leptos build --split --frontend-only
# The site's files are named by their content (hero.<hash>.wasm), the hashes in hash.txt.
test -f target/debug/hash.txt &&
  wasm="target/site/pkg/hero.$(sed -n 's/^wasm: //p' target/debug/hash.txt).wasm" && test -f "$wasm" ||
  { echo "build failed"; exit 1; }
ls target/site/pkg/__wasm_split.*.js >/dev/null || { echo "the wasm was not split"; exit 1; }

step "the shared core builds for the browser"
cargo build -p hero-shared --target wasm32-unknown-unknown

step "PostgreSQL 15 for the tests (a cluster of their own, stopped at the end)"
HERO_TEST_POSTGRES="$(scripts/postgres.sh start)"
export HERO_TEST_POSTGRES
# An absolute path: the browser tests run from end2end/.
trap "$PWD/scripts/postgres.sh stop; summary" EXIT

step "Rust tests (on SQLite)"
cargo test --workspace --exclude frontend

step "the Rust tests again, on PostgreSQL"
# The same packages as above, so the same features and nothing compiled again: `-p server`
# alone would resolve other features and build much of the tree anew (the doctests, which
# touch no database, are left out).
HERO_TEST_BACKEND=postgres cargo test --workspace --exclude frontend --lib --bins --tests

step "browser tests"
# The binaries cargo test built (features as the tests have them).
test -x target/debug/hero && test -x target/debug/mock-llm || { echo "cargo test built no hero"; exit 1; }
cd end2end
npx playwright test
