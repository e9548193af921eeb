//! Markdown to HTML that is safe by construction, the one renderer of server and browser.
//!
//! pulldown-cmark parses; this module writes the HTML itself, from a closed set of tags
//! with no attributes but the few it sets: raw HTML in the text is text, every character
//! of text and every URL is escaped, a link is kept only for `http`, `https` and `mailto`
//! (and carries `rel="noopener noreferrer nofollow"`), images are their alt text (a picture
//! that loads from a URL the model chose would carry whatever it was talked into putting
//! in that URL), and table alignment is a class, not an inline style. So the page needs no
//! HTML sanitizer, and nothing here can emit a script, a handler or a style.
//!
//! Fenced code blocks come out as their own parts: the page renders them as components
//! (each with a copy button), and none of their text is ever parsed as HTML.

use pulldown_cmark::{
    Alignment, CodeBlockKind, Event, HeadingLevel, LinkType, Options, Parser, Tag, TagEnd,
};

/// A piece of rendered markdown.
#[derive(Debug, Clone, PartialEq)]
pub enum MdPart {
    /// HTML from [`render`]'s closed set of tags.
    Html(String),
    /// A fenced or indented code block, as text.
    Code { lang: String, text: String },
}

/// The link schemes a rendered link may have; anything else is shown as its text.
pub const LINK_SCHEMES: &[&str] = &["http://", "https://", "mailto:"];

/// What every rendered link says to the browser: no `window.opener` for the page it opens,
/// no referrer, no endorsement.
pub const LINK_REL: &str = "noopener noreferrer nofollow";

/// Renders `src`; code blocks come out as their own parts.
///
/// In the browser (wasm) the parser is loaded on demand, as a part of the wasm of its own
/// (`app::markdown`): until it is [`install`]ed, and always inside [`plain`], the text comes
/// out escaped as it is, in one paragraph.
pub fn render(src: &str) -> Vec<MdPart> {
    #[cfg(target_arch = "wasm32")]
    return browser::render(src);
    #[cfg(not(target_arch = "wasm32"))]
    parse(src)
}

#[cfg(target_arch = "wasm32")]
pub use browser::{install, installed, plain};

/// The browser's side of [`render`]: the parser as a hook, filled when it has loaded.
#[cfg(target_arch = "wasm32")]
mod browser {
    use super::MdPart;
    use std::cell::Cell;

    /// A markdown parser: [`super::parse`].
    type Parser = fn(&str) -> Vec<MdPart>;

    thread_local! {
        static PARSER: Cell<Option<Parser>> = const { Cell::new(None) };
        static PLAIN: Cell<bool> = const { Cell::new(false) };
    }

    /// [`super::render`] from now on parses with `parser` ([`super::parse`], loaded).
    pub fn install(parser: Parser) {
        PARSER.with(|p| p.set(Some(parser)));
    }

    /// Whether [`install`] has been called.
    pub fn installed() -> bool {
        PARSER.with(|p| p.get().is_some())
    }

    /// `f`'s result with every markdown text escaped as it is, the parser installed or not:
    /// HTML that changes exactly when a text does, to tell what needs drawing again without
    /// parsing.
    pub fn plain<T>(f: impl FnOnce() -> T) -> T {
        let was = PLAIN.with(|p| p.replace(true));
        let out = f();
        PLAIN.with(|p| p.set(was));
        out
    }

    pub(super) fn render(src: &str) -> Vec<MdPart> {
        match PARSER.with(|p| p.get()) {
            Some(parse) if !PLAIN.with(|p| p.get()) => parse(src),
            _ => {
                let mut html = String::from("<p>");
                super::escape(&mut html, src);
                html.push_str("</p>");
                vec![MdPart::Html(html)]
            }
        }
    }
}

/// Parses `src` and writes its HTML: [`render`]'s work, in the browser once loaded.
pub fn parse(src: &str) -> Vec<MdPart> {
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    opts.insert(Options::ENABLE_TASKLISTS);
    let mut w = Writer::default();
    for ev in Parser::new_ext(src, opts) {
        w.event(ev);
    }
    w.finish()
}

/// Renders `src` as one piece of HTML, each code block a `<pre><code>` of escaped text (for
/// a preview, where code blocks need no buttons).
pub fn to_html(src: &str) -> String {
    let mut out = String::new();
    for part in render(src) {
        match part {
            MdPart::Html(h) => out.push_str(&h),
            MdPart::Code { text, .. } => {
                out.push_str("<pre><code>");
                escape(&mut out, &text);
                out.push_str("</code></pre>");
            }
        }
    }
    out
}

