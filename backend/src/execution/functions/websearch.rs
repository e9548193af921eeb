//! `websearch`: searches the web through a configured search service, or fetches one page
//! as text. Asks for approval by default (reference 000, "Registered System Functions").
//!
//! Backends: a SearXNG instance's JSON API (`GET {url}/search?q=…&format=json`, the
//! default) or the Brave Search API (`GET {url}/res/v1/web/search?q=…` with the key in
//! `X-Subscription-Token`). Every request goes through the egress policy
//! ([`crate::execution::egress::Outbound`]): a page the model names is fetched only if it is public.
//! Each answer is read within [`MAX_BODY`] bytes and [`TIME_LIMIT`].

use std::time::Duration;

use futures::future::BoxFuture;
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use hero_shared::hml::{Element, ElementKind};
use serde_json::{Value, json};

use super::{Ctx, Function, Spec};

/// The most of an answer read (search results or a page).
pub const MAX_BODY: usize = 2 << 20;
/// The longest a search or a page fetch may take, from connecting to the last byte.
pub const TIME_LIMIT: Duration = Duration::from_secs(20);
const DEFAULT_COUNT: u64 = 5;

/// Which search service answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    #[default]
    Searxng,
    Brave,
}

impl Backend {
    pub fn parse(s: &str) -> Option<Backend> {
        match s {
            "searxng" => Some(Backend::Searxng),
            "brave" => Some(Backend::Brave),
            _ => None,
        }
    }
}

/// The search service (`search_url`, `search_backend`, `search_api_key`).
#[derive(Clone, Default)]
pub struct SearchSettings {
    pub backend: Backend,
    /// The service's base URL; for Brave, its API's (default `https://api.search.brave.com`).
    pub url: Option<String>,
    /// Brave's subscription token. Never shown.
    pub api_key: Option<String>,
    /// Pages the model names may be on the hosts an administrator allowed
    /// (`search_pages_allowed`, for an intranet); by default pages are public or nothing.
    pub pages_allowed: bool,
}

impl std::fmt::Debug for SearchSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchSettings")
            .field("backend", &self.backend)
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "(set)"))
            .field("pages_allowed", &self.pages_allowed)
            .finish()
    }
}

pub const BRAVE_URL: &str = "https://api.search.brave.com";

pub struct WebSearch;

impl Function for WebSearch {
    fn spec(&self) -> Spec {
        Spec {
            name: "websearch".into(),
            description: "Searches the web and returns the top results (title, address, snippet); or, given `url`, fetches that one page as text.".into(),
            plugin: None,
            default: Permission::Ask,
            permissions: FunctionPermissions::allowed(DangerLevel::Moderate),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "the words to search for", "maxLength": 500, "minLength": 1},
                    "url": {"type": "string", "description": "an http or https address to read instead of searching", "maxLength": 2048, "minLength": 1},
                    "count": {"type": "integer", "description": "how many results (1 to 10, default 5)", "minimum": 1, "maximum": 10}
                }
            }),
            examples: vec![
                json!({"query": "hiking boots"}),
                json!({"url": "https://www.rust-lang.org/"}),
            ],
        }
    }

    fn args_of_element(&self, e: &Element) -> Option<Value> {
        if e.kind != ElementKind::Websearch {
            return None;
        }
        let text = e.content.trim();
        let is_url = (text.starts_with("https://") || text.starts_with("http://"))
            && !text.contains(char::is_whitespace);
        Some(if is_url {
            json!({"url": text})
        } else {
            json!({"query": text})
        })
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let query = args.get("query").and_then(Value::as_str);
            let url = args.get("url").and_then(Value::as_str);
            let count = args
                .get("count")
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_COUNT);
            let work = async {
                match (query, url) {
                    (Some(q), None) => search(cx, q, count).await,
                    (None, Some(u)) => fetch_page(cx, u).await,
                    _ => Err("websearch takes either `query` (to search) or `url` (to read one page), one of them".into()),
                }
            };
            tokio::time::timeout(TIME_LIMIT, work)
                .await
                .unwrap_or_else(|_| {
                    Err(format!("no answer within {} seconds", TIME_LIMIT.as_secs()))
                })
        })
    }
}

