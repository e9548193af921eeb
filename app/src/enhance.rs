//! The pages' forms in the browser, without a component each: the server renders every
//! page but the chat as plain HTML, and one delegated handler makes its forms act in place.
//! A `<form method="post" action="/_fn/…" data-then=…>` is sent to its server function as
//! the browser would send it (URL-encoded), asking for JSON; then:
//!
//! - an error shows its sentence in the form's `[role=alert]`, and the form can be sent
//!   again;
//! - success does what `data-then` says: `reload` loads the page again, `refresh` replaces
//!   its `<main>` with a fresh copy (the page's sockets stay open), a path (`/s/{id}`, the
//!   `{id}` taken from the answer) opens that page; a `data-done` sentence is then shown in
//!   the page's `[role=status]`.
//!
//! Without the wasm (before it loads, or never), the same forms still post and the server
//! answers with a redirect. Also here: the Agents page's status line, fed by the user's
//! WebSocket, and the Files page's live preview (through the shared markdown renderer).
//!
//! The pure parts (what a `data-then` means, the error's sentence, a status line) are
//! above `browser` and tested natively.

use leptos::prelude::*;

/// A form of a server-rendered page: posts its fields to the server function at `action`
/// (`<F as ServerFn>::PATH`), then does what `then` says (see the module); its error line
/// is kept hidden until there is one.
#[component]
pub fn FnForm(
    action: &'static str,
    then: &'static str,
    #[prop(optional)] class: &'static str,
    /// Shown in the page's `[role=status]` once it succeeded.
    #[prop(optional, into)]
    done: Option<String>,
    children: Children,
) -> impl IntoView {
    // The function's path and a path to open go under the base path; `reload` and
    // `refresh` are words.
    let then = if then.starts_with('/') {
        crate::base::href(then)
    } else {
        then.to_owned()
    };
    view! {
        <form method="post" action=crate::base::href(action) class=class data-then=then data-done=done>
            {children()}
            <p class="form-error" role="alert" hidden></p>
        </form>
    }
}

/// What a form does once its server function succeeded.
#[derive(Debug, PartialEq, Eq)]
pub enum Then {
    Reload,
    Refresh,
    /// Open this path.
    Go(String),
}

/// Reads `data-then`; `answer` is the server function's JSON answer (for `{id}`). A path
/// must be the site's own (one leading `/`), or nothing happens but a reload.
pub fn then_of(spec: &str, answer: &str) -> Then {
    match spec {
        "refresh" => Then::Refresh,
        p if p.starts_with('/') && !p.starts_with("//") && !p.starts_with("/\\") => {
            if !p.contains("{id}") {
                return Then::Go(p.to_owned());
            }
            let id = serde_json::from_str::<serde_json::Value>(answer)
                .ok()
                .and_then(|v| v.get("id").and_then(serde_json::Value::as_i64));
            match id {
                Some(id) => Then::Go(p.replace("{id}", &id.to_string())),
                None => Then::Reload,
            }
        }
        _ => Then::Reload,
    }
}

/// The sentence of a server function's error body (`ServerError|the sentence`, as server
/// functions encode theirs); another kind of failure says what it is.
pub fn error_sentence(status: u16, body: &str) -> String {
    match body.split_once('|') {
        Some(("ServerError", msg)) if !msg.trim().is_empty() => msg.to_owned(),
        Some((_, msg)) if !msg.trim().is_empty() => msg.to_owned(),
        _ if status == 0 => "The server could not be reached; try again.".to_owned(),
        _ => format!("The server answered {status}; try again."),
    }
}

/// An agent's status line on the Agents page: the feed's status and its detail.
pub fn agent_status_line(status: &str, detail: &str) -> String {
    match (status, detail.is_empty()) {
        ("summoning", true) => "summoning…".to_owned(),
        ("summoning", false) => format!("summoning… {detail}"),
        (_, true) => String::new(),
        (_, false) => format!("ready: {detail}"),
    }
}

