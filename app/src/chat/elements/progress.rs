//! `<progress>`: a bar, its value clamped to `max`, with its status.

use hero_shared::hml::Element;
use leptos::prelude::*;

#[component]
pub fn Progress(e: Element) -> impl IntoView {
    let id = e.id.clone();
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
