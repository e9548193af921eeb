//! The HTTP side: routes, authentication, the choice of what to play for a request, the
//! request log, and starting and stopping the server.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    future::Future,
    io,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{DefaultBodyLimit, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::watch, task::JoinHandle};

use crate::{
    anthropic,
    body::{self, Encoder, Ending, Gauge, Life, Tracked},
    config::Config,
    directive::{self, Directive},
    openai,
    reply::{Block, Cursor, Event, Reply, Usage},
    request::Request,
    script::{Answer, Fault, FaultKind, StopReason},
};

/// How many requests `/mock/requests` keeps.
const LOG_CAP: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    Anthropic,
    OpenAi,
}

/// Per-server state shared by all connections. The mutexes are `std`'s: each is held for a
/// few map operations and never across an await, which is cheaper than an async lock.
pub(crate) struct Shared {
    config: Config,
    /// Index of the next scripted answer or corpus response.
    next_answer: AtomicUsize,
    /// Numbers the ids (`msg_mock…`), so a fresh server's ids are predictable.
    next_id: AtomicU64,
    /// How many requests each directive text with `times=` has seen.
    counters: Mutex<HashMap<String, u64>>,
    log: Mutex<Log>,
    closing: watch::Receiver<bool>,
    gauge: Arc<Gauge>,
    /// How many inputs `POST /v1/embeddings` embedded.
    embedded: AtomicU64,
}

#[derive(Default)]
struct Log {
    requests: VecDeque<Value>,
    total: u64,
    per_path: BTreeMap<String, u64>,
    faults_served: u64,
    faults: BTreeMap<&'static str, u64>,
}

#[derive(Clone, Copy, Debug)]
struct Auth {
    present: bool,
    matched: bool,
}

impl Shared {
    fn new(config: Config, closing: watch::Receiver<bool>) -> Self {
        Self {
            config,
            next_answer: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            counters: Mutex::default(),
            log: Mutex::default(),
            closing,
            gauge: Arc::default(),
            embedded: AtomicU64::new(0),
        }
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Checks the key of the wire's header: `x-api-key` for Anthropic, `Authorization: Bearer`
    /// for OpenAI.
    fn auth(&self, wire: Wire, headers: &HeaderMap) -> Auth {
        let key = match wire {
            Wire::Anthropic => headers.get("x-api-key").and_then(|v| v.to_str().ok()),
            Wire::OpenAi => headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.strip_prefix("Bearer ").unwrap_or("").trim()),
        };
        let present = match wire {
            Wire::Anthropic => headers.contains_key("x-api-key"),
            Wire::OpenAi => headers.contains_key(header::AUTHORIZATION),
        };
        let matched = match (key, &self.config.api_key) {
            (Some(k), Some(want)) => k == want,
            (Some(k), None) => !k.is_empty(),
            (None, _) => false,
        };
        Auth { present, matched }
    }

    fn record(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        auth: Auth,
        body: Option<&Value>,
    ) {
        let shown: BTreeMap<&str, String> = headers
            .iter()
            .map(|(name, value)| {
                let value = if name == header::AUTHORIZATION || name == "x-api-key" {
                    "<redacted>".to_string()
                } else {
                    String::from_utf8_lossy(value.as_bytes()).into_owned()
                };
                (name.as_str(), value)
            })
            .collect();
        let entry = json!({
            "method": method.as_str(), "path": uri.path(), "headers": shown,
            "auth": {"present": auth.present, "matched": auth.matched},
            "body": body.cloned().unwrap_or(Value::Null),
        });
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if log.requests.len() == LOG_CAP {
            log.requests.pop_front();
        }
        log.requests.push_back(entry);
        log.total += 1;
        *log.per_path.entry(uri.path().to_string()).or_default() += 1;
    }

    fn count_fault(&self, kind: FaultKind) {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.faults_served += 1;
        *log.faults.entry(kind.name()).or_default() += 1;
    }

    fn life(&self) -> Life {
        Life {
            closing: self.closing.clone(),
            tracked: Tracked::new(self.gauge.clone()),
        }
    }

