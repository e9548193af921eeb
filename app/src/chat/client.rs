//! The chat in the browser, without a component: takes over the markup [`super::ChatView`]
//! rendered, subscribes to the session's feed ([`use_session_events`]), and keeps the DOM
//! up to date from that reactive state by hand:
//!
//! - the stored messages: one `msg-slot` per message, redrawn only when its HTML (from
//!   [`hero_shared::html`]) changed, what was typed in it carried over (`actions::keep`),
//!   kept in order without moving a slot that is already in place (a moved node loses its
//!   focus);
//! - the pages paged in above ("show earlier"), the reply in flight block by block, the
//!   scroll that follows only a reader near the bottom;
//! - the composer (send, stop, answering a question that waits), the agent picker, the
//!   system prompt view, "show hidden".
//!
//! Listeners, effects, the feed and timers live under the chat's owner, as long as the
//! session is shown: moving to another session ([`crate::navigate`]) [`stop`]s them all
//! before the next chat [`start`]s. Those of a reply in flight go with it sooner.

use std::cell::RefCell;
use std::rc::Rc;

use hero_shared::wire::CompiledView;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{Element, HtmlInputElement, HtmlTextAreaElement};

use super::events::{LiveView, use_session_events};
use super::live::LiveBlock;
use hero_shared::hooks::{self, Hook};

use super::{ChatData, PLACEHOLDER, actions};
use crate::auth::error_text;

thread_local! {
    /// The owner of the chat running on the page, if any.
    static RUNNING: RefCell<Option<Owner>> = const { RefCell::new(None) };
}

/// Starts the chat under `root` (the element with `data-chat`), if the page has one,
/// under an owner of its own; a chat already running stops first.
pub fn start() {
    stop();
    let owner = Owner::new();
    owner.with(start_here);
    RUNNING.with(|r| *r.borrow_mut() = Some(owner));
}

/// Stops the chat running on the page: its feed closed, its listeners removed, its effects,
/// timers and signals gone.
pub fn stop() {
    if let Some(owner) = RUNNING.with(|r| r.borrow_mut().take()) {
        owner.cleanup();
    }
}

fn start_here() {
    let Some(root) = document()
        .query_selector(&hooks::CHAT.selector())
        .ok()
        .flatten()
    else {
        return;
    };
    let data = document()
        .get_element_by_id("chat-data")
        .and_then(|d| d.text_content())
        .ok_or_else(|| "the page has no starting view (#chat-data)".to_owned())
        .and_then(|d| {
            // The error's own words would bring serde_json's messages into the wasm.
            serde_json::from_slice::<ChatData>(d.as_bytes())
                .map_err(|_| "its starting view (#chat-data) is unreadable".to_owned())
        });
    let started = data.and_then(|data| {
        let initial = data.initial.clone();
        Chat::new(root.clone(), data).map(|chat| chat.run(initial))
    });
    if let Err(why) = started {
        cannot_start(&root, &why);
    }
}

/// A chat that cannot start says so on the page and in the console, instead of a message
/// box that never writes.
fn cannot_start(root: &Element, why: &str) {
    let text = format!(
        "The chat could not start: {why}. Reload the page; if this goes on, the page and the server do not match."
    );
    leptos::logging::error!("{text}");
    error_line(root, "form-error", Some(&text), None);
}

/// The line under `parent` (of class `class`) that says what went wrong, drawn, changed or
/// taken away; a new one goes before `before` (none: last).
fn error_line(parent: &Element, class: &str, error: Option<&str>, before: Option<&web_sys::Node>) {
    let line = find(parent, &format!(":scope > .{class}"));
    match (error, line) {
        (Some(e), Some(l)) => l.set_text_content(Some(e)),
        (Some(e), None) => {
            if let Ok(l) = document().create_element("p") {
                let _ = l.set_attribute("class", class);
                let _ = l.set_attribute("role", "alert");
                l.set_text_content(Some(e));
                let _ = parent.insert_before(&l, before);
            }
        }
        (None, Some(l)) => l.remove(),
        (None, None) => {}
    }
}

/// The part `hook` names under `root`, or which one the page lacks.
fn need(root: &Element, hook: Hook) -> Result<Element, String> {
    let selector = hook.selector();
    find(root, &selector).ok_or_else(|| format!("the page has no `{selector}`"))
}

