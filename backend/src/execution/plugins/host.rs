//! Running plugins: each is an MCP server (JSON-RPC 2.0, a message a line on its stdin and
//! stdout) in the bash sandbox ([`Sandbox::start`]), spoken to by the `rmcp` client.
//!
//! - At start-up each ready plugin is run once to list its tools ([`discover`]); a plugin
//!   whose tools cannot be listed is failed with the reason.
//! - A call runs in the process of its (plugin, user), started at the first call and
//!   stopped after [`PluginSettings::idle`] without one; one call at a time each. The
//!   process sees its directory read-only at `/plugin` and the user's own state directory
//!   (`plugin-state/<plugin>/<user>`, 0700) at `/state`, and nothing else but `/usr`.
//! - Whatever goes wrong kills the process and fails the call in one line, and the next call
//!   starts a fresh one: a call past its timeout, a call given up (Stop drops it), a line
//!   over [`MAX_LINE_BYTES`] or one that is not JSON-RPC, the process's end. Its stderr goes
//!   to the log, [`MAX_STDERR_LOGGED`] bytes of it at most.
//! - At most [`MAX_LIVE`] processes run at once: past it the one idle longest is stopped,
//!   and if every one is in a call, the call is refused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures::Stream;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ContentBlock, ServerJsonRpcMessage,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::execution::sandbox::{Program, Sandbox};

use super::Plugin;

/// The longest line (one JSON-RPC message) a plugin may write.
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// What of one process's stderr reaches the log; the rest is read and dropped.
pub const MAX_STDERR_LOGGED: usize = 64 << 10;
/// The CPU time one process may use in all: past it, it is killed (and the next call
/// starts a fresh one).
pub const CPU_SECONDS: u64 = 600;
/// The most plugin processes running at once, every plugin and user together.
pub const MAX_LIVE: usize = 64;
/// The longest a process may take to start and answer `initialize`.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The most tools one plugin may export; the rest are skipped.
pub const MAX_TOOLS: usize = 100;

/// Where plugins live and how their processes are held.
#[derive(Debug, Clone)]
pub struct PluginSettings {
    /// Where administrators install plugins (`DATA_DIR/plugins`); none: no plugins.
    pub dir: Option<PathBuf>,
    /// Where each plugin keeps each user's state (`DATA_DIR/plugin-state`).
    pub state: PathBuf,
    /// The longest one call may take (at most the sandbox's longest timeout).
    pub timeout: Duration,
    /// How long a process waits for its next call before it is stopped.
    pub idle: Duration,
}

impl Default for PluginSettings {
    fn default() -> Self {
        PluginSettings {
            dir: None,
            state: std::env::temp_dir().join("hero-plugin-state"),
            timeout: Duration::from_secs(30),
            idle: Duration::from_secs(5 * 60),
        }
    }
}

/// A tool a plugin exports, as its `tools/list` described it.
#[derive(Debug, Clone)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// Its input's JSON Schema.
    pub schema: Value,
}

/// A running process and the client speaking to it. Dropped, the process dies.
struct Connection {
    client: RunningService<RoleClient, ()>,
    /// Why its output was refused, when it was.
    fault: Arc<Mutex<Option<String>>>,
    stderr: tokio::task::JoinHandle<usize>,
    program: Program,
    /// Its place among the live processes, given back when it goes.
    _counted: Counted,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stderr.abort();
    }
}

/// One place among the live processes, taken before a process starts (so two starts at
/// once cannot both pass the limit) and given back when it is dropped.
pub(crate) struct Counted(Arc<AtomicUsize>);

impl Counted {
    /// A place, if fewer than `max` are taken.
    pub(crate) fn take(count: &Arc<AtomicUsize>, max: usize) -> Option<Counted> {
        count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Counted(count.clone()))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Connection {
    /// Why the connection is unusable, if it is: its output was refused, or it ended.
    fn broken(&mut self) -> Option<String> {
        if let Some(why) = self.fault.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Some(why);
        }
        if self.program.over_quota() {
            return Some("it filled its state directory past the quota and was stopped".into());
        }
        if self.program.ended()
            || self.client.is_closed()
            || self.client.peer().is_transport_closed()
        {
            return Some("it ended".into());
        }
        None
    }
}

