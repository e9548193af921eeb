//! `<todo>` and its `<item>`s: a task list with each item's status.

use hero_shared::hml::{Element, ElementKind, Node};
use leptos::prelude::*;

use super::{nodes_view, status_class};

#[component]
pub fn Todo(e: Element, live: bool) -> impl IntoView {
    let id = e.id.clone();
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
