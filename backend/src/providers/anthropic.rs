//! Anthropic's Messages API, streaming: `message_start`, `content_block_start/delta/stop`
//! (text, thinking, tool_use with input JSON deltas), `message_delta` (usage, stop reason),
//! `message_stop`, `ping`, `error`.

use futures::StreamExt;
use serde_json::{Value, json};

use super::{
    Call, CallOptions, Delta, DeltaStream, ProviderError, Role, endpoint, error_message_from,
    normalize, send_with_retry, sse_error,
};
use eventsource_stream::Eventsource;

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const API_VERSION: &str = "2023-06-01";
const DEFAULT_MAX_TOKENS: u64 = 4096;

pub fn body(call: &Call<'_>) -> Value {
    let messages: Vec<Value> = normalize(call.messages.clone())
        .into_iter()
        .map(|m| json!({"role": if m.role == Role::User { "user" } else { "assistant" }, "content": m.content}))
        .collect();
    let mut body = serde_json::Map::new();
    body.insert("max_tokens".into(), json!(DEFAULT_MAX_TOKENS));
    // The agent's config overrides defaults; the keys below are Hero's and were refused in
    // the config when it was saved.
    for (k, v) in &call.agent.config {
        body.insert(k.clone(), v.clone());
    }
    body.insert("model".into(), json!(call.agent.model));
    if !call.system.is_empty() {
        body.insert("system".into(), json!(call.system));
    }
    body.insert("messages".into(), json!(messages));
    body.insert("stream".into(), json!(true));
    Value::Object(body)
}

fn read_error(body: &str) -> String {
    error_message_from(body, "/error/message")
}

