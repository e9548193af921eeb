//! What acts inside the conversation, which is HTML from the shared renderer
//! ([`hero_shared::html`]): the server functions its buttons and fields call, and, in the
//! browser, the one delegated listener of the message list that reads `data-action` and the
//! fields around it. Also the two things the HTML cannot do by itself: carrying what was
//! typed across a message drawn again (`data-keep`), and a timed question's countdown.

use leptos::prelude::*;

/// Records the answer to a prompt or a question of a stored message; `answer` is JSON text.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn answer_prompt(
    session_id: i64,
    message_id: String,
    element_id: String,
    answer: String,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let answer: serde_json::Value = serde_json::from_str(&answer).map_err(|_| {
        fail(hero_backend::Error::Invalid(
            "the answer is not JSON".into(),
        ))
    })?;
    hero_backend::conversation::answers::answer(
        &st,
        &user,
        session_id,
        &message_id,
        &element_id,
        answer,
    )
    .await
    .map_err(fail)
}

/// The user's decision on a call waiting for it.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn decide_call(
    session_id: i64,
    request_id: String,
    approved: bool,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::conversation::turn::decide(&st, &user, session_id, &request_id, approved)
        .await
        .map(|_| ())
        .map_err(fail)
}

/// Sets the call's function to `always` for this user, then approves the call.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn always_allow(
    session_id: i64,
    request_id: String,
    function: String,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::execution::permissions::set(
        &st,
        &user,
        &function,
        hero_shared::calls::Permission::Always,
    )
    .await
    .map_err(fail)?;
    hero_backend::conversation::turn::decide(&st, &user, session_id, &request_id, true)
        .await
        .map(|_| ())
        .map_err(fail)
}

/// A prompt's answer from its fields: `kind` is its `data-type`; `values` its fields'
/// values and whether each is checked, in order. `None` while there is nothing to send.
pub fn prompt_answer(kind: &str, values: &[(String, bool)]) -> Option<serde_json::Value> {
    use serde_json::Value;
    let first = values.first();
    let v = match kind {
        "checkbox" => Value::Bool(first.is_some_and(|(_, c)| *c)),
        "checkboxes" => Value::Array(
            values
                .iter()
                .filter(|(_, c)| *c)
                .map(|(v, _)| Value::String(v.clone()))
                .collect(),
        ),
        "radio" => Value::String(values.iter().find(|(_, c)| *c)?.0.clone()),
        "number" | "range" => {
            let s = first?.0.trim();
            s.parse::<i64>()
                .ok()
                .map(serde_json::Number::from)
                .or_else(|| s.parse::<f64>().ok().and_then(serde_json::Number::from_f64))
                .map_or_else(|| Value::String(s.to_owned()), Value::Number)
        }
        _ => Value::String(first?.0.clone()),
    };
    (!v.as_str().is_some_and(|s| s.trim().is_empty())).then_some(v)
}

#[cfg(feature = "hydrate")]
pub use browser::{Kept, countdowns, keep, on_click, on_keydown, restore};

#[cfg(feature = "hydrate")]
mod browser {
    use std::collections::HashMap;

    use leptos::prelude::*;
    use wasm_bindgen::JsCast;
    use web_sys::{Element, HtmlInputElement};

    use hero_shared::hooks::{self, Action};

    use super::prompt_answer;
    use crate::auth::error_text;

    /// What was typed in the fields under each `data-keep` key, and which field had focus.
    #[derive(Default)]
    pub struct Kept {
        fields: HashMap<String, Vec<(String, bool)>>,
        focus: Option<(String, u32, Option<u32>, Option<u32>)>,
    }

    fn fields(root: &Element) -> Vec<Element> {
        let mut out = Vec::new();
        if let Ok(list) = root.query_selector_all("input, select, textarea") {
            for i in 0..list.length() {
                if let Some(e) = list.item(i).and_then(|n| n.dyn_into::<Element>().ok()) {
                    out.push(e);
                }
            }
        }
        out
    }

    fn value_of(e: &Element) -> (String, bool) {
        if let Some(i) = e.dyn_ref::<HtmlInputElement>() {
            return (i.value(), i.checked());
        }
        if let Some(s) = e.dyn_ref::<web_sys::HtmlSelectElement>() {
            return (s.value(), false);
        }
        (String::new(), false)
    }

