//! MCP's streamable HTTP transport carried by Hero's own outbound client
//! ([`crate::execution::egress::Outbound`]): every request to a user's MCP server is checked
//! by the egress policy as the providers' are (its URL, and each address it resolves to at
//! connect), follows no redirect, and is bounded: a JSON answer to [`MAX_MESSAGE_BYTES`],
//! one SSE event to the same.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

use crate::execution::egress::Outbound;

/// The largest message a server may send: a JSON answer, or one SSE event.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// Why a request to a server failed: the policy's refusal, or the HTTP client's error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Failed(String);

impl Failed {
    fn of(e: reqwest::Error) -> StreamableHttpError<Failed> {
        // The policy's refusal is the reason a person can act on.
        let why = match crate::execution::egress::refusal_in(&e) {
            Some(r) => format!("{r} (egress_allow in hero.toml)"),
            None => e.to_string(),
        };
        StreamableHttpError::Client(Failed(why))
    }
}

/// Hero's outbound client as an MCP client's HTTP.
#[derive(Clone)]
pub struct EgressClient(pub Outbound);

type Result<T> = std::result::Result<T, StreamableHttpError<Failed>>;

impl EgressClient {
    fn request(
        &self,
        method: http::Method,
        uri: &str,
        session_id: Option<&str>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<reqwest::RequestBuilder> {
        let url = self.0.check(uri).map_err(|e| {
            StreamableHttpError::Client(Failed(format!("{} (egress_allow in hero.toml)", e)))
        })?;
        let mut b = match method {
            http::Method::GET => self.0.get(&url),
            http::Method::DELETE => self.0.delete(&url),
            _ => self.0.post(&url),
        }
        .header(
            reqwest::header::ACCEPT,
            format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
        );
        if let Some(s) = session_id {
            b = b.header(HEADER_SESSION_ID, s);
        }
        if let Some(a) = auth {
            b = b.bearer_auth(a);
        }
        for (k, v) in headers {
            b = b.header(k, v);
        }
        Ok(b)
    }
}

fn content_type(r: &reqwest::Response) -> Option<String> {
    r.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
}

/// A response's body, to [`MAX_MESSAGE_BYTES`].
async fn bounded_body(r: reqwest::Response) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut chunks = r.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(Failed::of)?;
        if body.len() + chunk.len() > MAX_MESSAGE_BYTES {
            return Err(StreamableHttpError::ResponseBodyTooLarge {
                max_size: MAX_MESSAGE_BYTES,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The byte stream of an SSE body, failing once an event (the bytes since the last blank
/// line) passes [`MAX_MESSAGE_BYTES`].
fn bounded_events(
    bytes: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
) -> BoxStream<'static, std::result::Result<Sse, SseError>> {
    let mut since = 0usize;
    let mut last = 0u8;
    let checked = bytes.map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        for &b in chunk.iter() {
            if b == b'\n' && last == b'\n' {
                since = 0;
            } else if b != b'\r' {
                since += 1;
            }
            if b != b'\r' {
                last = b;
            }
        }
        if since > MAX_MESSAGE_BYTES {
            return Err(std::io::Error::other(format!(
                "the server sent an event longer than {} MiB",
                MAX_MESSAGE_BYTES >> 20
            )));
        }
        Ok::<_, std::io::Error>(chunk)
    });
    SseStream::from_bytes_stream(checked).boxed()
}

/// An answer other than 2xx, as an error a person can read.
async fn refused(r: reqwest::Response) -> StreamableHttpError<Failed> {
    let status = r.status();
    let body = bounded_body(r).await.unwrap_or_default();
    let text: String = String::from_utf8_lossy(&body).chars().take(200).collect();
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
        "HTTP {status}{}{}",
        if text.trim().is_empty() { "" } else { ": " },
        text.trim()
    )))
}

impl StreamableHttpClient for EgressClient {
    type Error = Failed;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse> {
        let had_session = session_id.is_some();
        let r = self
            .request(
                http::Method::POST,
                &uri,
                session_id.as_deref(),
                auth,
                headers,
            )?
            .json(&message)
            .send()
            .await
            .map_err(Failed::of)?;
        let status = r.status();
        if matches!(
            status,
            reqwest::StatusCode::ACCEPTED | reqwest::StatusCode::NO_CONTENT
        ) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == reqwest::StatusCode::NOT_FOUND && had_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        if !status.is_success() {
            return Err(refused(r).await);
        }
        let session = r
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let no_answer_awaited = !matches!(message, ClientJsonRpcMessage::Request(_));
        match content_type(&r).as_deref() {
            Some(EVENT_STREAM_MIME_TYPE) => Ok(StreamableHttpPostResponse::Sse(
                bounded_events(r.bytes_stream()),
                session,
            )),
            Some(JSON_MIME_TYPE) => {
                let body = bounded_body(r).await?;
                match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    Ok(m) => Ok(StreamableHttpPostResponse::Json(m, session)),
                    Err(_) if no_answer_awaited => Ok(StreamableHttpPostResponse::Accepted),
                    Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                        format!("it answered with JSON that is not JSON-RPC ({e})"),
                    ))),
                }
            }
            _ if no_answer_awaited => Ok(StreamableHttpPostResponse::Accepted),
            other => Err(StreamableHttpError::UnexpectedContentType(
                other.map(str::to_owned),
            )),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
        let r = self
            .request(http::Method::DELETE, &uri, Some(&session_id), auth, headers)?
            .send()
            .await
            .map_err(Failed::of)?;
        if r.status().is_success() || r.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        Err(refused(r).await)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, std::result::Result<Sse, SseError>>> {
        let mut b = self.request(
            http::Method::GET,
            &uri,
            session_id.as_deref(),
            auth,
            headers,
        )?;
        if let Some(id) = last_event_id {
            b = b.header(HEADER_LAST_EVENT_ID, id);
        }
        let r = b.send().await.map_err(Failed::of)?;
        if r.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !r.status().is_success() {
            return Err(refused(r).await);
        }
        if content_type(&r).as_deref() != Some(EVENT_STREAM_MIME_TYPE) {
            return Err(StreamableHttpError::UnexpectedContentType(content_type(&r)));
        }
        Ok(bounded_events(r.bytes_stream()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events within the bound arrive, however the bytes are cut; one past it ends the
    /// stream in an error, without waiting for its end.
    #[tokio::test]
    async fn an_event_past_the_bound_is_refused() {
        let small = "data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\n";
        let chunks: Vec<reqwest::Result<Bytes>> = small
            .as_bytes()
            .chunks(3)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let got: Vec<_> = bounded_events(futures::stream::iter(chunks))
            .collect()
            .await;
        let data: Vec<String> = got
            .into_iter()
            .map(|e| e.unwrap().data.unwrap_or_default())
            .collect();
        assert_eq!(data, ["{\"a\":1}", "{\"b\":2}"]);

        let line = Bytes::from(vec![b'x'; 64 << 10]);
        let endless = futures::stream::iter(
            std::iter::once(Ok(Bytes::from_static(b"data: ")))
                .chain(std::iter::repeat_with(move || Ok(line.clone())).take(100)),
        );
        let mut events = bounded_events(endless);
        let first = events.next().await.expect("an answer");
        assert!(first.is_err(), "an event over 1 MiB was taken");
    }
}
