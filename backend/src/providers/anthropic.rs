//! Anthropic's Messages API, streaming: `message_start`, `content_block_start/delta/stop`
//! (text, thinking, tool_use with input JSON deltas), `message_delta` (usage, stop reason),
//! `message_stop`, `ping`, `error`.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{
    Call, CallOptions, Decoder, Delta, DeltaStream, Pending, ProviderError, Role, Step, Turned,
    body_json, brief, config_entries, drive, error_message_from, normalize, send_with_retry,
    sse_events, target,
};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const API_VERSION: &str = "2023-06-01";
const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The request's JSON body.
pub fn body(call: &Call<'_>) -> bytes::Bytes {
    let turned = normalize(&call.messages);
    let messages: Vec<Message<'_>> = turned.iter().map(Message::of).collect();
    body_json(
        &Body {
            call,
            messages: &messages,
        },
        call,
        &turned,
    )
}

/// The body's keys that are Hero's; an agent's config may set any other (`max_tokens`
/// overrides Hero's default).
const HERO_KEYS: &[&str] = &["model", "system", "messages", "tools", "stream"];

struct Body<'a> {
    call: &'a Call<'a>,
    messages: &'a [Message<'a>],
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (call, config) = (self.call, &self.call.endpoint.config);
        let mut m = s.serialize_map(None)?;
        if !config.contains_key("max_tokens") {
            m.serialize_entry("max_tokens", &DEFAULT_MAX_TOKENS)?;
        }
        for (k, v) in config_entries(config, HERO_KEYS) {
            m.serialize_entry(k, v)?;
        }
        m.serialize_entry("model", &call.endpoint.model)?;
        if !call.system.is_empty() {
            m.serialize_entry("system", &call.system)?;
        }
        m.serialize_entry("messages", self.messages)?;
        if !call.tools.is_empty() {
            let tools: Vec<&RawValue> = call.tools.iter().map(|t| &*t.anthropic).collect();
            m.serialize_entry("tools", &tools)?;
        }
        m.serialize_entry("stream", &!call.whole)?;
        m.end()
    }
}

/// A message: its text alone, or blocks when it carries tool calls or results.
#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Content<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(&'a str),
    Blocks(Vec<Block<'a>>),
}

/// An image's bytes as the Messages API takes them.
#[derive(Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: &'a str,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Image {
        source: ImageSource<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        is_error: bool,
    },
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Input<'a>,
    },
}

/// A tool call's input: an object as the API wants one (`{}` for anything else).
struct Input<'a>(&'a Value);

impl Serialize for Input<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(o) => o.serialize(s),
            _ => s.serialize_map(Some(0))?.end(),
        }
    }
}

impl<'a> Message<'a> {
    fn of(m: &'a Turned<'a>) -> Self {
        let role = if m.role == Role::User {
            "user"
        } else {
            "assistant"
        };
        if m.tool_calls.is_empty() && m.tool_results.is_empty() && m.images.is_empty() {
            return Message {
                role,
                content: Content::Text(&m.content),
            };
        }
        let mut blocks: Vec<Block<'a>> = m
            .tool_results
            .iter()
            .map(|r| Block::ToolResult {
                tool_use_id: &r.tool_use_id,
                content: &r.content,
                is_error: r.is_error,
            })
            .collect();
        // Images before the words about them, as Anthropic advises.
        blocks.extend(m.images.iter().filter_map(|i| {
            Some(Block::Image {
                source: ImageSource {
                    kind: "base64",
                    media_type: &i.media_type,
                    data: i.data.as_deref()?,
                },
            })
        }));
        if !m.content.trim().is_empty() {
            blocks.push(Block::Text { text: &m.content });
        }
        blocks.extend(m.tool_calls.iter().map(|c| Block::ToolUse {
            id: &c.id,
            name: &c.name,
            input: Input(&c.input),
        }));
        Message {
            role,
            content: Content::Blocks(blocks),
        }
    }
}

fn read_error(body: &str) -> Option<String> {
    error_message_from(body, "/error/message")
}

pub async fn stream(
    client: &crate::execution::egress::Outbound,
    opts: &CallOptions,
    call: &Call<'_>,
) -> Result<DeltaStream, ProviderError> {
    let key = call.endpoint.api_key.clone().ok_or_else(|| {
        ProviderError::Config("this agent has no API key; set one on the Agents page".into())
    })?;
    let url = target(
        client,
        call.endpoint
            .base_url
            .as_deref()
            .unwrap_or(DEFAULT_BASE_URL),
        "/v1/messages",
    )?;
    let body = body(call);
    let resp = send_with_retry(
        opts,
        &url,
        || {
            client
                .post(&url)
                .header("x-api-key", &key)
                .header("anthropic-version", API_VERSION)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone())
        },
        read_error,
    )
    .await?;
    if super::is_whole(&resp) {
        return super::whole(resp, opts.first_byte_timeout, whole_message).await;
    }
    Ok(drive(sse_events(resp), AnthropicDecoder::default()))
}

/// The deltas of a whole Messages API answer (`stream: false`'s shape), in its order.
fn whole_message(v: &serde_json::Value) -> Vec<Delta> {
    use serde_json::Value;
    let mut out = Vec::new();
    for block in v["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => out.push(Delta::Text(block["text"].as_str().unwrap_or("").into())),
            Some("thinking") => out.push(Delta::Thinking(
                block["thinking"].as_str().unwrap_or("").into(),
            )),
            Some("tool_use") => {
                let id = block["id"].as_str().unwrap_or("").to_owned();
                out.push(Delta::ToolUseStart {
                    id: id.clone(),
                    name: block["name"].as_str().unwrap_or("").into(),
                });
                out.push(Delta::ToolInput {
                    id,
                    json: block
                        .get("input")
                        .map_or_else(String::new, Value::to_string),
                });
            }
            _ => {}
        }
    }
    out.push(Delta::Usage(super::Tokens::anthropic(v.get("usage"))));
    out.push(Delta::Done {
        stop_reason: v["stop_reason"].as_str().map(str::to_owned),
    });
    out
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
        if &*ev.event == "content_block_delta"
            && let Ok(TextDeltaEvent {
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
                let mut tokens = super::Tokens::anthropic(data.pointer("/message/usage"));
                // The output so far (1) is not the reply's: its count comes at the end.
                tokens.output = None;
                out.push_back(Ok(Delta::Usage(tokens)));
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
                let tokens = super::Tokens::anthropic(data.get("usage"));
                if !tokens.is_empty() {
                    out.push_back(Ok(Delta::Usage(tokens)));
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
                out.push_back(Err(ProviderError::Midstream(brief(&format!(
                    "{ty}: {msg}"
                )))));
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
