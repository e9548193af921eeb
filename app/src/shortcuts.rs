//! Keyboard shortcuts, on every page: Ctrl+K (⌘K) or `/` finds the search box, Alt+N the
//! new session's name, Shift+Esc the message box, Alt+S stops the reply (Up in the empty
//! message box edits the user's last message, the composer's own key), `?` lists them
//! (the list is [`SHORTCUTS`], drawn by the server in [`ShortcutsHelp`], hidden until asked
//! for) and Esc closes the list.
//!
//! The pure part (which key does what) is above `browser` and tested natively.

use leptos::prelude::*;

/// What a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shortcut {
    Search,
    NewSession,
    Composer,
    Stop,
    Help,
    Close,
}

/// The shortcuts as the `?` list shows them.
pub const SHORTCUTS: &[(&str, &str)] = &[
    ("Ctrl+K or /", "Search your sessions"),
    ("Alt+N", "New session"),
    ("Shift+Esc", "Go to the message box"),
    ("Alt+S", "Stop the reply"),
    (
        "↑ in an empty message box",
        "Edit your last message (Esc: cancel)",
    ),
    ("?", "This list"),
    ("Esc", "Close this list"),
];

/// The key pressed, as the browser says it: `key` (what it types), `code` (which key, for
/// Alt's letters, which type other characters on some layouts), the modifiers, and whether
/// the focus is in a text field (where `/` and `?` are typed, not shortcuts).
pub struct Key<'a> {
    pub key: &'a str,
    pub code: &'a str,
    pub ctrl_or_meta: bool,
    pub alt: bool,
    pub shift: bool,
    pub typing: bool,
}

pub fn shortcut(k: &Key) -> Option<Shortcut> {
    match (k.ctrl_or_meta, k.alt, k.shift) {
        (true, false, false) if k.key.eq_ignore_ascii_case("k") => Some(Shortcut::Search),
        (false, true, false) if k.code == "KeyN" => Some(Shortcut::NewSession),
        (false, true, false) if k.code == "KeyS" => Some(Shortcut::Stop),
        (false, false, true) if k.key == "Escape" => Some(Shortcut::Composer),
        (false, false, _) if !k.typing && k.key == "/" => Some(Shortcut::Search),
        (false, false, _) if !k.typing && k.key == "?" => Some(Shortcut::Help),
        (false, false, false) if k.key == "Escape" => Some(Shortcut::Close),
        _ => None,
    }
}

/// The list `?` opens, on every page, hidden until then.
#[component]
pub fn ShortcutsHelp() -> impl IntoView {
    view! {
        <div class="shortcuts" role="dialog" aria-label="Keyboard shortcuts" data-shortcuts="" hidden>
            <h2>"Keyboard shortcuts"</h2>
            <dl>
                {SHORTCUTS.iter().map(|(keys, what)| view! {
                    <dt><kbd>{*keys}</kbd></dt><dd>{*what}</dd>
                }).collect_view()}
            </dl>
            <button type="button" data-shortcuts-close="">"Close"</button>
        </div>
    }
}

#[cfg(feature = "hydrate")]
pub use browser::install;

#[cfg(feature = "hydrate")]
mod browser {
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    use web_sys::{Element, HtmlElement};

    use super::{Key, Shortcut, shortcut};

    fn find(selector: &str) -> Option<HtmlElement> {
        web_sys::window()?
            .document()?
            .query_selector(selector)
            .ok()
            .flatten()?
            .dyn_into()
            .ok()
    }

    fn focus(selector: &str) -> bool {
        match find(selector) {
            Some(el) => {
                let _ = el.focus();
                if let Ok(input) = el.clone().dyn_into::<web_sys::HtmlInputElement>() {
                    input.select();
                }
                true
            }
            None => false,
        }
    }

    fn help(open: bool) {
        if let Some(el) = find("[data-shortcuts]") {
            el.set_hidden(!open);
            if open {
                let _ = el.focus();
            }
        }
    }