#[cfg(feature = "hydrate")]
pub use browser::install;
#[cfg(feature = "hydrate")]
pub(crate) use browser::{announce, busy, fetch_page_at, refresh, show_alert};

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::{Cell, RefCell};
    use std::collections::HashMap;

    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    use wasm_bindgen::prelude::*;
    use wasm_bindgen_futures::JsFuture;
    use web_sys::{Document, Element, HtmlFormElement};

    use super::{Then, agent_status_line, error_sentence, then_of};

    thread_local! {
        /// The agents' statuses the feed told, by agent id: shown again after a refresh.
        static STATUSES: RefCell<HashMap<i64, (String, String)>> = RefCell::new(HashMap::new());
        /// A Tasks card is being dragged: `<main>` is not replaced under it (that would end
        /// the drag with no drop), but read once the drag ends.
        static DRAGGING: Cell<bool> = const { Cell::new(false) };
        static REFRESH_AFTER_DRAG: Cell<bool> = const { Cell::new(false) };
        /// The refreshes of `<main>` started: one whose page arrives after a later one's is
        /// dropped, so an older page never replaces a newer one.
        static REFRESHES: Cell<u64> = const { Cell::new(0) };
    }

    fn document() -> Option<Document> {
        web_sys::window()?.document()
    }

    /// Installs the delegated handlers; called once, after the islands hydrate.
    pub fn install() {
        let Some(doc) = document() else { return };
        let on_submit = Closure::<dyn FnMut(web_sys::Event)>::new(on_submit);
        let on_input = Closure::<dyn FnMut(web_sys::Event)>::new(on_input);
        let _ = doc.add_event_listener_with_callback("submit", on_submit.as_ref().unchecked_ref());
        let _ = doc.add_event_listener_with_callback("input", on_input.as_ref().unchecked_ref());
        // They live as long as the page.
        on_submit.forget();
        on_input.forget();
        drag_and_drop(&doc);
        // Any page but the sign-in page: the user's socket, for the Agents page's statuses
        // and the toasts of `@user(notify, …)` on every page.
        let path = web_sys::window()
            .and_then(|w| w.location().pathname().ok())
            .unwrap_or_default();
        if !path.ends_with("/login") {
            listen_user();
        }
    }

    fn on_submit(ev: web_sys::Event) {
        let Some(form) = ev
            .target()
            .and_then(|t| t.dyn_into::<HtmlFormElement>().ok())
        else {
            return;
        };
        let Some(then) = form.get_attribute("data-then") else {
            return;
        };
        ev.prevent_default();
        if form.get_attribute("aria-busy").as_deref() == Some("true") {
            return;
        }
        leptos::task::spawn_local(async move {
            busy(&form, true);
            let outcome = send(&form).await;
            busy(&form, false);
            match outcome {
                Ok(answer) => {
                    show_alert(&form, None);
                    follow(then_of(&then, &answer)).await;
                    if let Some(done) = form.get_attribute("data-done") {
                        announce(&done);
                    }
                }
                Err(sentence) => show_alert(&form, Some(&sentence)),
            }
        });
    }

    /// Posts the form to its server function; the answer's text, or the error's sentence.
    async fn send(form: &HtmlFormElement) -> Result<String, String> {
        let unreachable = || error_sentence(0, "");
        let data = web_sys::FormData::new_with_form(form).map_err(|_| unreachable())?;
        let body = web_sys::UrlSearchParams::new_with_str_sequence_sequence(&data)
            .map_err(|_| unreachable())?;
        let init = web_sys::RequestInit::new();
        init.set_method("POST");
        init.set_body(&body);
        let headers = web_sys::Headers::new().map_err(|_| unreachable())?;
        let _ = headers.set("Accept", "application/json");
        init.set_headers(&headers);
        let (ok, status, text) = crate::http::fetch(&form.action(), &init)
            .await
            .ok_or_else(unreachable)?;
        if ok {
            Ok(text)
        } else {
            Err(error_sentence(status, &text))
        }
    }

    /// The page's `<main>` read again (the whole page, when that fails), as after a form
    /// whose `data-then` is `refresh`.
    pub(crate) async fn refresh() {
        follow(Then::Refresh).await;
    }

    async fn follow(then: Then) {
        let Some(location) = web_sys::window().map(|w| w.location()) else {
            return;
        };
        match then {
            Then::Reload => drop(location.reload()),
            Then::Go(path) => drop(location.set_href(&path)),
            Then::Refresh => {
                if refresh_main().await.is_err() {
                    let _ = location.reload();
                }
            }
        }
    }

    /// The page fetched again, parsed; an error when it is not this page any more (a failed
    /// answer, or a redirect: to the sign-in page once the session expired).
    async fn fetch_page() -> Result<Document, JsValue> {
        let href = web_sys::window().ok_or(JsValue::NULL)?.location().href()?;
        fetch_page_at(&href).await
    }

    /// The page at `path`, parsed; an error for a failed answer or a redirect.
    pub(crate) async fn fetch_page_at(path: &str) -> Result<Document, JsValue> {
        let window = web_sys::window().ok_or(JsValue::NULL)?;
        let response: web_sys::Response = JsFuture::from(window.fetch_with_str(path))
            .await?
            .unchecked_into();
        if !response.ok() || response.redirected() {
            return Err(JsValue::NULL);
        }
        let html = JsFuture::from(response.text()?)
            .await?
            .as_string()
            .unwrap_or_default();
        web_sys::DomParser::new()?.parse_from_string(&html, web_sys::SupportedType::TextHtml)
    }

    /// Replaces the page's `<main>` with the one of the page fetched again.
    async fn refresh_main() -> Result<(), JsValue> {
        if DRAGGING.get() {
            REFRESH_AFTER_DRAG.set(true);
            return Ok(());
        }
        let this = REFRESHES.get() + 1;
        REFRESHES.set(this);
        let fresh = fetch_page()
            .await?
            .query_selector("main")?
            .ok_or(JsValue::NULL)?;
        if DRAGGING.get() {
            // A drag began meanwhile: read again once it ends.
            REFRESH_AFTER_DRAG.set(true);
            return Ok(());
        }
        if REFRESHES.get() != this {
            // A later refresh reads a newer page.
            return Ok(());
        }
        let doc = document().ok_or(JsValue::NULL)?;
        let old = doc.query_selector("main")?.ok_or(JsValue::NULL)?;
        old.replace_with_with_node_1(&fresh)?;
        STATUSES.with(|s| {
            for (id, (status, detail)) in s.borrow().iter() {
                show_status(*id, status, detail);
            }
        });
        Ok(())
    }

    /// While a form is being sent: its buttons disabled, and a second submit ignored.
    pub(crate) fn busy(form: &HtmlFormElement, on: bool) {
        let _ = form.set_attribute("aria-busy", if on { "true" } else { "false" });
        if let Ok(buttons) = form.query_selector_all("button") {
            for i in 0..buttons.length() {
                if let Some(b) = buttons.item(i).and_then(|n| n.dyn_into::<Element>().ok()) {
                    let _ = if on {
                        b.set_attribute("disabled", "")
                    } else {
                        b.remove_attribute("disabled")
                    };
                }
            }
        }
    }

    /// The form's error line: its `[role=alert]`, made if the page has none.
    pub(crate) fn show_alert(form: &HtmlFormElement, sentence: Option<&str>) {
        let existing = form.query_selector("[role=alert]").ok().flatten();
        let alert = match (existing, sentence) {
            (Some(a), _) => a,
            (None, None) => return,
            (None, Some(_)) => {
                let Some(a) = document().and_then(|d| d.create_element("p").ok()) else {
                    return;
                };
                let _ = a.set_attribute("class", "form-error");
                let _ = a.set_attribute("role", "alert");
                let _ = form.append_child(&a);
                a
            }
        };
        alert.set_text_content(sentence);
        let _ = if sentence.is_some() {
            alert.remove_attribute("hidden")
        } else {
            alert.set_attribute("hidden", "")
        };
    }

    pub(crate) fn announce(text: &str) {
        if let Some(s) =
            document().and_then(|d| d.query_selector("main [role=status]").ok().flatten())
        {
            s.set_text_content(Some(text));
        }
    }

    /// A `textarea[data-preview]` renders into the element its value names, through the
    /// shared renderer (safe by construction: its own closed set of tags, text escaped).
    fn on_input(ev: web_sys::Event) {
        let Some(area) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlTextAreaElement>().ok())
        else {
            return;
        };
        let Some(target) = area.get_attribute("data-preview") else {
            return;
        };
        if let Some(out) = document().and_then(|d| d.get_element_by_id(&target)) {
            // The parser is loaded on demand: the preview is drawn once it is in.
            leptos::task::spawn_local(crate::markdown::with_parser(move || {
                out.set_inner_html(&hero_shared::markdown::to_html(&area.value()));
            }));
        }
    }

    /// One agent's card read again (the rest of the page, a form being filled included,
    /// stays as it is); the whole page when the card cannot be had.
    async fn refresh_card(id: i64) {
        let selector = format!(".agent-card[data-agent-id=\"{id}\"]");
        let swapped = async {
            let fresh = fetch_page()
                .await?
                .query_selector(&selector)?
                .ok_or(JsValue::NULL)?;
            let old = document()
                .ok_or(JsValue::NULL)?
                .query_selector(&selector)?
                .ok_or(JsValue::NULL)?;
            old.replace_with_with_node_1(&fresh)
        };
        if swapped.await.is_err() {
            follow(Then::Refresh).await;
        }
        STATUSES.with(|s| {
            if let Some((status, detail)) = s.borrow().get(&id) {
                show_status(id, status, detail);
            }
        });
    }

    /// The user's WebSocket: on the Agents page each `agent_status` updates its agent's
    /// status line (an agent active again has its card read again); on every page a
    /// `notification` shows as a toast.
    fn listen_user() {
        let Some(loc) = web_sys::window().map(|w| w.location()) else {
            return;
        };
        let scheme = if loc.protocol().ok().as_deref() == Some("https:") {
            "wss"
        } else {
            "ws"
        };
        let Ok(host) = loc.host() else { return };
        let Ok(ws) =
            web_sys::WebSocket::new(&format!("{scheme}://{host}{}/ws", crate::base::path()))
        else {
            return;
        };
        let on_message =
            Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
                let text = e.data().as_string().unwrap_or_default();
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
                    return;
                };
                // The Tasks board is read again when a task changed (an agent's change too).
                if v["type"] == "task_changed" {
                    if document()
                        .and_then(|d| d.query_selector("[data-board]").ok().flatten())
                        .is_some()
                    {
                        leptos::task::spawn_local(refresh());
                    }
                    return;
                }
                if v["type"] == "notification" {
                    toast(
                        v["message"].as_str().unwrap_or_default(),
                        v["level"].as_str().unwrap_or("info"),
                    );
                    return;
                }
                if v["type"] != "agent_status" {
                    return;
                }
                let (Some(id), Some(s), Some(d)) = (
                    v["agentId"].as_i64(),
                    v["status"].as_str(),
                    v["detail"].as_str(),
                ) else {
                    return;
                };
                STATUSES.with(|m| m.borrow_mut().insert(id, (s.to_owned(), d.to_owned())));
                show_status(id, s, d);
                if s == "active" {
                    leptos::task::spawn_local(refresh_card(id));
                }
            });
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        on_message.forget();
    }

    /// The Tasks board's cards dragged onto a column: the card's own move form
    /// (`.task-move`) is sent with the column's status, as a keyboard would send it.
    fn drag_and_drop(doc: &Document) {
        let on_start = Closure::<dyn FnMut(web_sys::DragEvent)>::new(|e: web_sys::DragEvent| {
            let card = e
                .target()
                .and_then(|t| t.dyn_into::<Element>().ok())
                .and_then(|t| t.closest("[data-task]").ok().flatten());
            if let (Some(card), Some(dt)) = (card, e.data_transfer())
                && let Some(id) = card.get_attribute("data-task")
            {
                let _ = dt.set_data("text/plain", &id);
                dt.set_effect_allowed("move");
                DRAGGING.set(true);
            }
        });
        // Dropped or not: a refresh that waited for the drag runs now.
        let on_end = Closure::<dyn FnMut(web_sys::DragEvent)>::new(|_: web_sys::DragEvent| {
            DRAGGING.set(false);
            if REFRESH_AFTER_DRAG.replace(false) {
                leptos::task::spawn_local(refresh());
            }
        });
        let column_of = |e: &web_sys::DragEvent| {
            e.target()
                .and_then(|t| t.dyn_into::<Element>().ok())
                .and_then(|t| t.closest("[data-column]").ok().flatten())
        };
        let on_over =
            Closure::<dyn FnMut(web_sys::DragEvent)>::new(move |e: web_sys::DragEvent| {
                if column_of(&e).is_some() {
                    e.prevent_default();
                }
            });
        let on_drop =
            Closure::<dyn FnMut(web_sys::DragEvent)>::new(move |e: web_sys::DragEvent| {
                let Some(column) = column_of(&e) else { return };
                e.prevent_default();
                let id = e
                    .data_transfer()
                    .and_then(|dt| dt.get_data("text/plain").ok())
                    .unwrap_or_default();
                let (Some(status), Some(doc)) = (column.get_attribute("data-column"), document())
                else {
                    return;
                };
                let selector = format!("[data-task=\"{}\"] form.task-move", id.replace('"', ""));
                let Some(form) = doc
                    .query_selector(&selector)
                    .ok()
                    .flatten()
                    .and_then(|f| f.dyn_into::<HtmlFormElement>().ok())
                else {
                    return;
                };
                if let Some(select) = form
                    .query_selector("select[name=status]")
                    .ok()
                    .flatten()
                    .and_then(|s| s.dyn_into::<web_sys::HtmlSelectElement>().ok())
                {
                    if select.value() == status {
                        return;
                    }
                    select.set_value(&status);
                    let _ = form.request_submit();
                }
            });
        for (name, f) in [
            ("dragstart", on_start.as_ref()),
            ("dragend", on_end.as_ref()),
            ("dragover", on_over.as_ref()),
            ("drop", on_drop.as_ref()),
        ] {
            let _ = doc.add_event_listener_with_callback(name, f.unchecked_ref());
        }
        on_start.forget();
        on_end.forget();
        on_over.forget();
        on_drop.forget();
    }

    /// How long a toast stays (ms).
    const TOAST_MS: i32 = 8000;

    /// A notification, at the corner of the page for a while.
    fn toast(message: &str, level: &str) {
        let Some(doc) = document() else { return };
        let (Ok(el), Some(body)) = (doc.create_element("div"), doc.body()) else {
            return;
        };
        let level: String = level
            .chars()
            .filter(|c| c.is_ascii_alphabetic())
            .take(10)
            .collect();
        let _ = el.set_attribute("class", &format!("toast toast-{level}"));
        let _ = el.set_attribute("role", "status");
        let _ = el.set_attribute("data-testid", "toast");
        el.set_text_content(Some(message));
        let _ = body.append_child(&el);
        let gone = Closure::once_into_js(move || el.remove());
        if let Some(w) = web_sys::window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(
                gone.unchecked_ref(),
                TOAST_MS,
            );
        }
    }

    fn show_status(id: i64, status: &str, detail: &str) {
        let selector = format!("[data-agent-id=\"{id}\"] [data-testid=agent-status]");
        if let Some(el) = document().and_then(|d| d.query_selector(&selector).ok().flatten()) {
            let _ = el.set_attribute("data-status", status);
            el.set_text_content(Some(&agent_status_line(status, detail)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn then_reads_reload_refresh_and_paths_with_the_answers_id() {
        assert_eq!(then_of("reload", ""), Then::Reload);
        assert_eq!(then_of("refresh", ""), Then::Refresh);
        assert_eq!(then_of("/login", ""), Then::Go("/login".into()));
        assert_eq!(
            then_of("/s/{id}", r#"{"id":42,"name":"x"}"#),
            Then::Go("/s/42".into())
        );
        // No id in the answer, another site, or nonsense: the page loads again.
        assert_eq!(then_of("/s/{id}", "null"), Then::Reload);
        assert_eq!(then_of("//evil.example/x", ""), Then::Reload);
        assert_eq!(then_of("/\\evil.example/x", ""), Then::Reload);
        assert_eq!(then_of("https://evil.example/", ""), Then::Reload);
        assert_eq!(then_of("", ""), Then::Reload);
    }

    #[test]
    fn an_errors_sentence_is_what_the_server_said() {
        assert_eq!(
            error_sentence(401, "ServerError|wrong username or password"),
            "wrong username or password"
        );
        assert_eq!(
            error_sentence(400, "Deserialization|missing field `name`"),
            "missing field `name`"
        );
        assert_eq!(
            error_sentence(502, ""),
            "The server answered 502; try again."
        );
        assert_eq!(
            error_sentence(0, ""),
            "The server could not be reached; try again."
        );
    }

    #[test]
    fn an_agents_status_line() {
        assert_eq!(agent_status_line("summoning", ""), "summoning…");
        assert_eq!(
            agent_status_line("summoning", "asking"),
            "summoning… asking"
        );
        assert_eq!(agent_status_line("active", ""), "");
        assert_eq!(agent_status_line("active", "done"), "ready: done");
    }
}
