//! OpenAI's Chat Completions, streaming (also Ollama, vLLM, llama.cpp): `data:` chunks with
//! `choices[].delta` (content, tool_calls), a usage chunk when `stream_options.include_usage`
//! is set, and `data: [DONE]`.

use eventsource_stream::Eventsource;
use futures::StreamExt;
use hero_shared::api::ProviderKind;
use serde_json::{Value, json};

use super::anthropic::async_stream_like;
use super::{
    Call, CallOptions, Delta, DeltaStream, ProviderError, Role, endpoint, error_message_from,
    normalize, send_with_retry, sse_error,
};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub fn body(call: &Call<'_>) -> Value {
    let mut messages = Vec::new();
    if !call.system.is_empty() {
        messages.push(json!({"role": "system", "content": call.system}));
    }
    messages.extend(
        normalize(call.messages.clone())
            .into_iter()
            .map(|m| json!({"role": if m.role == Role::User { "user" } else { "assistant" }, "content": m.content})),
    );
    let mut body = serde_json::Map::new();
    for (k, v) in &call.agent.config {
        body.insert(k.clone(), v.clone());
    }
    body.insert("model".into(), json!(call.agent.model));
    body.insert("messages".into(), json!(messages));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
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
    let key = call.agent.api_key.clone();
    if key.is_none() && call.agent.provider == ProviderKind::OpenAi {
        return Err(ProviderError::Config(
            "this agent has no API key; set one on the Agents page".into(),
        ));
    }
    let base = call.agent.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
    let url = endpoint(base, "/chat/completions");
    let body = body(call);
    let resp = send_with_retry(
        opts,
        || {
            let req = client.post(&url).json(&body);
            match &key {
                Some(k) => req.bearer_auth(k),
                None => req,
            }
        },
        read_error,
    )
    .await?;
    let mut events = resp.bytes_stream().eventsource();
    Ok(Box::pin(async_stream_like(move |mut emit| async move {
        let mut tool_ids: std::collections::HashMap<u64, String> = Default::default();
        let mut finished = false;
        while let Some(ev) = emit.next_or_closed(events.next()).await {
            let ev = match ev {
                Ok(ev) => ev,
                Err(e) => return emit.err(sse_error(e)).await,
            };
            if ev.data.trim() == "[DONE]" {
                if !finished {
                    emit.ok(Delta::Done { stop_reason: None }).await;
                }
                return;
            }
            let chunk: Value = match serde_json::from_str(&ev.data) {
                Ok(v) => v,
                Err(e) => {
                    return emit
                        .err(ProviderError::Protocol(format!("chunk: {e}")))
                        .await;
                }
            };
            if let Some(err) = chunk.get("error") {
                let msg = err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error");
                return emit.err(ProviderError::Midstream(msg.to_owned())).await;
            }
            if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
                let input = u.get("prompt_tokens").and_then(Value::as_u64);
                let output = u.get("completion_tokens").and_then(Value::as_u64);
                emit.ok(Delta::Usage { input, output }).await;
            }
            for choice in chunk
                .get("choices")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
                if let Some(t) = delta
                    .get("content")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                {
                    emit.ok(Delta::Text(t.to_owned())).await;
                }
                // Some compatible servers stream reasoning separately.
                if let Some(t) = delta
                    .get("reasoning_content")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                {
                    emit.ok(Delta::Thinking(t.to_owned())).await;
                }
                for call in delta
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                    if let Some(id) = call.get("id").and_then(Value::as_str) {
                        let name = call
                            .pointer("/function/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        tool_ids.insert(index, id.to_owned());
                        emit.ok(Delta::ToolUseStart {
                            id: id.to_owned(),
                            name: name.to_owned(),
                        })
                        .await;
                    }
                    if let Some(args) = call
                        .pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .filter(|a| !a.is_empty())
                    {
                        let id = tool_ids.get(&index).cloned().unwrap_or_default();
                        emit.ok(Delta::ToolInput {
                            id,
                            json: args.to_owned(),
                        })
                        .await;
                    }
                }
                if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                    emit.ok(Delta::Done {
                        stop_reason: Some(r.to_owned()),
                    })
                    .await;
                    finished = true;
                }
            }
        }
        emit.err(ProviderError::Cut).await
    })))
}
