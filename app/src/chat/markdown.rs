//! Markdown to the DOM: the shared renderer ([`hero_shared::markdown`]), which writes only
//! its own closed set of tags and escapes everything else, so there is nothing to sanitize.
//! This is the one reviewed place where rendered text becomes HTML (`inner_html`);
//! everything else renders through components, which escape. Fenced code blocks come out
//! as their own parts and render as components, so each gets a copy button and none of its
//! text is ever parsed as HTML.

use hero_shared::markdown::{MdPart, render};
use leptos::prelude::*;

/// Markdown prose, rendered safe by construction.
#[component]
pub fn Markdown(#[prop(into)] src: Signal<String>) -> impl IntoView {
    let parts = Memo::new(move |_| render(&src.get()));
    view! {
        <div class="md">
            {move || parts.get().into_iter().map(|p| match p {
                MdPart::Html(html) => view! { <div class="md-html" inner_html=html></div> }.into_any(),
                MdPart::Code { lang, text } => view! { <CodeBlock lang text/> }.into_any(),
            }).collect_view()}
        </div>
    }
}

#[component]
pub fn CodeBlock(lang: String, text: String) -> impl IntoView {
    let copy_text = text.clone();
    view! {
        <div class="code-block">
            <div class="code-head">
                <span class="code-lang">{lang}</span>
                <CopyButton text=copy_text label="Copy".to_string()/>
            </div>
            <pre><code>{text}</code></pre>
        </div>
    }
}

/// Copies `text` to the clipboard and says so for a moment.
#[component]
pub fn CopyButton(text: String, label: String) -> impl IntoView {
    let copied = RwSignal::new(false);
    let on_click = move |_| {
        #[cfg(feature = "hydrate")]
        {
            let clipboard = window().navigator().clipboard();
            let _ = clipboard.write_text(&text);
            copied.set(true);
            set_timeout(
                move || copied.set(false),
                std::time::Duration::from_millis(1500),
            );
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = &text;
    };
    view! {
        <button type="button" class="copy-button" on:click=on_click>
            {move || if copied.get() { "Copied".to_string() } else { label.clone() }}
        </button>
    }
}
