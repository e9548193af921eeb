//! `<hml-prompt>`: an inline question with its input (text, number, color, select, checkbox,
//! checkboxes, radio, range), or the answer once given.

use hero_shared::hml::{Element, Prompt, PromptType};
use leptos::prelude::*;

use super::ClientOnly;

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
    let input = match p.input {
        PromptType::Select => {
            let (label, options) = (p.question.clone(), p.options.clone());
            view! {
                <ClientOnly fallback=|| view! { <span class="hml-prompt-pending">"…"</span> }>
                    <select aria-label=label.clone()>
                        {options.iter().map(|o| view! { <option value=o.value.clone()>{o.label.clone()}</option> }).collect_view()}
                    </select>
                </ClientOnly>
            }
            .into_any()
        }
        PromptType::Radio | PromptType::Checkboxes => {
            let ty = if p.input == PromptType::Radio {
                "radio"
            } else {
                "checkbox"
            };
            let name = format!("prompt-{id}");
            p.options
                .iter()
                .map(|o| view! { <label class="hml-prompt-option"><input type=ty name=name.clone() value=o.value.clone()/>{o.label.clone()}</label> })
                .collect_view()
                .into_any()
        }
        other => {
            let ty = match other {
                PromptType::Number => "number",
                PromptType::Color => "color",
                PromptType::Checkbox => "checkbox",
                PromptType::Range => "range",
                _ => "text",
            };
            view! { <input type=ty placeholder=p.question.clone() aria-label=p.question.clone()/> }
                .into_any()
        }
    };
    view! {
        <span class="hml hml-inline hml-prompt" data-hml-id=id data-hml="hml-prompt">
            <span class="hml-prompt-question">{p.question}</span>
            {input}
        </span>
    }
    .into_any()
}
