//! The markdown parser in the browser, loaded when first needed: it is a part of the wasm of
//! its own (`cargo leptos build --split`), fetched the first time a text must be drawn that
//! the server did not draw, so the page's first load does without it (docs/perf.md).
//!
//! Until it is in, `hero_shared::markdown::render` writes a text escaped as it is; whoever
//! draws markdown reads [`ready`] inside its effect, which asks for the parser and runs the
//! effect again once it is in. A fetch that fails leaves texts unparsed (drawn again when
//! a later fetch succeeds), never the chat stopped.

use std::cell::Cell;

use hero_shared::markdown::MdPart;
use leptos::prelude::*;
use leptos::wasm_split::SplitLoaderError;

/// How long a failed fetch of the parser keeps the next one from starting.
const RETRY_AFTER_MS: u64 = 5_000;

thread_local! {
    /// Bumped each time a fetch of the parser ends, the parser in or not: whoever waits
    /// for it draws again.
    static SETTLED: ArcRwSignal<u32> = ArcRwSignal::new(0);
    /// A fetch is under way, or one failed less than [`RETRY_AFTER_MS`] ago.
    static ASKED: Cell<bool> = const { Cell::new(false) };
    /// The last fetch failed: texts are drawn unparsed rather than not at all.
    static FAILED: Cell<bool> = const { Cell::new(false) };
}

/// The parser, from its own part of the wasm; `Err` when that could not be fetched (a
/// later call tries again). `fallible`: Leptos's `#[lazy]` panics on a failed fetch, and a
/// panic ends the whole wasm.
#[leptos::wasm_split::wasm_split(markdown_parser, wasm_split_path = ::leptos::wasm_split, fallible)]
fn parser() -> Result<Parser, SplitLoaderError> {
    Ok(hero_shared::markdown::parse)
}

type Parser = fn(&str) -> Vec<MdPart>;

/// Fetches the parser and installs it; a failure is said, and a later ask tries again
/// once [`RETRY_AFTER_MS`] have passed.
async fn fetch() {
    match parser().await {
        Ok(p) => {
            hero_shared::markdown::install(p);
            FAILED.with(|f| f.set(false));
        }
        Err(_) => {
            FAILED.with(|f| f.set(true));
            leptos::logging::error!(
                "the markdown parser could not be fetched: texts stay unparsed"
            );
            set_timeout(
                || ASKED.with(|a| a.set(false)),
                std::time::Duration::from_millis(RETRY_AFTER_MS),
            );
        }
    }
    SETTLED.with(|s| s.update(|n| *n += 1));
}

/// Whether texts may be drawn now: the parser is in, or the last fetch of it failed (they
/// are then drawn unparsed: see [`installed`]). Asks for the parser when it is not in. Read
/// in an effect, it runs the effect again when a fetch ends.
pub fn ready() -> bool {
    SETTLED.with(|s| s.track());
    if installed() {
        return true;
    }
    want();
    FAILED.with(Cell::get)
}

/// Whether the parser is in: what is drawn without it is drawn again once it is.
pub fn installed() -> bool {
    hero_shared::markdown::installed()
}

/// Asks for the parser, unless a fetch is under way or failed a moment ago.
pub fn want() {
    if installed() || ASKED.with(|a| a.replace(true)) {
        return;
    }
    leptos::task::spawn_local(fetch());
}

/// `f`'s result once the parser is in (at once when it already is); texts stay unparsed
/// when it cannot be had.
pub async fn with_parser<T>(f: impl FnOnce() -> T) -> T {
    if !installed() && !ASKED.with(|a| a.replace(true)) {
        fetch().await;
    }
    f()
}