async fn search(cx: &Ctx<'_>, query: &str, count: u64) -> Result<String, String> {
    let s = &cx.st.settings.search;
    let (base, path) = match (s.backend, &s.url) {
        (Backend::Searxng, None) => {
            return Err("web search is not configured: set `search_url` (HERO_SEARCH_URL) to a SearXNG instance, or `search_backend = \"brave\"` with `search_api_key`".into());
        }
        (Backend::Brave, _) if s.api_key.is_none() => {
            return Err("web search is not configured: the Brave backend needs `search_api_key` (HERO_SEARCH_API_KEY)".into());
        }
        (Backend::Searxng, Some(u)) => (u.as_str(), "search"),
        (Backend::Brave, u) => (u.as_deref().unwrap_or(BRAVE_URL), "res/v1/web/search"),
    };
    let mut url = reqwest::Url::parse(base)
        .and_then(|b| {
            let b = if b.path().ends_with('/') {
                b
            } else {
                reqwest::Url::parse(&format!("{b}/"))?
            };
            b.join(path)
        })
        .map_err(|_| "the search service's address (`search_url`) is not a URL".to_owned())?;
    url.query_pairs_mut().append_pair("q", query);
    match s.backend {
        Backend::Searxng => {
            url.query_pairs_mut().append_pair("format", "json");
        }
        Backend::Brave => {
            url.query_pairs_mut()
                .append_pair("count", &count.to_string());
        }
    }
    let target = cx
        .st
        .http
        .check_with_query(url.as_str())
        .map_err(|e| format!("the search service's address is refused: {e}"))?;
    let mut req = cx.st.http.get(&target).header("accept", "application/json");
    if let (Backend::Brave, Some(k)) = (s.backend, &s.api_key) {
        req = req.header("x-subscription-token", k);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| reach_error("the search service", &e))?;
    let status = resp.status();
    let (body, _) = read_bounded(resp).await?;
    if !status.is_success() {
        return Err(format!("the search service answered {status}"));
    }
    let v: Value = serde_json::from_slice(&body)
        .map_err(|_| "the search service's answer is not JSON".to_owned())?;
    let items = match s.backend {
        Backend::Searxng => v.get("results"),
        Backend::Brave => v.pointer("/web/results"),
    }
    .and_then(Value::as_array)
    .cloned()
    .unwrap_or_default();
    let snippet_key = match s.backend {
        Backend::Searxng => "content",
        Backend::Brave => "description",
    };
    let mut out = format!("Results for “{query}”:\n");
    let mut n = 0;
    for item in items.iter().take(count as usize) {
        let field = |k: &str| {
            item.get(k)
                .and_then(Value::as_str)
                .map(|t| collapse(&strip_tags(t)))
                .unwrap_or_default()
        };
        n += 1;
        out.push_str(&format!(
            "{n}. {} — {}\n   {}\n",
            field("title"),
            field("url"),
            field(snippet_key)
        ));
    }
    if n == 0 {
        out = format!("No results for “{query}”.");
    }
    Ok(out)
}

/// A page the model names is public or nothing, unless `pages_allowed`: the administrator's
/// allowances are for the services Hero is set up with (a model, the search service).
async fn fetch_page(cx: &Ctx<'_>, url: &str) -> Result<String, String> {
    let checked = if cx.st.settings.search.pages_allowed {
        cx.st.http.check_with_query(url)
    } else {
        cx.st.http.check_public(url)
    };
    let target = checked.map_err(|e| format!("that address is refused: {e}"))?;
    let resp = cx
        .st
        .http
        .get(&target)
        .header("accept", "text/html, text/plain;q=0.9, */*;q=0.1")
        .send()
        .await
        .map_err(|e| reach_error("the page", &e))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("the page answered {status}"));
    }
    let kind = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("text/html")
        .to_ascii_lowercase();
    let (body, cut) = read_bounded(resp).await?;
    let text = String::from_utf8_lossy(&body);
    let mut out = if kind.contains("html") {
        html_to_text(&text)
    } else if kind.starts_with("text/") || kind.contains("json") || kind.contains("xml") {
        text.into_owned()
    } else {
        return Err(format!("the page is {kind}, not text"));
    };
    if cut {
        out.push_str("\n[… the page was longer than 2 MiB; the rest was not read]");
    }
    Ok(format!("{url}\n\n{out}"))
}

/// One line for a failed request; the egress policy's refusal says which rule.
fn reach_error(what: &str, e: &reqwest::Error) -> String {
    if let Some(r) = crate::execution::egress::refusal_in(e) {
        return format!("{what} is refused: {r}");
    }
    if e.is_timeout() {
        return format!("{what} did not answer in time");
    }
    format!("{what} could not be reached")
}