/// The part `hook` names inside the part `within` names.
fn need_in(root: &Element, within: Hook, hook: Hook) -> Result<Element, String> {
    need(&need(root, within)?, hook)
}

fn find(root: &Element, selector: &str) -> Option<Element> {
    root.query_selector(selector).ok().flatten()
}

/// Adds a listener for as long as the chat runs: removed, and its closure freed, when the
/// chat's owner is cleaned up (on a move to another session).
fn listen<E: wasm_bindgen::convert::FromWasmAbi + 'static>(
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

fn set_hidden(e: &Element, hidden: bool) {
    let _ = if hidden {
        e.set_attribute("hidden", "")
    } else {
        e.remove_attribute("hidden")
    };
}

fn set_disabled(e: &Element, disabled: bool) {
    let _ = if disabled {
        e.set_attribute("disabled", "")
    } else {
        e.remove_attribute("disabled")
    };
}

/// The chat's elements and state (all cheap handles).
/// A stored message's slot in the list.
struct Slot {
    id: String,
    el: Element,
    html: String,
}

#[derive(Clone)]
struct Chat {
    session_id: i64,
    /// The session streams its replies; else the live reply is a note until it is whole.
    streaming: RwSignal<bool>,
    root: Element,
    messages: Element,
    stored: Element,
    earlier_box: Element,
    live_slot: Element,
    jump: Element,
    textarea: HtmlTextAreaElement,
    send: Element,
    stop: Element,
    /// The stored messages' slots, in the list's order: each message's id, its element and
    /// the HTML it holds.
    slots: Rc<RefCell<Vec<Slot>>>,
    show_hidden: RwSignal<bool>,
    /// Earlier pages paged in, each by the seq it comes before.
    pages: RwSignal<Vec<(i64, CompiledView)>>,
    loading: RwSignal<bool>,
    near_bottom: RwSignal<bool>,
    /// A message being sent or an answer from the message box.
    sending: RwSignal<bool>,
    /// The composer's error line.
    error: RwSignal<Option<String>>,
}

impl Chat {
    fn new(root: Element, data: ChatData) -> Result<Chat, String> {
        let messages = need(&root, hooks::MESSAGES)?;
        let chat = Chat {
            session_id: data.session_id,
            streaming: RwSignal::new(data.streaming),
            stored: need(&messages, hooks::STORED)?,
            earlier_box: need(&messages, hooks::EARLIER_PAGES)?,
            live_slot: need(&messages, hooks::LIVE_SLOT)?,
            jump: need(&root, hooks::JUMP_DOWN)?,
            textarea: need(&root, hooks::COMPOSER)?
                .query_selector("textarea")
                .ok()
                .flatten()
                .ok_or("the composer has no textarea")?
                .dyn_into()
                .map_err(|_| "the message box is no textarea".to_owned())?,
            send: need_in(&root, hooks::COMPOSER, hooks::SEND)?,
            stop: need_in(&root, hooks::COMPOSER, hooks::STOP)?,
            messages,
            root,
            slots: Rc::default(),
            show_hidden: RwSignal::new(false),
            pages: RwSignal::new(Vec::new()),
            loading: RwSignal::new(false),
            near_bottom: RwSignal::new(true),
            sending: RwSignal::new(false),
            error: RwSignal::new(None),
        };
        // The slots the server rendered hold the HTML this renderer makes of the same view.
        if let Ok(list) = chat.stored.query_selector_all(&hooks::SLOT.selector()) {
            let drawn = hero_shared::html::messages_html(&data.initial.messages, false, |_| false);
            let mut slots = chat.slots.borrow_mut();
            for i in 0..list.length() {
                if let Some(el) = list.item(i).and_then(|n| n.dyn_into::<Element>().ok())
                    && let Some(id) = el.get_attribute(hooks::SLOT.name())
                    && let Some((_, html)) = drawn.iter().find(|(d, _)| *d == id)
                {
                    slots.push(Slot {
                        id,
                        el,
                        html: html.clone(),
                    });
                }
            }
        }
        Ok(chat)
    }

