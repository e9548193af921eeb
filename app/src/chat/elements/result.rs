//! `<result>`: a command's output, with what it is for and its status.

use hero_shared::hml::Element;
use leptos::prelude::*;

use super::status_class;

#[component]
pub fn Result(e: Element) -> impl IntoView {
    let id = e.id.clone();
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
