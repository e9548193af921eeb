//! Moving between sessions without loading the whole page: a plain click on a link to a
//! session's page (`/s/{id}`, in the sidebar or anywhere), and the browser's back and
//! forward between such pages, fetch the page, swap its `<main>` and the sidebar's session
//! list into this one, stop the chat of the session left (its feed closed, its effects and
//! listeners gone) and start the chat of the one opened; the address bar and the history
//! follow. Anything else (a new tab, a modified click, a page that answers with a redirect
//! or an error) is the browser's own navigation, as is every link without the wasm.
//!
//! The pure part (which clicks are taken, which paths are a session's) is above `browser`
//! and tested natively.

/// The session a link's `href` opens, if it is one of this site's session pages (`href` is
/// the app's own path: the base path taken off, [`crate::base::app_path`]).
pub fn session_of(href: &str) -> Option<i64> {
    let id = href.strip_prefix("/s/")?;
    let end = id.bytes().position(|b| b == b'?' || b == b'#');
    id[..end.unwrap_or(id.len())]
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
}

/// A click the page takes over: the main button, no key held that asks the browser for a
/// new tab or window or a download, not already handled, and a link that opens in place.
pub fn is_plain_click(button: i16, modifier: bool, prevented: bool, target: Option<&str>) -> bool {
    button == 0 && !modifier && !prevented && target.is_none_or(|t| t.is_empty() || t == "_self")
}

#[cfg(feature = "hydrate")]
pub use browser::install;

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::Cell;

    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    use wasm_bindgen::prelude::*;
    use web_sys::{Document, Element};

    use super::{is_plain_click, session_of};

    thread_local! {
        /// The navigation asked for last: an older one whose page arrives later is dropped.
        static LATEST: Cell<u64> = const { Cell::new(0) };
    }

    fn document() -> Option<Document> {
        web_sys::window()?.document()
    }

    /// Installs the click and history handlers; called once.
    pub fn install() {
        let (Some(window), Some(doc)) = (web_sys::window(), document()) else {
            return;
        };
        let on_click = Closure::<dyn FnMut(web_sys::MouseEvent)>::new(on_click);
        let _ = doc.add_event_listener_with_callback("click", on_click.as_ref().unchecked_ref());
        on_click.forget();
        // Back or forward: a page this one swapped in is swapped in again; any other is
        // loaded (the address bar already shows it).
        let on_pop = Closure::<dyn FnMut(web_sys::Event)>::new(|_: web_sys::Event| {
            let Some(location) = web_sys::window().map(|w| w.location()) else {
                return;
            };
            match location.pathname() {
                Ok(path)
                    if swappable() && {
                        let own = crate::base::app_path(&path);
                        own == "/" || session_of(own).is_some()
                    } =>
                {
                    go(path, false)
                }
                _ => drop(location.reload()),
            }
        });
        let _ =
            window.add_event_listener_with_callback("popstate", on_pop.as_ref().unchecked_ref());
        on_pop.forget();
    }

    /// This page is a sessions page (the sidebar's list beside the main region): another
    /// session's page swaps in; from any other page, a link loads.
    fn swappable() -> bool {
        document()
            .and_then(|d| d.query_selector("nav.session-list").ok().flatten())
            .is_some()
    }

    fn on_click(ev: web_sys::MouseEvent) {
        let modifier = ev.meta_key() || ev.ctrl_key() || ev.shift_key() || ev.alt_key();
        let Some(link) = ev
            .target()
            .and_then(|t| t.dyn_into::<Element>().ok())
            .and_then(|t| t.closest("a[href]").ok().flatten())
        else {
            return;
        };
        let target = link.get_attribute("target");
        if !is_plain_click(
            ev.button(),
            modifier,
            ev.default_prevented(),
            target.as_deref(),
        ) || link.has_attribute("download")
        {
            return;
        }
        let Some(href) = link.get_attribute("href") else {
            return;
        };
        if session_of(crate::base::app_path(&href)).is_none() || !swappable() {
            return;
        }
        ev.prevent_default();
        go(href, true);
    }

    /// Opens `path` in place (pushed on the history when `push`); the browser's own
    /// navigation if the page cannot be swapped in.
    fn go(path: String, push: bool) {
        let n = LATEST.with(|l| {
            l.set(l.get() + 1);
            l.get()
        });
        leptos::task::spawn_local(async move {
            let page = crate::enhance::fetch_page_at(&path).await;
            if LATEST.with(Cell::get) != n {
                return;
            }
            if page.and_then(|p| swap(&p, &path, push)).is_err()
                && let Some(w) = web_sys::window()
            {
                let _ = w.location().set_href(&path);
            }
        });
    }

    /// The fetched page's main region and session list in place of this page's; the chat
    /// of the session left stops before the new one starts, so no event of the one reaches
    /// the other.
    fn swap(page: &Document, path: &str, push: bool) -> Result<(), JsValue> {
        let doc = document().ok_or(JsValue::NULL)?;
        let pick = |d: &Document, sel: &str| d.query_selector(sel).ok().flatten();
        let (Some(new_main), Some(old_main)) = (pick(page, "main"), pick(&doc, "main")) else {
            return Err(JsValue::NULL);
        };
        crate::chat::client::stop();
        old_main.replace_with_with_node_1(&new_main)?;
        // On a phone, the drawer the session was chosen in closes.
        if let Some(drawer) = doc
            .get_element_by_id("drawer")
            .and_then(|d| d.dyn_into::<web_sys::HtmlInputElement>().ok())
        {
            drawer.set_checked(false);
        }
        if let (Some(new_list), Some(old_list)) = (
            pick(page, "nav.session-list"),
            pick(&doc, "nav.session-list"),
        ) {
            old_list.replace_with_with_node_1(&new_list)?;
        }
        doc.set_title(&page.title());
        if push && let Some(w) = web_sys::window() {
            w.history()?
                .push_state_with_url(&JsValue::NULL, "", Some(path))?;
        }
        crate::chat::client::start();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_sessions_page_is_opened_in_place() {
        assert_eq!(session_of("/s/12"), Some(12));
        assert_eq!(session_of("/s/12?x=1#end"), Some(12));
        for other in [
            "/s/",
            "/s/abc",
            "/s/-1",
            "/s/0",
            "/agents/3/files",
            "https://elsewhere/s/1",
            "//elsewhere/s/1",
            "/permissions",
        ] {
            assert_eq!(session_of(other), None, "{other}");
        }
    }

    #[test]
    fn only_a_plain_click_is_taken_over() {
        assert!(is_plain_click(0, false, false, None));
        assert!(is_plain_click(0, false, false, Some("_self")));
        assert!(!is_plain_click(1, false, false, None), "the middle button");
        assert!(
            !is_plain_click(0, true, false, None),
            "ctrl, cmd, shift or alt"
        );
        assert!(!is_plain_click(0, false, true, None), "handled already");
        assert!(!is_plain_click(0, false, false, Some("_blank")));
    }
}
