//! Calling a model: one module per wire format, a closed enum to dispatch on
//! ([`ProviderKind`]). Each turns a provider's stream into [`Delta`]s, decoding SSE with
//! `sseer` (a real decoder: events split across reads, multi-line data, CRLF, a BOM; the
//! events' fields are views into the bytes read, not copies).
//!
//! Failure policy: a 429 before the first byte is retried (honouring `retry-after`, with
//! backoff, a few times); every other failure ends the call with a [`ProviderError`] whose
//! text a person can act on. What streamed before a failure is the caller's to keep.
//!
//! Every call goes through the egress policy ([`crate::execution::egress`]): its URL is checked before
//! each call, whatever was allowed when the agent was saved. What a provider's answer says
//! reaches the user only as the provider's JSON error message, cut to a sentence, and a
//! failed connection is one line naming the host: a base URL pointed at some other service
//! must not turn Hero into a way to read it or to map its ports.

pub mod anthropic;
pub mod openai;
pub mod scripted;

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use hero_shared::api::ProviderKind;

use crate::execution::egress::{Outbound, PublicUrl};

/// One piece of a reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    Text(String),
    Thinking(String),
    ToolUseStart {
        id: String,
        name: String,
    },
    ToolInput {
        id: String,
        json: String,
    },
    /// Token counts; each may come alone (Anthropic sends input first, output last).
    Usage(Tokens),
    /// The provider ended the reply normally.
    Done {
        stop_reason: Option<String>,
    },
}

pub type DeltaStream = Pin<Box<dyn Stream<Item = Result<Delta, ProviderError>> + Send>>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("the provider refused the API key ({status}): {message}")]
    Unauthorized { status: u16, message: String },
    #[error(
        "the provider is rate-limiting this key (429) and still was after {attempts} tries: {message}"
    )]
    RateLimited { attempts: u32, message: String },
    #[error("the provider rejected the request ({status}): {message}")]
    BadRequest { status: u16, message: String },
    #[error("the provider failed ({status}): {message}")]
    Server { status: u16, message: String },
    #[error("the provider reported an error mid-reply: {0}")]
    Midstream(String),
    #[error("the provider did not answer within {0} seconds")]
    Timeout(u64),
    #[error("the provider went silent for {0} seconds mid-reply; the reply was ended")]
    Stalled(u64),
    #[error("the reply took longer than {0} seconds and was ended")]
    Overtime(u64),
    /// One line or event of the provider's stream outgrew its cap (it would be buffered
    /// whole before anything of it could be read).
    #[error("the provider sent {0} and the reply was ended")]
    Oversized(&'static str),
    /// Why is logged, not shown: the difference between a refused connection and a closed
    /// port is what a port scanner wants to know.
    #[error("could not connect to the provider at {host}")]
    Connect { host: String },
    /// The egress policy refused the base URL, or it is not of the right form; the text
    /// says which setting would allow it.
    #[error("{0}")]
    Refused(String),
    #[error("the connection to the provider was cut mid-reply")]
    Cut,
    #[error("the provider sent something unreadable: {0}")]
    Protocol(String),
    #[error("{0}")]
    Config(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    #[default]
    User,
    Assistant,
}

/// One message of the conversation sent to a model. An assistant message may carry the
/// native tool calls it made; a user message, the results of those calls (sent before its
/// text, as both APIs want them right after the calls).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub tool_results: Vec<ToolOutput>,
    /// Images the user attached, sent before the text to a provider that reads them.
    pub images: Vec<Image>,
}

/// An image attached to a message: its bytes (base64) once the turn read them from its
/// attachment ([`crate::conversation::attachments::with_images`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    pub attachment_id: String,
    /// The file's name, as the user's message names it.
    pub name: String,
    pub media_type: String,
    pub data: Option<Arc<str>>,
}

impl ChatMessage {
    pub fn text(role: Role, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role,
            content: content.into(),
            ..ChatMessage::default()
        }
    }

    fn is_empty(&self) -> bool {
        self.content.trim().is_empty()
            && self.tool_calls.is_empty()
            && self.tool_results.is_empty()
            && self.images.is_empty()
    }
}

/// A native tool call as the model made it; `input` is `null` when its arguments were not
/// a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: serde_json::Value,
}

/// A tool call's result, as the model is given it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub tool_use_id: String,
    pub content: String,
    pub is_error: bool,
}

/// A function the model is offered as a native tool: its JSON as each API lists it, written
/// once ([`Tool::new`]) and copied into every request that offers it.
#[derive(Debug, Clone)]
pub struct Tool {
    anthropic: Box<serde_json::value::RawValue>,
    openai: Box<serde_json::value::RawValue>,
}

impl Tool {
    /// `schema`: the JSON Schema of its arguments.
    pub fn new(name: &str, description: &str, schema: &serde_json::Value) -> Tool {
        let raw = |v: serde_json::Value| {
            serde_json::value::to_raw_value(&v).unwrap_or_else(|_| Default::default())
        };
        Tool {
            anthropic: raw(serde_json::json!({
                "name": name, "description": description, "input_schema": schema,
            })),
            openai: raw(serde_json::json!({
                "type": "function",
                "function": {"name": name, "description": description, "parameters": schema},
            })),
        }
    }
}

