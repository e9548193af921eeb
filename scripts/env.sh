# Sourced by every script that runs cargo, so that cargo-leptos and plain cargo share one
# target directory without rebuilding each other's artifacts (TOOLCHAIN.md pitfall 5).
export RUSTFLAGS="--cfg erase_components"
export LEPTOS_OUTPUT_NAME="hero"
export PATH="$HOME/.cargo/bin:$PWD/end2end/node_modules/.bin:$PATH"