/// Starts `plugin`'s program with `state` as its state directory and initialises MCP.
async fn connect(
    sandbox: &Sandbox,
    plugin: &Plugin,
    state: &Path,
    counted: Counted,
) -> Result<Connection, String> {
    let Some(m) = &plugin.manifest else {
        return Err("its manifest could not be read".into());
    };
    let code = plugin
        .dir
        .canonicalize()
        .map_err(|e| format!("its directory cannot be read: {e}"))?;
    let inside = m
        .program
        .strip_prefix(&code)
        .map_err(|_| "its command is outside its directory".to_owned())?;
    let mut argv = vec![Path::new("/plugin").join(inside).display().to_string()];
    argv.extend(m.args.iter().cloned());
    let mut program = sandbox.start(&code, state, argv, CPU_SECONDS).await?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (
        program.stdin.take(),
        program.stdout.take(),
        program.stderr.take(),
    ) else {
        return Err("its pipes could not be opened".into());
    };
    let fault = Arc::new(Mutex::new(None));
    let stderr = tokio::spawn(log_stderr(plugin.name.clone(), stderr, None));
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
    let started = ().serve((sink, messages(stdout, fault.clone())));
    // From here the connection owns the process: dropped on any failure below, it dies.
    let pending = Pending {
        program: Some(program),
        counted,
    };
    let client = match tokio::time::timeout(START_TIMEOUT, started).await {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => {
            let why = fault.lock().unwrap_or_else(|p| p.into_inner()).clone();
            stderr.abort();
            return Err(format!(
                "it did not start as an MCP server: {}",
                why.unwrap_or_else(|| e.to_string())
            ));
        }
        Err(_) => {
            stderr.abort();
            return Err(format!(
                "it did not answer `initialize` within {} s",
                START_TIMEOUT.as_secs()
            ));
        }
    };
    let (program, counted) = pending.take();
    Ok(Connection {
        client,
        fault,
        stderr,
        program,
        _counted: counted,
    })
}

/// A started process not yet a [`Connection`]: killed (its [`Program`] dropped), and its
/// place given back, if dropped first.
struct Pending {
    program: Option<Program>,
    counted: Counted,
}

impl Pending {
    fn take(mut self) -> (Program, Counted) {
        (self.program.take().expect("taken once"), self.counted)
    }
}

/// One line of `r`, without its end, if it has one within [`MAX_LINE_BYTES`]: `Ok(None)` at
/// the end of the stream, `Err` for a line too long.
async fn read_line<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> Result<Option<()>, String> {
    buf.clear();
    let n = r
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', buf)
        .await
        .map_err(|e| e.to_string())?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() > MAX_LINE_BYTES {
        return Err(format!(
            "it wrote a line longer than {} MiB",
            MAX_LINE_BYTES >> 20
        ));
    }
    Ok(Some(()))
}

/// The messages a process writes, a line each: the stream ends, with the reason in
/// `fault`, at the first line too long or not JSON-RPC (and the process is then killed).
pub(crate) fn messages<R: AsyncRead + Unpin + Send + 'static>(
    out: R,
    fault: Arc<Mutex<Option<String>>>,
) -> impl Stream<Item = ServerJsonRpcMessage> + Send + Unpin + 'static {
    let reader = (BufReader::new(out), Vec::new(), fault, false);
    Box::pin(futures::stream::unfold(
        reader,
        |(mut r, mut buf, fault, done)| async move {
            if done {
                return None;
            }
            loop {
                let refuse = |why: String| {
                    *fault.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
                };
                match read_line(&mut r, &mut buf).await {
                    Ok(None) => return None,
                    Err(why) => {
                        refuse(why);
                        return None;
                    }
                    Ok(Some(())) if buf.iter().all(u8::is_ascii_whitespace) => continue,
                    Ok(Some(())) => match serde_json::from_slice::<ServerJsonRpcMessage>(&buf) {
                        Ok(m) => return Some((m, (r, buf, fault, false))),
                        Err(e) => {
                            refuse(format!("it wrote a line that is not JSON-RPC ({e})"));
                            return None;
                        }
                    },
                }
            }
        },
    ))
}