/// Knobs shared by every call; from the server's settings.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// Connect + first byte of the answer.
    pub first_byte_timeout: Duration,
    /// Silence allowed between two pieces of a streaming reply (noticed after this to twice
    /// this, see [`crate::drive::wake::Silence`]).
    pub idle_timeout: Duration,
    pub max_retries: u32,
    /// Longest wait for one retry, whatever `retry-after` says.
    pub max_retry_wait: Duration,
    /// The longest a reply may take from the call on, however it is paced.
    pub turn_deadline: Duration,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            first_byte_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(90),
            max_retries: 3,
            max_retry_wait: Duration::from_secs(30),
            turn_deadline: Duration::from_secs(600),
        }
    }
}

/// A call's token counts as the provider reports them; `None`: not in this report.
/// `input` excludes the tokens read from or written to the prompt cache (OpenAI counts them
/// in its `prompt_tokens`: they are taken out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cache_read: Option<u64>,
    pub cache_write: Option<u64>,
}

impl Tokens {
    pub fn input(n: u64) -> Tokens {
        Tokens {
            input: Some(n),
            ..Tokens::default()
        }
    }

    pub fn output(n: u64) -> Tokens {
        Tokens {
            output: Some(n),
            ..Tokens::default()
        }
    }

    /// Anthropic's usage object (`input_tokens`, `output_tokens`,
    /// `cache_read_input_tokens`, `cache_creation_input_tokens`).
    pub(crate) fn anthropic(u: Option<&serde_json::Value>) -> Tokens {
        let n = |k: &str| u.and_then(|u| u.get(k)).and_then(serde_json::Value::as_u64);
        Tokens {
            input: n("input_tokens"),
            output: n("output_tokens"),
            cache_read: n("cache_read_input_tokens"),
            cache_write: n("cache_creation_input_tokens"),
        }
    }

    /// OpenAI's usage object: `prompt_tokens` less its `cached_tokens`, which are read.
    pub(crate) fn openai(u: Option<&serde_json::Value>) -> Tokens {
        let n = |p: &str| {
            u.and_then(|u| u.pointer(p))
                .and_then(serde_json::Value::as_u64)
        };
        let cached = n("/prompt_tokens_details/cached_tokens");
        Tokens {
            input: n("/prompt_tokens").map(|p| p.saturating_sub(cached.unwrap_or(0))),
            output: n("/completion_tokens"),
            cache_read: cached,
            cache_write: None,
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Tokens::default()
    }
}

/// Where and how a model is called: what an agent's row says of its provider. Holds the API
/// key in clear, so it neither prints it nor serialises.
pub struct Endpoint {
    pub provider: ProviderKind,
    pub model: String,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// Extra body fields of every request (`temperature`, `max_tokens`, …).
    pub config: serde_json::Map<String, serde_json::Value>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "…"))
            .finish()
    }
}

/// A system prompt, shared by the prompt cache and every call made with it: its text, and
/// the JSON string a request body writes it as, escaped the first time a body needs it and
/// kept (a prompt of several kilobytes escaped again for every round was a tenth of writing
/// a body).
#[derive(Clone, Default)]
pub struct SystemPrompt(Arc<Prompt>);

#[derive(Default)]
struct Prompt {
    text: String,
    json: std::sync::OnceLock<Option<Box<serde_json::value::RawValue>>>,
}

impl SystemPrompt {
    pub fn new(text: impl Into<String>) -> Self {
        SystemPrompt(Arc::new(Prompt {
            text: text.into(),
            json: std::sync::OnceLock::new(),
        }))
    }
}

impl std::ops::Deref for SystemPrompt {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0.text
    }
}

impl std::fmt::Debug for SystemPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.text.fmt(f)
    }
}

/// As a JSON string: the one escaped once (a string always escapes; were it not to, the
/// text is written as any string is).
impl serde::Serialize for SystemPrompt {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let json = (self.0.json).get_or_init(|| serde_json::value::to_raw_value(&self.0.text).ok());
        match json {
            Some(raw) => raw.serialize(s),
            None => s.serialize_str(&self.0.text),
        }
    }
}

pub struct Call<'a> {
    pub endpoint: &'a Endpoint,
    pub system: SystemPrompt,
    /// Shared with the conversation kept between turns ([`crate::conversation::context`]):
    /// a request is written from them as they are, nothing copied.
    pub messages: Vec<Arc<ChatMessage>>,
    /// Offered as native tools (none: the model answers in text only); the registry's own.
    pub tools: Vec<Arc<Tool>>,
    /// Ask for the reply whole (`"stream": false`, batch mode): it comes as one answer,
    /// within the turn's deadline rather than the first byte's, and is read as the deltas a
    /// stream of it would have carried, at once.
    pub whole: bool,
}

/// Starts a streaming call; the returned stream yields the reply as it arrives. Silence
/// mid-reply is the caller's to bound ([`crate::drive::wake::Silence`]).
pub async fn stream(
    client: &Outbound,
    opts: &CallOptions,
    call: Call<'_>,
) -> Result<DeltaStream, ProviderError> {
    // A whole reply's first byte comes when the model has written all of it.
    let whole_opts;
    let opts = if call.whole {
        whole_opts = CallOptions {
            first_byte_timeout: opts.turn_deadline,
            ..opts.clone()
        };
        &whole_opts
    } else {
        opts
    };
    Ok(match call.endpoint.provider {
        ProviderKind::Anthropic => anthropic::stream(client, opts, &call).await?,
        ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => {
            openai::stream(client, opts, &call).await?
        }
        ProviderKind::Scripted => scripted::stream(&call),
    })
}

