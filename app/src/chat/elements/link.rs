//! `<link>`: a link, only to http(s) or mailto; anything else is shown as text.

use hero_shared::hml::Element;
use leptos::prelude::*;

use super::safe_href;

#[component]
pub fn Link(e: Element) -> impl IntoView {
    let id = e.id.clone();
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
