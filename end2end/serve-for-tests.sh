#!/bin/sh
# Starts the built `hero` for the browser tests: a fresh data directory, users alice and bob
# created through the command line (password on standard input, as scripts do), then serve.
# The data directory is one fixed place under target/, emptied at the start of each run:
# Playwright ends the server with a signal no trap outlives, and a fresh directory per run
# (each holding a copy of the sandbox helper) filled the disk over many runs.
set -eu
port="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${HERO_BIN:-$root/target/debug/hero}"
data="$root/target/e2e-data"
# What a sandboxed test left unwritable is made writable first, so that it goes too.
chmod -R u+rwx "$data" 2>/dev/null || true
rm -rf "$data"
mkdir -m 700 -p "$data"
# The chat tests' agents point at the mock LLM, one port up (playwright.config.ts): the only
# non-public address this Hero may reach.
export HERO_DATA_DIR="$data" HERO_CONFIG=/dev/null HERO_EGRESS_ALLOW="127.0.0.1:$((port + 1))"
# The mock LLM is the search service of `websearch` too.
export HERO_SEARCH_URL="http://127.0.0.1:$((port + 1))"
unset HERO_MASTER_KEY || true
printf 'alice-password\n' | "$bin" user add alice --admin
printf 'bob-password\n' | "$bin" user add bob
printf 'carol-password\n' | "$bin" user add carol
printf 'dave-password\n' | "$bin" user add dave
printf 'erin-password\n' | "$bin" user add erin
printf 'frank-password\n' | "$bin" user add frank
printf 'grace-password\n' | "$bin" user add grace
printf 'heidi-password\n' | "$bin" user add heidi
printf 'ivan-password\n' | "$bin" user add ivan
printf 'judy-password\n' | "$bin" user add judy
printf 'kim-password\n' | "$bin" user add kim
printf 'liam-password\n' | "$bin" user add liam
printf 'mia-password\n' | "$bin" user add mia
printf 'pia-password\n' | "$bin" user add pia
printf 'olive-password\n' | "$bin" user add olive
printf 'quinn-password\n' | "$bin" user add quinn
printf 'rosa-password\n' | "$bin" user add rosa
# Quinn (user 16) keeps an MCP server in her workspace (mcp.spec.ts), as she would put it
# there with bash: the test server the Rust tests built.
if [ -x "$root/target/debug/hero-test-plugin" ]; then
  mkdir -m 700 -p "$data/workspaces/16"
  cp "$root/target/debug/hero-test-plugin" "$data/workspaces/16/mcp-server"
fi
# Where this run keeps its data: a test that must damage a stored row finds the database here.
printf '%s\n' "$data" > "$root/target/e2e-data-dir"
exec "$bin" serve --addr "127.0.0.1:$port" --site-root "$root/target/site"