/// One whole reply as text, bounded in time and in size, for calls that are not a chat
/// turn (summoning, compaction): `Err` says in a line why there is none. A Stop reaching
/// `abort` ends it too.
pub async fn collect(
    client: &Outbound,
    opts: &CallOptions,
    call: Call<'_>,
    within: Duration,
    max_bytes: usize,
    abort: Option<&crate::drive::abort::Abort>,
) -> Result<String, String> {
    use futures::StreamExt;
    let read = async {
        let mut stream = stream(client, opts, call)
            .await
            .map_err(|e| format!("the provider refused: {e}"))?;
        let mut reply = String::new();
        while let Some(d) = stream.next().await {
            match d {
                Ok(Delta::Text(t)) => {
                    reply.push_str(&t);
                    if reply.len() > max_bytes {
                        return Err(format!("the reply is longer than {} KiB", max_bytes >> 10));
                    }
                }
                Ok(Delta::Done { .. }) => break,
                Ok(_) => {}
                Err(e) => return Err(format!("the reply was cut: {e}")),
            }
        }
        Ok(reply)
    };
    let timed = async {
        tokio::time::timeout(within, read)
            .await
            .map_err(|_| format!("no reply within {} s", within.as_secs()))?
    };
    match abort {
        Some(a) => tokio::select! {
            r = timed => r,
            () = a.aborted() => Err("stopped by the user".into()),
        },
        None => timed.await,
    }
}

/// A message as a request carries it ([`normalize`]): borrowed from the conversation, but
/// where two of one role were merged or a missing tool result was written in.
#[derive(Debug, Clone, PartialEq)]
pub struct Turned<'a> {
    pub role: Role,
    pub content: Cow<'a, str>,
    pub tool_calls: Vec<&'a ToolCall>,
    pub tool_results: Vec<Cow<'a, ToolOutput>>,
    /// The images read for this message (those without their bytes are not sent).
    pub images: Vec<&'a Image>,
}

impl<'a> Turned<'a> {
    fn of(m: &'a ChatMessage) -> Self {
        Turned {
            role: m.role,
            content: Cow::Borrowed(&m.content),
            tool_calls: m.tool_calls.iter().collect(),
            tool_results: m.tool_results.iter().map(Cow::Borrowed).collect(),
            images: m.images.iter().filter(|i| i.data.is_some()).collect(),
        }
    }

    fn text(role: Role, content: &'a str) -> Self {
        Turned {
            role,
            content: Cow::Borrowed(content),
            tool_calls: Vec::new(),
            tool_results: Vec::new(),
            images: Vec::new(),
        }
    }
}

/// Merges consecutive messages of one role and makes the first one the user's, as both
/// APIs expect a conversation to read.
pub fn normalize(messages: &[Arc<ChatMessage>]) -> Vec<Turned<'_>> {
    let mut out: Vec<Turned<'_>> = Vec::with_capacity(messages.len());
    for m in messages.iter().map(|m| &**m).filter(|m| !m.is_empty()) {
        match out.last_mut() {
            Some(last) if last.role == m.role => {
                if !m.content.trim().is_empty() {
                    let content = last.content.to_mut();
                    if !content.trim().is_empty() {
                        content.push_str("\n\n");
                    }
                    content.push_str(&m.content);
                }
                last.tool_calls.extend(&m.tool_calls);
                last.images
                    .extend(m.images.iter().filter(|i| i.data.is_some()));
                last.tool_results
                    .extend(m.tool_results.iter().map(Cow::Borrowed));
            }
            _ => out.push(Turned::of(m)),
        }
    }
    if out.first().is_some_and(|m| m.role == Role::Assistant) {
        out.insert(0, Turned::text(Role::User, "(conversation continues)"));
    }
    pair_tool_results(&mut out);
    out
}

/// Both APIs want every tool call answered by a result in the very next message, and no
/// result without its call: a call still waiting (for the user's approval) is answered as
/// not run yet, and a result whose call is not right before it becomes text.
fn pair_tool_results(out: &mut Vec<Turned<'_>>) {
    let mut i = 0;
    while i < out.len() {
        if out[i].role == Role::User && !out[i].tool_results.is_empty() {
            let (before, at) = out.split_at_mut(i);
            let asked: &[&ToolCall] = match before.last() {
                Some(prev) if prev.role == Role::Assistant => &prev.tool_calls,
                _ => &[],
            };
            let m = &mut at[0];
            let (kept, orphans): (Vec<_>, Vec<_>) = std::mem::take(&mut m.tool_results)
                .into_iter()
                .partition(|r| asked.iter().any(|c| c.id == r.tool_use_id));
            m.tool_results = kept;
            for o in orphans {
                let content = m.content.to_mut();
                if !content.is_empty() {
                    content.push_str("\n\n");
                }
                content.push_str(&o.content);
            }
        }
        if out[i].role == Role::Assistant && !out[i].tool_calls.is_empty() {
            if out.get(i + 1).is_none_or(|n| n.role != Role::User) {
                out.insert(i + 1, Turned::text(Role::User, ""));
            }
            let (upto, after) = out.split_at_mut(i + 1);
            let next = &mut after[0];
            for c in &upto[i].tool_calls {
                if !next.tool_results.iter().any(|r| r.tool_use_id == c.id) {
                    next.tool_results.push(Cow::Owned(ToolOutput {
                        tool_use_id: c.id.clone(),
                        content: "(no result: the call has not run)".into(),
                        is_error: true,
                    }));
                }
            }
        }
        i += 1;
    }
}