    fn run(self, initial: CompiledView) {
        let feed = use_session_events(self.session_id, initial, self.streaming);
        let conversation = feed.conversation;

        // The header: "batch mode" while the session's replies arrive whole.
        if let Some(badge) = find(&self.root, &hooks::BATCH_BADGE.selector()) {
            let streaming = self.streaming;
            Effect::new(move |_| set_hidden(&badge, streaming.get()));
        }

        // Connected: the box writes.
        let c = self.clone();
        Effect::new(move |_| {
            let _ = c
                .root
                .set_attribute("data-connected", &feed.connected.get().to_string());
        });

        // The stored messages, and the earlier pages above them.
        let c = self.clone();
        Effect::new(move |_| {
            let show = c.show_hidden.get();
            let loaded: Vec<i64> = c.pages.with(|p| p.iter().map(|(s, _)| *s).collect());
            let drawn = conversation.with(|v| {
                hero_shared::html::messages_html(&v.messages, show, |seq| loaded.contains(&seq))
            });
            c.draw_stored(drawn);
            actions::countdowns(&c.messages);
        });
        let c = self.clone();
        let last_earlier = StoredValue::new(String::new());
        Effect::new(move |_| {
            let show = c.show_hidden.get();
            let mut pages = c.pages.get();
            pages.sort_by_key(|(seq, _)| *seq);
            let loaded: Vec<i64> = pages.iter().map(|(s, _)| *s).collect();
            let drawn: Vec<_> = pages
                .iter()
                .map(|(_, v)| {
                    hero_shared::html::messages_html(&v.messages, show, |seq| loaded.contains(&seq))
                })
                .collect();
            let html = hero_shared::html::earlier_pages_html(&drawn);
            // Drawn again only when it changed: a redraw closes what the reader opened.
            if last_earlier.with_value(|l| *l != html) {
                c.earlier_box.set_inner_html(&html);
                last_earlier.set_value(html);
            }
        });
        let c = self.clone();
        Effect::new(move |_| {
            let before = conversation.with(|v| v.earlier_before);
            c.pages.track();
            c.draw_top_button(before);
        });

        // The reply in flight.
        let c = self.clone();
        let live_owner = StoredValue::new_local(None::<Owner>);
        // The reply's own root goes with the chat too.
        on_cleanup(move || {
            if let Some(o) = live_owner.try_update_value(|o| o.take()).flatten() {
                o.cleanup();
            }
        });
        Effect::new(move |_| {
            let live = feed.live.get();
            if let Some(old) = live_owner.try_update_value(|o| o.take()).flatten() {
                old.cleanup();
            }
            c.live_slot.set_text_content(None);
            if let Some(l) = live {
                // Its own root: the effect re-running must not take the reply's effects with it.
                let owner = Owner::new_root(None);
                owner.with(|| c.draw_live(l, conversation));
                live_owner.set_value(Some(owner));
            }
        });

        // Following new content, and the way down.
        let c = self.clone();
        Effect::new(move |_| {
            feed.tick.get();
            if c.near_bottom.get_untracked() {
                let (el, near) = (c.messages.clone(), c.near_bottom);
                // Checked again when the frame comes: the reader may have scrolled up since.
                request_animation_frame(move || {
                    if near.get_untracked() {
                        el.set_scroll_top(el.scroll_height());
                    }
                });
            }
        });
        let c = self.clone();
        Effect::new(move |_| set_hidden(&c.jump, c.near_bottom.get()));

        self.composer(feed.live, conversation, feed.connected);
        self.listeners();

        // A timed question's countdown, in whatever message it is, for as long as the chat.
        let el = self.messages.clone();
        if let Ok(timer) = set_interval_with_handle(
            move || actions::countdowns(&el),
            std::time::Duration::from_millis(250),
        ) {
            on_cleanup(move || timer.clear());
        }
    }

