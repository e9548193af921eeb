//! `<ask>`: a question of the agent's, waiting for the user's answer. While it waits it
//! offers its options as buttons and a field for any other answer; a timed one counts down
//! to its default (the server takes the default when the time is up, whether or not a page
//! is open). A demand question also turns the composer into its answer box. Once answered,
//! it shows the answer; the state comes from the log (its call's request and result), so
//! every tab, and a reload, shows the same.

use hero_shared::calls::{CallView, Outcome};
use hero_shared::hml::Element;
use leptos::prelude::*;
use serde_json::Value;

use super::ClientOnly;
use super::prompt::{AnswerPrompt, MessageCtx};

/// Now, in Unix milliseconds, by the browser's clock (the server renders no countdown).
fn now_ms() -> i64 {
    #[cfg(feature = "hydrate")]
    {
        js_sys::Date::now() as i64
    }
    #[cfg(not(feature = "hydrate"))]
    {
        0
    }
}

#[component]
pub fn Ask(e: Element, live: bool) -> impl IntoView {
    let call = use_context::<crate::chat::calls::MessageCalls>()
        .and_then(|c| c.of_element(&e.id).cloned());
    let ctx = use_context::<MessageCtx>();
    let (Some(c), Some(ctx)) = (call, ctx) else {
        // Still being written, or never a question (cut off, not valid): the executable card.
        return view! { <super::executable::Executable e live/> }.into_any();
    };
    let id = e.id.clone();
    let arg = |k: &str| {
        c.request
            .args
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let question = arg("question").unwrap_or_else(|| e.content.trim().to_owned());
    if !c.is_question() {
        let (class, shown) = match &c.result {
            Some(r) if r.outcome == Outcome::Ok => ("answered", r.output.clone()),
            _ => ("closed", c.state().to_owned()),
        };
        return view! {
            <div class=format!("hml hml-ask {class}") data-hml-id=id data-hml="ask">
                <div class="hml-ask-question">{question}</div>
                <div class="hml-ask-answer" data-testid="ask-answer">{shown}</div>
            </div>
        }
        .into_any();
    }
    view! { <Waiting c ctx element_id=id question/> }.into_any()
}

/// Answers being typed into questions, by request id: kept by the chat view, so that a
/// message drawn again does not lose them.
#[derive(Clone, Copy, Default)]
pub struct Drafts(pub StoredValue<std::collections::HashMap<String, String>>);

/// A question still waiting: its options, a field for another answer, its countdown. In
/// its `<ask>` element, or, for a question asked through a native tool call (no element in
/// the text stands for it), in its call's card.
#[component]
pub fn Waiting(
    c: CallView,
    ctx: MessageCtx,
    element_id: String,
    question: String,
) -> impl IntoView {
    let answer = ServerAction::<AnswerPrompt>::new();
    // What is typed outlives a re-render of the message (a frame of another call arriving).
    let drafts = use_context::<Drafts>();
    let key = c.request_id.clone();
    let draft = RwSignal::new(
        drafts
            .as_ref()
            .and_then(|d| d.0.with_value(|m| m.get(&key).cloned()))
            .unwrap_or_default(),
    );
    if let Some(d) = drafts {
        Effect::new(move |_| {
            let text = draft.get();
            d.0.update_value(|m| {
                m.insert(key.clone(), text);
            });
        });
    }
    let send = {
        let (ctx, element_id) = (ctx.clone(), element_id.clone());
        move |text: String| {
            if text.trim().is_empty() || answer.pending().get_untracked() {
                return;
            }
            answer.dispatch(AnswerPrompt {
                session_id: ctx.session_id,
                message_id: ctx.message_id.clone(),
                element_id: element_id.clone(),
                answer: Value::String(text).to_string(),
            });
        }
    };
    let options: Vec<String> = c
        .request
        .args
        .get("options")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    let default = c
        .request
        .args
        .get("default")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let buttons = options
        .into_iter()
        .map(|o| {
            let send = send.clone();
            let pick = o.clone();
            view! { <button type="button" class="ask-option" on:click=move |_| send(pick.clone())>{o}</button> }
        })
        .collect_view();
    let countdown = c.request.expires_at.map(|at| {
        view! {
            <ClientOnly fallback=|| ()>
                <Countdown expires_at=at default=default.clone()/>
            </ClientOnly>
        }
    });
    let note = c
        .request
        .expires_at
        .is_none()
        .then(|| view! { <div class="hml-ask-note">"The agent waits for your answer: answer here or in the message box."</div> });
    let enter = send.clone();
    let error = move || {
        answer.value().get().and_then(Result::err).map(
            |e| view! { <div class="msg-error" role="alert">{crate::auth::error_text(&e)}</div> },
        )
    };
    view! {
        <div class="hml hml-ask asking" data-hml-id=element_id data-hml="ask">
            <div class="hml-ask-question">{question}</div>
            <div class="hml-ask-options">{buttons}</div>
            <div class="hml-ask-own">
                <input type="text" aria-label="Your answer" placeholder="Your answer (Enter sends)"
                    prop:value=move || draft.get()
                    on:input=move |ev| draft.set(event_target_value(&ev))
                    on:keydown=move |ev| {
                        if ev.key() == "Enter" && !ev.is_composing() {
                            ev.prevent_default();
                            enter(draft.get_untracked());
                        }
                    }/>
                <button type="button" class="ask-send" on:click=move |_| send(draft.get_untracked())>"Answer"</button>
            </div>
            {countdown}
            {note}
            {error}
        </div>
    }
}

/// The seconds left before a timed question takes its default.
#[component]
fn Countdown(expires_at: i64, default: Option<String>) -> impl IntoView {
    let now = RwSignal::new(now_ms());
    #[cfg(feature = "hydrate")]
    if let Ok(h) = set_interval_with_handle(
        move || now.set(now_ms()),
        std::time::Duration::from_millis(250),
    ) {
        on_cleanup(move || h.clear());
    }
    let then = match default {
        Some(d) => format!("“{d}” is the answer"),
        None => "the question closes".to_owned(),
    };
    move || {
        let left = ((expires_at - now.get()).max(0) as u64).div_ceil(1000);
        let text = if left == 0 {
            format!("Time is up: {then}.")
        } else {
            format!("{then} in {left} s")
        };
        view! { <div class="hml-ask-countdown" data-testid="ask-countdown" data-left=left>{text}</div> }
    }
}