/// A request's JSON body, written straight from what it borrows (no tree of values is built
/// and dropped per request) into a buffer about its size.
pub(crate) fn body_json(
    body: &impl serde::Serialize,
    call: &Call<'_>,
    turned: &[Turned<'_>],
) -> bytes::Bytes {
    let text: usize = turned
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_results
                    .iter()
                    .map(|r| r.content.len())
                    .sum::<usize>()
                + 64 * (1 + m.tool_calls.len() + m.tool_results.len())
        })
        .sum();
    let tools: usize = call
        .tools
        .iter()
        .map(|t| t.anthropic.get().len().max(t.openai.get().len()))
        .sum();
    let mut out = Vec::with_capacity(512 + call.system.len() + text + tools);
    // Writing to memory fails only on a map with non-string keys, which no body has.
    match serde_json::to_writer(&mut out, body) {
        Ok(()) => bytes::Bytes::from(out),
        Err(_) => bytes::Bytes::new(),
    }
}

/// The entries of an agent's config a request body carries: all but `hero_keys`, the keys
/// the body writes itself (a config setting one was refused when saved), so that a body
/// has each key once.
pub(crate) fn config_entries<'a>(
    config: &'a serde_json::Map<String, serde_json::Value>,
    hero_keys: &'a [&'a str],
) -> impl Iterator<Item = (&'a String, &'a serde_json::Value)> {
    config
        .iter()
        .filter(move |(k, _)| !hero_keys.contains(&k.as_str()))
}

/// The URL of `path` under the agent's base URL, if the egress policy lets a call go there
/// now.
fn target(client: &Outbound, base: &str, path: &str) -> Result<PublicUrl, ProviderError> {
    client
        .check(&endpoint(base, path))
        .map_err(|e| ProviderError::Refused(e.to_string()))
}

/// Sends the request `make` builds for `url`, retrying 429s before any byte of an answer
/// arrived.
async fn send_with_retry(
    opts: &CallOptions,
    url: &PublicUrl,
    make: impl Fn() -> reqwest::RequestBuilder,
    read_error: fn(&str) -> Option<String>,
) -> Result<reqwest::Response, ProviderError> {
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let resp = tokio::time::timeout(opts.first_byte_timeout, make().send())
            .await
            .map_err(|_| ProviderError::Timeout(opts.first_byte_timeout.as_secs()))?
            .map_err(|e| {
                if let Some(refused) = crate::execution::egress::refusal_in(&e) {
                    ProviderError::Refused(refused.to_string())
                } else if e.is_timeout() {
                    ProviderError::Timeout(opts.first_byte_timeout.as_secs())
                } else {
                    tracing::info!(cause = %without_url_secrets(&e), "provider connection failed");
                    ProviderError::Connect {
                        host: url.authority(),
                    }
                }
            })?;
        let status = resp.status().as_u16();
        if resp.status().is_success() {
            return Ok(resp);
        }
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .and_then(|s| Duration::try_from_secs_f64(s.max(0.0)).ok());
        let body = read_error_body(resp, opts.first_byte_timeout).await;
        let message = read_error(&body).unwrap_or_else(|| "no error message came with it".into());
        match status {
            429 if attempt <= opts.max_retries => {
                let backoff = Duration::from_millis(500 * 2u64.pow(attempt - 1));
                let wait = retry_after.unwrap_or(backoff).min(opts.max_retry_wait);
                tracing::info!(
                    attempt,
                    wait_ms = wait.as_millis() as u64,
                    "provider answered 429; retrying"
                );
                tokio::time::sleep(wait).await;
            }
            429 => {
                return Err(ProviderError::RateLimited {
                    attempts: attempt,
                    message,
                });
            }
            401 | 403 => return Err(ProviderError::Unauthorized { status, message }),
            400..=499 => return Err(ProviderError::BadRequest { status, message }),
            _ => return Err(ProviderError::Server { status, message }),
        }
    }
}

/// The most of a whole-message answer read (a reply's text is capped at 4 MiB anyway).
const MAX_WHOLE_BODY: usize = 8 << 20;