    /// Puts the stored messages' slots in order, redrawing only those whose HTML changed
    /// and moving only those out of order ([`super::slots::plan`]).
    fn draw_stored(&self, drawn: Vec<(String, String)>) {
        use super::slots::{SlotOp, plan};
        let mut slots = self.slots.borrow_mut();
        if drawn.is_empty() {
            slots.clear();
            self.stored.set_inner_html(hero_shared::html::EMPTY);
            return;
        }
        if let Some(empty) = find(&self.stored, ".empty") {
            empty.remove();
        }
        let ops = {
            let held: Vec<(&str, &str)> = slots
                .iter()
                .map(|s| (s.id.as_str(), s.html.as_str()))
                .collect();
            plan(&held, &drawn)
        };
        let kept = actions::keep(&self.stored);
        let at = |slots: &[Slot], id: &str| slots.iter().position(|s| s.id == id);
        let mut made: Vec<Slot> = Vec::new();
        let mut redrawn = false;
        for op in ops {
            match op {
                SlotOp::Make { id, html } => {
                    let Ok(el) = document().create_element("div") else {
                        continue;
                    };
                    let _ = el.set_attribute("class", "msg-slot");
                    let _ = el.set_attribute(hooks::SLOT.name(), &id);
                    el.set_inner_html(&html);
                    made.push(Slot { id, el, html });
                }
                SlotOp::Redraw { id, html } => {
                    if let Some(i) = at(&slots, &id) {
                        slots[i].el.set_inner_html(&html);
                        slots[i].html = html;
                        redrawn = true;
                    }
                }
                SlotOp::Remove { id } => {
                    if let Some(i) = at(&slots, &id) {
                        slots.remove(i).el.remove();
                    }
                }
                SlotOp::Move { id, before } => {
                    let slot = match at(&slots, &id) {
                        Some(i) => slots.remove(i),
                        None => match made.iter().position(|s| s.id == id) {
                            Some(i) => made.remove(i),
                            None => continue,
                        },
                    };
                    let place = before.as_deref().and_then(|b| at(&slots, b));
                    let next = place.map(|i| slots[i].el.clone());
                    let _ = self
                        .stored
                        .insert_before(&slot.el, next.as_ref().map(|n| n.as_ref()));
                    let end = slots.len();
                    slots.insert(place.unwrap_or(end), slot);
                }
            }
        }
        if redrawn {
            actions::restore(&self.stored, &kept);
        }
    }

    /// The way further up: before the topmost page shown, if that has one before it.
    fn draw_top_button(&self, conversation_before: Option<i64>) {
        let top = self.pages.with(|p| {
            p.iter()
                .min_by_key(|(seq, _)| *seq)
                .map(|(_, v)| v.earlier_before)
        });
        let loaded = |seq: i64| self.pages.with(|p| p.iter().any(|(s, _)| *s == seq));
        let next = top
            .unwrap_or(conversation_before)
            .filter(|seq| !loaded(*seq));
        let existing = find(&self.messages, ".show-earlier.top");
        match (next, existing) {
            (None, Some(b)) => b.remove(),
            (Some(seq), Some(b)) => {
                let _ = b.set_attribute("data-seq", &seq.to_string());
            }
            (Some(seq), None) => {
                let button = hero_shared::html::show_earlier_top_html(seq);
                let _ = self.messages.insert_adjacent_html("afterbegin", &button);
            }
            (None, None) => {}
        }
    }

    /// Pages in what comes before `seq`, keeping what the reader sees where it was.
    fn load_earlier(&self, seq: i64) {
        if self.loading.get_untracked()
            || self
                .pages
                .with_untracked(|p| p.iter().any(|(s, _)| *s == seq))
        {
            return;
        }
        self.loading.set(true);
        let c = self.clone();
        leptos::task::spawn_local(async move {
            let before = c.messages.scroll_height();
            let result = super::earlier_messages(c.session_id, seq).await;
            c.loading.set(false);
            if let Ok((before_seq, view)) = result {
                c.pages.update(|p| {
                    if !p.iter().any(|(s, _)| *s == before_seq) {
                        p.push((before_seq, view));
                    }
                });
                let el = c.messages.clone();
                request_animation_frame(move || {
                    el.set_scroll_top(el.scroll_top() + el.scroll_height() - before);
                });
            }
        });
    }

