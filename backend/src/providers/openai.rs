//! OpenAI's Chat Completions, streaming (also Ollama, vLLM, llama.cpp): `data:` chunks with
//! `choices[].delta` (content, tool_calls), a usage chunk when `stream_options.include_usage`
//! is set, and `data: [DONE]`.

use hero_shared::api::ProviderKind;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{
    Call, CallOptions, Decoder, Delta, DeltaStream, Pending, ProviderError, Role, Step, body_json,
    brief, config_entries, drive, error_message_from, normalize, send_with_retry, sse_events,
    target,
};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The request's JSON body.
pub fn body(call: &Call<'_>) -> bytes::Bytes {
    let turned = normalize(&call.messages);
    let mut messages: Vec<Message<'_>> = Vec::with_capacity(turned.len() + 1);
    if !call.system.is_empty() {
        messages.push(Message::System {
            role: "system",
            content: &call.system,
        });
    }
    for m in &turned {
        messages.extend(m.tool_results.iter().map(|r| Message::Tool {
            role: "tool",
            tool_call_id: &r.tool_use_id,
            content: &r.content,
        }));
        let role = if m.role == Role::User {
            "user"
        } else {
            "assistant"
        };
        if m.role == Role::Assistant && !m.tool_calls.is_empty() {
            let tool_calls = m
                .tool_calls
                .iter()
                .map(|c| FunctionCall {
                    id: &c.id,
                    kind: "function",
                    function: Function {
                        name: &c.name,
                        arguments: if c.input.is_object() {
                            c.input.to_string()
                        } else {
                            "{}".into()
                        },
                    },
                })
                .collect();
            let content = (!m.content.trim().is_empty()).then_some(&*m.content);
            messages.push(Message::Calls {
                role,
                content,
                tool_calls,
            });
        } else if !m.images.is_empty() {
            // Content parts: the text, then each image as a data URL.
            let mut parts = vec![Part::Text { text: &m.content }];
            parts.extend(m.images.iter().filter_map(|i| {
                let data = i.data.as_deref()?;
                Some(Part::ImageUrl {
                    image_url: ImageUrl {
                        url: format!("data:{};base64,{data}", i.media_type),
                    },
                })
            }));
            messages.push(Message::Parts {
                role,
                content: parts,
            });
        } else if !m.content.trim().is_empty() || m.tool_results.is_empty() {
            messages.push(Message::Text {
                role,
                content: &m.content,
            });
        }
    }
    body_json(
        &Body {
            call,
            messages: &messages,
        },
        call,
        &turned,
    )
}

/// The body's keys that are Hero's; an agent's config may set any other.
const HERO_KEYS: &[&str] = &["model", "messages", "tools", "stream", "stream_options"];

struct Body<'a> {
    call: &'a Call<'a>,
    messages: &'a [Message<'a>],
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let call = self.call;
        let mut m = s.serialize_map(None)?;
        for (k, v) in config_entries(&call.endpoint.config, HERO_KEYS) {
            m.serialize_entry(k, v)?;
        }
        m.serialize_entry("model", &call.endpoint.model)?;
        m.serialize_entry("messages", self.messages)?;
        if !call.tools.is_empty() {
            let tools: Vec<&RawValue> = call.tools.iter().map(|t| &*t.openai).collect();
            m.serialize_entry("tools", &tools)?;
        }
        m.serialize_entry("stream", &!call.whole)?;
        if !call.whole {
            m.serialize_entry(
                "stream_options",
                &StreamOptions {
                    include_usage: true,
                },
            )?;
        }
        m.end()
    }
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Message<'a> {
    /// A tool call's result, in a message of its own.
    Tool {
        role: &'static str,
        tool_call_id: &'a str,
        content: &'a str,
    },
    /// An assistant's tool calls, with its text if it wrote any (`null` if not).
    Calls {
        role: &'static str,
        content: Option<&'a str>,
        tool_calls: Vec<FunctionCall<'a>>,
    },
    Text {
        role: &'static str,
        content: &'a str,
    },
    /// The system prompt, its JSON kept ([`super::SystemPrompt`]).
    System {
        role: &'static str,
        content: &'a super::SystemPrompt,
    },
    /// A user's text with the images attached to it.
    Parts {
        role: &'static str,
        content: Vec<Part<'a>>,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    /// The arguments as a JSON string, as the API wants them.
    arguments: String,
}

