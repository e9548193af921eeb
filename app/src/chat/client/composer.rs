//! The composer's binding: the message box (Enter sends, Shift+Enter adds a line, Up in an
//! empty box edits the last message of the user's), Send and Stop, "Private", the question
//! being answered from it, an edit being made in it, and its error line.

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::Element;

use super::dom::*;
use super::*;

impl Chat {
    /// The message box: Enter sends, Shift+Enter adds a line; Stop while a reply is in
    /// flight; a question that waits for as long as it takes is answered from here.
    pub(super) fn composer(
        &self,
        live: RwSignal<Option<LiveView>>,
        conversation: RwSignal<CompiledView>,
        connected: RwSignal<bool>,
    ) {
        // The question answered from the box, if one waits (read by the effects below, each
        // run again when the conversation changes).
        let question = move || {
            conversation.with(|v| {
                hero_shared::calls::calls(&v.messages)
                    .into_iter()
                    .rev()
                    .find(|c| c.is_question() && c.request.expires_at.is_none())
            })
        };
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
            let q = question();
            c.textarea.set_placeholder(if q.is_some() {
                "Your answer to the agent's question (Enter answers)"
            } else {
                PLACEHOLDER
            });
            let banner = find(&c.root, &hooks::ANSWERING.selector());
            match (q.is_some(), banner) {
                (false, Some(b)) => b.remove(),
                (true, None) => {
                    if let Some(form) = find(&c.root, &hooks::COMPOSER.selector()) {
                        let html = hero_shared::html::answering_banner_html();
                        let _ = form.insert_adjacent_html("beforebegin", &html);
                    }
                }
                _ => {}
            }
        });
        // The box's error line.
        let c = self.clone();
        Effect::new(move |_| {
            let before = c.jump.next_element_sibling();
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
            // An edit of a message is sent as a new version of it (with the files the
            // message carried; the chips wait for the next message).
            let editing = find(&c.root, &hooks::COMPOSER.selector())
                .and_then(|f| f.get_attribute(hooks::EDITING.name()));
            let attached = match editing {
                Some(_) => Vec::new(),
                None => match super::attach::ready(&c.root) {
                    Ok(ids) => ids,
                    Err(why) => return c.error.set(Some(why)),
                },
            };
            c.near_bottom.set(true);
            c.sending.set(true);
            c.textarea.set_value("");
            let private = find(&c.root, &hooks::PRIVATE.selector())
                .and_then(|p| p.dyn_into::<HtmlInputElement>().ok())
                .is_some_and(|p| p.checked());
            let (c, q) = (c.clone(), untrack(question));
            leptos::task::spawn_local(async move {
                let result = match (editing, q) {
                    (Some(frame_id), _) => {
                        let edit = crate::chat::EditMessage {
                            session_id: c.session_id,
                            frame_id,
                            content: content.clone(),
                        };
                        let sent = crate::rpc::call(edit).await;
                        // A refused edit stays in the box, still an edit.
                        match &sent {
                            Ok(()) => end_edit(false),
                            Err(_) => c.textarea.set_value(&content),
                        }
                        sent
                    }
                    (None, Some(q)) => crate::rpc::call(actions::AnswerPrompt {
                        session_id: c.session_id,
                        message_id: q.message_id.clone(),
                        element_id: q.request.origin.element_id(),
                        answer: serde_json::Value::String(content).to_string(),
                    })
                    .await
                    .map(|_| ()),
                    (None, None) => {
                        let sent = crate::rpc::call(crate::chat::PostMessage {
                            session_id: c.session_id,
                            content,
                            private,
                            attachments: attached,
                        })
                        .await;
                        if sent.is_ok() {
                            super::attach::clear(&c.root);
                        }
                        sent.map(|_| ())
                    }
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
        let menu = find(&self.root, &hooks::COMMAND_MENU.selector());
        let (open_menu, textarea) = (menu.clone(), self.textarea.clone());
        let (stored, root) = (self.stored.clone(), self.root.clone());
        listen(
            &self.textarea,
            "keydown",
            move |ev: web_sys::KeyboardEvent| {
                // Up in an empty box edits the user's last message; Escape ends an edit.
                if ev.key() == "ArrowUp" && textarea.value().is_empty() {
                    let last = all(&stored, &edit_buttons()).pop();
                    if let Some(msg) =
                        last.and_then(|b| b.closest(&hooks::MESSAGE_ID.selector()).ok().flatten())
                    {
                        ev.prevent_default();
                        start_edit(&msg);
                    }
                }
                let editing = || {
                    find(&root, &hooks::COMPOSER.selector())
                        .is_some_and(|f| f.has_attribute(hooks::EDITING.name()))
                };
                if ev.key() == "Escape" && !ev.is_composing() && editing() {
                    end_edit(true);
                }
                if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
                    ev.prevent_default();
                    // With the `/` menu open on a command's name begun, Enter takes the first
                    // command listed into the box; a whole name typed is sent.
                    let typed = textarea.value();
                    let first = open_menu
                        .as_ref()
                        .filter(|m| !m.has_attribute("hidden"))
                        .and_then(|m| find(m, "li:not([hidden]) button"))
                        .and_then(|b| b.get_attribute(hooks::COMMAND.name()))
                        .filter(|command| command.trim_end() != typed.trim());
                    match first {
                        Some(command) => {
                            textarea.set_value(&command);
                            if let Some(m) = &open_menu {
                                set_hidden(m, true);
                            }
                        }
                        None => submit(),
                    }
                }
            },
        );
        self.command_menu(menu);
        let (session_id, error) = (self.session_id, self.error);
        let stop = move || {
            leptos::task::spawn_local(async move {
                if let Err(e) = crate::rpc::call(crate::chat::AbortTurn { session_id }).await {
                    error.set(Some(format!(
                        "Could not stop the reply: {}",
                        error_text(&e)
                    )));
                }
            })
        };
        listen(&self.stop, "click", move |_: web_sys::Event| stop());
        let dismiss = format!(
            "{} {}",
            hooks::ANSWERING.selector(),
            hooks::DISMISS.selector()
        );
        let cancel = format!(
            "{} {}",
            hooks::EDITING_BANNER.selector(),
            hooks::DISMISS.selector()
        );
        listen(&self.root, "click", move |ev: web_sys::Event| {
            let Some(target) = ev.target().and_then(|t| t.dyn_into::<Element>().ok()) else {
                return;
            };
            if target.closest(&dismiss).ok().flatten().is_some() {
                stop();
            }
            if target.closest(&cancel).ok().flatten().is_some() {
                end_edit(true);
            }
        });
    }

    /// The `/` menu: while the box holds `/` and the start of a command's name, the commands
    /// begun so are listed ([`hero_shared::command::menu`]); choosing one puts it in the box;
    /// Escape or anything else closes it.
    fn command_menu(&self, menu: Option<Element>) {
        let Some(menu) = menu else { return };
        let items: Vec<Element> = all(&menu, &hooks::COMMAND.selector());
        let show = {
            let (menu, textarea) = (menu.clone(), self.textarea.clone());
            move || {
                let shown = hero_shared::command::menu(&textarea.value());
                set_hidden(&menu, shown.is_none());
                for item in &items {
                    let command = item
                        .get_attribute(hooks::COMMAND.name())
                        .unwrap_or_default();
                    let listed = shown.as_ref().is_some_and(|s| {
                        s.iter()
                            .any(|c| command.trim_end() == format!("/{}", c.name))
                    });
                    if let Some(li) = item.parent_element() {
                        set_hidden(&li, !listed);
                    }
                }
            }
        };
        listen(&self.textarea, "input", move |_: web_sys::Event| show());
        let closing = menu.clone();
        listen(
            &self.textarea,
            "keydown",
            move |ev: web_sys::KeyboardEvent| {
                if ev.key() == "Escape" {
                    set_hidden(&closing, true);
                }
            },
        );
        let (textarea, chosen) = (self.textarea.clone(), menu.clone());
        listen(&menu, "click", move |ev: web_sys::Event| {
            let command = ev
                .target()
                .and_then(|t| t.dyn_into::<Element>().ok())
                .and_then(|t| t.get_attribute(hooks::COMMAND.name()));
            if let Some(command) = command {
                textarea.set_value(&command);
                set_hidden(&chosen, true);
                let _ = textarea.focus();
            }
        });
    }
}

/// The selector of the "Edit" buttons of the user's messages.
fn edit_buttons() -> String {
    format!(
        "[{}=\"{}\"]",
        hooks::ACTION.name(),
        hooks::Action::Edit.as_str()
    )
}

/// Puts the user's message `msg` in the message box, to be sent changed as a new
/// version of it: the box's form names the message it edits, and a banner says so.
pub(super) fn start_edit(msg: &Element) {
    let (Some(frame_id), Some(form)) = (
        msg.get_attribute(hooks::MESSAGE_ID.name()),
        document()
            .query_selector(&hooks::COMPOSER.selector())
            .ok()
            .flatten(),
    ) else {
        return;
    };
    let text = msg
        .query_selector(".msg-body")
        .ok()
        .flatten()
        .and_then(|b| b.text_content())
        .unwrap_or_default();
    let Some(textarea) = form
        .query_selector("textarea")
        .ok()
        .flatten()
        .and_then(|t| t.dyn_into::<web_sys::HtmlTextAreaElement>().ok())
    else {
        return;
    };
    textarea.set_value(&text);
    let _ = form.set_attribute(hooks::EDITING.name(), &frame_id);
    let banner = document()
        .query_selector(&hooks::EDITING_BANNER.selector())
        .ok()
        .flatten();
    if banner.is_none() {
        let html = hero_shared::html::editing_banner_html();
        let _ = form.insert_adjacent_html("beforebegin", &html);
    }
    let _ = textarea.focus();
}

/// The message box no longer edits a message (what it holds stays, unless `clear`).
fn end_edit(clear: bool) {
    let doc = document();
    if let Some(form) = doc
        .query_selector(&hooks::COMPOSER.selector())
        .ok()
        .flatten()
    {
        let _ = form.remove_attribute(hooks::EDITING.name());
        if clear
            && let Some(t) = form
                .query_selector("textarea")
                .ok()
                .flatten()
                .and_then(|t| t.dyn_into::<web_sys::HtmlTextAreaElement>().ok())
        {
            t.set_value("");
        }
    }
    if let Some(b) = doc
        .query_selector(&hooks::EDITING_BANNER.selector())
        .ok()
        .flatten()
    {
        b.remove();
    }
}