    /// The reply in flight: its blocks as they stream (or a note, in batch mode), the
    /// cards of the calls its elements began as they closed, and its error. Runs under an
    /// owner of its own, cleaned up when the reply leaves.
    fn draw_live(&self, l: LiveView, conversation: RwSignal<CompiledView>) {
        let (id, agent) = (l.message_id.get_value(), l.agent_name.get_value());
        self.live_slot
            .set_inner_html(&hero_shared::html::live_reply_html(&id, &agent));
        let (Some(msg), Some(body), Some(cards)) = (
            find(&self.live_slot, ".live"),
            find(&self.live_slot, ".live > .msg-body"),
            find(&self.live_slot, &hooks::LIVE_CALLS.selector()),
        ) else {
            return;
        };
        // The reply's calls, from the log as its frames arrive (their parent is the reply).
        let mid = id.clone();
        let calls = Memo::new(move |_| {
            conversation.with(|v| {
                hero_shared::calls::calls(&v.messages)
                    .into_iter()
                    .filter(|c| c.message_id == mid)
                    .collect::<Vec<_>>()
            })
        });
        Effect::new(move |_| {
            calls.with(|c| cards.set_inner_html(&hero_shared::html::calls_html(c, &id)))
        });
        if self.streaming.get_untracked() {
            // One element per block, each redrawn by an effect of its own as it grows, owned
            // by the reply (not by this effect, which runs again at each new block).
            let owner = Owner::current();
            let drawn = StoredValue::new(0usize);
            Effect::new(move |_| {
                let blocks = l.blocks.get();
                for b in blocks.iter().skip(drawn.get_value()).copied() {
                    let Ok(el) = document().create_element("div") else {
                        return;
                    };
                    let _ = el.set_attribute("class", "live-block");
                    let _ = body.append_child(&el);
                    let draw = move || {
                        // Only an element shows a call: only it follows the calls.
                        Effect::new(move |_| {
                            let html = match b {
                                LiveBlock::Text(_) => super::live::block_html(b, &[]),
                                LiveBlock::Element { .. } => {
                                    calls.with(|c| super::live::block_html(b, c))
                                }
                            };
                            el.set_inner_html(&html)
                        });
                    };
                    match &owner {
                        Some(o) => o.with(draw),
                        None => draw(),
                    }
                }
                drawn.set_value(blocks.len());
            });
        } else {
            body.set_inner_html(hero_shared::html::TYPING);
        }
        Effect::new(move |_| error_line(&msg, "msg-error", l.error.get().as_deref(), None));
    }

