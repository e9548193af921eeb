//! The small DOM helper the chat's regions share: finding a part by its hook, listening
//! for as long as the chat runs, showing, hiding and disabling, and a region's error line.

use leptos::prelude::*;
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

/// Adds a listener for as long as the chat runs: removed, and its closure freed, when the
/// chat's owner is cleaned up (on a move to another session).
pub(super) fn listen<E: wasm_bindgen::convert::FromWasmAbi + 'static>(
    target: &web_sys::EventTarget,
    event: &str,
    f: impl FnMut(E) + 'static,
) {
    let cb = Closure::<dyn FnMut(E)>::new(f);
    let _ = target.add_event_listener_with_callback(event, cb.as_ref().unchecked_ref());
    // Held by the owner (whose own values outlive its cleanups), dropped with it.
    let held = StoredValue::new_local(Some((target.clone(), event.to_owned(), cb)));
    on_cleanup(move || {
        if let Some((target, event, cb)) = held.try_update_value(Option::take).flatten() {
            let _ = target.remove_event_listener_with_callback(&event, cb.as_ref().unchecked_ref());
        }
    });
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
