//! One component per HML element, each in a module of its own; this module dispatches on
//! the element's kind. Model text only ever reaches the DOM through these (which escape) or
//! through [`super::markdown`] (which sanitizes). Unknown tags never get here: the parser
//! keeps them as text.

pub mod ask;
mod copy;
mod executable;
mod link;
mod progress;
pub mod prompt;
mod result;
mod thinking;
mod todo;

use hero_shared::hml::{Element, ElementKind, Node};
use leptos::prelude::*;

use super::markdown::Markdown;
/// Renders parsed nodes: prose as markdown, elements as their components.
pub fn nodes_view(nodes: Vec<Node>, live: bool) -> impl IntoView {
    nodes
        .into_iter()
        .map(|n| match n {
            Node::Text(t) => view! { <Markdown src=Signal::stored(t)/> }.into_any(),
            Node::Element(e) => element_view(e, live),
        })
        .collect_view()
}

/// `href` only when it is http(s) or mailto: anything else (javascript:, data:) is shown
/// as plain text.
pub(crate) fn safe_href(href: &str) -> Option<String> {
    let h = href.trim();
    let lower = h.to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://") || lower.starts_with("mailto:"))
        .then(|| h.to_owned())
}

pub(crate) fn status_class(prefix: &str, status: Option<&str>) -> String {
    let s: String = status
        .unwrap_or("none")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(24)
        .collect();
    format!("{prefix} status-{s}")
}

/// One element. `live`: its reply is still streaming (an open element is in progress, not
/// truncated).
pub fn element_view(e: Element, live: bool) -> AnyView {
    match e.kind {
        ElementKind::Thinking => view! { <thinking::Thinking e live/> }.into_any(),
        ElementKind::Todo => view! { <todo::Todo e live/> }.into_any(),
        ElementKind::Progress => view! { <progress::Progress e/> }.into_any(),
        ElementKind::Link => view! { <link::Link e/> }.into_any(),
        ElementKind::Copy => view! { <copy::Copy e/> }.into_any(),
        ElementKind::Result => view! { <result::Result e/> }.into_any(),
        ElementKind::HmlPrompt => view! { <prompt::HmlPrompt e/> }.into_any(),
        ElementKind::Ask => view! { <ask::Ask e live/> }.into_any(),
        ElementKind::Bash | ElementKind::Websearch | ElementKind::Interaction => {
            view! { <executable::Executable e live/> }.into_any()
        }
        // Only meaningful inside their parents, which render them.
        ElementKind::Item | ElementKind::Data | ElementKind::Response => {
            view! { <span class="hml-orphan">{e.text()}</span> }.into_any()
        }
    }
}

/// Renders `fallback` on the server and while hydrating, then `children` in the browser.
///
/// For `<select>`: Chromium's parser (customizable select) moves the comment markers Leptos
/// leaves in server-rendered markup out of a `<select>`, so hydrating one fails; a select
/// made in the browser has no such problem.
#[component]
pub fn ClientOnly<F, FV>(fallback: F, children: ChildrenFn) -> impl IntoView
where
    F: Fn() -> FV + Send + Sync + 'static,
    FV: IntoView + 'static,
{
    let mounted = RwSignal::new(false);
    Effect::new(move |_| mounted.set(true));
    move || {
        if mounted.get() {
            children().into_any()
        } else {
            fallback().into_any()
        }
    }
}
