//! The message list's binding: the stored messages (each slot redrawn only when its key
//! changed, [`crate::chat::slots::plan`]), the earlier pages above them and the way up,
//! the scroll that follows a reader near the bottom and the way down, the messages' own
//! buttons (one delegated listener, `actions`), and the timed questions' countdown.

use std::rc::Rc;

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::Element;

use super::dom::*;
use super::*;
use crate::chat::events::SessionEvents;

impl Chat {
    pub(super) fn list(&self, feed: SessionEvents) {
        let conversation = feed.conversation;
        // The stored messages, and the earlier pages above them.
        let c = self.clone();
        Effect::new(move |_| {
            let show = c.show_hidden.get();
            let loaded: Vec<i64> = c.pages.with(|p| p.iter().map(|(s, _)| *s).collect());
            let html = |v: &CompiledView| {
                hero_shared::html::messages_html(&v.messages, show, |seq| loaded.contains(&seq))
            };
            let keys = conversation.with(|v| hero_shared::markdown::plain(|| html(v)));
            c.draw_stored(keys, || conversation.with(html));
            actions::countdowns(&c.messages);
        });
        let c = self.clone();
        let last_earlier = StoredValue::new(String::new());
        Effect::new(move |_| {
            let show = c.show_hidden.get();
            let mut pages = c.pages.get();
            // Pages the server did not draw: with the parser when it is in (a page paged in
            // waits for it), else unparsed, and again once it comes.
            if !pages.is_empty() {
                crate::markdown::track();
            }
            pages.sort_by_key(|(seq, _)| *seq);
            let loaded: Vec<i64> = pages.iter().map(|(s, _)| *s).collect();
            // What lies before the last summary can no longer be edited or regenerated. The
            // summary is in the view, or in a page when many messages followed it.
            let last_summary = |v: &CompiledView| {
                v.messages
                    .iter()
                    .filter(|m| m.frame_type == hero_shared::frame::FrameType::Compact)
                    .map(|m| m.seq)
                    .max()
            };
            // (Untracked: the pages are not drawn again at every frame that arrives.)
            let summary = conversation
                .with_untracked(last_summary)
                .into_iter()
                .chain(pages.iter().filter_map(|(_, v)| last_summary(v)))
                .max()
                .unwrap_or(i64::MIN);
            let drawn: Vec<_> = pages
                .iter()
                .map(|(_, v)| {
                    hero_shared::html::earlier_messages_html(
                        &v.messages,
                        show,
                        |seq| loaded.contains(&seq),
                        summary,
                    )
                })
                .collect();
            let html = hero_shared::html::earlier_pages_html(&drawn);
            // Drawn again only when it changed: a redraw closes what the reader opened.
            if last_earlier.with_value(|l| *l != html) {
                c.earlier_box.set_inner_html(&html);
                last_earlier.set_value(html);
                highlight(&c.earlier_box);
            }
        });
        let c = self.clone();
        Effect::new(move |_| {
            let before = conversation.with(|v| v.earlier_before);
            c.pages.track();
            c.draw_top_button(before);
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

        let session_id = self.session_id;
        // The messages' buttons and fields; "show earlier" and "Edit" (which fills the
        // message box) here too.
        let c = self.clone();
        let of = |a: hooks::Action| format!("[{}={}]", hooks::ACTION.name(), a.as_str());
        let (earlier, edit) = (of(hooks::Action::Earlier), of(hooks::Action::Edit));
        let close = of(hooks::Action::ClosePanel);
        listen(&self.messages, "click", move |ev: web_sys::MouseEvent| {
            let target = ev.target().and_then(|t| t.dyn_into::<Element>().ok());
            let on = |selector: &str| {
                target
                    .as_ref()
                    .and_then(|t| t.closest(selector).ok().flatten())
            };
            if let Some(b) = on(&earlier) {
                if let Some(seq) = b
                    .get_attribute(hooks::SEQ.name())
                    .and_then(|s| s.parse().ok())
                {
                    c.load_earlier(seq);
                }
            } else if let Some(b) = on(&close) {
                c.reads.borrow_mut().1 = None;
                if let Some(panel) = b.closest(&hooks::CONFIG_READ.selector()).ok().flatten() {
                    let _ = panel.remove_attribute("data-panel");
                }
            } else if let Some(b) = on(&edit) {
                if let Some(msg) = b.closest(&hooks::MESSAGE_ID.selector()).ok().flatten() {
                    start_edit(&msg);
                }
            } else {
                actions::on_click(session_id, ev);
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
                && let Some(seq) = find(el, &hooks::EARLIER_TOP.selector())
                    .and_then(|b| b.get_attribute(hooks::SEQ.name()))
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
            if let Some(b) = find(&c.messages, &hooks::EARLIER_TOP.selector()) {
                set_disabled(&b, loading);
            }
        });
        // A timed question's countdown, in whatever message it is, for as long as the chat.
        let el = self.messages.clone();
        if let Ok(timer) = set_interval_with_handle(
            move || actions::countdowns(&el),
            std::time::Duration::from_millis(250),
        ) {
            on_cleanup(move || timer.clear());
        }
        self.seek_from_address();
    }

    /// Brings the slots to `keys` (each message's id and key, in order): redraws only those
    /// whose key changed and moves only those out of order ([`crate::chat::slots::plan`]),
    /// drawing with the HTML of `html` (the same messages, parsed). Before the markdown
    /// parser is in, a slot is drawn with its texts unparsed and asks for the parser (the
    /// effect calling this runs again when a fetch of it ends): a new message is never
    /// kept waiting.
    fn draw_stored(
        &self,
        keys: Vec<(String, String)>,
        html: impl FnOnce() -> Vec<(String, String)>,
    ) {
        use crate::chat::slots::{SlotOp, plan};
        let mut slots = self.slots.borrow_mut();
        if keys.is_empty() {
            slots.clear();
            self.stored.set_inner_html(hero_shared::html::EMPTY);
            return;
        }
        if let Some(empty) = find(&self.stored, &hooks::EMPTY_NOTE.selector()) {
            empty.remove();
        }
        let ops = {
            let held: Vec<(&str, &str)> = slots
                .iter()
                .map(|s| (s.id.as_str(), s.key.as_str()))
                .collect();
            plan(&held, &keys)
        };
        let draws = ops
            .iter()
            .any(|op| matches!(op, SlotOp::Make { .. } | SlotOp::Redraw { .. }));
        if draws {
            crate::markdown::track();
        }
        let mut drawn = if draws { html() } else { Vec::new() };
        // Drawn without the parser (not in yet, or not to be had): the key marked, so the
        // slot is drawn again, parsed, once the parser is in (and not before).
        let parsed = crate::markdown::installed();
        let key_of = |key: String| if parsed { key } else { format!("\0{key}") };
        // The HTML of message `id` (each is drawn once).
        let mut html_of = |id: &str| {
            drawn
                .iter()
                .position(|(d, _)| d == id)
                .map(|i| drawn.swap_remove(i).1)
                .unwrap_or_default()
        };
        let kept = actions::keep(&self.stored);
        let at = |slots: &[Slot], id: &str| slots.iter().position(|s| s.id == id);
        let mut made: Vec<Slot> = Vec::new();
        let mut redrawn = false;
        for op in ops {
            match op {
                SlotOp::Make { id, html: key } => {
                    let Ok(el) = document().create_element("div") else {
                        continue;
                    };
                    let _ = el.set_attribute("class", "msg-slot");
                    let _ = el.set_attribute(hooks::SLOT.name(), &id);
                    let html = html_of(&id);
                    el.set_inner_html(&html);
                    made.push(Slot {
                        id,
                        el,
                        key: key_of(key),
                    });
                }
                SlotOp::Redraw { id, html: key } => {
                    if let Some(i) = at(&slots, &id) {
                        let html = html_of(&id);
                        slots[i].el.set_inner_html(&html);
                        slots[i].key = key_of(key);
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
        drop(slots);
        highlight(&self.stored);
        self.show_read();
    }

    /// A read of its configuration the agent made while the page is open is shown in the
    /// panel beside the chat, until closed (a redraw of its message keeps it shown).
    fn show_read(&self) {
        let mut reads = self.reads.borrow_mut();
        for id in read_calls(&self.stored) {
            if reads.0.insert(id.clone()) {
                reads.1 = Some(id);
            }
        }
        if let Some(id) = &reads.1 {
            let selector = format!(
                "[{}=\"{}\"] {}",
                hooks::CALL.name(),
                id.replace('"', ""),
                hooks::CONFIG_READ.selector()
            );
            if let Some(panel) = find(&self.stored, &selector) {
                let _ = panel.set_attribute("data-panel", "");
            }
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
        let existing = find(&self.messages, &hooks::EARLIER_TOP.selector());
        match (next, existing) {
            (None, Some(b)) => b.remove(),
            (Some(seq), Some(b)) => {
                let _ = b.set_attribute(hooks::SEQ.name(), &seq.to_string());
            }
            (Some(seq), None) => {
                let html = hero_shared::html::show_earlier_top_html(seq);
                let _ = self.messages.insert_adjacent_html("afterbegin", &html);
            }
            (None, None) => {}
        }
    }

    /// Pages in what comes before `seq`, keeping what the reader sees where it was.
    fn load_earlier(&self, seq: i64) {
        let c = self.clone();
        leptos::task::spawn_local(async move {
            c.page_in(seq).await;
        });
    }

    /// [`Self::load_earlier`], done once the page is drawn and the view put back: whether a
    /// page came (not when one is loading already, this one is in, or it could not be had).
    async fn page_in(&self, seq: i64) -> bool {
        if self.loading.get_untracked()
            || self
                .pages
                .with_untracked(|p| p.iter().any(|(s, _)| *s == seq))
        {
            return false;
        }
        self.loading.set(true);
        let before = self.messages.scroll_height();
        let Ok((before_seq, view)) = crate::rpc::call(crate::chat::EarlierMessages {
            session_id: self.session_id,
            before_seq: seq,
        })
        .await
        else {
            self.loading.set(false);
            return false;
        };
        // The page is drawn in the next frame only with the parser in (or given up on).
        crate::markdown::with_parser(|| ()).await;
        self.pages.update(|p| {
            if !p.iter().any(|(s, _)| *s == before_seq) {
                p.push((before_seq, view));
            }
        });
        // Still loading until the view is put back where the reader was: a scroll event in
        // between sees the top, and would page in the next one too.
        next_frame().await;
        let el = &self.messages;
        el.set_scroll_top(el.scroll_top() + el.scroll_height() - before);
        self.loading.set(false);
        true
    }

    /// Opens the chat at the message the address names (`#m-<frame id>`, a search result's
    /// link): pages in what comes before until it is drawn (the way up, then a summary's
    /// "show earlier"), then brings it into view, marked, and stops following the bottom.
    pub(super) fn seek_from_address(&self) {
        let Some(id) = web_sys::window()
            .and_then(|w| w.location().hash().ok())
            .and_then(|h| h.strip_prefix("#m-").map(str::to_owned))
            .filter(|id| crate::chat::is_frame_id(id))
        else {
            return;
        };
        self.near_bottom.set(false);
        let c = self.clone();
        leptos::task::spawn_local(async move {
            let wanted = format!("[{}=\"{id}\"]", hooks::MESSAGE_ID.name());
            let earlier = format!(
                "[data-action={}]",
                hero_shared::hooks::Action::Earlier.as_str()
            );
            for _ in 0..MAX_SEEK_PAGES {
                next_frame().await;
                if let Some(el) = find(&c.messages, &wanted) {
                    el.scroll_into_view();
                    let _ = el.class_list().add_1("found");
                    return;
                }
                let seq_of = |b: Element| {
                    b.get_attribute(hooks::SEQ.name())
                        .and_then(|s| s.parse::<i64>().ok())
                };
                let next = find(&c.messages, &hooks::EARLIER_TOP.selector())
                    .and_then(seq_of)
                    .or_else(|| {
                        all(&c.messages, &earlier)
                            .into_iter()
                            .rev()
                            .find_map(seq_of)
                    });
                match next {
                    Some(seq) if c.page_in(seq).await => {}
                    _ => return,
                }
            }
        });
    }
}

thread_local! {
    /// Code already highlighted, by (language, text): a block drawn again is highlighted
    /// at once, without asking the server again.
    static HIGHLIGHTED: std::cell::RefCell<std::collections::HashMap<(String, String), String>> =
        std::cell::RefCell::default();
}

/// The most highlighted blocks kept.
const MAX_HIGHLIGHTED: usize = 256;

/// Highlights the code blocks under `root` not yet highlighted: each block's language and
/// text go to the server once (`highlight_code`), and its tokens come back drawn by the
/// shared renderer. A block without a language stays plain.
fn highlight(root: &Element) {
    for block in all(root, &hooks::CODE_BLOCK.selector()) {
        if block.has_attribute("data-hl") {
            continue;
        }
        let Some(code) = find(&block, "pre code") else {
            continue;
        };
        let lang = find(&block, &hooks::CODE_LANG.selector())
            .and_then(|l| l.text_content())
            .unwrap_or_default();
        let text = code.text_content().unwrap_or_default();
        if lang.trim().is_empty() || text.is_empty() {
            let _ = block.set_attribute("data-hl", "plain");
            continue;
        }
        let key = (lang, text);
        if let Some(html) = HIGHLIGHTED.with(|h| h.borrow().get(&key).cloned()) {
            code.set_inner_html(&html);
            let _ = block.set_attribute("data-hl", "done");
            continue;
        }
        let _ = block.set_attribute("data-hl", "pending");
        leptos::task::spawn_local(async move {
            let (lang, text) = key.clone();
            let Ok(tokens) =
                crate::rpc::call(crate::chat::HighlightCode { lang, code: text }).await
            else {
                let _ = block.set_attribute("data-hl", "failed");
                return;
            };
            let html = hero_shared::html::highlighted_html(&tokens);
            // Drawn again meanwhile with other text: that one is highlighted on its own.
            if code.text_content().as_deref() == Some(key.1.as_str()) {
                code.set_inner_html(&html);
                let _ = block.set_attribute("data-hl", "done");
            }
            HIGHLIGHTED.with(|h| {
                let mut h = h.borrow_mut();
                if h.len() >= MAX_HIGHLIGHTED {
                    h.clear();
                }
                h.insert(key, html);
            });
        });
    }
}

/// The most pages a search result's link pages in looking for its message.
const MAX_SEEK_PAGES: usize = 200;

/// Resolves at the browser's next frame, once what was drawn is laid out (through the
/// `request_animation_frame` the list already uses: no promise of its own).
async fn next_frame() {
    use std::cell::{Cell, RefCell};
    use std::task::{Poll, Waker};
    let done = Rc::new(Cell::new(false));
    let waker: Rc<RefCell<Option<Waker>>> = Rc::default();
    let (d, w) = (done.clone(), waker.clone());
    request_animation_frame(move || {
        d.set(true);
        if let Some(w) = w.take() {
            w.wake();
        }
    });
    std::future::poll_fn(|cx| {
        if done.get() {
            Poll::Ready(())
        } else {
            *waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        }
    })
    .await
}
