//! The markdown parser in the browser, loaded when first needed: it is a part of the wasm of
//! its own (`cargo leptos build --split`), fetched the first time a text must be drawn that
//! the server did not draw, so the page's first load does without it (docs/perf.md).
//!
//! Until it is in, `hero_shared::markdown::render` writes a text escaped as it is; whoever
//! draws markdown calls [`track`] inside its effect, which asks for the parser and runs the
//! effect again when a fetch of it ends. A fetch that fails leaves texts drawn unparsed,
//! never the chat stopped; it is tried again after [`RETRY_MS`] (doubling up to
//! [`RETRY_MAX_MS`]), and what was drawn unparsed is drawn again once the parser is in.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use hero_shared::markdown::MdPart;
use leptos::prelude::*;
use leptos::wasm_split::SplitLoaderError;

/// The wait after a first failed fetch before the next; it doubles with each failure.
pub const RETRY_MS: u64 = 5_000;
/// The longest wait between two fetches that fail.
pub const RETRY_MAX_MS: u64 = 60_000;

thread_local! {
    /// Bumped each time a fetch of the parser ends, the parser in or not: effects that
    /// called [`track`] run again, and [`with_parser`]'s waits end.
    static SETTLED: ArcRwSignal<u32> = ArcRwSignal::new(0);
    /// Those waiting in [`with_parser`] for the fetch under way.
    static WAITING: RefCell<Vec<Waker>> = const { RefCell::new(Vec::new()) };
    /// A fetch is under way.
    static FETCHING: Cell<bool> = const { Cell::new(false) };
    /// A fetch failed, and the wait before the next is not over.
    static COOLING: Cell<bool> = const { Cell::new(false) };
    /// Fetches that failed in a row.
    static FAILURES: Cell<u32> = const { Cell::new(0) };
}

/// The parser, from its own part of the wasm; `Err` when that could not be fetched (a
/// later call tries again). `fallible`: Leptos's `#[lazy]` panics on a failed fetch, and a
/// panic ends the whole wasm.
#[leptos::wasm_split::wasm_split(markdown_parser, wasm_split_path = ::leptos::wasm_split, fallible)]
fn parser() -> Result<Parser, SplitLoaderError> {
    Ok(hero_shared::markdown::parse)
}

type Parser = fn(&str) -> Vec<MdPart>;

/// Asks for the parser when it is not in. Read in an effect, it runs the effect again when
/// a fetch of the parser ends (what was drawn unparsed is then drawn again).
pub fn track() {
    SETTLED.with(|s| s.track());
    want();
}

/// Whether the parser is in: what is drawn without it is drawn again once it is.
pub fn installed() -> bool {
    hero_shared::markdown::installed()
}

/// Asks for the parser, unless it is in, a fetch is under way, or one failed a moment ago.
pub fn want() {
    if installed() || FETCHING.with(Cell::get) || COOLING.with(Cell::get) {
        return;
    }
    FETCHING.with(|f| f.set(true));
    leptos::task::spawn_local(fetch());
}

/// Fetches the parser and installs it; a failure is said, and the next fetch starts after
/// the wait.
async fn fetch() {
    match parser().await {
        Ok(p) => {
            hero_shared::markdown::install(p);
            FAILURES.with(|f| f.set(0));
        }
        Err(_) => {
            let failures = FAILURES.with(|f| {
                f.set(f.get() + 1);
                f.get()
            });
            leptos::logging::error!(
                "the markdown parser could not be fetched: texts stay unparsed"
            );
            let wait = (RETRY_MS << (failures - 1).min(4)).min(RETRY_MAX_MS);
            COOLING.with(|c| c.set(true));
            set_timeout(
                || {
                    COOLING.with(|c| c.set(false));
                    want();
                },
                std::time::Duration::from_millis(wait),
            );
        }
    }
    FETCHING.with(|f| f.set(false));
    SETTLED.with(|s| s.update(|n| *n += 1));
    for w in WAITING.with(|w| std::mem::take(&mut *w.borrow_mut())) {
        w.wake();
    }
}

/// `f`'s result once the parser is in (at once when it already is), or once the fetch
/// under way has failed: texts then stay unparsed.
pub async fn with_parser<T>(f: impl FnOnce() -> T) -> T {
    want();
    if FETCHING.with(Cell::get) {
        Settled(SETTLED.with(|s| s.get_untracked())).await;
    }
    f()
}

/// Ends when a fetch ends after the count of ended fetches was the one it holds.
struct Settled(u32);

impl Future for Settled {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if SETTLED.with(|s| s.get_untracked()) != self.0 {
            return Poll::Ready(());
        }
        WAITING.with(|w| w.borrow_mut().push(cx.waker().clone()));
        Poll::Pending
    }
}
