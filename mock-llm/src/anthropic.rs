//! Anthropic Messages API (`POST /v1/messages`): request validation, the SSE event sequence,
//! the non-streaming message and error bodies, shaped as the real API shapes them.

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::{
    reply::{Block, Event, Reply, SIGNATURE},
    request::{Request, directive_source, prompt_chars},
    script::StopReason,
};

/// Reads a request body as the real API checks it: `model`, `max_tokens` and a non-empty
/// `messages` array are required.
pub(crate) fn validate(body: Option<&Value>) -> Result<Request, String> {
    let body = body
        .filter(|b| b.is_object())
        .ok_or("The request body is not valid JSON.")?;
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or("model: Field required")?;
    match body.get("max_tokens") {
        Some(v) if v.as_u64().is_some_and(|n| n >= 1) => {}
        Some(_) => return Err("max_tokens: Input should be a valid positive integer".into()),
        None => return Err("max_tokens: Field required".into()),
    }
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("messages: Field required")?;
    if messages.is_empty() {
        return Err("messages: at least one message is required".into());
    }
    for (i, m) in messages.iter().enumerate() {
        match m.get("role").and_then(Value::as_str) {
            Some("user" | "assistant") => {}
            _ => {
                return Err(format!(
                    "messages.{i}.role: Input should be 'user' or 'assistant'"
                ));
            }
        }
        if m.get("content").is_none() {
            return Err(format!("messages.{i}.content: Field required"));
        }
        // Image blocks as the Messages API takes them: base64 of a known image type.
        let blocks = m.get("content").and_then(Value::as_array);
        for (j, b) in blocks.into_iter().flatten().enumerate() {
            if b.get("type").and_then(Value::as_str) != Some("image") {
                continue;
            }
            let source = &b["source"];
            let media = source["media_type"].as_str().unwrap_or_default();
            let known = ["image/png", "image/jpeg", "image/gif", "image/webp"].contains(&media);
            if source["type"] != "base64" || !known || !crate::request::is_base64(&source["data"]) {
                return Err(format!(
                    "messages.{i}.content.{j}.source: an image is {{type: base64, media_type: image/png|jpeg|gif|webp, data}}"
                ));
            }
        }
    }
    // Anthropic keeps the system prompt beside the messages; echo shows it first, as a
    // message with role "system", so a test sees the whole context in one list.
    let mut context = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = body.get("system") {
        context.push(json!({"role": "system", "content": system}));
    }
    context.extend(messages.iter().cloned());
    let source = directive_source(messages);
    Ok(Request {
        model: model.to_string(),
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        include_usage: true,
        prompt_chars: prompt_chars(&context),
        last_user_text: source.0,
        rounds_after: source.1,
        context,
    })
}

pub(crate) fn stop_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
    }
}

fn frame(event: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

pub(crate) fn head(id: &str, reply: &Reply, out: &mut Vec<Bytes>) {
    let message = json!({
        "id": id, "type": "message", "role": "assistant", "model": reply.model, "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {
            "input_tokens": reply.usage.input, "output_tokens": 1,
            "cache_creation_input_tokens": reply.usage.cache_write,
            "cache_read_input_tokens": reply.usage.cache_read,
        },
    });
    out.push(frame(
        "message_start",
        &json!({"type": "message_start", "message": message}),
    ));
    out.push(frame("ping", &json!({"type": "ping"})));
}

pub(crate) fn event(ev: Event<'_>, reply: &Reply, out: &mut Vec<Bytes>) {
    match ev {
        Event::BlockStart(i) => {
            let block = match &reply.blocks[i] {
                Block::Thinking(_) => json!({"type": "thinking", "thinking": ""}),
                Block::Text(_) => json!({"type": "text", "text": ""}),
                Block::ToolUse { id, name, .. } => {
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}})
                }
            };
            out.push(frame(
                "content_block_start",
                &json!({"type": "content_block_start", "index": i, "content_block": block}),
            ));
        }
        Event::Delta(i, piece) => {
            // By hand, not through a `Value`: the hot path of a benchmark, in Anthropic's
            // field order.
            let (kind, field) = match &reply.blocks[i] {
                Block::Thinking(_) => ("thinking_delta", "thinking"),
                Block::Text(_) => ("text_delta", "text"),
                Block::ToolUse { .. } => ("input_json_delta", "partial_json"),
            };
            out.push(Bytes::from(format!(
                "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{i},\
                 \"delta\":{{\"type\":\"{kind}\",\"{field}\":{}}}}}\n\n",
                Value::from(piece)
            )));
        }
        Event::BlockStop(i) => {
            if let Block::Thinking(_) = reply.blocks[i] {
                let delta = json!({"type": "signature_delta", "signature": SIGNATURE});
                out.push(frame(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": i, "delta": delta}),
                ));
            }
            out.push(frame(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": i}),
            ));
        }
    }
}

pub(crate) fn tail(reply: &Reply, out: &mut Vec<Bytes>) {
    let delta = json!({"stop_reason": stop_reason(reply.stop), "stop_sequence": null});
    out.push(frame("message_delta", &json!({"type": "message_delta", "delta": delta, "usage": {"output_tokens": reply.usage.output}})));
    out.push(frame("message_stop", &json!({"type": "message_stop"})));
}

pub(crate) fn midstream_error(out: &mut Vec<Bytes>) {
    out.push(frame(
        "error",
        &error_body("overloaded_error", "Overloaded"),
    ));
}

/// The whole message, for `stream: false`.
pub(crate) fn message(id: &str, reply: &Reply) -> Value {
    let content: Vec<Value> = reply
        .blocks
        .iter()
        .map(|b| match b {
            Block::Thinking(t) => {
                json!({"type": "thinking", "thinking": t, "signature": SIGNATURE})
            }
            Block::Text(t) => json!({"type": "text", "text": t}),
            Block::ToolUse { id, name, input } => json!({
                "type": "tool_use", "id": id, "name": name,
                "input": serde_json::from_str::<Value>(input).unwrap_or(Value::Null),
            }),
        })
        .collect();
    json!({
        "id": id, "type": "message", "role": "assistant", "model": reply.model, "content": content,
        "stop_reason": stop_reason(reply.stop), "stop_sequence": null,
        "usage": {
            "input_tokens": reply.usage.input, "output_tokens": reply.usage.output,
            "cache_creation_input_tokens": reply.usage.cache_write,
            "cache_read_input_tokens": reply.usage.cache_read,
        },
    })
}

pub(crate) fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}