pub async fn stream(
    client: &reqwest::Client,
    opts: &CallOptions,
    call: &Call<'_>,
) -> Result<DeltaStream, ProviderError> {
    let key = call.agent.api_key.clone().ok_or_else(|| {
        ProviderError::Config("this agent has no API key; set one on the Agents page".into())
    })?;
    let url = endpoint(
        call.agent.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL),
        "/v1/messages",
    );
    let body = body(call);
    let resp = send_with_retry(
        opts,
        || {
            client
                .post(&url)
                .header("x-api-key", &key)
                .header("anthropic-version", API_VERSION)
                .json(&body)
        },
        read_error,
    )
    .await?;
    let mut events = resp.bytes_stream().eventsource();
    let mut blocks: std::collections::HashMap<u64, String> = Default::default();
    let mut stopped = false;
    Ok(Box::pin(async_stream_like(move |mut emit| async move {
        while let Some(ev) = emit.next_or_closed(events.next()).await {
            let ev = match ev {
                Ok(ev) => ev,
                Err(e) => return emit.err(sse_error(e)).await,
            };
            // The hot path, once per token: a text delta read into borrowed fields, no tree.
            if ev.event == "content_block_delta" {
                if let Ok(TextDeltaEvent {
                    delta:
                        TextDelta {
                            kind: "text_delta",
                            text: Some(t),
                        },
                }) = serde_json::from_str::<TextDeltaEvent<'_>>(&ev.data)
                {
                    emit.ok(Delta::Text(t.into_owned())).await;
                    continue;
                }
            }
            let data: Value = match serde_json::from_str(&ev.data) {
                Ok(v) => v,
                Err(_) if ev.event == "ping" => continue,
                Err(e) => {
                    return emit
                        .err(ProviderError::Protocol(format!("{} event: {e}", ev.event)))
                        .await;
                }
            };
            let kind = data
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or(&ev.event)
                .to_owned();
            match kind.as_str() {
                "message_start" => {
                    let input = data
                        .pointer("/message/usage/input_tokens")
                        .and_then(Value::as_u64);
                    emit.ok(Delta::Usage {
                        input,
                        output: None,
                    })
                    .await;
                }
                "content_block_start" => {
                    let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                    let block = data.get("content_block").cloned().unwrap_or(Value::Null);
                    if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                        let id = block
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        let name = block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        blocks.insert(index, id.clone());
                        emit.ok(Delta::ToolUseStart { id, name }).await;
                    } else if let Some(t) = block
                        .get("text")
                        .and_then(Value::as_str)
                        .filter(|t| !t.is_empty())
                    {
                        emit.ok(Delta::Text(t.to_owned())).await;
                    }
                }
                "content_block_delta" => {
                    let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                    let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                    match delta.get("type").and_then(Value::as_str) {
                        Some("text_delta") => {
                            let t = delta
                                .get("text")
                                .and_then(Value::as_str)
                                .unwrap_or_default();
                            emit.ok(Delta::Text(t.to_owned())).await;
                        }
                        Some("thinking_delta") => {
                            let t = delta
                                .get("thinking")
                                .and_then(Value::as_str)
                                .unwrap_or_default();
                            emit.ok(Delta::Thinking(t.to_owned())).await;
                        }
                        Some("input_json_delta") => {
                            let j = delta
                                .get("partial_json")
                                .and_then(Value::as_str)
                                .unwrap_or_default();
                            let id = blocks.get(&index).cloned().unwrap_or_default();
                            emit.ok(Delta::ToolInput {
                                id,
                                json: j.to_owned(),
                            })
                            .await;
                        }
                        _ => {} // signature_delta and future kinds carry nothing to show
                    }
                }
                "content_block_stop" | "ping" => {}
                "message_delta" => {
                    let output = data.pointer("/usage/output_tokens").and_then(Value::as_u64);
                    let input = data.pointer("/usage/input_tokens").and_then(Value::as_u64);
                    if output.is_some() || input.is_some() {
                        emit.ok(Delta::Usage { input, output }).await;
                    }
                    if let Some(r) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                        emit.ok(Delta::Done {
                            stop_reason: Some(r.to_owned()),
                        })
                        .await;
                        stopped = true;
                    }
                }
                "message_stop" => {
                    if !stopped {
                        emit.ok(Delta::Done { stop_reason: None }).await;
                    }
                    return;
                }
                "error" => {
                    let msg = data
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown error");
                    let ty = data
                        .pointer("/error/type")
                        .and_then(Value::as_str)
                        .unwrap_or("error");
                    return emit
                        .err(ProviderError::Midstream(format!("{ty}: {msg}")))
                        .await;
                }
                _ => {}
            }
        }
        emit.err(ProviderError::Cut).await
    })))
}

#[derive(serde::Deserialize)]
struct TextDeltaEvent<'a> {
    #[serde(borrow)]
    delta: TextDelta<'a>,
}

#[derive(serde::Deserialize)]
struct TextDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: &'a str,
    #[serde(borrow, default)]
    text: Option<std::borrow::Cow<'a, str>>,
}

/// A tiny generator: runs `f` with an emitter feeding a channel-backed stream.
pub(super) fn async_stream_like<F, Fut>(
    f: F,
) -> impl futures::Stream<Item = Result<Delta, ProviderError>> + Send
where
    F: FnOnce(Emitter) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(f(Emitter(tx)));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// Sends items to the stream; when the reader has gone, sending does nothing and the
/// producer's next `is_closed` check (or the dropped HTTP body) ends it.
pub(super) struct Emitter(tokio::sync::mpsc::Sender<Result<Delta, ProviderError>>);

impl Emitter {
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    /// The next item of `fut`, or `None` once the reader has gone: the provider's body is
    /// then dropped, which closes the request (how an abort reaches the provider).
    pub async fn next_or_closed<T>(
        &self,
        fut: impl std::future::Future<Output = Option<T>>,
    ) -> Option<T> {
        tokio::select! {
            item = fut => item,
            _ = self.0.closed() => None,
        }
    }

    pub async fn ok(&mut self, d: Delta) {
        let _ = self.0.send(Ok(d)).await;
    }
    pub async fn err(&mut self, e: ProviderError) {
        let _ = self.0.send(Err(e)).await;
    }
}
