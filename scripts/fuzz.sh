#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 600), one after another,
# on the stable toolchain (RUSTC_BOOTSTRAP=1, shared/FUZZING.md). Not part of the test
# command. A crash stops the run and is left in fuzz/artifacts/TARGET/; add it to the seeds
# of the target's unit test (hero_shared::fuzz or hero_backend::fuzz) so the suite keeps it.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-600}"; shift || true
unset RUSTFLAGS
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(RUSTC_BOOTSTRAP=1 cargo fuzz list)
for t in "${targets[@]}"; do
  echo "== $t for $secs s"
  RUSTC_BOOTSTRAP=1 cargo fuzz run "$t" -- -max_total_time="$secs" -max_len=4096 -print_final_stats=1
done
