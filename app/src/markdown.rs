//! The markdown parser in the browser, loaded when first needed: it is a part of the wasm of
//! its own (`cargo leptos build --split`), fetched the first time a text must be drawn that
//! the server did not draw, so the page's first load does without it (docs/perf.md).
//!
//! Until it is in, `hero_shared::markdown::render` writes a text escaped as it is; whoever
//! draws markdown reads [`ready`] inside its effect, which asks for the parser and runs the
//! effect again once it is in.

use std::cell::Cell;

use hero_shared::markdown::MdPart;
use leptos::prelude::*;

thread_local! {
    static READY: ArcRwSignal<bool> = ArcRwSignal::new(false);
    static ASKED: Cell<bool> = const { Cell::new(false) };
}

/// The parser, from its own part of the wasm.
#[leptos::lazy]
fn parser() -> fn(&str) -> Vec<MdPart> {
    hero_shared::markdown::parse
}

/// Whether the parser is in. Read in an effect (or any reactive scope), it tracks the
/// parser's arrival; read with it out, it asks for the parser (once).
pub fn ready() -> bool {
    let ready = READY.with(|r| r.get());
    if !ready {
        want();
    }
    ready
}

/// Asks for the parser, once: `ready` turns true when it is in.
pub fn want() {
    if ASKED.with(|a| a.replace(true)) {
        return;
    }
    leptos::task::spawn_local(async {
        hero_shared::markdown::install(parser().await);
        READY.with(|r| r.set(true));
    });
}

/// The parser, in: `f`'s result once it is (at once when it already is).
pub async fn with_parser<T>(f: impl FnOnce() -> T) -> T {
    if !hero_shared::markdown::installed() {
        want();
        hero_shared::markdown::install(parser().await);
        READY.with(|r| r.set(true));
    }
    f()
}