    /// Installs the key listener; called once.
    pub fn install() {
        let Some(doc) = web_sys::window().and_then(|w| w.document()) else {
            return;
        };
        let on_key = Closure::<dyn FnMut(web_sys::KeyboardEvent)>::new(on_key);
        let _ = doc.add_event_listener_with_callback("keydown", on_key.as_ref().unchecked_ref());
        on_key.forget();
        let on_click = Closure::<dyn FnMut(web_sys::MouseEvent)>::new(|ev: web_sys::MouseEvent| {
            let close = ev
                .target()
                .and_then(|t| t.dyn_into::<Element>().ok())
                .and_then(|t| t.closest("[data-shortcuts-close]").ok().flatten());
            if close.is_some() {
                help(false);
            }
        });
        let _ = doc.add_event_listener_with_callback("click", on_click.as_ref().unchecked_ref());
        on_click.forget();
    }

    fn on_key(ev: web_sys::KeyboardEvent) {
        if ev.default_prevented() || ev.is_composing() {
            return;
        }
        let typing = ev
            .target()
            .and_then(|t| t.dyn_into::<Element>().ok())
            .is_some_and(|t| {
                matches!(t.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT")
                    || t.has_attribute("contenteditable")
            });
        let (key, code) = (ev.key(), ev.code());
        let Some(s) = shortcut(&Key {
            key: &key,
            code: &code,
            ctrl_or_meta: ev.ctrl_key() || ev.meta_key(),
            alt: ev.alt_key(),
            shift: ev.shift_key(),
            typing,
        }) else {
            return;
        };
        let taken = match s {
            Shortcut::Search => {
                focus("[data-search-box]") || {
                    if let Some(w) = web_sys::window() {
                        let _ = w.location().set_href(&crate::base::href("/search"));
                    }
                    true
                }
            }
            Shortcut::NewSession => focus(".new-session input[name=name]"),
            Shortcut::Composer => focus(".composer textarea"),
            Shortcut::Stop => match find(".composer .stop:not([hidden])") {
                Some(b) => {
                    b.click();
                    true
                }
                None => false,
            },
            Shortcut::Help => {
                help(true);
                true
            }
            Shortcut::Close => match find("[data-shortcuts]:not([hidden])") {
                Some(_) => {
                    help(false);
                    true
                }
                None => false,
            },
        };
        if taken {
            ev.prevent_default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(key: &str, code: &str, mods: (bool, bool, bool), typing: bool) -> Option<Shortcut> {
        shortcut(&Key {
            key,
            code,
            ctrl_or_meta: mods.0,
            alt: mods.1,
            shift: mods.2,
            typing,
        })
    }

    const NONE: (bool, bool, bool) = (false, false, false);

    #[test]
    fn each_key_does_what_the_list_says() {
        assert_eq!(
            key("k", "KeyK", (true, false, false), true),
            Some(Shortcut::Search)
        );
        assert_eq!(
            key("K", "KeyK", (true, false, false), false),
            Some(Shortcut::Search)
        );
        assert_eq!(key("/", "Slash", NONE, false), Some(Shortcut::Search));
        assert_eq!(
            key("ñ", "KeyN", (false, true, false), true),
            Some(Shortcut::NewSession)
        );
        assert_eq!(
            key("ß", "KeyS", (false, true, false), true),
            Some(Shortcut::Stop)
        );
        assert_eq!(
            key("Escape", "Escape", (false, false, true), false),
            Some(Shortcut::Composer)
        );
        assert_eq!(
            key("?", "Slash", (false, false, true), false),
            Some(Shortcut::Help)
        );
        assert_eq!(key("Escape", "Escape", NONE, true), Some(Shortcut::Close));
        // Each of the six, and the composer's own key (Up edits the last message).
        assert_eq!(SHORTCUTS.len(), 7, "the list names every shortcut");
        assert!(SHORTCUTS.iter().any(|(k, _)| k.starts_with('↑')));
    }

    #[test]
    fn typed_characters_stay_typed() {
        assert_eq!(key("/", "Slash", NONE, true), None);
        assert_eq!(key("?", "Slash", (false, false, true), true), None);
        assert_eq!(key("k", "KeyK", NONE, false), None);
        assert_eq!(
            key("k", "KeyK", (true, false, true), false),
            None,
            "Ctrl+Shift+K is the browser's"
        );
        assert_eq!(key("n", "KeyN", NONE, false), None);
    }
}
