//! One component per HML element. Model text only ever reaches the DOM through these (which
//! escape) or through [`super::markdown`] (which sanitizes). Unknown tags never get here:
//! the parser keeps them as text.

use hero_shared::hml::{Element, ElementKind, Node, Prompt, PromptType};
use leptos::prelude::*;

use super::markdown::{CopyButton, Markdown};

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
fn safe_href(href: &str) -> Option<String> {
    let h = href.trim();
    let lower = h.to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://") || lower.starts_with("mailto:"))
        .then(|| h.to_owned())
}

fn status_class(prefix: &str, status: Option<&str>) -> String {
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
    let id = e.id.clone();
    let open = e.truncated && live;
    match e.kind {
        ElementKind::Thinking => {
            let label = if open { "Thinking…" } else { "Thought" };
            view! {
                <details class="hml hml-thinking" class:live=open data-hml-id=id data-hml="thinking">
                    <summary>{label}</summary>
                    <div class="hml-body">{nodes_view(e.children, live)}</div>
                </details>
            }
            .into_any()
        }
        ElementKind::Todo => {
            let title = e.attr("title").unwrap_or("Tasks").to_owned();
            let items: Vec<Element> = e
                .children
                .into_iter()
                .filter_map(|n| match n {
                    Node::Element(i) if i.kind == ElementKind::Item => Some(i),
                    _ => None,
                })
                .collect();
            view! {
                <div class="hml hml-todo" data-hml-id=id data-hml="todo">
                    <div class="hml-todo-title">{title}</div>
                    <ul>
                        {items.into_iter().map(|i| {
                            let status = i.attr("status").unwrap_or("pending").to_owned();
                            let mark = match status.as_str() {
                                "done" | "completed" => "✓",
                                "in_progress" | "in-progress" | "active" => "◐",
                                "failed" | "error" => "✗",
                                _ => "○",
                            };
                            view! {
                                <li class=status_class("hml-item", Some(&status)) data-status=status.clone()>
                                    <span class="hml-item-mark" aria-hidden="true">{mark}</span>
                                    <span class="hml-item-text">{nodes_view(i.children, live)}</span>
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                </div>
            }
            .into_any()
        }
        ElementKind::Progress => {
            let max = e
                .attr("max")
                .and_then(|m| m.trim().parse::<f64>().ok())
                .filter(|m| *m > 0.0)
                .unwrap_or(100.0);
            let value = e
                .attr("value")
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
                .clamp(0.0, max);
            let status = e.attr("status").map(str::to_owned);
            let pct = format!("{:.0}%", value / max * 100.0);
            view! {
                <div class="hml hml-progress" data-hml-id=id data-hml="progress">
                    <progress max=max value=value></progress>
                    <span class="hml-progress-label">{status.map(|s| format!("{s} · ")).unwrap_or_default()}{pct}</span>
                </div>
            }
            .into_any()
        }
        ElementKind::Link => {
            let text = e.text();
            let label = if text.trim().is_empty() {
                e.attr("href").unwrap_or("link").to_owned()
            } else {
                text
            };
            match e.attr("href").and_then(safe_href) {
                Some(href) => view! {
                    <a class="hml hml-inline hml-link" href=href target="_blank" rel="noopener noreferrer nofollow" data-hml-id=id data-hml="link">{label}</a>
                }
                .into_any(),
                None => view! { <span class="hml hml-inline hml-link unsafe" data-hml-id=id data-hml="link">{label}</span> }.into_any(),
            }
        }
        ElementKind::Copy => {
            let text = e.text();
            let label = e.attr("label").unwrap_or("Copy").to_owned();
            view! {
                <span class="hml hml-inline hml-copy" data-hml-id=id data-hml="copy">
                    <code>{text.clone()}</code>
                    <CopyButton text label/>
                </span>
            }
            .into_any()
        }
        ElementKind::Result => {
            let status = e.attr("status").map(str::to_owned);
            let target = e.attr("for").map(str::to_owned);
            let class = status_class("hml hml-result", status.as_deref());
            view! {
                <div class=class data-hml-id=id data-hml="result">
                    <div class="hml-result-head">
                        "Result"{target.map(|t| format!(" · {t}"))}{status.map(|s| format!(" · {s}"))}
                    </div>
                    <pre>{e.text()}</pre>
                </div>
            }
            .into_any()
        }
        ElementKind::HmlPrompt => prompt_view(&e),
        ElementKind::Bash
        | ElementKind::Websearch
        | ElementKind::Ask
        | ElementKind::Interaction => {
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
            let state = if open {
                "being written…"
            } else if e.error.is_some() {
                "too large: not run"
            } else if e.truncated {
                "cut off: never run"
            } else {
                "recognised: not run"
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
        // Only meaningful inside their parents, which render them.
        ElementKind::Item | ElementKind::Data | ElementKind::Response => {
            view! { <span class="hml-orphan">{e.text()}</span> }.into_any()
        }
    }
}

fn prompt_view(e: &Element) -> AnyView {
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