/// Whether a streaming request was answered with one whole JSON message instead of an
/// event stream (some OpenAI- and Anthropic-compatible proxies do this).
pub(crate) fn is_whole(resp: &reqwest::Response) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// Reads a whole-message answer ([`is_whole`]), within `limit` and [`MAX_WHOLE_BODY`], and
/// hands it out as the deltas `read` finds in it, as if it had streamed. An error object
/// in it ends the reply with the provider's message.
pub(crate) async fn whole(
    resp: reqwest::Response,
    limit: Duration,
    read: fn(&serde_json::Value) -> Vec<Delta>,
) -> Result<DeltaStream, ProviderError> {
    use futures::StreamExt;
    let mut body = Vec::new();
    let mut chunks = resp.bytes_stream();
    let read_all = async {
        while let Some(c) = chunks.next().await {
            let c = c.map_err(|_| ProviderError::Cut)?;
            if body.len() + c.len() > MAX_WHOLE_BODY {
                return Err(ProviderError::Oversized(
                    "a whole message longer than 8 MiB",
                ));
            }
            body.extend_from_slice(&c);
        }
        Ok(())
    };
    tokio::time::timeout(limit, read_all)
        .await
        .map_err(|_| ProviderError::Timeout(limit.as_secs()))??;
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|_| ProviderError::Protocol("a JSON answer that does not parse".into()))?;
    if let Some(m) = v.pointer("/error/message").and_then(|m| m.as_str()) {
        return Err(ProviderError::Midstream(brief(m)));
    }
    let deltas = read(&v);
    Ok(Box::pin(futures::stream::iter(deltas.into_iter().map(Ok))))
}

/// At most [`MAX_ERROR_BODY`] bytes of an error answer, within `limit`: a provider that
/// stalls or streams after an error status must not hold the turn.
const MAX_ERROR_BODY: usize = 64 * 1024;

async fn read_error_body(resp: reqwest::Response, limit: Duration) -> String {
    use futures::StreamExt;
    let mut body = Vec::new();
    let mut chunks = resp.bytes_stream();
    let read = async {
        while let Some(Ok(c)) = chunks.next().await {
            body.extend_from_slice(&c[..c.len().min(MAX_ERROR_BODY - body.len())]);
            if body.len() >= MAX_ERROR_BODY {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(limit, read).await;
    String::from_utf8_lossy(&body).into_owned()
}

/// reqwest errors print the URL; a base URL may carry credentials, so print only the cause.
fn without_url_secrets(e: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut msg = String::new();
    let mut cur: Option<&dyn std::error::Error> = e.source();
    while let Some(c) = cur {
        msg = c.to_string();
        cur = c.source();
    }
    if msg.is_empty() {
        "connection failed".into()
    } else {
        msg
    }
}

/// The provider's own error message in a JSON error body, cut to a sentence; nothing for any
/// other body (whatever answered is not shown to the user).
fn error_message_from(body: &str, pointer: &str) -> Option<String> {
    let v = serde_json::from_str::<serde_json::Value>(body).ok()?;
    let message = brief(v.pointer(pointer)?.as_str()?);
    (!message.is_empty()).then_some(message)
}

/// Longest provider message shown, in characters.
const MAX_MESSAGE_CHARS: usize = 200;

/// A provider's message as the user is shown it: its first sentence, on one line, at most
/// [`MAX_MESSAGE_CHARS`].
pub(crate) fn brief(message: &str) -> String {
    let line: String = message
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let sentence = line
        .match_indices(['.', '!', '?'])
        .find(|(i, _)| line[i + 1..].starts_with(' '))
        .map_or(line.as_str(), |(i, _)| &line[..=i]);
    if sentence.chars().count() <= MAX_MESSAGE_CHARS {
        return sentence.to_owned();
    }
    let mut cut: String = sentence.chars().take(MAX_MESSAGE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Joins a base URL and a path.
fn endpoint(base: &str, path: &str) -> String {
    format!("{}{}", base.trim_end_matches('/'), path)
}

/// What a provider's decoder makes of one SSE event.
pub(crate) enum Step {
    More,
    /// The reply ended normally.
    End,
}

/// Reads a provider's SSE events into deltas, one wire format's rules per implementation.
pub(crate) trait Decoder: Send + Unpin + 'static {
    fn event(&mut self, ev: &sseer::event::Event, out: &mut Pending) -> Step;
}

/// Deltas decoded and not yet handed out. Nearly every event makes one delta: the first waits
/// in place, and only a second one takes the queue (another allocation, more memory to touch
/// on every token).
#[derive(Default)]
pub(crate) struct Pending {
    first: Option<Result<Delta, ProviderError>>,
    rest: std::collections::VecDeque<Result<Delta, ProviderError>>,
}

impl Pending {
    pub(crate) fn push_back(&mut self, d: Result<Delta, ProviderError>) {
        if self.first.is_none() && self.rest.is_empty() {
            self.first = Some(d);
        } else {
            self.rest.push_back(d);
        }
    }

    fn pop_front(&mut self) -> Option<Result<Delta, ProviderError>> {
        self.first.take().or_else(|| self.rest.pop_front())
    }

    fn clear(&mut self) {
        self.first = None;
        self.rest.clear();
    }
}

/// A provider's answer as SSE events.
///
/// Each chunk is copied out of the connection's read buffer (a few hundred bytes) before the
/// decoder sees it. The decoder keeps a view of the last chunk until the next one comes, and
/// a read buffer something still points into cannot be reused: hyper then allocated a new
/// 8 KiB buffer for every read, one per token, and freed the old one when the view let go.
pub(crate) fn sse_events(
    resp: reqwest::Response,
) -> impl futures::Stream<
    Item = Result<sseer::event::Event, sseer::errors::EventStreamError<BodyError<reqwest::Error>>>,
> + Send
+ 'static {
    copied_sse(resp.bytes_stream())
}

/// The most one line of a provider's stream may hold, and one event (its lines up to the
/// blank one): the SSE decoder keeps either whole until it ends, so a provider that never
/// ends one would otherwise grow it without bound.
pub const MAX_SSE_LINE: usize = 1 << 20;
pub const MAX_SSE_EVENT: usize = 4 << 20;

/// A failure reading a provider's body: the connection's, or a line or event too long.
#[derive(Debug)]
pub enum BodyError<E> {
    Read(E),
    Oversized(&'static str),
}

impl<E: std::fmt::Display> std::fmt::Display for BodyError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Read(e) => e.fmt(f),
            BodyError::Oversized(what) => f.write_str(what),
        }
    }
}

/// What a body's read error says of the reply: a cut connection, or a cap passed.
pub(crate) trait Transport: std::fmt::Display {
    fn oversized(&self) -> Option<&'static str> {
        None
    }
}