    /// The message box: Enter sends, Shift+Enter adds a line; Stop while a reply is in
    /// flight; a question that waits for as long as it takes is answered from here.
    fn composer(
        &self,
        live: RwSignal<Option<LiveView>>,
        conversation: RwSignal<CompiledView>,
        connected: RwSignal<bool>,
    ) {
        let question = Memo::new(move |_| {
            conversation.with(|v| {
                hero_shared::calls::calls(&v.messages)
                    .into_iter()
                    .rev()
                    .find(|c| c.is_question() && c.request.expires_at.is_none())
            })
        });
        let sending = self.sending;
        let busy = move || sending.get() || live.get().is_some_and(|l| !l.finished.get());
        let c = self.clone();
        Effect::new(move |_| {
            let (busy, connected) = (busy(), connected.get());
            c.textarea.set_disabled(busy || !connected);
            set_hidden(&c.send, busy);
            set_disabled(&c.send, !connected);
            set_hidden(&c.stop, !busy);
        });
        // The question being answered, above the box.
        let c = self.clone();
        Effect::new(move |_| {
            let q = question.get();
            c.textarea.set_placeholder(if q.is_some() {
                "Your answer to the agent's question (Enter answers)"
            } else {
                PLACEHOLDER
            });
            let banner = find(&c.root, "[data-testid=answering]");
            match (q, banner) {
                (None, Some(b)) => b.remove(),
                (None, None) => {}
                (Some(q), b) => {
                    let b = match b {
                        Some(b) => b,
                        None => {
                            let Ok(b) = document().create_element("div") else {
                                return;
                            };
                            let _ = b.set_attribute("class", "composer-answering");
                            let _ = b.set_attribute("data-testid", "answering");
                            if let Some(form) = find(&c.root, &hooks::COMPOSER.selector()) {
                                let _ = c.root.insert_before(&b, Some(&form));
                            }
                            b
                        }
                    };
                    b.set_inner_html(&hero_shared::html::answering_html(
                        q.request.arg("question").unwrap_or_default(),
                    ));
                }
            }
        });
        // The box's error line.
        let c = self.clone();
        Effect::new(move |_| {
            let before = c.jump.next_sibling();
            error_line(
                &c.root,
                "form-error",
                c.error.get().as_deref(),
                before.as_ref(),
            );
        });

        let c = self.clone();
        let submit = Rc::new(move || {
            let content = c.textarea.value();
            if content.trim().is_empty() || busy() {
                return;
            }
            c.near_bottom.set(true);
            c.sending.set(true);
            c.textarea.set_value("");
            let private = find(&c.root, &hooks::PRIVATE.selector())
                .and_then(|p| p.dyn_into::<HtmlInputElement>().ok())
                .is_some_and(|p| p.checked());
            let (c, q) = (c.clone(), question.get_untracked());
            leptos::task::spawn_local(async move {
                let result = match q {
                    Some(q) => actions::answer_prompt(
                        c.session_id,
                        q.message_id.clone(),
                        q.request.origin.element_id(),
                        serde_json::Value::String(content).to_string(),
                    )
                    .await
                    .map(|_| ()),
                    None => super::post_message(c.session_id, content, private)
                        .await
                        .map(|_| ()),
                };
                c.sending.set(false);
                c.error.set(result.err().map(|e| error_text(&e)));
            });
        });
        if let Some(form) = find(&self.root, &hooks::COMPOSER.selector()) {
            let submit = submit.clone();
            listen(&form, "submit", move |ev: web_sys::Event| {
                ev.prevent_default();
                submit();
            });
        }
        listen(
            &self.textarea,
            "keydown",
            move |ev: web_sys::KeyboardEvent| {
                if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
                    ev.prevent_default();
                    submit();
                }
            },
        );
        let (session_id, error) = (self.session_id, self.error);
        let stop = move || {
            leptos::task::spawn_local(async move {
                if let Err(e) = super::abort_turn(session_id).await {
                    error.set(Some(format!(
                        "Could not stop the reply: {}",
                        error_text(&e)
                    )));
                }
            })
        };
        listen(&self.stop, "click", move |_: web_sys::Event| stop());
        listen(&self.root, "click", move |ev: web_sys::Event| {
            let dismiss = ev
                .target()
                .and_then(|t| t.dyn_into::<Element>().ok())
                .and_then(|t| t.closest("[data-testid=answering] .dismiss").ok().flatten());
            if dismiss.is_some() {
                stop();
            }
        });
    }

    /// The header's agent part: the Files link names the session's agent; `error` is the
    /// line that says why a change was refused (none clears it).
    fn draw_agent(&self, agent_id: Option<i64>, error: Option<String>) {
        let Some(head) = find(&self.root, &hooks::HEADER.selector()) else {
            return;
        };
        if let Some(a) = find(&head, &hooks::AGENT_FILES.selector()) {
            if let Some(id) = agent_id {
                let _ = a.set_attribute("href", &format!("/agents/{id}/files"));
            }
            set_hidden(&a, agent_id.is_none());
        }
        // The placeholder option goes once the session has an agent.
        if agent_id.is_some()
            && let Some(o) = find(&head, "option[value='']")
        {
            o.remove();
        }
        error_line(&head, "form-error", error.as_deref(), None);
    }

    fn listeners(&self) {
        let session_id = self.session_id;
        // The messages' buttons and fields; "show earlier" here too.
        let c = self.clone();
        let selector = format!(
            "[data-action={}]",
            hero_shared::hooks::Action::Earlier.as_str()
        );
        listen(&self.messages, "click", move |ev: web_sys::MouseEvent| {
            let earlier = ev
                .target()
                .and_then(|t| t.dyn_into::<Element>().ok())
                .and_then(|t| t.closest(&selector).ok().flatten());
            match earlier {
                Some(b) => {
                    if let Some(seq) = b.get_attribute("data-seq").and_then(|s| s.parse().ok()) {
                        c.load_earlier(seq);
                    }
                }
                None => actions::on_click(session_id, ev),
            }
        });
        listen(
            &self.messages,
            "keydown",
            move |ev: web_sys::KeyboardEvent| actions::on_keydown(session_id, ev),
        );
        // Only the reader moving up stops the following, and reaching the bottom resumes
        // it: a scroll event caused by our own scrolling, while more text keeps arriving,
        // must not look like the reader leaving.
        let c = self.clone();
        let last_top = Rc::new(std::cell::Cell::new(0i32));
        listen(&self.messages, "scroll", move |_: web_sys::Event| {
            let el = &c.messages;
            let top = el.scroll_top();
            // Near the top: the page before comes in.
            if top < 40
                && let Some(seq) = find(el, ".show-earlier.top")
                    .and_then(|b| b.get_attribute("data-seq"))
                    .and_then(|s| s.parse().ok())
            {
                c.load_earlier(seq);
            }
            if el.scroll_height() - top - el.client_height() < 80 {
                c.near_bottom.set(true);
            } else if top < last_top.get() - 2 {
                c.near_bottom.set(false);
            }
            last_top.set(top);
        });
        let c = self.clone();
        listen(&self.jump, "click", move |_: web_sys::Event| {
            c.messages.set_scroll_top(c.messages.scroll_height());
            c.near_bottom.set(true);
        });
        let c = self.clone();
        Effect::new(move |_| {
            let loading = c.loading.get();
            if let Some(b) = find(&c.messages, ".show-earlier.top") {
                set_disabled(&b, loading);
            }
        });
        // Show hidden messages.
        if let Some(b) = find(&self.root, &hooks::SHOW_HIDDEN.selector()) {
            let show = self.show_hidden;
            listen(&b, "change", move |ev: web_sys::Event| {
                if let Some(i) = ev
                    .target()
                    .and_then(|t| t.dyn_into::<HtmlInputElement>().ok())
                {
                    show.set(i.checked());
                }
            });
        }
        // The session's agent: once the server took it, the header names it (the Files
        // link); if it refused, the picker goes back and says why.
        if let Some(s) = find(&self.root, &hooks::AGENT_PICKER.selector())
            .and_then(|s| s.dyn_into::<web_sys::HtmlSelectElement>().ok())
        {
            let in_force = Rc::new(RefCell::new(s.value()));
            let (c, picker) = (self.clone(), s.clone());
            listen(&s, "change", move |_: web_sys::Event| {
                let Ok(agent_id) = picker.value().parse::<i64>() else {
                    return;
                };
                let (c, picker, in_force) = (c.clone(), picker.clone(), in_force.clone());
                leptos::task::spawn_local(async move {
                    match super::set_session_agent(session_id, agent_id).await {
                        Ok(s) => {
                            *in_force.borrow_mut() = picker.value();
                            c.draw_agent(s.agent_id, None);
                        }
                        Err(e) => {
                            picker.set_value(&in_force.borrow());
                            let why = format!("This agent could not be chosen: {}", error_text(&e));
                            c.draw_agent(in_force.borrow().parse().ok(), Some(why));
                        }
                    }
                });
            });
        }
        // "View system prompt": what the agent is told, fetched when asked for.
        if let Some(b) = find(&self.root, &hooks::PROMPT_BUTTON.selector()) {
            let button = b.clone();
            listen(&b, "click", move |_: web_sys::Event| {
                if let Some(open) = button
                    .next_element_sibling()
                    .filter(|s| s.class_list().contains("system-prompt"))
                {
                    open.remove();
                    button.set_text_content(Some("View system prompt"));
                    return;
                }
                button.set_text_content(Some("Hide system prompt"));
                let Ok(section) = document().create_element("section") else {
                    return;
                };
                let _ = section.set_attribute("class", "system-prompt");
                let _ = section.set_attribute("aria-label", "System prompt");
                section.set_inner_html(hero_shared::html::LOADING);
                let _ = button.after_with_node_1(&section);
                leptos::task::spawn_local(async move {
                    let (tag, text, attrs): (&str, String, &[(&str, &str)]) =
                        match super::system_prompt(session_id).await {
                            Ok(p) => ("pre", p, &[("data-testid", "system-prompt")]),
                            Err(e) => (
                                "p",
                                error_text(&e),
                                &[("class", "form-error"), ("role", "alert")],
                            ),
                        };
                    if let Ok(el) = document().create_element(tag) {
                        for (k, v) in attrs {
                            let _ = el.set_attribute(k, v);
                        }
                        el.set_text_content(Some(&text));
                        section.set_text_content(None);
                        let _ = section.append_child(&el);
                    }
                });
            });
        }
    }
}