fn read_error(body: &str) -> Option<String> {
    error_message_from(body, "/error/message")
}

pub async fn stream(
    client: &crate::execution::egress::Outbound,
    opts: &CallOptions,
    call: &Call<'_>,
) -> Result<DeltaStream, ProviderError> {
    let key = call.endpoint.api_key.clone();
    if key.is_none() && call.endpoint.provider == ProviderKind::OpenAi {
        return Err(ProviderError::Config(
            "this agent has no API key; set one on the Agents page".into(),
        ));
    }
    let base = call
        .endpoint
        .base_url
        .as_deref()
        .unwrap_or(DEFAULT_BASE_URL);
    let url = target(client, base, "/chat/completions")?;
    let body = body(call);
    let resp = send_with_retry(
        opts,
        &url,
        || {
            let req = client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            match &key {
                Some(k) => req.bearer_auth(k),
                None => req,
            }
        },
        read_error,
    )
    .await?;
    if super::is_whole(&resp) {
        return super::whole(resp, opts.first_byte_timeout, whole_completion).await;
    }
    Ok(drive(sse_events(resp), OpenAiDecoder::default()))
}

/// The deltas of a whole chat completion (`stream: false`'s shape).
fn whole_completion(v: &serde_json::Value) -> Vec<Delta> {
    use serde_json::Value;
    let mut out = Vec::new();
    let choice = &v["choices"][0];
    let message = &choice["message"];
    if let Some(t) = message["reasoning_content"]
        .as_str()
        .filter(|t| !t.is_empty())
    {
        out.push(Delta::Thinking(t.into()));
    }
    if let Some(t) = message["content"].as_str().filter(|t| !t.is_empty()) {
        out.push(Delta::Text(t.into()));
    }
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let id = call["id"].as_str().unwrap_or("").to_owned();
        out.push(Delta::ToolUseStart {
            id: id.clone(),
            name: call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
        });
        out.push(Delta::ToolInput {
            id,
            json: call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
        });
    }
    out.push(Delta::Usage(super::Tokens::openai(v.get("usage"))));
    out.push(Delta::Done {
        stop_reason: choice["finish_reason"].as_str().map(str::to_owned),
    });
    out
}

#[derive(Default)]
struct OpenAiDecoder {
    /// Tool call index → id, for argument deltas that name only the index.
    tool_ids: std::collections::HashMap<u64, String>,
    finished: bool,
}

