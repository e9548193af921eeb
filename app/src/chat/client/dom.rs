//! The small DOM helper the chat's regions share: finding a part by its hook, listening
//! for as long as the chat runs, showing, hiding and disabling, and a region's error line.

use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::Element;

use hero_shared::hooks::Hook;

/// The line under `parent` (of class `class`) that says what went wrong, drawn, changed or
/// taken away; a new one goes before `before` (none: last).
pub(super) fn error_line(
    parent: &Element,
    class: &str,
    error: Option<&str>,
    before: Option<&Element>,
) {
    let line = find(parent, &format!(":scope > .{class}"));
    match (error, line) {
        (Some(e), Some(l)) => l.set_text_content(Some(e)),
        (Some(e), None) => {
            let html = hero_shared::html::error_line_html(class, e);
            let _ = match before {
                Some(b) => b.insert_adjacent_html("beforebegin", &html),
                None => parent.insert_adjacent_html("beforeend", &html),
            };
        }
        (None, Some(l)) => l.remove(),
        (None, None) => {}
    }
}

/// The part `hook` names under `root`, or which one the page lacks.
pub(super) fn need(root: &Element, hook: Hook) -> Result<Element, String> {
    let selector = hook.selector();
    find(root, &selector).ok_or_else(|| format!("the page has no `{selector}`"))
}

/// The part `hook` names inside the part `within` names.
pub(super) fn need_in(root: &Element, within: Hook, hook: Hook) -> Result<Element, String> {
    need(&need(root, within)?, hook)
}

pub(super) fn find(root: &Element, selector: &str) -> Option<Element> {
    root.query_selector(selector).ok().flatten()
}

/// Every element under `root` that `selector` matches, in document order.
pub(super) fn all(root: &Element, selector: &str) -> Vec<Element> {
    let Ok(list) = root.query_selector_all(selector) else {
        return Vec::new();
    };
    (0..list.length())
        .filter_map(|i| list.item(i)?.dyn_into::<Element>().ok())
        .collect()
}

/// Adds a listener for as long as the chat runs: removed, and its closure freed, when the
/// chat stops (on a move to another session).
pub(super) fn listen<E: wasm_bindgen::convert::FromWasmAbi + 'static>(
    target: &web_sys::EventTarget,
    event: &str,
    f: impl FnMut(E) + 'static,
) {
    // The closure is handed to JavaScript, which frees it once the listener is gone; the
    // rest is one function for every kind of listener (a smaller wasm).
    let cb = Closure::<dyn FnMut(E)>::new(f).into_js_value();
    hold(target, event, cb);
}

thread_local! {
    /// The listeners the running chat added, removed when it stops ([`release`]).
    static HELD: std::cell::RefCell<Vec<(web_sys::EventTarget, String, wasm_bindgen::JsValue)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Adds `cb` as the listener, until the chat stops.
fn hold(target: &web_sys::EventTarget, event: &str, cb: wasm_bindgen::JsValue) {
    let _ = target.add_event_listener_with_callback(event, cb.unchecked_ref());
    HELD.with(|h| h.borrow_mut().push((target.clone(), event.to_owned(), cb)));
}

/// Removes every listener the chat added (their closures go with them).
pub(super) fn release() {
    for (target, event, cb) in HELD.with(|h| std::mem::take(&mut *h.borrow_mut())) {
        let _ = target.remove_event_listener_with_callback(&event, cb.unchecked_ref());
    }
}

pub(super) fn set_hidden(e: &Element, hidden: bool) {
    let _ = if hidden {
        e.set_attribute("hidden", "")
    } else {
        e.remove_attribute("hidden")
    };
}

pub(super) fn set_disabled(e: &Element, disabled: bool) {
    let _ = if disabled {
        e.set_attribute("disabled", "")
    } else {
        e.remove_attribute("disabled")
    };
}