impl<E: std::fmt::Display> Transport for BodyError<E> {
    fn oversized(&self) -> Option<&'static str> {
        match self {
            BodyError::Oversized(what) => Some(what),
            BodyError::Read(_) => None,
        }
    }
}

impl Transport for std::io::Error {}

/// Counts the bytes of the line and of the event being read; past [`MAX_SSE_LINE`] or
/// [`MAX_SSE_EVENT`], the body ends with [`BodyError::Oversized`]. Lines end as SSE says:
/// at `\r\n`, `\n` or `\r`; an empty line ends an event.
#[derive(Default)]
struct Caps {
    /// Bytes of the line so far (its end not yet seen).
    line: usize,
    /// The last byte seen ended a line with `\r`: a `\n` right after it is the same end.
    after_cr: bool,
    /// Bytes since the last empty line (which ends an event).
    event: usize,
}

impl Caps {
    fn take(&mut self, chunk: &[u8]) -> Result<(), &'static str> {
        let mut start = 0;
        for end in memchr::memchr2_iter(b'\r', b'\n', chunk) {
            let seg = &chunk[start..end];
            start = end + 1;
            if chunk[end] == b'\n' && seg.is_empty() && self.after_cr {
                self.after_cr = false;
                continue;
            }
            let empty = self.line == 0 && seg.is_empty();
            self.event = if empty { 0 } else { self.event + seg.len() + 1 };
            self.line = 0;
            self.after_cr = chunk[end] == b'\r';
        }
        let rest = &chunk[start..];
        if !rest.is_empty() {
            self.after_cr = false;
        }
        self.line += rest.len();
        self.event += rest.len();
        if self.line > MAX_SSE_LINE {
            return Err("a line longer than 1 MiB");
        }
        if self.event > MAX_SSE_EVENT {
            return Err("an event longer than 4 MiB");
        }
        Ok(())
    }
}

fn copied_sse<S, E>(
    body: S,
) -> sseer::EventStream<impl futures::Stream<Item = Result<bytes::Bytes, BodyError<E>>>>
where
    S: futures::Stream<Item = Result<bytes::Bytes, E>>,
{
    use futures::StreamExt;
    let mut caps = Caps::default();
    let mut over = false;
    // A copy of its own size, from memory just freed (the last chunk's): copying into one
    // buffer per stream instead, each token wrote to lines not touched since its turn came
    // round last, cold, and measured dearer.
    let capped = body.map(move |r| match r {
        _ if over => Err(BodyError::Oversized("more after a cap")),
        Ok(b) => match caps.take(&b) {
            Ok(()) => Ok(bytes::Bytes::copy_from_slice(&b)),
            Err(what) => {
                over = true;
                Err(BodyError::Oversized(what))
            }
        },
        Err(e) => Err(BodyError::Read(e)),
    });
    sseer::EventStream::new(capped)
}

/// Turns an SSE stream into a [`DeltaStream`] in the caller's task: no task and no channel
/// between the provider's bytes and the turn (one wake-up per token, not two). Dropping the
/// stream drops the response body, which closes the provider request (how abort reaches it).
/// A body that ends before the decoder saw the end is a cut connection.
pub(crate) fn drive<S, E, D>(events: S, decoder: D) -> DeltaStream
where
    S: futures::Stream<Item = Result<sseer::event::Event, sseer::errors::EventStreamError<E>>>
        + Send
        + 'static,
    E: Transport + Send + 'static,
    D: Decoder,
{
    Box::pin(Deltas {
        events: Some(Box::pin(events)),
        decoder,
        out: Pending::default(),
        ended: false,
    })
}

/// [`drive`]'s stream: a plain state machine, polled in place.
struct Deltas<S, D> {
    /// Until the end, when what is left of the body is read in the background.
    events: Option<Pin<Box<S>>>,
    decoder: D,
    out: Pending,
    ended: bool,
}

