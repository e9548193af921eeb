//! The chat in the browser, without a component: takes over the markup [`super::ChatView`]
//! rendered, subscribes to the session's feed ([`use_session_events`]), and keeps the DOM
//! up to date from that reactive state by hand, one small binding per region of the page,
//! each a file over the shared DOM helper (`dom`):
//!
//! - `header`: the agent picker and the Files link, "View system prompt", "Show hidden
//!   messages", the "batch mode" badge;
//! - `list`: the stored messages, one `msg-slot` each, redrawn only when its HTML (from
//!   [`hero_shared::html`]) changed and moved only when out of order
//!   ([`super::slots::plan`]), what was typed in it carried over (`actions::keep`); the
//!   earlier pages above them; the scroll that follows only a reader near the bottom;
//! - `reply`: the reply in flight, block by block, and its calls' cards;
//! - `composer`: send, stop, answering a question that waits, an edit;
//! - `attach`: the files chosen for the next message, uploaded as they are chosen.
//!
//! Effects, the feed and timers live under the chat's owner, and its listeners in one list
//! (`dom`), as long as the session is shown: moving to another session
//! ([`crate::navigate`]) [`stop`]s them all before the next chat [`start`]s. Those of a
//! reply in flight go with it sooner.

use std::cell::RefCell;
use std::rc::Rc;

use hero_shared::wire::CompiledView;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Element, HtmlInputElement, HtmlTextAreaElement};

use super::events::{LiveView, use_session_events};
use super::live::LiveBlock;
use hero_shared::hooks;

use super::{ChatData, PLACEHOLDER, actions};

mod attach;
mod composer;
mod dom;
mod header;
mod list;
mod reply;

use crate::auth::error_text;
use composer::start_edit;
use dom::*;

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
    dom::release();
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

/// The calls (their ids) whose card shows what the agent read of its configuration.
fn read_calls(root: &Element) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    if let Ok(list) = root.query_selector_all(&hooks::CONFIG_READ.selector()) {
        for i in 0..list.length() {
            if let Some(id) = list
                .item(i)
                .and_then(|n| n.dyn_into::<Element>().ok())
                .and_then(|e| e.closest(&hooks::CALL.selector()).ok().flatten())
                .and_then(|c| c.get_attribute(hooks::CALL.name()))
            {
                out.insert(id);
            }
        }
    }
    out
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

/// A stored message's slot in the list.
struct Slot {
    id: String,
    el: Element,
    /// Its HTML with every text unparsed (`hero_shared::markdown::plain`): it changes
    /// exactly when the slot's HTML does, and is had without the parser. Marked (a leading
    /// NUL) when the slot was drawn without the parser, so that it is drawn again with it.
    key: String,
}

/// The chat's elements and state (all cheap handles).
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
    /// The reads of its configuration the agent made (their calls' ids), and the one shown
    /// in the panel beside the chat: a read that arrives while the page is open opens it.
    reads: Rc<RefCell<(std::collections::HashSet<String>, Option<String>)>>,
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
            reads: Rc::default(),
        };
        // The reads the page came with are not opened.
        chat.reads.borrow_mut().0 = read_calls(&chat.stored);
        // The slots the server rendered hold the HTML this renderer makes of the same view;
        // each is known by its key (its HTML with the texts unparsed: no parser needed yet).
        if let Ok(list) = chat.stored.query_selector_all(&hooks::SLOT.selector()) {
            let drawn = hero_shared::markdown::plain(|| {
                hero_shared::html::messages_html(&data.initial.messages, false, |_| false)
            });
            let mut slots = chat.slots.borrow_mut();
            for i in 0..list.length() {
                if let Some(el) = list.item(i).and_then(|n| n.dyn_into::<Element>().ok())
                    && let Some(id) = el.get_attribute(hooks::SLOT.name())
                    && let Some((_, html)) = drawn.iter().find(|(d, _)| *d == id)
                {
                    slots.push(Slot {
                        id,
                        el,
                        key: html.clone(),
                    });
                }
            }
        }
        Ok(chat)
    }

    fn run(self, initial: CompiledView) {
        let feed = use_session_events(self.session_id, initial, self.streaming);
        // Connected: the box writes.
        let c = self.clone();
        Effect::new(move |_| {
            let _ = c
                .root
                .set_attribute("data-connected", &feed.connected.get().to_string());
        });

        self.header(feed.conversation);
        self.list(feed);
        self.reply(feed);
        self.composer(feed.live, feed.conversation, feed.connected);
        self.attachments();
    }
}