/// Logs a process's stderr a line at a time (4 KiB of a line at most), the first
/// [`MAX_STDERR_LOGGED`] bytes of it; the rest is read and dropped; its last line kept in
/// `last` (cut to 500 bytes), when given. Answers how much it logged.
pub(crate) async fn log_stderr<R: AsyncRead + Unpin>(
    plugin: String,
    err: R,
    last: Option<Said>,
) -> usize {
    let mut r = BufReader::new(err);
    let mut buf = Vec::new();
    let mut logged = 0usize;
    loop {
        match read_line(&mut r, &mut buf).await {
            Ok(None) => return logged,
            Ok(Some(())) => {}
            // A line over the bound is logged cut; a read that fails ends the log.
            Err(_) if buf.len() > MAX_LINE_BYTES => {}
            Err(_) => return logged,
        }
        let hide = |text: std::borrow::Cow<'_, str>| match &last {
            Some(said) => said.hide(&text),
            None => text.into_owned(),
        };
        if let Some(said) = &last
            && !buf.iter().all(u8::is_ascii_whitespace)
        {
            let line = hide(String::from_utf8_lossy(&buf[..buf.len().min(500)]));
            *said.last.lock().unwrap_or_else(|p| p.into_inner()) = line.trim().to_owned();
        }
        if logged >= MAX_STDERR_LOGGED {
            continue;
        }
        let shown = &buf[..buf.len().min(4096)];
        logged += shown.len();
        tracing::info!(plugin = %plugin, "stderr: {}", hide(String::from_utf8_lossy(shown)));
        if logged >= MAX_STDERR_LOGGED {
            tracing::warn!(plugin = %plugin, "the rest of this process's stderr is not logged");
        }
    }
}

/// Where a process's stderr's last line is kept, and the secrets hidden in what is kept and
/// logged of it (each of four bytes or more).
pub(crate) struct Said {
    pub last: Arc<Mutex<String>>,
    pub secrets: Vec<String>,
}

impl Said {
    fn hide(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in self.secrets.iter().filter(|s| s.len() >= 4) {
            out = out.replace(s.as_str(), "[hidden]");
        }
        out
    }
}

/// Runs `plugin` once, with `state` as its state directory, to list its tools.
pub async fn discover(
    sandbox: &Sandbox,
    plugin: &Plugin,
    state: &Path,
) -> Result<Vec<ToolDef>, String> {
    let alone = Arc::new(AtomicUsize::new(0));
    let counted = Counted::take(&alone, 1).ok_or("no place to start it")?;
    let began = Instant::now();
    let c = connect(sandbox, plugin, state, counted).await?;
    let started = began.elapsed();
    let tools = tokio::time::timeout(START_TIMEOUT, c.client.peer().list_all_tools())
        .await
        .map_err(|_| {
            format!(
                "it did not list its tools within {} s",
                START_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("its tools could not be listed: {e}"))?;
    tracing::info!(plugin = %plugin.name, tools = tools.len(), started_ms = started.as_millis() as u64, "plugin's tools listed");
    Ok(tools
        .into_iter()
        .take(MAX_TOOLS)
        .map(|t| ToolDef {
            name: t.name.into_owned(),
            description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
            schema: Value::Object((*t.input_schema).clone()),
        })
        .collect())
}

/// One (plugin, user)'s process, if it runs, and when it was last called.
#[derive(Default)]
struct Slot {
    conn: tokio::sync::Mutex<Option<Connection>>,
    /// Milliseconds since [`Live::epoch`].
    last_used: AtomicU64,
}

/// The processes running, by (plugin, user).
pub struct Live {
    slots: Mutex<HashMap<(String, i64), Arc<Slot>>>,
    count: Arc<AtomicUsize>,
    epoch: Instant,
    reaper: std::sync::OnceLock<()>,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            slots: Mutex::default(),
            count: Arc::default(),
            epoch: Instant::now(),
            reaper: std::sync::OnceLock::new(),
        }
    }
}

