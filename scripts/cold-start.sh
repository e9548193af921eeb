#!/usr/bin/env bash
# How long `hero serve` takes from being started to its first 200, and how big the binary
# is: the release binary with the site inside it (built unless --no-build, then
# precompressed and embedded), on an installation that already has its data (the first
# run's account made once before). Starts it RUNS times (default 20) and prints the median
# and the slowest start, to the sign-in page (which links the site) and to the wasm.
# Usage: scripts/cold-start.sh [--no-build] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--no-build" ]; then shift; else
  scripts/setup.sh; source scripts/env.sh; cargo leptos build --release --split
fi
scripts/compress-site.sh target/site
target/release/hero embed-site --site target/site >/dev/null
runs="${1:-20}"
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
export HERO_DATA_DIR="$data/hero" HERO_CONFIG=/dev/null HERO_LOG=warn
unset HERO_MASTER_KEY HERO_SITE_ROOT || true
printf 'measure-password\n' | target/release/hero user add measure >/dev/null
printf 'binary: %s bytes (%.1f MB), of which the site: %s bytes\n' \
  "$(stat -c %s target/release/hero)" "$(echo "$(stat -c %s target/release/hero) / 1000000" | bc -l)" \
  "$(find target/site -type f | xargs cat | wc -c)"
python3 - "$runs" <<'PY'
import os, socket, statistics, subprocess, sys, time
runs = int(sys.argv[1])
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def status(port, path):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
            c.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            return c.recv(12)[9:12]
    except OSError:
        return None
wasm = next(f for f in os.listdir("target/site/pkg") if f.endswith(".wasm"))
for path in ["/login", f"/pkg/{wasm}"]:
    times = []
    for _ in range(runs):
        port = free_port()
        t0 = time.perf_counter()
        p = subprocess.Popen(["target/release/hero", "serve", "--addr", f"127.0.0.1:{port}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while status(port, path) != b"200":
            if time.perf_counter() - t0 > 10:
                sys.exit(f"no 200 for {path} within 10 s")
            time.sleep(0.0005)
        times.append((time.perf_counter() - t0) * 1000)
        p.terminate(); p.wait()
    print(f"start to first 200 of {path}: median {statistics.median(times):.1f} ms, slowest {max(times):.1f} ms ({runs} starts)")
PY
