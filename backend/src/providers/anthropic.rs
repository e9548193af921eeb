//! Anthropic's Messages API, streaming: `message_start`, `content_block_start/delta/stop`
//! (text, thinking, tool_use with input JSON deltas), `message_delta` (usage, stop reason),
//! `message_stop`, `ping`, `error`.

use serde_json::{Value, json};

use super::{
    Call, CallOptions, Decoder, Delta, DeltaStream, Pending, ProviderError, Role, Step, drive,
    endpoint, error_message_from, normalize, send_with_retry, sse_events,
};

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
    Ok(drive(sse_events(resp), AnthropicDecoder::default()))
}

#[derive(Default)]
pub(crate) struct AnthropicDecoder {
    /// Content block index → tool_use id, for input JSON deltas.
    blocks: std::collections::HashMap<u64, String>,
    stopped: bool,
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, ev: &sseer::event::Event, out: &mut Pending) -> Step {
        // The hot path, once per token: a text delta read into borrowed fields, no tree.
        if &*ev.event == "content_block_delta" {
            if let Ok(TextDeltaEvent {
                delta:
                    TextDelta {
                        kind: "text_delta",
                        text: Some(t),
                    },
            }) = serde_json::from_str::<TextDeltaEvent<'_>>(&ev.data)
            {
                out.push_back(Ok(Delta::Text(t.into_owned())));
                return Step::More;
            }
        }
        let data: Value = match serde_json::from_str(&ev.data) {
            Ok(v) => v,
            Err(_) if &*ev.event == "ping" => return Step::More,
            Err(e) => {
                out.push_back(Err(ProviderError::Protocol(format!(
                    "{} event: {e}",
                    ev.event
                ))));
                return Step::End;
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
                out.push_back(Ok(Delta::Usage {
                    input,
                    output: None,
                }));
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
                    self.blocks.insert(index, id.clone());
                    out.push_back(Ok(Delta::ToolUseStart { id, name }));
                } else if let Some(t) = block
                    .get("text")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                {
                    out.push_back(Ok(Delta::Text(t.to_owned())));
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
                        out.push_back(Ok(Delta::Text(t.to_owned())));
                    }
                    Some("thinking_delta") => {
                        let t = delta
                            .get("thinking")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        out.push_back(Ok(Delta::Thinking(t.to_owned())));
                    }
                    Some("input_json_delta") => {
                        let j = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        let id = self.blocks.get(&index).cloned().unwrap_or_default();
                        out.push_back(Ok(Delta::ToolInput {
                            id,
                            json: j.to_owned(),
                        }));
                    }
                    _ => {} // signature_delta and future kinds carry nothing to show
                }
            }
            "message_delta" => {
                let output = data.pointer("/usage/output_tokens").and_then(Value::as_u64);
                let input = data.pointer("/usage/input_tokens").and_then(Value::as_u64);
                if output.is_some() || input.is_some() {
                    out.push_back(Ok(Delta::Usage { input, output }));
                }
                if let Some(r) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    out.push_back(Ok(Delta::Done {
                        stop_reason: Some(r.to_owned()),
                    }));
                    self.stopped = true;
                }
            }
            "message_stop" => {
                if !self.stopped {
                    out.push_back(Ok(Delta::Done { stop_reason: None }));
                }
                return Step::End;
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
                out.push_back(Err(ProviderError::Midstream(format!("{ty}: {msg}"))));
                return Step::End;
            }
            _ => {} // content_block_stop, ping
        }
        Step::More
    }
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

#[cfg(test)]
mod cost {
    use super::*;
    use futures::{FutureExt, StreamExt};