impl<S, E, D> Stream for Deltas<S, D>
where
    S: futures::Stream<Item = Result<sseer::event::Event, sseer::errors::EventStreamError<E>>>
        + Send
        + 'static,
    E: Transport,
    D: Decoder,
{
    type Item = Result<Delta, ProviderError>;

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = self.get_mut();
        loop {
            if let Some(item) = this.out.pop_front() {
                if item.is_err() {
                    this.ended = true;
                    this.out.clear();
                }
                return Poll::Ready(Some(item));
            }
            let Some(events) = this.events.as_mut() else {
                return Poll::Ready(None);
            };
            if this.ended {
                if let Some(events) = this.events.take() {
                    finish_body(events);
                }
                return Poll::Ready(None);
            }
            match std::task::ready!(events.as_mut().poll_next(cx)) {
                None => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(ProviderError::Cut)));
                }
                Some(Err(e)) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(sse_error(e))));
                }
                Some(Ok(ev)) => {
                    if let Step::End = this.decoder.event(&ev, &mut this.out) {
                        this.ended = true;
                    }
                }
            }
        }
    }
}

/// Reads what is left of a reply's body after its last event, so that its connection goes
/// back to the pool instead of being closed (for a real provider, a new connection is a TLS
/// handshake on the next turn). The end is normally already here; if not, a task waits for
/// it, a few seconds at most.
fn finish_body<S: futures::Stream + Send + 'static>(mut events: std::pin::Pin<Box<S>>) {
    use futures::{FutureExt, StreamExt};
    // What is already here, within reason: a provider that keeps talking after its last
    // event must not hold up the end of the turn.
    for _ in 0..64 {
        match events.next().now_or_never() {
            Some(Some(_)) => continue,
            Some(None) => return,
            None => break,
        }
    }
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            let drain = async { while events.next().await.is_some() {} };
            let _ = tokio::time::timeout(Duration::from_secs(5), drain).await;
        });
    }
}