    fn set_value(e: &Element, (value, checked): &(String, bool)) {
        if let Some(i) = e.dyn_ref::<HtmlInputElement>() {
            if i.value() != *value {
                i.set_value(value);
            }
            i.set_checked(*checked);
        } else if let Some(s) = e.dyn_ref::<web_sys::HtmlSelectElement>() {
            s.set_value(value);
        }
    }

    /// Reads what is typed under every `data-keep` inside `root`.
    pub fn keep(root: &Element) -> Kept {
        let mut kept = Kept::default();
        let active = document().active_element();
        let Ok(list) = root.query_selector_all(&hooks::KEEP.selector()) else {
            return kept;
        };
        for i in 0..list.length() {
            let Some(block) = list.item(i).and_then(|n| n.dyn_into::<Element>().ok()) else {
                continue;
            };
            let Some(key) = block.get_attribute(hooks::KEEP.name()) else {
                continue;
            };
            let fs = fields(&block);
            if let Some(a) = &active
                && let Some(at) = fs.iter().position(|f| f == a)
            {
                let (start, end) = a.dyn_ref::<HtmlInputElement>().map_or((None, None), |i| {
                    (
                        i.selection_start().ok().flatten(),
                        i.selection_end().ok().flatten(),
                    )
                });
                kept.focus = Some((key.clone(), at as u32, start, end));
            }
            kept.fields.insert(key, fs.iter().map(value_of).collect());
        }
        kept
    }

    /// Puts back what [`keep`] read, where the same key has the same fields, and the focus.
    pub fn restore(root: &Element, kept: &Kept) {
        let Ok(list) = root.query_selector_all(&hooks::KEEP.selector()) else {
            return;
        };
        for i in 0..list.length() {
            let Some(block) = list.item(i).and_then(|n| n.dyn_into::<Element>().ok()) else {
                continue;
            };
            let Some(key) = block.get_attribute(hooks::KEEP.name()) else {
                continue;
            };
            let Some(values) = kept.fields.get(&key) else {
                continue;
            };
            let fs = fields(&block);
            if fs.len() != values.len() {
                continue;
            }
            for (f, v) in fs.iter().zip(values) {
                set_value(f, v);
            }
            if let Some((k, at, start, end)) = &kept.focus
                && *k == key
                && let Some(f) = fs.get(*at as usize)
                && document().active_element().as_ref() != Some(f)
                && let Some(h) = f.dyn_ref::<web_sys::HtmlElement>()
            {
                let _ = h.focus();
                if let (Some(i), Some(s), Some(e)) = (f.dyn_ref::<HtmlInputElement>(), start, end) {
                    let _ = i.set_selection_range(*s, *e);
                }
            }
        }
    }

    /// Fills in every timed question's countdown under `root`, from its `data-expires-at`.
    pub fn countdowns(root: &Element) {
        let Ok(list) = root.query_selector_all(&hooks::EXPIRES_AT.selector()) else {
            return;
        };
        let now = js_sys::Date::now() as i64;
        for i in 0..list.length() {
            let Some(el) = list.item(i).and_then(|n| n.dyn_into::<Element>().ok()) else {
                continue;
            };
            let Some(at) = el
                .get_attribute(hooks::EXPIRES_AT.name())
                .and_then(|s| s.parse::<i64>().ok())
            else {
                continue;
            };
            let default = el.get_attribute(hooks::DEFAULT.name());
            let (left, text) = hero_shared::html::countdown_text(at - now, default.as_deref());
            if el.text_content().as_deref() != Some(text.as_str()) {
                el.set_text_content(Some(&text));
                let _ = el.set_attribute("data-left", &left.to_string());
            }
        }
    }

    fn closest(e: &Element, selector: &str) -> Option<Element> {
        e.closest(selector).ok().flatten()
    }

    /// Shows `err` (or clears it) in the block's error line, made when first needed (its own
    /// class: a stored reply's own error line is not the action's).
    fn show_error(block: &Element, err: Option<String>) {
        let line = block
            .query_selector(":scope > .action-error")
            .ok()
            .flatten();
        match (line, err) {
            (Some(l), None) => l.remove(),
            (Some(l), Some(e)) => l.set_text_content(Some(&e)),
            (None, Some(e)) => {
                if let Ok(l) = document().create_element("div") {
                    let _ = l.set_attribute("class", "msg-error action-error");
                    let _ = l.set_attribute("role", "alert");
                    l.set_text_content(Some(&e));
                    let _ = block.append_child(&l);
                }
            }
            (None, None) => {}
        }
    }

