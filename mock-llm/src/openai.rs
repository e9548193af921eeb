//! OpenAI Chat Completions (`POST /v1/chat/completions`): request validation, the chunk
//! sequence ending in `data: [DONE]`, the non-streaming completion and error bodies.
//!
//! Thinking, which OpenAI itself does not stream, goes out as `delta.reasoning_content`, the
//! field OpenAI-compatible servers (vLLM, DeepSeek) use; a client that ignores it sees
//! exactly OpenAI's stream.

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::{
    reply::{Block, Event, Reply},
    request::{Request, directive_source, prompt_chars},
    script::StopReason,
};

pub(crate) fn validate(body: Option<&Value>) -> Result<Request, String> {
    let body = body
        .filter(|b| b.is_object())
        .ok_or("We could not parse the JSON body of your request.")?;
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or("you must provide a model parameter")?;
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("Missing required parameter: 'messages'.")?;
    if messages.is_empty() {
        return Err("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.".into());
    }
    for (i, m) in messages.iter().enumerate() {
        if m.get("role").and_then(Value::as_str).is_none() {
            return Err(format!("Missing required parameter: 'messages[{i}].role'."));
        }
        // An image part's URL: a web address or a base64 data URL.
        let parts = m.get("content").and_then(Value::as_array);
        for (j, p) in parts.into_iter().flatten().enumerate() {
            if p.get("type").and_then(Value::as_str) != Some("image_url") {
                continue;
            }
            let url = p
                .pointer("/image_url/url")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let ok = match url.strip_prefix("data:") {
                Some(rest) => rest.split_once(";base64,").is_some_and(|(media, data)| {
                    media.starts_with("image/")
                        && crate::request::is_base64(&Value::String(data.to_owned()))
                }),
                None => url.starts_with("https://") || url.starts_with("http://"),
            };
            if !ok {
                return Err(format!(
                    "Invalid image URL: 'messages[{i}].content[{j}].image_url.url' is not a web address or a base64 data URL."
                ));
            }
        }
    }
    let include_usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let source = directive_source(messages);
    Ok(Request {
        model: model.to_string(),
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        include_usage,
        prompt_chars: prompt_chars(messages),
        last_user_text: source.0,
        rounds_after: source.1,
        context: messages.clone(),
    })
}

pub(crate) fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
    }
}

/// What every chunk of one stream has in common.
pub(crate) struct Chunker<'a> {
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
    /// With `stream_options.include_usage`, OpenAI sends `"usage": null` on every chunk and
    /// the numbers on a last chunk with no choices.
    pub include_usage: bool,
}

impl Chunker<'_> {
    /// Written by hand rather than through a `Value`: this is the hot path of a benchmark
    /// (thousands of chunks a second), and it keeps OpenAI's field order.
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Bytes {
        let finish = finish.map_or("null".to_string(), json_str);
        let usage = if self.include_usage {
            ",\"usage\":null"
        } else {
            ""
        };
        Bytes::from(format!(
            "data: {{\"id\":{},\"object\":\"chat.completion.chunk\",\"created\":{},\"model\":{},\
             \"system_fingerprint\":null,\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\
             \"finish_reason\":{finish}}}]{usage}}}\n\n",
            json_str(self.id),
            self.created,
            json_str(self.model),
        ))
    }

    pub fn head(&self, out: &mut Vec<Bytes>) {
        out.push(self.chunk(json!({"role": "assistant", "content": ""}), None));
    }

    pub fn event(&self, ev: Event<'_>, reply: &Reply, out: &mut Vec<Bytes>) {
        let delta = match (ev, &reply.blocks[block_of(ev)]) {
            (Event::Delta(_, s), Block::Thinking(_)) => json!({"reasoning_content": s}),
            (Event::Delta(_, s), Block::Text(_)) => json!({"content": s}),
            (Event::BlockStart(i), Block::ToolUse { id, name, .. }) => json!({"tool_calls": [{
                "index": reply.tool_index(i), "id": id, "type": "function",
                "function": {"name": name, "arguments": ""},
            }]}),
            (Event::Delta(i, s), Block::ToolUse { .. }) => {
                json!({"tool_calls": [{"index": reply.tool_index(i), "function": {"arguments": s}}]})
            }
            _ => return,
        };
        out.push(self.chunk(delta, None));
    }

    pub fn tail(&self, reply: &Reply, out: &mut Vec<Bytes>) {
        out.push(self.chunk(json!({}), Some(finish_reason(reply.stop))));
        if self.include_usage {
            out.push(data(&json!({
                "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "system_fingerprint": null, "choices": [], "usage": usage(reply),
            })));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }
}

fn block_of(ev: Event<'_>) -> usize {
    match ev {
        Event::BlockStart(i) | Event::Delta(i, _) | Event::BlockStop(i) => i,
    }
}

fn json_str(s: &str) -> String {
    Value::from(s).to_string()
}

fn data(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

pub(crate) fn midstream_error(out: &mut Vec<Bytes>) {
    out.push(data(&error_body("Overloaded", "server_error", None)));
}

/// OpenAI counts cached prompt tokens in `prompt_tokens` and again in its details.
fn usage(reply: &Reply) -> Value {
    let u = reply.usage;
    let p = u.input + u.cache_read + u.cache_write;
    json!({
        "prompt_tokens": p, "completion_tokens": u.output, "total_tokens": p + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cache_read},
    })
}

/// The whole completion, for `stream: false`.
pub(crate) fn completion(id: &str, created: u64, reply: &Reply) -> Value {
    let text = reply.text();
    let tools: Vec<Value> = reply
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, name, input } => {
                Some(json!({"id": id, "type": "function", "function": {"name": name, "arguments": input}}))
            }
            _ => None,
        })
        .collect();
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && !tools.is_empty() { Value::Null } else { Value::String(text) },
        "refusal": null,
    });
    if !tools.is_empty() {
        message["tool_calls"] = Value::Array(tools);
    }
    if let Some(t) = reply.thinking() {
        message["reasoning_content"] = Value::String(t.to_string());
    }
    json!({
        "id": id, "object": "chat.completion", "created": created, "model": reply.model,
        "system_fingerprint": null,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason(reply.stop)}],
        "usage": usage(reply),
    })
}

pub(crate) fn error_body(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}