/// Escapes text for an element's content or a double-quoted attribute.
pub fn escape(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// `url` if a rendered link may point there: one of [`LINK_SCHEMES`] (any case), with no
/// whitespace or control character anywhere (browsers drop those, and `java\tscript:` is
/// `javascript:` to them).
pub fn safe_link(url: &str) -> Option<&str> {
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return None;
    }
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    LINK_SCHEMES
        .iter()
        .any(|s| lower.starts_with(s) && url.len() > s.len())
        .then_some(url)
}

#[derive(Default)]
struct Writer {
    parts: Vec<MdPart>,
    html: String,
    /// The code block being read: its language and text so far.
    code: Option<(String, String)>,
    /// For each link open, whether it was written (an unsafe one is its text alone).
    links: Vec<bool>,
    /// Inside an image: its alt text is written as text, the image itself never.
    images: usize,
    /// The open table's column alignments, and the next cell's column.
    table: Vec<Alignment>,
    cell: usize,
    in_head: bool,
}

impl Writer {
    fn event(&mut self, ev: Event<'_>) {
        if let Some((_, text)) = self.code.as_mut() {
            match ev {
                Event::End(TagEnd::CodeBlock) => {
                    let (lang, text) = self.code.take().unwrap_or_default();
                    self.parts.push(MdPart::Code { lang, text });
                }
                Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => text.push_str(&t),
                _ => {}
            }
            return;
        }
        match ev {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            // Raw HTML in the text is shown as the text it is.
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => escape(&mut self.html, &t),
            Event::Code(t) => {
                self.html.push_str("<code>");
                escape(&mut self.html, &t);
                self.html.push_str("</code>");
            }
            Event::InlineMath(t) | Event::DisplayMath(t) | Event::FootnoteReference(t) => {
                escape(&mut self.html, &t)
            }
            Event::SoftBreak => self.html.push('\n'),
            Event::HardBreak => self.html.push_str("<br>\n"),
            Event::Rule => self.html.push_str("<hr>\n"),
            Event::TaskListMarker(done) => self.html.push_str(if done {
                "<input type=\"checkbox\" disabled checked> "
            } else {
                "<input type=\"checkbox\" disabled> "
            }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        let h = &mut self.html;
        match tag {
            Tag::CodeBlock(kind) => {
                self.flush();
                let lang = match kind {
                    CodeBlockKind::Fenced(l) => {
                        l.split_whitespace().next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::Paragraph => h.push_str("<p>"),
            Tag::Heading { level, .. } => {
                h.push_str("<h");
                h.push(heading_digit(level));
                h.push('>');
            }
            Tag::BlockQuote(_) => h.push_str("<blockquote>\n"),
            Tag::List(Some(1)) => h.push_str("<ol>\n"),
            Tag::List(Some(start)) => {
                h.push_str("<ol start=\"");
                h.push_str(&start.to_string());
                h.push_str("\">\n");
            }
            Tag::List(None) => h.push_str("<ul>\n"),
            Tag::Item => h.push_str("<li>"),
            Tag::Table(align) => {
                self.table = align;
                h.push_str("<table>");
            }
            Tag::TableHead => {
                self.in_head = true;
                self.cell = 0;
                h.push_str("<thead><tr>");
            }
            Tag::TableRow => {
                self.cell = 0;
                h.push_str("<tr>");
            }
            Tag::TableCell => {
                h.push_str(if self.in_head { "<th" } else { "<td" });
                match self.table.get(self.cell) {
                    Some(Alignment::Left) => h.push_str(" class=\"align-left\""),
                    Some(Alignment::Center) => h.push_str(" class=\"align-center\""),
                    Some(Alignment::Right) => h.push_str(" class=\"align-right\""),
                    _ => {}
                }
                h.push('>');
            }
            Tag::Emphasis => h.push_str("<em>"),
            Tag::Strong => h.push_str("<strong>"),
            Tag::Strikethrough => h.push_str("<del>"),
            Tag::Superscript => h.push_str("<sup>"),
            Tag::Subscript => h.push_str("<sub>"),
            Tag::Link {
                link_type,
                dest_url,
                ..
            } => {
                let url = if link_type == LinkType::Email && !dest_url.starts_with("mailto:") {
                    format!("mailto:{dest_url}")
                } else {
                    dest_url.to_string()
                };
                let written = self.images == 0 && safe_link(&url).is_some();
                if written {
                    h.push_str("<a href=\"");
                    escape(h, &url);
                    h.push_str("\" rel=\"");
                    h.push_str(LINK_REL);
                    h.push_str("\">");
                }
                self.links.push(written);
            }
            Tag::Image { .. } => self.images += 1,
            // Not enabled; their content is kept as plain text if they ever appear.
            Tag::HtmlBlock
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        let h = &mut self.html;
        match tag {
            TagEnd::Paragraph => h.push_str("</p>\n"),
            TagEnd::Heading(level) => {
                h.push_str("</h");
                h.push(heading_digit(level));
                h.push_str(">\n");
            }
            TagEnd::BlockQuote(_) => h.push_str("</blockquote>\n"),
            TagEnd::List(true) => h.push_str("</ol>\n"),
            TagEnd::List(false) => h.push_str("</ul>\n"),
            TagEnd::Item => h.push_str("</li>\n"),
            TagEnd::Table => h.push_str("</tbody></table>\n"),
            TagEnd::TableHead => {
                self.in_head = false;
                h.push_str("</tr></thead><tbody>\n");
            }
            TagEnd::TableRow => h.push_str("</tr>\n"),
            TagEnd::TableCell => {
                h.push_str(if self.in_head { "</th>" } else { "</td>" });
                self.cell += 1;
            }
            TagEnd::Emphasis => h.push_str("</em>"),
            TagEnd::Strong => h.push_str("</strong>"),
            TagEnd::Strikethrough => h.push_str("</del>"),
            TagEnd::Superscript => h.push_str("</sup>"),
            TagEnd::Subscript => h.push_str("</sub>"),
            TagEnd::Link => {
                if self.links.pop() == Some(true) {
                    h.push_str("</a>");
                }
            }
            TagEnd::Image => self.images = self.images.saturating_sub(1),
            TagEnd::CodeBlock
            | TagEnd::HtmlBlock
            | TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => {}
        }
    }

    /// Ends the HTML part so far (a code block starts).
    fn flush(&mut self) {
        let html = std::mem::take(&mut self.html);
        if !html.trim().is_empty() {
            self.parts.push(MdPart::Html(html));
        }
    }

    fn finish(mut self) -> Vec<MdPart> {
        if let Some((lang, text)) = self.code.take() {
            self.flush();
            self.parts.push(MdPart::Code { lang, text });
        }
        self.flush();
        self.parts
    }
}

fn heading_digit(level: HeadingLevel) -> char {
    match level {
        HeadingLevel::H1 => '1',
        HeadingLevel::H2 => '2',
        HeadingLevel::H3 => '3',
        HeadingLevel::H4 => '4',
        HeadingLevel::H5 => '5',
        HeadingLevel::H6 => '6',
    }
}

/// Checks that `html` is inert: only [`render`]'s own tags, each with only the attributes
/// it sets (a link's `href` of an allowed scheme and its `rel`, a list's `start`, a cell's
/// alignment class, a task's disabled checkbox; [`to_html`]'s `<pre>`). The invariant the hostile corpus, the fuzz
/// target and the unit tests all check; `Err` says what was found.
pub fn inert(html: &str) -> Result<(), String> {
    const TAGS: &[&str] = &[
        "p",
        "em",
        "strong",
        "del",
        "sup",
        "sub",
        "code",
        "pre",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "ol",
        "ul",
        "li",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "br",
        "hr",
        "input",
        "a",
    ];
    check_tags(
        html,
        TAGS,
        |name, attr, value| match (name, attr, value) {
            ("a", "href", Some(v)) => safe_link(&v.replace("&amp;", "&")).is_some(),
            ("a", "rel", Some(v)) => v == LINK_REL,
            ("ol", "start", Some(v)) => v.bytes().all(|b| b.is_ascii_digit()),
            ("th" | "td", "class", Some(v)) => {
                matches!(v, "align-left" | "align-center" | "align-right")
            }
            ("input", "type", Some("checkbox")) => true,
            ("input", "disabled" | "checked", None) => true,
            _ => false,
        },
        |name, tag| {
            if name == "input" && !tag.contains(" disabled") {
                return Err(format!("an input that is not disabled: <{tag}>"));
            }
            Ok(())
        },
    )
}

/// The walk behind [`inert`] and `html::inert`, over HTML a renderer of this crate wrote
/// (values double-quoted and escaped): every tag must be in `tags`, every attribute pass
/// `attr_ok(tag name, attribute, value)` (`None` for a bare one), and every opening tag
/// `tag_ok(name, whole tag)`.
pub(crate) fn check_tags(
    html: &str,
    tags: &[&str],
    attr_ok: impl Fn(&str, &str, Option<&str>) -> bool,
    tag_ok: impl Fn(&str, &str) -> Result<(), String>,
) -> Result<(), String> {
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        let close = after
            .find('>')
            .ok_or_else(|| format!("a '<' that opens no tag: {:?}", &rest[open..]))?;
        let tag = &after[..close];
        rest = &after[close + 1..];
        let (name, mut attrs) = tag.split_once(' ').unwrap_or((tag, ""));
        let name = name.strip_prefix('/').unwrap_or(name);
        if !tags.contains(&name) {
            return Err(format!("tag <{tag}>"));
        }
        if tag.starts_with('/') {
            continue;
        }
        while !attrs.is_empty() {
            let (attr, value, more) = match attrs.split_once('=') {
                Some((a, v)) if !a.contains(' ') => {
                    let v = v
                        .strip_prefix('"')
                        .ok_or_else(|| format!("an unquoted value in <{tag}>"))?;
                    let end = v
                        .find('"')
                        .ok_or_else(|| format!("an unclosed value in <{tag}>"))?;
                    (a, Some(&v[..end]), v[end + 1..].trim_start())
                }
                _ => {
                    let (a, more) = attrs.split_once(' ').unwrap_or((attrs, ""));
                    (a, None, more)
                }
            };
            attrs = more;
            if !attr_ok(name, attr, value) {
                return Err(format!("attribute {attr}={value:?} in <{tag}>"));
            }
        }
        tag_ok(name, tag)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(src: &str) -> String {
        render(src)
            .into_iter()
            .filter_map(|p| match p {
                MdPart::Html(h) => Some(h),
                MdPart::Code { .. } => None,
            })
            .collect()
    }

    #[test]
    fn to_html_joins_the_parts_and_escapes_code() {
        let h = to_html("**a**\n\n```\n<script>x</script>\n```\n");
        assert_eq!(
            h,
            "<p><strong>a</strong></p>\n<pre><code>&lt;script&gt;x&lt;/script&gt;\n</code></pre>"
        );
        assert!(inert(&h).is_ok(), "{h}");
    }

    #[test]
    fn markdown_renders_as_expected() {
        let h = html(
            "# Title\n\n**bold** _em_ ~~gone~~ `code` [site](https://x.com/?a=1&b=2)\n\n- [x] done\n- [ ] todo\n\n3. three\n4. four\n\n| a | b |\n|:-|-:|\n| 1 | 2 |\n\n> quote\n\n---\nline  \nbreak <mail@example.com>",
        );
        for want in [
            "<h1>Title</h1>",
            "<strong>bold</strong> <em>em</em> <del>gone</del> <code>code</code>",
            "<a href=\"https://x.com/?a=1&amp;b=2\" rel=\"noopener noreferrer nofollow\">site</a>",
            "<li><input type=\"checkbox\" disabled checked> done</li>",
            "<ol start=\"3\">",
            "<th class=\"align-left\">a</th><th class=\"align-right\">b</th>",
            "<td class=\"align-left\">1</td>",
            "<blockquote>",
            "<hr>",
            "line<br>",
            "<a href=\"mailto:mail@example.com\" rel=\"noopener noreferrer nofollow\">mail@example.com</a>",
        ] {
            assert!(h.contains(want), "{want} in {h}");
        }
        inert(&h).unwrap();
    }

    #[test]
    fn what_could_be_live_is_text() {
        let h = html(
            "hi <script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1)) ![i](https://e.com/?leak=1)",
        );
        assert!(h.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{h}");
        assert!(h.contains("&lt;img src=x onerror=alert(1)&gt;"), "{h}");
        assert!(
            !h.contains("<a") && !h.contains("<img") && !h.contains("e.com"),
            "{h}"
        );
        assert!(
            h.contains("x") && h.contains(" i"),
            "link and image text stay: {h}"
        );
        inert(&h).unwrap();
    }

    #[test]
    fn only_three_schemes_link() {
        for ok in ["http://a.b", "HTTPS://a.b/c", "mailto:x@y.z"] {
            assert_eq!(safe_link(ok), Some(ok));
        }
        for bad in [
            "javascript:alert(1)",
            "JaVaScRiPt:alert(1)",
            "java\tscript:alert(1)",
            " https://a.b",
            "data:text/html,x",
            "vbscript:x",
            "//evil.example",
            "/relative",
            "#frag",
            "https://",
            "http://a.b/\u{0}",
            "file:///etc/passwd",
        ] {
            assert_eq!(safe_link(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_checker_refuses_what_is_live() {
        for live in [
            "<script>x</script>",
            "<img src=\"x\">",
            "<a href=\"javascript:x\" rel=\"noopener noreferrer nofollow\">x</a>",
            "<a href=\"https://x\" onclick=\"x\">x</a>",
            "<p style=\"color:red\">x</p>",
            "<input type=\"checkbox\">",
            "<iframe>",
            "<svg onload=x>",
            "<p",
            "<td class=\"evil\">",
        ] {
            assert!(inert(live).is_err(), "{live}");
        }
        inert("<p>a &lt;b&gt; c</p>").unwrap();
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
        // One left open at the end of a streaming reply is a code block too.
        let open = render("text\n\n```sh\nrm -rf /");
        assert_eq!(
            open.last(),
            Some(&MdPart::Code {
                lang: "sh".into(),
                text: "rm -rf /".into()
            })
        );
    }
}
