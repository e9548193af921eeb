//! `<thinking>`: the agent's musings, folded; "Thinking…" while they stream.

use hero_shared::hml::Element;
use leptos::prelude::*;

use super::nodes_view;

#[component]
pub fn Thinking(e: Element, live: bool) -> impl IntoView {
    let id = e.id.clone();
    let open = e.truncated && live;
    let label = if open { "Thinking…" } else { "Thought" };
    view! {
        <details class="hml hml-thinking" class:live=open data-hml-id=id data-hml="thinking">
            <summary>{label}</summary>
            <div class="hml-body">{nodes_view(e.children, live)}</div>
        </details>
    }
    .into_any()
}
