//! The executable elements (`<bash>`, `<websearch>`, `<ask>`, `<interaction>`): a card with
//! what would run and its state (being written, cut off, waiting for approval, run).

use hero_shared::hml::{Element, ElementKind};
use leptos::prelude::*;

#[component]
pub fn Executable(e: Element, live: bool) -> impl IntoView {
    let id = e.id.clone();
    let open = e.truncated && live;
    let kind = e.kind.name();
    let detail = match e.kind {
        ElementKind::Bash => [
            e.attr("cwd").map(|c| format!("in {c}")),
            e.attr("timeout").map(|t| format!("timeout {t}")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" · "),
        _ => String::new(),
    };
    // The call the element stands for, if it made one (a stored message's cards).
    let call = use_context::<crate::chat::calls::MessageCalls>()
        .and_then(|c| c.of_element(&e.id).map(|c| c.state()));
    let state = if open {
        "being written…"
    } else if e.error.is_some() {
        "too large: not run"
    } else if e.truncated {
        "cut off: never run"
    } else {
        call.unwrap_or("recognised: not run")
    };
    let state_class = if open {
        "streaming"
    } else if e.truncated || e.error.is_some() {
        "truncated"
    } else {
        "ready"
    };
    view! {
        <div class=format!("hml hml-exec exec-{state_class}") data-hml-id=id data-hml=kind>
            <div class="hml-exec-head">
                <span class="hml-exec-kind">{kind}</span>
                <span class="hml-exec-detail">{detail}</span>
                <span class="hml-exec-state">{state}</span>
            </div>
            <pre>{e.content.clone()}</pre>
        </div>
    }
    .into_any()
}