    /// Not a test: what one token costs in this process's pipeline, warm, on one thread.
    /// `cargo test --release -p hero-backend --lib cost -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn per_token_pipeline_cost() {
        const N: usize = 200_000;
        let ev = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word\"}}\n\n";
        let chunks: Vec<&'static [u8]> = (0..N).map(|_| ev.as_bytes()).collect();
        let t = std::time::Instant::now();
        let mut events = sseer::EventStream::new(futures::stream::iter(
            chunks.clone().into_iter().map(Ok::<_, std::io::Error>),
        ));
        let mut n = 0;
        while let Some(Some(Ok(e))) = events.next().now_or_never() {
            assert_eq!(&*e.event, "content_block_delta");
            n += 1;
        }
        let sse = t.elapsed();
        assert_eq!(n, N);
        let t = std::time::Instant::now();
        let mut deltas = drive(
            sseer::EventStream::new(futures::stream::iter(
                chunks.into_iter().map(Ok::<_, std::io::Error>),
            )),
            AnthropicDecoder::default(),
        );
        let mut parser = hero_shared::hml::StreamParser::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut out = 0usize;
        let mid = "0193a0b1-7c2d-7e3f-8a9b-0c1d2e3f4a5b".to_owned();
        while let Some(Some(Ok(Delta::Text(text)))) = deltas.next().now_or_never() {
            let mut evs = Vec::new();
            parser.feed_str_with(&text, |ev| {
                if let Some(e) = hero_shared::wire::SseEvent::from_parser_event(&mid, &ev, None) {
                    evs.push(e);
                }
            });
            buf.reserve(4096);
            for e in evs {
                let _ = e.write_sse(&mut buf);
            }
            out += std::mem::take(&mut buf).len();
        }
        let all = t.elapsed();
        assert!(out > 0);
        println!(
            "per token: sse decode {:.2} µs; decode + anthropic + hml + event + write {:.2} µs",
            sse.as_secs_f64() * 1e6 / N as f64,
            all.as_secs_f64() * 1e6 / N as f64
        );
    }

    /// Not a test: the same pipeline for many streams taken in turn, one token each per
    /// round, as a server meets them: each stream's state is cold when its next token comes.
    /// `cargo test --release -p hero-backend --lib cost -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn per_token_pipeline_cost_interleaved() {
        let ev: &'static [u8] = b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word\"}}\n\n";
        for n in [1usize, 100, 1000, 3000] {
            let rounds = 300_000 / n;
            let mut pipes: Vec<_> = (0..n)
                .map(|_| {
                    let (tx, rx) = futures::channel::mpsc::unbounded::<
                        Result<&'static [u8], std::io::Error>,
                    >();
                    let deltas = drive(sseer::EventStream::new(rx), AnthropicDecoder::default());
                    (
                        tx,
                        deltas,
                        hero_shared::hml::StreamParser::new(),
                        Vec::<u8>::new(),
                        String::new(),
                    )
                })
                .collect();
            let mid = "0193a0b1-7c2d-7e3f-8a9b-0c1d2e3f4a5b".to_owned();
            let mut out = 0usize;
            let t = std::time::Instant::now();
            for _ in 0..rounds {
                for (tx, deltas, parser, buf, text) in pipes.iter_mut() {
                    tx.unbounded_send(Ok(ev)).unwrap();
                    let Some(Some(Ok(Delta::Text(t)))) = deltas.next().now_or_never() else {
                        panic!("no delta")
                    };
                    let mut evs = Vec::new();
                    parser.feed_str_with(&t, |ev| {
                        if let Some(e) =
                            hero_shared::wire::SseEvent::from_parser_event(&mid, &ev, None)
                        {
                            evs.push(e);
                        }
                    });
                    text.push_str(&t);
                    buf.reserve(4096);
                    for e in evs {
                        let _ = e.write_sse(&mut *buf);
                    }
                    out += std::hint::black_box(std::mem::take(buf)).len();
                }
            }
            let el = t.elapsed();
            assert!(out > 0);
            println!(
                "{n} streams in turn: {:.2} µs per token",
                el.as_secs_f64() * 1e6 / (rounds * n) as f64
            );
        }
    }
}
