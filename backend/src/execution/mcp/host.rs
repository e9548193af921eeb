//! Users' MCP servers running: a stdio server is a program in its user's sandbox
//! ([`Sandbox::start_in_workspace`]: the workspace at `/workspace`, `/usr`, no network), an
//! HTTP server a streamable-HTTP session through the egress policy ([`super::http`]); both
//! spoken to by the `rmcp` client.
//!
//! - One connection per server, started at its first call (or its test) and stopped after
//!   [`Hosts::idle`] without one. Calls share it, each within the server's timeout.
//! - A call given up (Stop drops it) is cancelled (`notifications/cancelled`, sent by rmcp
//!   when the request is dropped); one past its timeout stops the connection (a server
//!   that hangs is killed). Whatever breaks a connection (its end, a line over
//!   [`MAX_LINE_BYTES`] or not JSON-RPC) fails the call in one line, and the next call
//!   starts another: at most [`RESTARTS_PER_MINUTE`] times a minute, after which the server
//!   is failed with its stderr's last line until it is tested again.
//! - At most [`MAX_LIVE`] connections at once, every user's together: past it the one idle
//!   longest is stopped, and if none is idle the call is refused.
//! - `notifications/tools/list_changed` is passed on ([`Changed`]): the server's tools are
//!   listed again and stored.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::handler::client::ClientHandler;
use rmcp::model::{CallToolRequestParams, ClientJsonRpcMessage, PaginatedRequestParams, Tool};
use rmcp::service::{NotificationContext, RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::execution::egress::Outbound;
use crate::execution::plugins::host::{Counted, Said, log_stderr, messages};
use crate::execution::sandbox::{Program, Sandbox};

pub use crate::execution::plugins::host::MAX_LINE_BYTES;

/// The most connections open at once, every user's together.
pub const MAX_LIVE: usize = 64;
/// How often a minute a server's connection may be started again after it broke.
pub const RESTARTS_PER_MINUTE: usize = 3;
/// The longest a server may take to start and answer `initialize`, and to list its tools.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The CPU time a stdio server's process may use in all.
pub const CPU_SECONDS: u64 = 3600;
/// The most tools read of a server's listing, and the most pages it is read in.
pub const MAX_LISTED: usize = 256;
pub const MAX_PAGES: usize = 8;
/// A server's `tools/list_changed` is passed on at most once in so long.
pub const RELIST_EVERY: Duration = Duration::from_secs(1);

/// Where a server is and how it is reached.
#[derive(Debug, Clone, PartialEq, Hash)]
pub enum Target {
    /// A program of the user's sandbox: its command line and environment.
    Stdio {
        argv: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// A streamable-HTTP endpoint and the headers sent with each request.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// One server, as a connection to it is made.
#[derive(Debug, Clone)]
pub struct Spec {
    pub id: i64,
    pub user_id: i64,
    pub name: String,
    pub target: Target,
    /// The longest one call may take.
    pub timeout: Duration,
}

impl Spec {
    /// What a connection was opened for: one opened for another configuration (the server
    /// changed since) is not used for this one.
    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.name, &self.target).hash(&mut h);
        h.finish()
    }

    /// `text` with each secret of the configuration (an environment value or a header of
    /// four bytes or more) hidden and its line ends and other control characters made
    /// spaces: an error a server echoed (its stderr, an HTTP page) never carries a secret
    /// out, and is one line.
    pub fn scrub(&self, text: &str) -> String {
        self.hide(text)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    }

    /// `text` with each secret of the configuration hidden, its lines kept.
    pub fn hide(&self, text: &str) -> String {
        let secrets = match &self.target {
            Target::Stdio { env, .. } => env,
            Target::Http { headers, .. } => headers,
        };
        let mut out = text.to_owned();
        for (_, v) in secrets {
            if v.len() >= 4 {
                out = out.replace(v.as_str(), "[hidden]");
            }
        }
        out
    }
}

/// What a server told of itself when it was started.
#[derive(Debug, Clone, Default)]
pub struct Listed {
    pub tools: Vec<Tool>,
    pub instructions: Option<String>,
}

/// Which server's tools changed: `(user, server)`, sent when it says so.
pub type Changed = tokio::sync::mpsc::Sender<(i64, i64)>;

/// The client's side of a connection: it passes `tools/list_changed` on.
struct Watcher {
    user_id: i64,
    server_id: i64,
    changed: Option<Changed>,
    /// When it last passed one on: at most one each [`RELIST_EVERY`].
    last: Mutex<Option<std::time::Instant>>,
}

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        let Some(tx) = &self.changed else { return };
        {
            let mut last = lock(&self.last);
            if last.is_some_and(|t| t.elapsed() < RELIST_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        // A full queue drops it: the servers of every user share it, and one spamming
        // cannot make it grow.
        let _ = tx.try_send((self.user_id, self.server_id));
    }
}

/// An open connection. Dropped, its process (for stdio) dies and its session (HTTP) ends.
struct Connection {
    client: RunningService<RoleClient, Watcher>,
    /// Why its output was refused, when it was.
    fault: Arc<Mutex<Option<String>>>,
    program: Option<Mutex<Program>>,
    stderr: Option<tokio::task::JoinHandle<usize>>,
    /// The last line its stderr said something on.
    last_line: Arc<Mutex<String>>,
    listed: Listed,
    /// The configuration it was opened for ([`Spec::fingerprint`]).
    fingerprint: u64,
    _counted: Counted,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(s) = &self.stderr {
            s.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Connection {
    /// Why it is unusable, if it is.
    fn broken(&self) -> Option<String> {
        if let Some(why) = lock(&self.fault).clone() {
            return Some(why);
        }
        if let Some(p) = &self.program {
            let mut p = lock(p);
            if p.over_quota() {
                return Some("it filled the workspace past its quota and was stopped".into());
            }
            if p.ended() {
                return Some("it ended".into());
            }
        }
        if self.client.is_closed() || self.client.peer().is_transport_closed() {
            return Some("its connection closed".into());
        }
        None
    }

    /// What went wrong, with its stderr's last line when it said anything.
    fn reason(&self, why: &str) -> String {
        match lock(&self.last_line).as_str() {
            "" => why.to_owned(),
            line => format!("{why} (its last words: {line})"),
        }
    }
}

/// Opens a connection to `spec`'s server and lists its tools.
async fn connect(
    sandbox: &Sandbox,
    http: &Outbound,
    spec: &Spec,
    changed: Option<Changed>,
    counted: Counted,
) -> Result<Connection, String> {
    let watcher = Watcher {
        user_id: spec.user_id,
        server_id: spec.id,
        changed,
        last: Mutex::new(None),
    };
    let fault = Arc::new(Mutex::new(None));
    let last_line = Arc::new(Mutex::new(String::new()));
    let (started, program, stderr) = match &spec.target {
        Target::Stdio { argv, env } => {
            let mut program = sandbox
                .start_in_workspace(spec.user_id, argv.clone(), env, CPU_SECONDS)
                .await?;
            let (Some(stdin), Some(stdout), Some(err)) = (
                program.stdin.take(),
                program.stdout.take(),
                program.stderr.take(),
            ) else {
                return Err("its pipes could not be opened".into());
            };
            let said = Said {
                last: last_line.clone(),
                secrets: env.iter().map(|(_, v)| v.clone()).collect(),
            };
            let stderr = tokio::spawn(log_stderr(format!("mcp-{}", spec.name), err, Some(said)));
            let sink = Box::pin(futures::sink::unfold(
                stdin,
                |mut w, message: ClientJsonRpcMessage| async move {
                    let mut line = serde_json::to_vec(&message).map_err(std::io::Error::other)?;
                    line.push(b'\n');
                    w.write_all(&line).await?;
                    w.flush().await?;
                    Ok::<_, std::io::Error>(w)
                },
            ));
            let started = tokio::time::timeout(
                START_TIMEOUT,
                watcher.serve((sink, messages(stdout, fault.clone()))),
            )
            .await;
            (started, Some(Mutex::new(program)), Some(stderr))
        }
        Target::Http { url, headers } => {
            let mut custom = HashMap::new();
            for (k, v) in headers {
                let (Ok(k), Ok(v)) = (
                    http::HeaderName::try_from(k.as_str()),
                    http::HeaderValue::try_from(v.as_str()),
                ) else {
                    return Err(format!("the header {k:?} cannot be sent"));
                };
                custom.insert(k, v);
            }
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            config.custom_headers = custom;
            config.max_sse_event_size = super::http::MAX_MESSAGE_BYTES;
            config.max_json_response_size = super::http::MAX_MESSAGE_BYTES;
            let transport = StreamableHttpClientTransport::with_client(
                super::http::EgressClient(http.clone()),
                config,
            );
            let started = tokio::time::timeout(START_TIMEOUT, watcher.serve(transport)).await;
            (started, None, None)
        }
    };
    let why_not = |e: String| {
        if let Some(s) = &stderr {
            s.abort();
        }
        let said = lock(&last_line).clone();
        let why = lock(&fault).clone().unwrap_or(e);
        match said.as_str() {
            "" => why,
            line => format!("{why} (its last words: {line})"),
        }
    };
    let client = match started {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(why_not(format!("it did not start as an MCP server: {e}"))),
        Err(_) => {
            return Err(why_not(format!(
                "it did not answer `initialize` within {} s",
                START_TIMEOUT.as_secs()
            )));
        }
    };
    let instructions = client
        .peer()
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .filter(|i| !i.trim().is_empty());
    let mut c = Connection {
        client,
        fault,
        program,
        stderr,
        last_line,
        listed: Listed::default(),
        fingerprint: spec.fingerprint(),
        _counted: counted,
    };
    c.listed = Listed {
        tools: list(&c).await?,
        instructions,
    };
    Ok(c)
}

/// The server's tools, as it lists them now: [`MAX_LISTED`] at most, in [`MAX_PAGES`] pages
/// at most, within [`START_TIMEOUT`].
async fn list(c: &Connection) -> Result<Vec<Tool>, String> {
    let peer = c.client.peer();
    let pages = async {
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_PAGES {
            let params = PaginatedRequestParams::default().with_cursor(cursor);
            let page = peer.list_tools(Some(params)).await?;
            tools.extend(page.tools);
            cursor = page.next_cursor;
            if cursor.is_none() || tools.len() >= MAX_LISTED {
                break;
            }
        }
        tools.truncate(MAX_LISTED);
        Ok::<_, ServiceError>(tools)
    };
    match tokio::time::timeout(START_TIMEOUT, pages).await {
        Err(_) => Err(c.reason(&format!(
            "it did not list its tools within {} s",
            START_TIMEOUT.as_secs()
        ))),
        Ok(Err(e)) => Err(c.reason(&format!("its tools could not be listed: {e}"))),
        Ok(Ok(tools)) => Ok(tools),
    }
}

/// Counts a call in progress while it lives: a call dropped (Stop) is counted out too.
struct InCall<'a>(&'a AtomicUsize);

impl<'a> InCall<'a> {
    fn new(calls: &'a AtomicUsize) -> InCall<'a> {
        calls.fetch_add(1, Ordering::SeqCst);
        InCall(calls)
    }
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One server's connection, if open, and what it has been through.
#[derive(Default)]
struct Slot {
    /// Locked while a connection is looked at or started, never across a call.
    conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// Milliseconds since [`Hosts::epoch`].
    last_used: AtomicU64,
    /// Calls in progress (a connection with one is not idle).
    calls: AtomicUsize,
    /// Its last connection was stopped for breaking, or its last start failed: the next
    /// start is a restart.
    broke: std::sync::atomic::AtomicBool,
    /// Why it broke or failed to start, the last time.
    last_reason: Mutex<Option<String>>,
    /// When it was started again after breaking, within the last minute.
    restarts: Mutex<VecDeque<Instant>>,
    /// Why it is failed, when it spent its restarts: until it is tested again.
    failed: Mutex<Option<String>>,
}

/// Every user's servers' connections.
pub struct Hosts {
    slots: Mutex<HashMap<i64, Arc<Slot>>>,
    count: Arc<AtomicUsize>,
    epoch: Instant,
    reaper: std::sync::OnceLock<()>,
    /// How long a connection waits for its next call before it is stopped.
    pub idle: Duration,
    /// Where servers' `tools/list_changed` go.
    pub changed: Option<Changed>,
}

impl Hosts {
    pub fn new(idle: Duration, changed: Option<Changed>) -> Hosts {
        Hosts {
            slots: Mutex::default(),
            count: Arc::default(),
            epoch: Instant::now(),
            reaper: std::sync::OnceLock::new(),
            idle,
            changed,
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn slot(&self, id: i64) -> Arc<Slot> {
        lock(&self.slots).entry(id).or_default().clone()
    }

    /// Whether the server has a connection open.
    pub fn running(&self, id: i64) -> bool {
        let slot = lock(&self.slots).get(&id).cloned();
        slot.is_some_and(|s| s.conn.try_lock().map_or(true, |c| c.is_some()))
    }

    /// Why the server is failed, if it spent its restarts.
    pub fn failed(&self, id: i64) -> Option<String> {
        let slot = lock(&self.slots).get(&id).cloned();
        slot.and_then(|s| lock(&s.failed).clone())
    }

    /// How many connections are open.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Stops the server's connection and forgets what it went through (it was changed,
    /// disabled or removed).
    pub fn stop(&self, id: i64) {
        lock(&self.slots).remove(&id);
    }

    /// Stops idle connections (and, with `room`, the one idle longest when [`MAX_LIVE`]
    /// are open); forgets slots with nothing to remember.
    fn reap(&self, room: bool) {
        let now = self.now();
        let idle = self.idle.as_millis() as u64;
        let mut slots = lock(&self.slots);
        let mut oldest: Option<(u64, Arc<Slot>)> = None;
        slots.retain(|_, s| {
            if Arc::strong_count(s) > 1 || s.calls.load(Ordering::SeqCst) > 0 {
                return true;
            }
            let Ok(mut c) = s.conn.try_lock() else {
                return true;
            };
            let last = s.last_used.load(Ordering::SeqCst);
            if c.is_some() && now.saturating_sub(last) >= idle {
                *c = None;
            }
            if c.is_some() && oldest.as_ref().is_none_or(|(t, _)| last < *t) {
                oldest = Some((last, s.clone()));
            }
            c.is_some() || lock(&s.failed).is_some() || !lock(&s.restarts).is_empty()
        });
        drop(slots);
        if room
            && self.count() >= MAX_LIVE
            && let Some((_, s)) = oldest
            && let Ok(mut c) = s.conn.try_lock()
        {
            *c = None;
        }
    }

    /// Starts the task that stops idle connections, once: it ends with the last reference.
    fn reap_idle(self: &Arc<Self>) {
        self.reaper.get_or_init(|| {
            let hosts: Weak<Hosts> = Arc::downgrade(self);
            let every = (self.idle / 2).clamp(Duration::from_millis(20), Duration::from_secs(30));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(hosts) = hosts.upgrade() else { return };
                    hosts.reap(false);
                }
            });
        });
    }

    /// A place among the open connections.
    fn place(&self) -> Result<Counted, String> {
        if let Some(c) = Counted::take(&self.count, MAX_LIVE) {
            return Ok(c);
        }
        self.reap(true);
        Counted::take(&self.count, MAX_LIVE).ok_or_else(|| {
            format!("{MAX_LIVE} MCP connections are open, the most at once: try again in a moment")
        })
    }

    /// The server's connection, started if it has none or its last one broke (within its
    /// restarts).
    async fn open(
        self: &Arc<Self>,
        sandbox: &Sandbox,
        http: &Outbound,
        spec: &Spec,
        slot: &Slot,
    ) -> Result<Arc<Connection>, String> {
        self.reap_idle();
        let mut held = slot.conn.lock().await;
        if let Some(why) = lock(&slot.failed).clone() {
            return Err(why);
        }
        let mut restart = slot.broke.swap(false, Ordering::SeqCst);
        if let Some(c) = held.as_ref() {
            match c.broken() {
                // One opened for the server as it was before a change is not used.
                None if c.fingerprint != spec.fingerprint() => *held = None,
                None => return Ok(c.clone()),
                Some(why) => {
                    tracing::info!(server = %spec.name, user = spec.user_id, "the MCP server {}; starting it again", spec.scrub(&why));
                    *lock(&slot.last_reason) = Some(c.reason(&why));
                    restart = true;
                    *held = None;
                }
            }
        }
        if restart {
            let mut r = lock(&slot.restarts);
            r.retain(|t| t.elapsed() < Duration::from_secs(60));
            if r.len() >= RESTARTS_PER_MINUTE {
                let last = lock(&slot.last_reason).clone().unwrap_or_default();
                let why = spec.scrub(&format!(
                    "it broke {} times within a minute and is failed until it is tested again; the last time: {last}",
                    RESTARTS_PER_MINUTE + 1
                ));
                *lock(&slot.failed) = Some(why.clone());
                return Err(why);
            }
            r.push_back(Instant::now());
        }
        match connect(sandbox, http, spec, self.changed.clone(), self.place()?).await {
            Ok(c) => {
                let c = Arc::new(c);
                *held = Some(c.clone());
                Ok(c)
            }
            // A start that fails counts as a break: the next is a restart, within the budget.
            Err(why) => {
                let why = spec.scrub(&why);
                slot.broke.store(true, Ordering::SeqCst);
                *lock(&slot.last_reason) = Some(why.clone());
                Err(why)
            }
        }
    }

    /// Starts the server afresh (its failure and restarts forgotten) and answers what it
    /// lists; its connection stays open for the calls that follow.
    pub async fn test(
        self: &Arc<Self>,
        sandbox: &Sandbox,
        http: &Outbound,
        spec: &Spec,
    ) -> Result<Listed, String> {
        self.stop(spec.id);
        let slot = self.slot(spec.id);
        slot.last_used.store(self.now(), Ordering::SeqCst);
        let c = self.open(sandbox, http, spec, &slot).await?;
        let mut listed = c.listed.clone();
        listed.instructions = listed.instructions.map(|i| spec.hide(&i));
        Ok(listed)
    }

    /// The server's tools listed again on its open connection (after it said they changed);
    /// `None` when it has none open.
    pub async fn relist(&self, id: i64) -> Option<Result<Listed, String>> {
        let slot = lock(&self.slots).get(&id).cloned()?;
        let c = slot.conn.lock().await.clone()?;
        Some(list(&c).await.map(|tools| Listed {
            tools,
            instructions: c.listed.instructions.clone(),
        }))
    }

    /// Calls the server's `tool` with `args` within its timeout: the text it answered, or
    /// (as `Err`) why the call failed, its `isError` answers included.
    pub async fn call(
        self: &Arc<Self>,
        sandbox: &Sandbox,
        http: &Outbound,
        spec: &Spec,
        tool: &str,
        args: &Value,
    ) -> Result<String, String> {
        let slot = self.slot(spec.id);
        slot.last_used.store(self.now(), Ordering::SeqCst);
        // Counted as in progress from here (the idle reaper leaves it alone), and counted out
        // however it ends, dropped by a Stop included.
        let _in_call = InCall::new(&slot.calls);
        let function = format!("mcp__{}__{tool}", spec.name);
        let deadline = Instant::now() + spec.timeout;
        // Waiting for the server to start is within the call's time too.
        let c =
            match tokio::time::timeout(spec.timeout, self.open(sandbox, http, spec, &slot)).await {
                Ok(Ok(c)) => c,
                Ok(Err(why)) => {
                    return Err(format!(
                        "the MCP server {} cannot be reached: {why}",
                        spec.name
                    ));
                }
                Err(_) => {
                    return Err(format!(
                        "the MCP server {} did not start within {} s",
                        spec.name,
                        spec.timeout.as_secs()
                    ));
                }
            };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = match args {
            Value::Object(o) => Some(o.clone()),
            _ => Some(serde_json::Map::new()),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        // Dropped (Stop), the request is cancelled by rmcp (`notifications/cancelled`).
        let answered = tokio::time::timeout(left, c.client.peer().call_tool(params)).await;
        slot.last_used.store(self.now(), Ordering::SeqCst);
        // A connection stopped for what it did: marked broken first, so that whoever holds
        // the slot's lock now does not use it again.
        let stop = |why: &str| {
            lock(&c.fault).get_or_insert_with(|| why.to_owned());
            slot.broke.store(true, Ordering::SeqCst);
            *lock(&slot.last_reason) = Some(c.reason(why));
            if let Ok(mut held) = slot.conn.try_lock()
                && held.as_ref().is_some_and(|h| Arc::ptr_eq(h, &c))
            {
                *held = None;
            }
        };
        let result = match answered {
            Err(_) => {
                let why = format!("it did not answer within {} s", spec.timeout.as_secs());
                stop(&why);
                return Err(format!(
                    "{function} did not answer within {} s; the server was stopped",
                    spec.timeout.as_secs()
                ));
            }
            Ok(Err(ServiceError::McpError(e))) => {
                return Err(spec.scrub(&format!("{function} refused the call: {}", e.message)));
            }
            Ok(Err(e)) => {
                let why = c.broken().unwrap_or_else(|| e.to_string());
                let said = c.reason(&why);
                stop(&why);
                return Err(spec.scrub(&format!("{function} failed: {said}")));
            }
            Ok(Ok(r)) => r,
        };
        let text = crate::execution::plugins::host::text_of(
            &result.content,
            result.structured_content.as_ref(),
        );
        match result.is_error {
            Some(true) if text.is_empty() => Err(format!("{function} failed")),
            Some(true) => Err(text),
            _ => Ok(text),
        }
    }
}
