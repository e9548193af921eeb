//! `<hml-prompt>`: an inline question with its input (text, number, color, select, checkbox,
//! checkboxes, radio, range), or the answer once given. In a stored message it can be
//! answered: Enter for text and number, an OK button for the rest (`min`, `max`, `step`
//! and `default` honoured). The answer is a frame; the prompt shows it in every tab once
//! the log has it.

use hero_shared::hml::{Element, Prompt, PromptType};
use leptos::prelude::*;
use serde_json::Value;

use super::ClientOnly;

/// Records the answer to a prompt of a stored message; `answer` is JSON text.
#[server(prefix = "/_fn")]
pub async fn answer_prompt(
    session_id: i64,
    message_id: String,
    element_id: String,
    answer: String,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let answer: Value = serde_json::from_str(&answer).map_err(|_| {
        fail(hero_backend::Error::Invalid(
            "the answer is not JSON".into(),
        ))
    })?;
    hero_backend::answers::answer(&st, &user, session_id, &message_id, &element_id, answer)
        .await
        .map_err(fail)
}

/// The stored message an element is in: where its prompt's answer goes.
#[derive(Clone, Debug)]
pub struct MessageCtx {
    pub session_id: i64,
    pub message_id: String,
}

#[component]
pub fn HmlPrompt(e: Element) -> impl IntoView {
    let e = &e;
    let id = e.id.clone();
    let Some(p) = Prompt::from_element(e) else {
        return view! { <span class="hml-orphan">{e.text()}</span> }.into_any();
    };
    if p.answered {
        return view! {
            <span class="hml hml-inline hml-prompt answered" data-hml-id=id data-hml="hml-prompt">
                <span class="hml-prompt-question">{p.question}</span>
                <span class="hml-prompt-response">{p.response.unwrap_or_default()}</span>
            </span>
        }
        .into_any();
    }
    let attr = |name: &str| {
        p.attributes
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let default = attr("default");
    // The answer as it stands, sent by Enter or OK.
    let value: RwSignal<Value> = RwSignal::new(match (p.input, &default) {
        (PromptType::Checkbox, d) => Value::Bool(d.as_deref() == Some("true")),
        (PromptType::Checkboxes, _) => Value::Array(Vec::new()),
        (_, Some(d)) => Value::String(d.clone()),
        (PromptType::Select | PromptType::Radio, None) => p
            .options
            .first()
            .map(|o| Value::String(o.value.clone()))
            .filter(|_| p.input == PromptType::Select)
            .unwrap_or(Value::Null),
        (PromptType::Color, None) => Value::String("#000000".into()),
        _ => Value::Null,
    });
    let ctx = use_context::<MessageCtx>();
    let answer = ServerAction::<AnswerPrompt>::new();
    let input = p.input;
    let submit = {
        let (ctx, id) = (ctx.clone(), id.clone());
        move || {
            let Some(ctx) = ctx.clone() else { return };
            let v = value.get_untracked();
            // Numbers go as numbers.
            let v = match (input, &v) {
                (PromptType::Number | PromptType::Range, Value::String(s)) => {
                    let s = s.trim();
                    s.parse::<i64>()
                        .ok()
                        .map(serde_json::Number::from)
                        .or_else(|| s.parse::<f64>().ok().and_then(serde_json::Number::from_f64))
                        .map_or(v.clone(), Value::Number)
                }
                _ => v,
            };
            if v.is_null() || v.as_str().is_some_and(|s| s.trim().is_empty()) {
                return;
            }
            answer.dispatch(AnswerPrompt {
                session_id: ctx.session_id,
                message_id: ctx.message_id,
                element_id: id.clone(),
                answer: v.to_string(),
            });
        }
    };
    let stored = ctx.is_some();
    let label = p.question.clone();
    let field = match input {
        PromptType::Select => {
            let options = p.options.clone();
            let label = label.clone();
            view! {
                <ClientOnly fallback=|| view! { <span class="hml-prompt-pending">"…"</span> }>
                    <select aria-label=label.clone() on:change=move |ev| value.set(Value::String(event_target_value(&ev)))>
                        {options.iter().map(|o| view! { <option value=o.value.clone()>{o.label.clone()}</option> }).collect_view()}
                    </select>
                </ClientOnly>
            }
            .into_any()
        }
        PromptType::Radio | PromptType::Checkboxes => {
            let radio = input == PromptType::Radio;
            let name = format!("prompt-{id}");
            p.options
                .iter()
                .map(|o| {
                    let v = o.value.clone();
                    let on_change = move |ev: leptos::ev::Event| {
                        let checked = event_target_checked(&ev);
                        if radio {
                            value.set(Value::String(v.clone()));
                        } else {
                            value.update(|all| {
                                let list = all.as_array_mut().expect("checkboxes hold a list");
                                list.retain(|x| x.as_str() != Some(v.as_str()));
                                if checked {
                                    list.push(Value::String(v.clone()));
                                }
                            });
                        }
                    };
                    view! {
                        <label class="hml-prompt-option">
                            <input type=if radio { "radio" } else { "checkbox" } name=name.clone() value=o.value.clone() on:change=on_change/>
                            {o.label.clone()}
                        </label>
                    }
                })
                .collect_view()
                .into_any()
        }
        PromptType::Checkbox => view! {
            <label class="hml-prompt-option">
                <input type="checkbox" checked=value.get_untracked().as_bool().unwrap_or(false)
                    on:change=move |ev| value.set(Value::Bool(event_target_checked(&ev)))/>
                {label.clone()}
            </label>
        }
        .into_any(),
        other => {
            let ty = match other {
                PromptType::Number => "number",
                PromptType::Color => "color",
                PromptType::Range => "range",
                _ => "text",
            };
            let enter = submit.clone();
            view! {
                <input type=ty placeholder=label.clone() aria-label=label.clone()
                    min=attr("min") max=attr("max") step=attr("step") value=default.clone()
                    on:input=move |ev| value.set(Value::String(event_target_value(&ev)))
                    on:keydown=move |ev| {
                        if ev.key() == "Enter" && matches!(other, PromptType::Text | PromptType::Number) {
                            ev.prevent_default();
                            enter();
                        }
                    }/>
            }
            .into_any()
        }
    };
    // Text and number are sent with Enter; the rest with OK.
    let ok = (stored && !matches!(input, PromptType::Text | PromptType::Number)).then(|| {
        let submit = submit.clone();
        view! { <button type="button" class="hml-prompt-ok" on:click=move |_| submit()>"OK"</button> }
    });
    let error = move || {
        answer.value().get().and_then(Result::err).map(
            |e| view! { <span class="msg-error" role="alert">{crate::auth::error_text(&e)}</span> },
        )
    };
    let question = (input != PromptType::Checkbox)
        .then(|| view! { <span class="hml-prompt-question">{p.question.clone()}</span> });
    view! {
        <span class="hml hml-inline hml-prompt" data-hml-id=id data-hml="hml-prompt" data-type=format!("{:?}", input).to_lowercase()>
            {question}
            {field}
            {ok}
            {error}
        </span>
    }
    .into_any()
}