    pub(crate) fn requests(&self) -> Vec<Value> {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .requests
            .iter()
            .cloned()
            .collect()
    }

    pub(crate) fn stats(&self) -> Value {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        json!({
            "requests_total": log.total, "per_path": log.per_path,
            "faults_served": log.faults_served, "faults": log.faults,
            "streams": {
                "started": self.gauge.started.load(Ordering::Relaxed),
                "open": self.gauge.open.load(Ordering::Relaxed),
                "client_gone": self.gauge.client_gone.load(Ordering::Relaxed),
            },
            "connections_total": self.gauge.connections.load(Ordering::Relaxed),
            "embedded_inputs": self.embedded.load(Ordering::Relaxed),
        })
    }

    pub(crate) fn reset(&self) {
        self.next_answer.store(0, Ordering::Relaxed);
        *self.log.lock().unwrap_or_else(|e| e.into_inner()) = Log::default();
        self.counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        // `open` counts live bodies, which a reset does not end.
        self.gauge.started.store(0, Ordering::Relaxed);
        self.gauge.client_gone.store(0, Ordering::Relaxed);
        self.gauge.connections.store(0, Ordering::Relaxed);
        self.embedded.store(0, Ordering::Relaxed);
    }

    /// Whether a directive's fault applies to this request: always without `times=`, else to
    /// the first `times` requests carrying the same directive text.
    fn directive_fault(&self, d: &Directive) -> Option<Fault> {
        let spec = d.fault?;
        if let Some(times) = d.times {
            let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
            let seen = counters.entry(d.key.clone()).or_default();
            *seen += 1;
            if *seen > times {
                return None;
            }
        }
        Some(self.config.resolve(spec))
    }
}

/// `listener`, counting the connections it accepts (`connections_total` in the stats).
fn counted(
    listener: TcpListener,
    shared: &Arc<Shared>,
) -> impl axum::serve::Listener<Addr = SocketAddr> {
    use axum::serve::ListenerExt;
    let gauge = shared.gauge.clone();
    listener.tap_io(move |_| {
        gauge.connections.fetch_add(1, Ordering::Relaxed);
    })
}

/// Serves until `shutdown` resolves, then closes: paced and stalled streams are cut at their
/// next frame boundary, so shutdown never waits on a slow client.
pub async fn serve_until(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let (close, closing) = watch::channel(false);
    let shared = Arc::new(Shared::new(config, closing));
    let signal = async move {
        shutdown.await;
        let _ = close.send(true);
    };
    axum::serve(
        counted(listener, &shared),
        router(shared).into_make_service(),
    )
    .with_graceful_shutdown(signal)
    .await
}

/// Serves forever (the binary stops on Ctrl-C by ending the process).
pub async fn serve(config: Config, listener: TcpListener) -> io::Result<()> {
    serve_until(config, listener, std::future::pending()).await
}

/// A mock server running in the current tokio runtime; dropping it shuts it down.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    close: watch::Sender<bool>,
    task: Option<JoinHandle<io::Result<()>>>,
}

/// Starts a server on a free loopback port.
pub async fn spawn(config: Config) -> io::Result<MockServer> {
    spawn_on(config, TcpListener::bind("127.0.0.1:0").await?)
}

/// Starts a server on a listener the caller bound.
pub fn spawn_on(config: Config, listener: TcpListener) -> io::Result<MockServer> {
    let addr = listener.local_addr()?;
    let (close, closing) = watch::channel(false);
    let shared = Arc::new(Shared::new(config, closing.clone()));
    let app = router(shared.clone());
    let listener = counted(listener, &shared);
    let mut signal = closing;
    let task = tokio::spawn(async move {
        axum::serve(listener, app.into_make_service())
            .with_graceful_shutdown(async move {
                let _ = signal.wait_for(|c| *c).await;
            })
            .await
    });
    Ok(MockServer {
        addr,
        shared,
        close,
        task: Some(task),
    })
}