    /// Runs `call` for `block` once at a time, and shows its error there.
    fn send<F>(block: Element, call: F)
    where
        F: std::future::Future<Output = Result<(), ServerFnError>> + 'static,
    {
        if block.get_attribute("aria-busy").as_deref() == Some("true") {
            return;
        }
        let _ = block.set_attribute("aria-busy", "true");
        leptos::task::spawn_local(async move {
            let result = call.await;
            let _ = block.remove_attribute("aria-busy");
            show_error(&block, result.err().map(|e| error_text(&e)));
        });
    }

    /// Sends the answer of the prompt or question `block` (`[data-hml]` with
    /// `data-message`); `given` is a question option's answer.
    fn answer(session_id: i64, block: Element, given: Option<String>) {
        let (Some(message_id), Some(element_id)) = (
            block.get_attribute(hooks::MESSAGE.name()),
            block.get_attribute(hooks::HML_ID.name()),
        ) else {
            return;
        };
        let value = match block.get_attribute(hooks::TYPE.name()) {
            // A prompt: from its fields.
            Some(kind) => {
                let values: Vec<_> = fields(&block).iter().map(value_of).collect();
                prompt_answer(&kind, &values)
            }
            // A question: the option, or what was typed.
            None => given
                .or_else(|| fields(&block).first().map(|f| value_of(f).0))
                .filter(|s| !s.trim().is_empty())
                .map(serde_json::Value::String),
        };
        let Some(value) = value else { return };
        send(
            block,
            crate::rpc::call(super::AnswerPrompt {
                session_id,
                message_id,
                element_id,
                answer: value.to_string(),
            }),
        );
    }

    /// An element of a message (a prompt, a question), as drawn.
    fn element_selector() -> String {
        format!("{}{}", hooks::HML.selector(), hooks::MESSAGE.selector())
    }

    /// A click in the message list: the `data-action` of the button it landed on.
    pub fn on_click(session_id: i64, ev: web_sys::MouseEvent) {
        let Some(target) = ev.target().and_then(|t| t.dyn_into::<Element>().ok()) else {
            return;
        };
        let Some(button) = closest(&target, &hooks::ACTION.selector()) else {
            return;
        };
        let action = button
            .get_attribute(hooks::ACTION.name())
            .unwrap_or_default();
        let Some(action) = Action::parse(&action) else {
            return;
        };
        // A dangerous function let run without asking is asked about first.
        if let Some(question) = button.get_attribute(hooks::CONFIRM.name())
            && !window().confirm_with_message(&question).unwrap_or(false)
        {
            return;
        }
        match action {
            Action::Copy => copy(&button),
            Action::Prompt | Action::Ask => {
                if let Some(block) = closest(&button, &element_selector()) {
                    answer(
                        session_id,
                        block,
                        button.get_attribute(hooks::ANSWER.name()),
                    );
                }
            }
            Action::Approve | Action::Deny | Action::Always => {
                let Some(card) = closest(&button, &hooks::CALL.selector()) else {
                    return;
                };
                let request_id = card.get_attribute(hooks::CALL.name()).unwrap_or_default();
                if action == Action::Always {
                    let function = card
                        .get_attribute(hooks::FUNCTION.name())
                        .unwrap_or_default();
                    send(
                        card,
                        crate::rpc::call(super::AlwaysAllow {
                            session_id,
                            request_id,
                            function,
                        }),
                    );
                } else {
                    send(
                        card,
                        crate::rpc::call(super::DecideCall {
                            session_id,
                            request_id,
                            approved: action == Action::Approve,
                        }),
                    );
                }
            }
            Action::Hide => {
                let frame_id = button
                    .get_attribute(hooks::FRAME.name())
                    .unwrap_or_default();
                let hidden = button.get_attribute(hooks::HIDDEN.name()).as_deref() == Some("true");
                if let Some(msg) = closest(&button, &hooks::MESSAGE_ID.selector()) {
                    send(
                        msg,
                        crate::rpc::call(super::super::SetHidden {
                            session_id,
                            frame_id,
                            hidden: !hidden,
                        }),
                    );
                }
            }
            // "Show earlier", "Edit" and the panel's "Close" are the message list's own
            // (`client`).
            Action::Earlier | Action::Edit | Action::ClosePanel => {}
            Action::Regenerate | Action::Version => {
                let frame_id = button
                    .get_attribute(hooks::FRAME.name())
                    .unwrap_or_default();
                let Some(msg) = closest(&button, &hooks::MESSAGE_ID.selector()) else {
                    return;
                };
                if action == Action::Regenerate {
                    send(
                        msg,
                        crate::rpc::call(super::super::RegenerateReply {
                            session_id,
                            frame_id,
                        }),
                    );
                } else if let Some(version) = button
                    .get_attribute(hooks::VERSION.name())
                    .and_then(|v| v.parse().ok())
                {
                    send(
                        msg,
                        crate::rpc::call(super::super::ShowVersion {
                            session_id,
                            frame_id,
                            version,
                        }),
                    );
                }
            }
            Action::Branch => {
                let frame_id = button
                    .get_attribute(hooks::FRAME.name())
                    .unwrap_or_default();
                let Some(msg) = closest(&button, &hooks::MESSAGE_ID.selector()) else {
                    return;
                };
                leptos::task::spawn_local(async move {
                    match crate::rpc::call(super::super::BranchSession {
                        session_id,
                        frame_id,
                    })
                    .await
                    {
                        Ok(id) => {
                            if let Some(w) = web_sys::window() {
                                let _ = w
                                    .location()
                                    .set_href(&crate::base::href(&format!("/s/{id}")));
                            }
                        }
                        Err(e) => show_error(&msg, Some(error_text(&e))),
                    }
                });
            }
        }
    }

