//! Markdown to the DOM: pulldown-cmark, then ammonia. This is the one reviewed place where
//! model text becomes HTML (`inner_html`); everything else renders through components,
//! which escape. Fenced code blocks are split out and rendered as components, so each gets
//! a copy button and none of its text is ever parsed as HTML.

use leptos::prelude::*;
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// A piece of rendered markdown.
#[derive(Debug, Clone, PartialEq)]
pub enum MdPart {
    /// Sanitized HTML.
    Html(String),
    Code {
        lang: String,
        text: String,
    },
}

fn sanitize(html: &str) -> String {
    // No images: a reply that embeds `![](https://host/?q=<secret>)` would send whatever the
    // model was talked into writing to that host the moment it renders.
    ammonia::Builder::default()
        .rm_tags(["img"])
        .link_rel(Some("noopener noreferrer nofollow"))
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .clean(html)
        .to_string()
}

/// Renders `src`; code blocks come out as their own parts.
pub fn render(src: &str) -> Vec<MdPart> {
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    opts.insert(Options::ENABLE_TASKLISTS);
    let mut parts = Vec::new();
    let mut pending: Vec<Event<'_>> = Vec::new();
    let mut code: Option<(String, String)> = None;
    let flush = |pending: &mut Vec<Event<'_>>, parts: &mut Vec<MdPart>| {
        if pending.is_empty() {
            return;
        }
        let mut html = String::new();
        pulldown_cmark::html::push_html(&mut html, pending.drain(..));
        let clean = sanitize(&html);
        if !clean.trim().is_empty() {
            parts.push(MdPart::Html(clean));
        }
    };
    for ev in Parser::new_ext(src, opts) {
        match ev {
            Event::Start(Tag::CodeBlock(kind)) => {
                flush(&mut pending, &mut parts);
                let lang = match kind {
                    CodeBlockKind::Fenced(l) => {
                        l.split_whitespace().next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                code = Some((lang, String::new()));
            }
            Event::Text(t) if code.is_some() => {
                if let Some((_, text)) = code.as_mut() {
                    text.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((lang, text)) = code.take() {
                    parts.push(MdPart::Code { lang, text });
                }
            }
            // Raw HTML in model output is shown as text, never interpreted.
            Event::Html(h) | Event::InlineHtml(h) => pending.push(Event::Text(h)),
            other => pending.push(other),
        }
    }
    if let Some((lang, text)) = code.take() {
        parts.push(MdPart::Code { lang, text });
    }
    flush(&mut pending, &mut parts);
    parts
}

/// Markdown prose, rendered and sanitized.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_in_model_text_is_never_live() {
        let parts = render(
            "hi <script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))",
        );
        let MdPart::Html(h) = &parts[0] else {
            panic!("{parts:?}")
        };
        assert!(
            !h.contains("<script") && !h.contains("<img") && !h.contains("javascript:"),
            "{h}"
        );
        assert!(h.contains("&lt;script&gt;"), "{h}");
        let md_img = render("![x](https://example.com/?leak=1)");
        assert!(
            md_img
                .iter()
                .all(|p| !matches!(p, MdPart::Html(h) if h.contains("<img"))),
            "{md_img:?}"
        );
    }

    #[test]
    fn code_blocks_are_their_own_parts() {
        let parts = render("before\n\n```rust\nlet v: Vec<T> = x;\n```\n\nafter");
        assert_eq!(parts.len(), 3);
        assert_eq!(
            parts[1],
            MdPart::Code {
                lang: "rust".into(),
                text: "let v: Vec<T> = x;\n".into()
            }
        );
    }
}