impl MockServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, the base URL to give a provider client.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The last 100 requests, as `GET /mock/requests` lists them.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests()
    }

    /// The counters of `GET /mock/stats`.
    pub fn stats(&self) -> Value {
        self.shared.stats()
    }

    /// Clears the log, the counters and the `times=` directive counts, and restarts the
    /// script at its first answer.
    pub fn reset(&self) {
        self.shared.reset()
    }

    /// Stops accepting, cuts open streams at their next frame and waits for the server task.
    pub async fn shutdown(mut self) -> io::Result<()> {
        let _ = self.close.send(true);
        match self.task.take() {
            Some(task) => task.await.unwrap_or_else(|e| Err(io::Error::other(e))),
            None => Ok(()),
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        let _ = self.close.send(true);
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/messages", post(anthropic_messages))
        .route("/v1/chat/completions", post(openai_chat))
        .route("/v1/models", get(models))
        .route("/v1/embeddings", post(embeddings))
        .route("/search", get(crate::search::searxng))
        .route("/res/v1/web/search", get(crate::search::brave))
        .route("/page/{name}", get(crate::search::page))
        .route(
            "/mock/requests",
            get(|State(s): State<Arc<Shared>>| async move { axum::Json(s.requests()) }),
        )
        .route(
            "/mock/stats",
            get(|State(s): State<Arc<Shared>>| async move { axum::Json(s.stats()) }),
        )
        .route(
            "/mock/reset",
            post(|State(s): State<Arc<Shared>>| async move {
                s.reset();
                StatusCode::NO_CONTENT
            }),
        )
        // Hero's contexts and the echo tests can be large; the default 2 MB is not enough.
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(shared)
}

async fn anthropic_messages(
    State(s): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    chat(s, Wire::Anthropic, method, uri, headers, body).await
}

async fn openai_chat(
    State(s): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    chat(s, Wire::OpenAi, method, uri, headers, body).await
}

/// The most inputs one `POST /v1/embeddings` takes (OpenAI's limit).
const MAX_EMBEDDING_INPUTS: usize = 2048;

/// `POST /v1/embeddings`, OpenAI's shape: `{model, input: text | [text]}` answered with one
/// vector per input ([`crate::embed`]), in order. A directive in an input (`[[mock
/// fault=500]]`) serves its fault instead.
async fn embeddings(
    State(s): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let body: Option<Value> = serde_json::from_slice(&raw).ok();
    let auth = s.auth(Wire::OpenAi, &headers);
    s.record(&method, &uri, &headers, auth, body.as_ref());
    if !auth.matched {
        return unauthorized(Wire::OpenAi, auth.present);
    }
    let Some(body) = body else {
        return invalid(Wire::OpenAi, "the body is not JSON");
    };
    let Some(model) = body.get("model").and_then(Value::as_str) else {
        return invalid(Wire::OpenAi, "you must provide a model parameter");
    };
    let inputs: Vec<&str> = match body.get("input") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) if many.iter().all(Value::is_string) => {
            many.iter().filter_map(Value::as_str).collect()
        }
        _ => {
            return invalid(
                Wire::OpenAi,
                "input must be a string or an array of strings",
            );
        }
    };
    if inputs.is_empty() || inputs.len() > MAX_EMBEDDING_INPUTS {
        return invalid(
            Wire::OpenAi,
            &format!("input must hold 1 to {MAX_EMBEDDING_INPUTS} texts"),
        );
    }
    for text in &inputs {
        match directive::parse(text) {
            Ok(Some(d)) => {
                if let Some(f) = s.directive_fault(&d).filter(|f| f.kind.is_status()) {
                    s.count_fault(f.kind);
                    return status_fault(Wire::OpenAi, f);
                }
            }
            Ok(None) => {}
            Err(message) => {
                return invalid(Wire::OpenAi, &format!("mock-llm directive: {message}"));
            }
        }
    }
    s.embedded.fetch_add(inputs.len() as u64, Ordering::Relaxed);
    let dimensions = body
        .get("dimensions")
        .and_then(Value::as_u64)
        .map_or(s.config.embedding_dimensions, |d| d as usize)
        .clamp(1, 4096);
    let tokens: usize = inputs.iter().map(|t| t.split_whitespace().count()).sum();
    axum::Json(json!({
        "object": "list",
        "data": inputs.iter().enumerate().map(|(i, text)| json!({
            "object": "embedding",
            "index": i,
            "embedding": crate::embed::vector(text, dimensions),
        })).collect::<Vec<_>>(),
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response()
}

/// `GET /v1/models`: Anthropic's list when asked with `x-api-key`, OpenAI's otherwise.
async fn models(
    State(s): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let wire = if headers.contains_key("x-api-key") {
        Wire::Anthropic
    } else {
        Wire::OpenAi
    };
    let auth = s.auth(wire, &headers);
    s.record(&method, &uri, &headers, auth, None);
    if !auth.matched {
        return unauthorized(wire, auth.present);
    }
    let names = &s.config.models;
    let body = match wire {
        Wire::Anthropic => json!({
            "data": names.iter().map(|m| json!({"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"})).collect::<Vec<_>>(),
            "has_more": false, "first_id": names.first(), "last_id": names.last(),
        }),
        Wire::OpenAi => json!({
            "object": "list",
            "data": names.iter().map(|m| json!({"id": m, "object": "model", "created": 0, "owned_by": "mock-llm"})).collect::<Vec<_>>(),
        }),
    };
    axum::Json(body).into_response()
}

async fn chat(
    s: Arc<Shared>,
    wire: Wire,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let body: Option<Value> = serde_json::from_slice(&raw).ok();
    let auth = s.auth(wire, &headers);
    s.record(&method, &uri, &headers, auth, body.as_ref());
    if !auth.matched {
        return unauthorized(wire, auth.present);
    }
    let validated = match wire {
        Wire::Anthropic => anthropic::validate(body.as_ref()),
        Wire::OpenAi => openai::validate(body.as_ref()),
    };
    let req = match validated {
        Ok(r) => r,
        Err(message) => return invalid(wire, &message),
    };
    let directive = match directive::parse(&req.last_user_text) {
        Ok(d) => d.unwrap_or_default(),
        Err(message) => return invalid(wire, &format!("mock-llm directive: {message}")),
    };
    // Hero's memory flush is answered as its directive's `flush=` says.
    let flush = crate::flush::answer(&req.context, directive.flush.as_deref());
    let directive = if flush.is_some() {
        directive::Directive::default()
    } else {
        directive.later(req.rounds_after)
    };

    // A directive's fault wins, then the answer's, then `--fault`. A status fault from the
    // directive or the flag is served before an answer is taken, so a retried request gets
    // the answer the refused one would have had.
    let early = s.directive_fault(&directive).or_else(|| {
        s.config
            .fault
            .map(|k| s.config.resolve(crate::script::FaultSpec::new(k)))
    });
    if let Some(f) = early.filter(|f| f.kind.is_status()) {
        s.count_fault(f.kind);
        return status_fault(wire, f);
    }
    let answer = if let Some(flush) = flush {
        flush
    } else if directive.has_answer() {
        Answer {
            text: directive.text.clone().unwrap_or_default(),
            thinking: directive.thinking.clone(),
            tool_calls: directive.tools.clone(),
            ..Answer::default()
        }
    } else if directive.echo || s.config.echo {
        Answer::text(serde_json::to_string(&req.context).unwrap_or_default())
    } else {
        s.config
            .script
            .answer(s.next_answer.fetch_add(1, Ordering::Relaxed))
    };
    let fault = early.or_else(|| answer.fault.map(|f| s.config.resolve(f)));
    if let Some(f) = fault {
        s.count_fault(f.kind);
        if f.kind.is_status() {
            return status_fault(wire, f);
        }
    }

    let mut pacing = s.config.pacing();
    if let Some(n) = answer.chunk_bytes {
        pacing.chunk_bytes = n;
    }
    if let Some(ms) = answer.delay_ms {
        pacing.delay = Duration::from_millis(ms);
    }
    if let Some(rate) = directive.tokens_per_sec {
        pacing = crate::script::Pacing::tokens_per_sec(rate);
    }
    if let Some(n) = directive.chunk {
        pacing.chunk_bytes = n;
    }
    if let Some(ms) = directive.delay_ms {
        pacing.delay = Duration::from_millis(ms);
    }

    let reply = build_reply(&s, wire, &req, &directive, &answer);
    let ending = match fault.map(|f| f.kind) {
        Some(FaultKind::Cut) => Ending::Cut,
        Some(FaultKind::Stall) => Ending::Stall,
        Some(FaultKind::OverloadedMidstream) => Ending::MidstreamError,
        _ => Ending::Complete,
    };
    let after_bytes = fault.map_or(0, |f| f.after_bytes);
    let n = s.id();
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let id = match wire {
        Wire::Anthropic => format!("msg_mock{n:016}"),
        Wire::OpenAi => format!("chatcmpl-mock{n:016}"),
    };

    if req.stream && !directive.whole {
        let encoder = match wire {
            Wire::Anthropic => Encoder::Anthropic { id },
            Wire::OpenAi => Encoder::OpenAi {
                id,
                created,
                include_usage: req.include_usage,
            },
        };
        // Staggered: request n starts its beat at the fractional part of n × the golden
        // ratio of one pause, which spreads any number of streams evenly and repeatably.
        let first = if s.config.stagger {
            pacing
                .delay
                .mul_f64((n as f64 * 0.618_033_988_749_895).fract())
        } else {
            Duration::ZERO
        };
        let stream = body::events(
            reply,
            encoder,
            body::Pace {
                chunk: pacing.chunk_bytes,
                delay: pacing.delay,
                first,
            },
            ending,
            after_bytes,
            s.life(),
        );
        let mut res = Response::new(Body::from_stream(stream));
        let h = res.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream; charset=utf-8"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        add_request_id(wire, n, h);
        return res;
    }

    if ending == Ending::MidstreamError {
        // A whole-message answer has no "middle": the real API answers overloaded instead.
        return status_fault(
            wire,
            Fault {
                kind: FaultKind::Overloaded,
                retry_after: 0,
                after_bytes: 0,
            },
        );
    }
    // The real API takes as long to write a whole answer as to stream it.
    let pieces = count_deltas(&reply, pacing.chunk_bytes);
    let wait = pacing.delay * u32::try_from(pieces.saturating_sub(1)).unwrap_or(u32::MAX);
    if !wait.is_zero() {
        let mut closing = s.closing.clone();
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = closing.wait_for(|c| *c) => {}
        }
    }
    let json = match wire {
        Wire::Anthropic => anthropic::message(&id, &reply),
        Wire::OpenAi => openai::completion(&id, created, &reply),
    };
    let mut bytes = json.to_string().into_bytes();
    let mut res = if ending == Ending::Complete {
        // A plain body, so the response has a content-length as the real APIs' do.
        Response::new(Body::from(bytes))
    } else {
        bytes.truncate(after_bytes.min(bytes.len()));
        Response::new(Body::from_stream(body::fixed(
            Bytes::from(bytes),
            ending,
            s.life(),
        )))
    };
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    add_request_id(wire, n, h);
    res
}

fn build_reply(s: &Shared, wire: Wire, req: &Request, d: &Directive, a: &Answer) -> Reply {
    let mut blocks = Vec::new();
    if let Some(t) = &a.thinking {
        blocks.push(Block::Thinking(t.clone()));
    }
    if !a.text.is_empty() || a.tool_calls.is_empty() {
        blocks.push(Block::Text(a.text.clone()));
    }
    for call in &a.tool_calls {
        let n = s.id();
        let id = match wire {
            Wire::Anthropic => format!("toolu_mock{n:012}"),
            Wire::OpenAi => format!("call_mock{n:012}"),
        };
        blocks.push(Block::ToolUse {
            id,
            name: call.name.clone(),
            input: call.input.to_string(),
        });
    }
    let stop = d.stop.or(a.stop).unwrap_or(if a.tool_calls.is_empty() {
        StopReason::EndTurn
    } else {
        StopReason::ToolUse
    });
    let answer_chars: usize = blocks.iter().map(|b| b.content().chars().count()).sum();
    let usage = Usage {
        input: d
            .usage_input
            .or(a.usage_input)
            .or(s.config.usage_input)
            .unwrap_or((req.prompt_chars / 4).max(1) as u64),
        output: d
            .usage_output
            .or(a.usage_output)
            .or(s.config.usage_output)
            .unwrap_or((answer_chars / 4).max(1) as u64),
        cache_read: d.usage_cache_read.unwrap_or(0),
        cache_write: d.usage_cache_write.unwrap_or(0),
    };
    Reply {
        model: req.model.clone(),
        blocks,
        stop,
        usage,
    }
}

fn count_deltas(reply: &Reply, chunk: usize) -> usize {
    let mut c = Cursor::new(chunk, None);
    std::iter::from_fn(|| c.next(reply))
        .filter(|e| matches!(e, Event::Delta(..)))
        .count()
}

fn add_request_id(wire: Wire, n: u64, h: &mut HeaderMap) {
    let (name, value) = match wire {
        Wire::Anthropic => ("request-id", format!("req_mock{n:016}")),
        Wire::OpenAi => ("x-request-id", format!("req_mock{n:016}")),
    };
    if let Ok(v) = HeaderValue::from_str(&value) {
        h.insert(name, v);
    }
}

fn error(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn invalid(wire: Wire, message: &str) -> Response {
    let body = match wire {
        Wire::Anthropic => anthropic::error_body("invalid_request_error", message),
        Wire::OpenAi => openai::error_body(message, "invalid_request_error", None),
    };
    error(StatusCode::BAD_REQUEST, body)
}

fn unauthorized(wire: Wire, present: bool) -> Response {
    let body = match (wire, present) {
        (Wire::Anthropic, false) => {
            anthropic::error_body("authentication_error", "x-api-key header is required")
        }
        (Wire::Anthropic, true) => {
            anthropic::error_body("authentication_error", "invalid x-api-key")
        }
        (Wire::OpenAi, false) => openai::error_body(
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            "invalid_request_error",
            None,
        ),
        (Wire::OpenAi, true) => openai::error_body(
            "Incorrect API key provided.",
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
    };
    error(StatusCode::UNAUTHORIZED, body)
}

fn status_fault(wire: Wire, f: Fault) -> Response {
    let (status, body) = match (wire, f.kind) {
        (_, FaultKind::Unauthorized) => return unauthorized(wire, true),
        (Wire::Anthropic, FaultKind::RateLimited) => (
            StatusCode::TOO_MANY_REQUESTS,
            anthropic::error_body(
                "rate_limit_error",
                "Number of requests has exceeded your rate limit (mock-llm).",
            ),
        ),
        (Wire::Anthropic, FaultKind::ServerError) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            anthropic::error_body("api_error", "Internal server error"),
        ),
        (Wire::Anthropic, _) => (
            StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
            anthropic::error_body("overloaded_error", "Overloaded"),
        ),
        (Wire::OpenAi, FaultKind::RateLimited) => (
            StatusCode::TOO_MANY_REQUESTS,
            openai::error_body(
                "Rate limit reached for requests (mock-llm).",
                "rate_limit_exceeded",
                Some("rate_limit_exceeded"),
            ),
        ),
        (Wire::OpenAi, FaultKind::ServerError) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            openai::error_body(
                "The server had an error while processing your request. Sorry about that!",
                "server_error",
                None,
            ),
        ),
        (Wire::OpenAi, _) => (
            StatusCode::SERVICE_UNAVAILABLE,
            openai::error_body(
                "The engine is currently overloaded, please try again later.",
                "server_error",
                None,
            ),
        ),
    };
    let mut res = error(status, body);
    if f.kind == FaultKind::RateLimited {
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(f.retry_after));
    }
    res
}