impl Live {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn slot(&self, plugin: &str, user_id: i64) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .entry((plugin.to_owned(), user_id))
            .or_default()
            .clone()
    }

    /// Whether `plugin` has a process running (or starting).
    pub fn running(&self, plugin: &str) -> bool {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .iter()
            .filter(|((p, _), _)| p == plugin)
            .any(|(_, s)| s.conn.try_lock().map_or(true, |c| c.is_some()))
    }

    /// How many processes run.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Stops every process idle for `idle` or longer (and, with `room`, the one idle
    /// longest when [`MAX_LIVE`] run); forgets slots with none.
    fn reap(&self, idle: Duration, room: bool) {
        let now = self.now();
        let idle = idle.as_millis() as u64;
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut oldest: Option<(u64, Arc<Slot>)> = None;
        slots.retain(|_, s| {
            // A caller holds it (about to lock it): kept, or the caller's process would be
            // in a slot no one else sees.
            if Arc::strong_count(s) > 1 {
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
            c.is_some()
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

    /// Starts the task that stops idle processes, once: it ends with the last reference.
    fn reap_idle(self: &Arc<Self>, idle: Duration) {
        self.reaper.get_or_init(|| {
            let live: Weak<Live> = Arc::downgrade(self);
            let every = (idle / 2).clamp(Duration::from_millis(20), Duration::from_secs(30));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(live) = live.upgrade() else { return };
                    live.reap(idle, false);
                }
            });
        });
    }
}

/// Calls `tool` of `plugin` for `user_id` with `args`, in that user's process of it
/// (started if need be), within `settings.timeout`.
pub async fn call(
    sandbox: &Sandbox,
    live: &Arc<Live>,
    settings: &PluginSettings,
    plugin: &Plugin,
    user_id: i64,
    tool: &str,
    args: &Value,
) -> Result<String, String> {
    let timeout = settings.timeout.min(sandbox.limits.max_timeout);
    live.reap_idle(settings.idle);
    let slot = live.slot(&plugin.name, user_id);
    let mut held = slot.conn.lock().await;
    slot.last_used.store(live.now(), Ordering::SeqCst);
    // Taken out for the call: if the call is given up (Stop drops this future), times out
    // or breaks the process, the connection is dropped here and the process dies with it.
    let mut conn = match held.take() {
        Some(mut c) => match c.broken() {
            Some(why) => {
                tracing::info!(plugin = %plugin.name, user = user_id, "the process {why}; starting another");
                drop(c);
                None
            }
            None => Some(c),
        },
        None => None,
    };
    if conn.is_none() {
        // The place is taken before the start: two starts at once cannot both pass it.
        let counted = match Counted::take(&live.count, MAX_LIVE) {
            Some(c) => Some(c),
            None => {
                live.reap(settings.idle, true);
                Counted::take(&live.count, MAX_LIVE)
            }
        };
        let Some(counted) = counted else {
            return Err(format!(
                "{} plugin processes are running, the most at once: try again in a moment",
                MAX_LIVE
            ));
        };
        let state = settings.state.join(&plugin.name).join(user_id.to_string());
        let c = connect(sandbox, plugin, &state, counted)
            .await
            .map_err(|why| format!("the plugin {} could not start: {why}", plugin.name))?;
        conn = Some(c);
    }
    let Some(c) = conn else {
        return Err("no process".into());
    };
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = match args {
        Value::Object(o) => Some(o.clone()),
        _ => Some(serde_json::Map::new()),
    };
    let answered = tokio::time::timeout(timeout, c.client.peer().call_tool(params)).await;
    slot.last_used.store(live.now(), Ordering::SeqCst);
    let name = &plugin.name;
    let result = match answered {
        Err(_) => {
            return Err(format!(
                "{name}__{tool} did not answer within {} s; its process was stopped",
                timeout.as_secs()
            ));
        }
        Ok(Err(ServiceError::McpError(e))) => {
            *held = Some(c);
            return Err(format!("{name}__{tool} refused the call: {}", e.message));
        }
        Ok(Err(e)) => {
            let mut c = c;
            let why = c.broken().unwrap_or_else(|| e.to_string());
            return Err(format!(
                "{name}__{tool} failed: {why}; its process was stopped"
            ));
        }
        Ok(Ok(r)) => r,
    };
    *held = Some(c);
    let text = text_of(&result.content, result.structured_content.as_ref());
    match result.is_error {
        Some(true) => Err(if text.is_empty() {
            format!("{name}__{tool} failed")
        } else {
            text
        }),
        _ => Ok(text),
    }
}