    /// Enter in a prompt's text or number field, or in a question's own-answer field, sends.
    pub fn on_keydown(session_id: i64, ev: web_sys::KeyboardEvent) {
        if ev.key() != "Enter" || ev.is_composing() {
            return;
        }
        let Some(input) = ev
            .target()
            .and_then(|t| t.dyn_into::<HtmlInputElement>().ok())
        else {
            return;
        };
        let Some(block) = closest(&input, &element_selector()) else {
            return;
        };
        let sends = match block.get_attribute(hooks::TYPE.name()).as_deref() {
            Some(kind) => matches!(kind, "text" | "number"),
            None => input.type_() == "text",
        };
        if sends {
            ev.prevent_default();
            answer(session_id, block, None);
        }
    }

    /// Copies the text of the `<code>` beside the button, and says so for a moment.
    fn copy(button: &Element) {
        let Some(code) = closest(
            button,
            &format!(
                "{}, {}",
                hooks::CODE_BLOCK.selector(),
                hooks::HML_COPY.selector()
            ),
        )
        .and_then(|b| b.query_selector("code").ok().flatten()) else {
            return;
        };
        let _ = window()
            .navigator()
            .clipboard()
            .write_text(&code.text_content().unwrap_or_default());
        button.set_text_content(Some("Copied"));
        let (button, label) = (
            button.clone(),
            button
                .get_attribute(hooks::LABEL.name())
                .unwrap_or_default(),
        );
        set_timeout(
            move || button.set_text_content(Some(&label)),
            std::time::Duration::from_millis(1500),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::prompt_answer;
    use serde_json::json;

    fn v(items: &[(&str, bool)]) -> Vec<(String, bool)> {
        items.iter().map(|(s, c)| (s.to_string(), *c)).collect()
    }

    #[test]
    fn a_prompts_answer_from_its_fields() {
        assert_eq!(
            prompt_answer("text", &v(&[("Ada", false)])),
            Some(json!("Ada"))
        );
        assert_eq!(prompt_answer("text", &v(&[("  ", false)])), None);
        assert_eq!(prompt_answer("number", &v(&[("7", false)])), Some(json!(7)));
        assert_eq!(
            prompt_answer("range", &v(&[("2.5", false)])),
            Some(json!(2.5))
        );
        assert_eq!(
            prompt_answer("checkbox", &v(&[("on", true)])),
            Some(json!(true))
        );
        assert_eq!(
            prompt_answer("checkboxes", &v(&[("a", true), ("b", false), ("c", true)])),
            Some(json!(["a", "c"]))
        );
        assert_eq!(
            prompt_answer("radio", &v(&[("x", false), ("y", true)])),
            Some(json!("y"))
        );
        assert_eq!(prompt_answer("radio", &v(&[("x", false)])), None);
        assert_eq!(
            prompt_answer("select", &v(&[("green", false)])),
            Some(json!("green"))
        );
    }
}