impl Decoder for OpenAiDecoder {
    fn event(&mut self, ev: &sseer::event::Event, out: &mut Pending) -> Step {
        if ev.data.trim() == "[DONE]" {
            if !self.finished {
                out.push_back(Ok(Delta::Done { stop_reason: None }));
            }
            return Step::End;
        }
        // The hot path, once per token: a chunk that only carries text, read into borrowed
        // fields, no tree. Anything more (usage, tools, reasoning, an end, several choices)
        // takes the full reading below.
        if let Ok(TextChunk {
            choices:
                (TextChoice {
                    delta:
                        TextOnly {
                            content: Some(t),
                            reasoning_content: None,
                            tool_calls: None,
                        },
                    finish_reason: None,
                },),
            usage: None,
            error: None,
        }) = serde_json::from_str::<TextChunk<'_>>(&ev.data)
            && !t.is_empty()
        {
            out.push_back(Ok(Delta::Text(t.into_owned())));
            return Step::More;
        }
        let chunk: Value = match serde_json::from_str(&ev.data) {
            Ok(v) => v,
            Err(e) => {
                out.push_back(Err(ProviderError::Protocol(format!("chunk: {e}"))));
                return Step::End;
            }
        };
        if let Some(err) = chunk.get("error") {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("unknown error");
            out.push_back(Err(ProviderError::Midstream(brief(msg))));
            return Step::End;
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            out.push_back(Ok(Delta::Usage(super::Tokens::openai(Some(u)))));
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
                out.push_back(Ok(Delta::Text(t.to_owned())));
            }
            // Some compatible servers stream reasoning separately.
            if let Some(t) = delta
                .get("reasoning_content")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                out.push_back(Ok(Delta::Thinking(t.to_owned())));
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
                    self.tool_ids.insert(index, id.to_owned());
                    out.push_back(Ok(Delta::ToolUseStart {
                        id: id.to_owned(),
                        name: name.to_owned(),
                    }));
                }
                if let Some(args) = call
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .filter(|a| !a.is_empty())
                {
                    let id = self.tool_ids.get(&index).cloned().unwrap_or_default();
                    out.push_back(Ok(Delta::ToolInput {
                        id,
                        json: args.to_owned(),
                    }));
                }
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                out.push_back(Ok(Delta::Done {
                    stop_reason: Some(r.to_owned()),
                }));
                self.finished = true;
            }
        }
        Step::More
    }
}

/// A chunk of one choice, read for its text only ([`OpenAiDecoder`]'s hot path). Fields it
/// does not name are skipped; those that would need the full reading are named, to be seen.
#[derive(serde::Deserialize)]
struct TextChunk<'a> {
    /// Exactly one choice: a one-element tuple, no vector to allocate.
    #[serde(borrow)]
    choices: (TextChoice<'a>,),
    #[serde(default)]
    usage: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct TextChoice<'a> {
    #[serde(borrow)]
    delta: TextOnly<'a>,
    #[serde(default, borrow)]
    finish_reason: Option<&'a str>,
}

#[derive(serde::Deserialize)]
struct TextOnly<'a> {
    #[serde(borrow, default)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    reasoning_content: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    tool_calls: Option<serde::de::IgnoredAny>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    /// Every kind of chunk, text among the rest: the hot path takes only plain text, and the
    /// deltas are what the full reading makes of the same chunks.
    #[tokio::test]
    async fn chunks_decode_to_their_deltas() {
        let chunks = [
            r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"hé \"quoted\""},"logprobs":null,"finish_reason":null}],"usage":null}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"hmm"},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"a","reasoning_content":"b"},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t1","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null},{"index":1,"delta":{"content":"y"},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"end"},"finish_reason":"stop"}]}"#,
            r#"{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
        ];
        let wire: String = chunks
            .iter()
            .map(|c| format!("data: {c}\n\n"))
            .collect::<String>()
            + "data: [DONE]\n\n";
        let body = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(wire))]);
        let deltas: Vec<_> = drive(sseer::EventStream::new(body), OpenAiDecoder::default())
            .collect()
            .await;
        let text = |t: &str| Ok(Delta::Text(t.into()));
        assert_eq!(
            deltas,
            vec![
                text("hé \"quoted\""),
                Ok(Delta::Thinking("hmm".into())),
                text("a"),
                Ok(Delta::Thinking("b".into())),
                Ok(Delta::ToolUseStart {
                    id: "t1".into(),
                    name: "f".into()
                }),
                Ok(Delta::ToolInput {
                    id: "t1".into(),
                    json: "{}".into()
                }),
                text("x"),
                text("y"),
                text("end"),
                Ok(Delta::Done {
                    stop_reason: Some("stop".into())
                }),
                Ok(Delta::Usage(crate::providers::Tokens {
                    input: Some(3),
                    output: Some(4),
                    ..Default::default()
                })),
            ]
        );
    }
}
