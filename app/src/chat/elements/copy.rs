//! `<copy>`: text with a button that copies it.

use hero_shared::hml::Element;
use leptos::prelude::*;

use crate::chat::markdown::CopyButton;

#[component]
pub fn Copy(e: Element) -> impl IntoView {
    let id = e.id.clone();
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