/// A result's text: its text blocks, one after another, and a line naming each other block;
/// its structured content when it has no text.
pub(crate) fn text_of(content: &[ContentBlock], structured: Option<&Value>) -> String {
    let mut out = String::new();
    for block in content {
        if !out.is_empty() {
            out.push('\n');
        }
        match block {
            ContentBlock::Text(t) => out.push_str(&t.text),
            ContentBlock::Image(_) => out.push_str("[an image]"),
            ContentBlock::Audio(_) => out.push_str("[audio]"),
            _ => out.push_str("[a resource]"),
        }
    }
    if out.is_empty()
        && let Some(v) = structured
    {
        out = v.to_string();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Places among the live processes are taken at once or not at all: however many
    /// threads race for them, no more than the limit are held, and each is given back.
    #[test]
    fn no_more_places_than_the_limit_however_many_race() {
        let count = Arc::new(AtomicUsize::new(0));
        let held = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..100 {
                        if let Some(c) = Counted::take(&count, 5) {
                            assert!(count.load(Ordering::SeqCst) <= 5);
                            held.lock().unwrap().push(c);
                        }
                    }
                });
            }
        });
        assert_eq!(held.lock().unwrap().len(), 5);
        assert!(Counted::take(&count, 5).is_none());
        held.lock().unwrap().pop();
        assert_eq!(count.load(Ordering::SeqCst), 4);
        assert!(
            Counted::take(&count, 5).is_some(),
            "a place given back is taken again"
        );
        held.lock().unwrap().clear();
        assert_eq!(count.load(Ordering::SeqCst), 0);
    }

    /// A process's stderr reaches the log up to its bound, however much it writes, a line
    /// over 1 MiB included; all of it is read.
    #[tokio::test]
    async fn stderr_is_logged_up_to_its_bound() {
        let mut flood = Vec::new();
        for i in 0..3_000 {
            flood.extend_from_slice(format!("{i:099}\n").as_bytes());
        }
        flood.extend(std::iter::repeat_n(b'x', 2 << 20));
        flood.push(b'\n');
        let logged = log_stderr("kit".into(), flood.as_slice(), None).await;
        assert!(
            (MAX_STDERR_LOGGED..MAX_STDERR_LOGGED + 4096).contains(&logged),
            "{logged}"
        );
        let last = Arc::new(Mutex::new(String::new()));
        let said = Said {
            last: last.clone(),
            secrets: vec!["s3cret".into()],
        };
        let logged = log_stderr("kit".into(), &b"one\ntwo s3cret\n\n"[..], Some(said)).await;
        assert_eq!(logged, 13);
        assert_eq!(
            *last.lock().unwrap(),
            "two [hidden]",
            "the last line that says something, its secret hidden"
        );
    }
}