/// The body, up to [`MAX_BODY`] bytes, and whether it was longer.
async fn read_bounded(resp: reqwest::Response) -> Result<(Vec<u8>, bool), String> {
    use futures::StreamExt;
    let mut body = Vec::new();
    let mut chunks = resp.bytes_stream();
    while let Some(c) = chunks.next().await {
        let c = c.map_err(|_| "the answer was cut off".to_owned())?;
        let room = MAX_BODY - body.len();
        if c.len() > room {
            body.extend_from_slice(&c[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&c);
    }
    Ok((body, false))
}

/// A page's readable text: its title, then its text without scripts, styles or tags, one
/// line per block, entities decoded.
pub fn html_to_text(html: &str) -> String {
    let lower = html.to_ascii_lowercase();
    let title = lower
        .find("<title")
        .and_then(|s| lower[s..].find('>').map(|e| s + e + 1))
        .and_then(|s| lower[s..].find("</title").map(|e| &html[s..s + e]))
        .map(|t| collapse(&decode_entities(t)));
    let body_start = lower.find("<body").unwrap_or(0);
    let mut out = String::new();
    let mut i = body_start;
    let bytes = html.as_bytes();
    while i < html.len() {
        if bytes[i] == b'<' {
            let rest = &lower[i..];
            // Skip what is not text: scripts, styles, comments, templates.
            let skip_to = [
                ("<script", "</script>"),
                ("<style", "</style>"),
                ("<!--", "-->"),
                ("<noscript", "</noscript>"),
                ("<template", "</template>"),
                ("<svg", "</svg>"),
            ]
            .iter()
            .find(|(open, _)| rest.starts_with(open))
            .map(|(_, close)| rest.find(close).map_or(html.len(), |e| i + e + close.len()));
            if let Some(to) = skip_to {
                i = to;
                continue;
            }
            let end = rest.find('>').map_or(html.len(), |e| i + e + 1);
            let tag = &lower[i + 1..end.min(html.len()).max(i + 1)];
            let name: String = tag
                .trim_start_matches('/')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            if matches!(
                name.as_str(),
                "p" | "div"
                    | "br"
                    | "li"
                    | "tr"
                    | "h1"
                    | "h2"
                    | "h3"
                    | "h4"
                    | "h5"
                    | "h6"
                    | "section"
                    | "article"
                    | "header"
                    | "footer"
                    | "pre"
                    | "blockquote"
                    | "table"
                    | "ul"
                    | "ol"
                    | "hr"
                    | "main"
                    | "nav"
            ) {
                out.push('\n');
            }
            i = end;
        } else {
            let next = html[i..].find('<').map_or(html.len(), |n| i + n);
            out.push_str(&decode_entities(&html[i..next]));
            i = next;
        }
    }
    let text: Vec<String> = out
        .lines()
        .map(collapse)
        .filter(|l| !l.is_empty())
        .collect();
    match title {
        Some(t) if !t.is_empty() => format!("# {t}\n\n{}", text.join("\n")),
        _ => text.join("\n"),
    }
}

fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    decode_entities(&out)
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        // `;` is ASCII: looking for it in bytes never cuts a character.
        let end = rest.as_bytes()[..rest.len().min(12)]
            .iter()
            .position(|&b| b == b';');
        let decoded = end.and_then(|e| {
            let name = &rest[1..e];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                "nbsp" => Some(' '),
                n if n.starts_with("#x") || n.starts_with("#X") => u32::from_str_radix(&n[2..], 16)
                    .ok()
                    .and_then(char::from_u32),
                n if n.starts_with('#') => n[1..].parse().ok().and_then(char::from_u32),
                _ => None,
            };
            c.map(|c| (c, e + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_reads_as_its_title_and_text() {
        let html = r#"<!doctype html><html><head><title>Rust &amp; Leptos</title>
            <style>body { color: red }</style><script>alert("x")</script></head>
            <body><h1>Hydration</h1><p>Server renders,&nbsp;the browser <b>hydrates</b>.</p>
            <!-- a comment --><ul><li>one</li><li>two &#8212; &#x41;</li></ul></body></html>"#;
        assert_eq!(
            html_to_text(html),
            "# Rust & Leptos\n\nHydration\nServer renders, the browser hydrates.\none\ntwo — A"
        );
    }

    #[test]
    fn entities_next_to_any_text_decode_without_cutting_a_character() {
        assert_eq!(decode_entities("&amp;Привет"), "&Привет");
        assert_eq!(decode_entities("&Привет мир"), "&Привет мир");
        assert_eq!(decode_entities("a&中文字中文字;b"), "a&中文字中文字;b");
        assert_eq!(strip_tags("<b>&amp;中文</b>&#x4e2d;"), "&中文中");
        for s in ["&", "&&", "&#", "&#x", "&#xZZ;", "&#99999999;", "&é", "é&"] {
            let _ = decode_entities(s);
        }
    }

    #[test]
    fn broken_markup_and_stray_ampersands_do_not_lose_text() {
        assert_eq!(html_to_text("a & b <p>c &bogus; d"), "a & b\nc &bogus; d");
        assert_eq!(html_to_text("<p>unclosed <b"), "unclosed");
        assert_eq!(html_to_text("x<script>never closed"), "x");
    }

    #[test]
    fn an_element_is_a_search_or_a_page() {
        let doc = hero_shared::hml::parse(
            "<websearch>rust leptos hydration</websearch> <websearch> https://example.com/a </websearch>",
        );
        let args: Vec<Value> = doc
            .elements()
            .filter_map(|e| WebSearch.args_of_element(e))
            .collect();
        assert_eq!(
            args,
            [
                json!({"query": "rust leptos hydration"}),
                json!({"url": "https://example.com/a"})
            ]
        );
    }
}