/// Maps the SSE decoder's errors: a body that ends or breaks early is a cut connection.
fn sse_error<E: Transport>(e: sseer::errors::EventStreamError<E>) -> ProviderError {
    match e {
        sseer::errors::EventStreamError::Transport(e) => match e.oversized() {
            Some(what) => ProviderError::Oversized(what),
            None => ProviderError::Cut,
        },
        other => ProviderError::Protocol(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A system prompt is written as the JSON string of its text, each time the same (its
    /// escaping kept from the first), inside a body as alone.
    #[test]
    fn a_system_prompt_is_written_as_its_text_escaped() {
        let text = "You are \"Hero\".\n\tA back\\slash, a </script>, a \u{1} and é.";
        let p = SystemPrompt::new(text);
        let plain = serde_json::to_string(text).unwrap();
        assert_eq!(serde_json::to_string(&p).unwrap(), plain);
        assert_eq!(serde_json::to_string(&p).unwrap(), plain);
        let body = serde_json::to_value(serde_json::json!({ "system": &p })).unwrap();
        assert_eq!(body["system"], text);
        assert_eq!(&*p, text);
        assert_eq!(
            serde_json::to_string(&SystemPrompt::default()).unwrap(),
            "\"\""
        );
    }

    #[test]
    fn caps_count_lines_and_events_across_chunks() {
        let mut c = Caps::default();
        // Events of any number, each small: never over, whatever the cuts.
        for _ in 0..10_000 {
            c.take(b"event: x\r\ndata: {\"a\":1}\r").unwrap();
            c.take(b"\n\r").unwrap();
            c.take(b"\n").unwrap();
        }
        assert_eq!((c.line, c.event), (0, 0));
        // Lines ended by a lone CR (which SSE allows), events by an empty one.
        let mut c = Caps::default();
        for _ in 0..100_000 {
            c.take(b"data: {\"a\":1}\r\r").unwrap();
        }
        assert_eq!((c.line, c.event), (0, 0));
        // A CRLF cut between its two bytes is one line end, not an empty line.
        let mut c = Caps::default();
        c.take(b"data: a\r").unwrap();
        c.take(b"\ndata: b\r").unwrap();
        assert_eq!(c.event, 16, "still one event of two lines");
        c.take(b"\n\r\n").unwrap();
        assert_eq!(c.event, 0);
        // One line that never ends.
        let mut c = Caps::default();
        let kib = [b'x'; 1024];
        for _ in 0..1024 {
            c.take(&kib).unwrap();
        }
        assert_eq!(c.take(b"x"), Err("a line longer than 1 MiB"));
        // Short lines, no blank one: one event that never ends.
        let mut c = Caps::default();
        let line = [&[b'd'; 1023][..], b"\n"].concat();
        for _ in 0..4096 {
            c.take(&line).unwrap();
        }
        assert_eq!(c.take(b"data\n"), Err("an event longer than 4 MiB"));
    }

    #[tokio::test]
    async fn a_provider_line_past_its_cap_ends_the_reply_with_what_came_before() {
        use futures::StreamExt;
        let first = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"kept\"}}\n\n";
        let flood = vec![b'x'; 64 * 1024];
        let body = futures::stream::iter(
            std::iter::once(Ok::<_, std::io::Error>(bytes::Bytes::from(first)))
                .chain(std::iter::repeat_n(bytes::Bytes::from(flood), 100).map(Ok)),
        );
        let deltas: Vec<_> = drive(copied_sse(body), anthropic::AnthropicDecoder::default())
            .collect()
            .await;
        assert_eq!(deltas[0], Ok(Delta::Text("kept".into())));
        assert_eq!(
            deltas.last(),
            Some(&Err(ProviderError::Oversized("a line longer than 1 MiB")))
        );
        assert_eq!(deltas.len(), 2, "{deltas:?}");
    }

    #[tokio::test]
    async fn the_rest_of_a_body_is_read_to_its_end_in_the_background() {
        use futures::StreamExt;
        use std::sync::atomic::{AtomicBool, Ordering};
        let (tx, rx) = futures::channel::mpsc::unbounded::<u8>();
        let ended = std::sync::Arc::new(AtomicBool::new(false));
        let seen_end = ended.clone();
        let body = rx.chain(futures::stream::once(async move {
            seen_end.store(true, Ordering::SeqCst);
            0
        }));
        tx.unbounded_send(1).unwrap();
        // What is there is read at once; the end has not come yet, so a task waits for it.
        finish_body(Box::pin(body));
        assert!(!ended.load(Ordering::SeqCst));
        drop(tx);
        tokio::time::timeout(Duration::from_secs(5), async {
            while !ended.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the body was read to its end");
    }

    /// What a real decoder is for: a byte order mark, comments, CRLF line ends, an event and
    /// a character split across reads, data over two lines.
    #[tokio::test]
    async fn provider_streams_are_decoded_as_sse_not_as_lines() {
        use futures::StreamExt;
        let wire = "\u{feff}: a comment\r\nevent: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hé\"}}\r\n\r\n\
                    event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\ndata: \"delta\":{\"type\":\"text_delta\",\"text\":\"llo\"}}\n\n\
                    event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
        let bytes = wire.as_bytes();
        // Cut inside "é" (two bytes), inside a line, and between the CR and the LF.
        let e = wire.find('é').unwrap() + 1;
        let cr = wire.find("\r\n\r\n").unwrap() + 1;
        let cuts = [3, 40, e, cr, cr + 7, bytes.len()];
        let mut chunks = Vec::new();
        let mut at = 0;
        for c in cuts {
            chunks.push(Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(
                &bytes[at..c],
            )));
            at = c;
        }
        let deltas: Vec<_> = drive(
            sseer::EventStream::new(futures::stream::iter(chunks)),
            anthropic::AnthropicDecoder::default(),
        )
        .collect()
        .await;
        assert_eq!(
            deltas,
            vec![
                Ok(Delta::Text("hé".into())),
                Ok(Delta::Text("llo".into())),
                Ok(Delta::Done { stop_reason: None })
            ]
        );
    }

    /// The decoder keeps a view of the last chunk it read; if that were the connection's own
    /// buffer, the connection could not reuse it for the next read.
    #[tokio::test]
    async fn the_decoder_lets_go_of_the_connections_buffer() {
        use futures::StreamExt;
        let read =
            bytes::Bytes::from(b"event: ping\ndata: {}\n\nevent: ping\ndata: {}\n\n".to_vec());
        let mut events = Box::pin(copied_sse(futures::stream::iter([
            Ok::<_, std::io::Error>(read.clone()),
        ])));
        assert_eq!(&*events.next().await.unwrap().unwrap().event, "ping");
        assert!(read.is_unique(), "the decoder still holds the read buffer");
        assert_eq!(&*events.next().await.unwrap().unwrap().data, "{}");
    }

    #[test]
    fn provider_messages_are_cut_to_a_sentence() {
        let m = |body: &str| error_message_from(body, "/error/message");
        assert_eq!(
            m(r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low. Go to Plans & Billing."}}"#).as_deref(),
            Some("Your credit balance is too low.")
        );
        assert_eq!(
            m(r#"{"error":{"message":"Incorrect API key provided: sk-abc***xyz. You can find your key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error"}}"#).as_deref(),
            Some("Incorrect API key provided: sk-abc***xyz.")
        );
        assert_eq!(
            m(r#"{"error":{"message":"model 'x' not found\nat line 2"}}"#).as_deref(),
            Some("model 'x' not found at line 2")
        );
        let long = m(&format!(
            r#"{{"error":{{"message":"{}"}}}}"#,
            "a".repeat(500)
        ))
        .unwrap();
        assert_eq!(long.chars().count(), MAX_MESSAGE_CHARS);
        // Whatever else answered is not shown: HTML, plain text, JSON of another shape.
        assert_eq!(m("<html><title>Router admin</title></html>"), None);
        assert_eq!(m("SSH-2.0-OpenSSH_9.6"), None);
        assert_eq!(m(r#"{"detail":"secret internal state"}"#), None);
        assert_eq!(m(r#"{"error":{"message":"  "}}"#), None);
        assert_eq!(m(""), None);
    }

    #[test]
    fn conversations_are_normalized() {
        let m = |role, c: &str| Arc::new(ChatMessage::text(role, c));
        let said = [
            m(Role::Assistant, "hi"),
            m(Role::User, "a"),
            m(Role::User, "b"),
            m(Role::Assistant, " "),
        ];
        let t = |role, c| Turned::text(role, c);
        assert_eq!(
            normalize(&said),
            vec![
                t(Role::User, "(conversation continues)"),
                t(Role::Assistant, "hi"),
                t(Role::User, "a\n\nb")
            ]
        );
    }
}
