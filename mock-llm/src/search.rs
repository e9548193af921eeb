//! A mock web search service on the same server: SearXNG's JSON API (`GET /search?q=…
//! &format=json`), the Brave Search API (`GET /res/v1/web/search?q=…`, which wants an
//! `X-Subscription-Token`), and pages to fetch (`GET /page/{name}`). Answers are made from
//! the query, so tests know them: result `i` of "q" is titled `Result i for q`. The query
//! `fail` answers 500; `empty` has no results. The page `big` is 4 MB of HTML, `binary` an
//! image, `slow` takes two minutes.

use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::HashMap;

const RESULTS: usize = 3;

fn results(q: &str, snippet_key: &str) -> Vec<Value> {
    if q == "empty" {
        return Vec::new();
    }
    let slug: String = q
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    (1..=RESULTS)
        .map(|i| {
            json!({
                "title": format!("Result {i} for {q}"),
                "url": format!("https://example.com/{slug}/{i}"),
                snippet_key: format!("Snippet {i} about <b>{q}</b>"),
            })
        })
        .collect()
}

pub(crate) async fn searxng(Query(q): Query<HashMap<String, String>>) -> Response {
    let query = q.get("q").cloned().unwrap_or_default();
    if q.get("format").map(String::as_str) != Some("json") {
        return (StatusCode::FORBIDDEN, "format=json is required").into_response();
    }
    if query == "fail" {
        return (StatusCode::INTERNAL_SERVER_ERROR, "search backend failed").into_response();
    }
    axum::Json(json!({"query": query, "results": results(&query, "content")})).into_response()
}

pub(crate) async fn brave(
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if headers.get("x-subscription-token").is_none() {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The provided subscription token is invalid.", "status": 401}})),
        )
            .into_response();
    }
    let query = q.get("q").cloned().unwrap_or_default();
    if query == "fail" {
        return (StatusCode::INTERNAL_SERVER_ERROR, "search backend failed").into_response();
    }
    axum::Json(json!({"type": "search", "query": {"original": query}, "web": {"type": "search", "results": results(&query, "description")}}))
        .into_response()
}

pub(crate) async fn page(Path(name): Path<String>) -> Response {
    match name.as_str() {
        // Longer than any reader should take whole.
        "big" => {
            let body = "<p>big page line</p>\n".repeat(200_000);
            return ([(header::CONTENT_TYPE, "text/html")], body).into_response();
        }
        // Never answers in time: the reader's time bound ends it.
        "slow" => {
            tokio::time::sleep(std::time::Duration::from_secs(120)).await;
        }
        "binary" => {
            return (
                [(header::CONTENT_TYPE, "image/png")],
                vec![0x89u8, b'P', b'N', b'G'],
            )
                .into_response();
        }
        _ => {}
    }
    let body = format!(
        "<!doctype html><html><head><title>Page {name}</title><script>var secret = 1;</script></head>\
         <body><h1>About {name}</h1><p>This page is about <b>{name}</b> &amp; nothing else.</p></body></html>"
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}
