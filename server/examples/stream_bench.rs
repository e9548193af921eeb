//! Streaming benchmark: N concurrent replies at 50 tokens/s from the mock LLM, three ways in
//! one run, and what Hero adds.
//!
//! 1. direct: N clients stream straight from the mock (the floor);
//! 2. relay:  N clients through a bare pass-through relay (axum + reqwest, bytes copied, no
//!    parsing, no storage): what any proxy costs;
//! 3. hero:   N clients post to Hero's `/api/sessions/{id}/messages/stream`, which calls the
//!    mock, parses HML, fans out to the hub, stores frames, and answers in SSE.
//!
//! The middle (relay or Hero) runs on a runtime of its own, on threads named `middle-relay`
//! and `middle-hero`; its CPU is read per thread from /proc (with the SQLite worker
//! threads, which only Hero uses), so the mock and the clients, on the main runtime, do not blur the figure. They
//! still share the two cores with it, so the clients are as light as they can be: a bare
//! HTTP/1.1 exchange read in each stream's own task.
//!
//! The mock staggers its streams: each starts its 20 ms beat at its own offset, as
//! independent replies from a real provider do. Streams started in the same instant would
//! otherwise tick in step, and whatever reads them would get each token of all N in one
//! burst, one wake-up for N tokens: that flatters a reader that starts every stream in the
//! same millisecond (the relay) over one whose turns start a few milliseconds apart (Hero,
//! which stores the user's message first).
//!
//! Per token it prints the lateness against the stream's own schedule (arrival − first
//! token's arrival − k × interval), p50 and p99, for each way; "added" is Hero's minus
//! direct. Time to first token (which for Hero includes storing the user's frame and
//! compiling the context) is printed apart. CPU per token is
//! the process CPU time of the phase (all parts run in this process, so the mock and the
//! clients are counted in every phase; the difference between phases is what the middle
//! adds). Memory per stream is the growth of RSS at the busiest moment, over N; with
//! `--heap`, also the growth of the bytes the heap holds (counted by the allocator), which
//! does not move with glibc's per-thread arenas: each keeps what its thread freed, so RSS
//! grows more when a new kind of work allocates on the runtime's threads.
//!
//! The machine's speed drifts over minutes (a VM's neighbours), by ±10-15% between two
//! phases ten seconds apart; `--together` runs the relay and Hero at the same time instead,
//! each on its own runtime and read on its own threads, so that both meet the same machine:
//! their CPU ratio then holds within a few percent from round to round.
//!
//! Run: `cargo run --release -p server --example stream_bench -- --streams 100 --tokens 200`
//! (a "token" is 4 bytes; 200 tokens take 4 s at 50 tokens/s). `--rounds N` runs the relay
//! and Hero N times each, taking turns (which goes first alternates), and sums their figures;
//! each round's own ratio is printed too, with their median.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hero_backend::{Settings, accounts, conversation::frames, test_support};
use hero_shared::frame::AuthorType;
use mock_llm::{Answer, Config};
use serde_json::{Value, json};

const RATE: f64 = 50.0;

/// The system allocator, counting the bytes it holds once `--heap` turned it on (one shared
/// counter: it costs a little CPU, so it is off unless asked for).
#[global_allocator]
static HEAP: hero_shared::heap::CountingAlloc = hero_shared::heap::CountingAlloc::new();

fn heap_kib() -> i64 {
    HEAP.live_bytes() / 1024
}

struct Args {
    streams: usize,
    tokens: usize,
    /// Relay and Hero take turns this many times; their figures are summed.
    rounds: usize,
    /// Also run answers this long, to split a turn's fixed cost from its cost per token.
    short: usize,
    /// Frames each session holds before the first turn (half questions, half answers): what
    /// a long conversation costs a turn.
    history: usize,
    /// Also stream as the browser does: post, leave the reply's own stream at once, and read
    /// the session's `/events` (hub, phantom events, `message_chunk`).
    watch: bool,
    /// Count the heap's bytes (see [`HEAP`]).
    heap: bool,
    /// Run the relay and Hero at the same time, each on its own runtime, in every round: both
    /// then meet the same machine (whose speed drifts over minutes), and each one's CPU is
    /// read on its own threads. Their lateness is then the two together's.
    together: bool,
    /// Run only this middle ("relay" or "hero"), to profile one side alone.
    only: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        streams: 100,
        tokens: 200,
        rounds: 1,
        short: 0,
        history: 0,
        watch: false,
        heap: false,
        together: false,
        only: None,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let n = v.get(i + 1).and_then(|s| s.parse().ok());
        match (v[i].as_str(), n) {
            ("--streams", Some(n)) => a.streams = n,
            ("--tokens", Some(n)) => a.tokens = n,
            ("--rounds", Some(n)) if n > 0 => a.rounds = n,
            ("--short", Some(n)) => a.short = n,
            ("--history", Some(n)) => a.history = n,
            ("--watch", _) => {
                a.watch = true;
                i += 1;
                continue;
            }
            ("--heap", _) => {
                a.heap = true;
                i += 1;
                continue;
            }
            ("--together", _) => {
                a.together = true;
                i += 1;
                continue;
            }
            ("--only", _) if matches!(v.get(i + 1).map(String::as_str), Some("relay" | "hero")) => {
                a.only = v.get(i + 1).cloned()
            }
            _ => {
                eprintln!(
                    "usage: stream_bench [--streams N] [--tokens N] [--rounds N] [--short N] [--history N] [--watch] [--heap] [--together] [--only relay|hero]"
                );
                std::process::exit(2);
            }
        }
        i += 2;
    }
    a
}

fn stat_cpu(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// utime + stime of this process, in seconds.
fn cpu_seconds() -> f64 {
    stat_cpu("/proc/self/stat")
}

/// Time on a CPU of one thread, in seconds: the first field of its `schedstat`, kept in
/// nanoseconds (utime and stime are counted in 10 ms ticks, too coarse for a few seconds
/// of a few threads), and its utime alone.
fn thread_cpu(task: &std::path::Path) -> (f64, f64) {
    let ns = std::fs::read_to_string(task.join("schedstat"))
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|n| n.parse::<f64>().ok())
        })
        .unwrap_or(0.0);
    let stat = std::fs::read_to_string(task.join("stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let utime = after
        .split_whitespace()
        .nth(11)
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(0.0);
    (ns / 1e9, utime / 100.0)
}

/// The threads of the relay's runtime and of Hero's (whose SQLite workers count as Hero's).
const RELAY: &str = "middle-relay";
const HERO: &str = "middle-hero";

/// CPU time of the middle's threads (those whose name starts with `middle`: the relay's,
/// Hero's, or both) and of SQLite's workers (with Hero's only), and the middle's user time
/// alone, in seconds.
fn middle_cpu_seconds(middle: &str) -> (f64, f64, f64) {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return (0.0, 0.0, 0.0);
    };
    let mut out = (0.0, 0.0, 0.0);
    for t in dir.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.starts_with(middle) {
            let (cpu, user) = thread_cpu(&t.path());
            out.0 += cpu;
            out.2 += user;
        } else if comm.starts_with("sqlx-sqlite") && HERO.starts_with(middle) {
            out.1 += thread_cpu(&t.path()).0;
        }
    }
    out
}

/// Context switches of the middle's threads, (voluntary, preempted): a voluntary one is a
/// worker parking for want of work.
fn middle_switches(middle: &str) -> (u64, u64) {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return (0, 0);
    };
    let mut out = (0, 0);
    for t in dir.flatten() {
        if !std::fs::read_to_string(t.path().join("comm"))
            .unwrap_or_default()
            .starts_with(middle)
        {
            continue;
        }
        for l in std::fs::read_to_string(t.path().join("status"))
            .unwrap_or_default()
            .lines()
        {
            let n = || {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            if l.starts_with("voluntary_ctxt_switches:") {
                out.0 += n();
            } else if l.starts_with("nonvoluntary_ctxt_switches:") {
                out.1 += n();
            }
        }
    }
    out
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

#[derive(Default)]
struct Outcome {
    lateness_ms: Vec<f64>,
    /// Lateness of the tokens that arrived once every stream of the phase had started.
    steady_lateness_ms: Vec<f64>,
    first_token_ms: Vec<f64>,
    tokens: u64,
    cpu: f64,
    middle_cpu: f64,
    /// Of which SQLite's worker threads.
    db_cpu: f64,
    /// The middle's user time alone (10 ms ticks).
    middle_user: f64,
    switches: u64,
    /// Of which the middle's threads were preempted.
    preempted: u64,
    peak_rss_growth_kib: u64,
    peak_heap_growth_kib: i64,
    failed_streams: usize,
}

impl Outcome {
    fn add(&mut self, o: Outcome) {
        self.lateness_ms.extend(o.lateness_ms);
        self.steady_lateness_ms.extend(o.steady_lateness_ms);
        self.first_token_ms.extend(o.first_token_ms);
        self.tokens += o.tokens;
        self.cpu += o.cpu;
        self.middle_cpu += o.middle_cpu;
        self.db_cpu += o.db_cpu;
        self.middle_user += o.middle_user;
        self.switches += o.switches;
        self.preempted += o.preempted;
        self.peak_rss_growth_kib = self.peak_rss_growth_kib.max(o.peak_rss_growth_kib);
        self.peak_heap_growth_kib = self.peak_heap_growth_kib.max(o.peak_heap_growth_kib);
        self.failed_streams += o.failed_streams;
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// The clients' side of the streams: a bare HTTP/1.1 exchange per stream on a socket of its
/// own, read in the stream's task. The clients share the two cores with what they measure,
/// so what they spend is taken from it; reqwest reads each connection in a task of its own
/// and hands the body over through a channel, and at 1,000 streams the clients and the mock
/// took about a core. Only the text events are parsed, into borrowed fields. A reply is read
/// to its end, as a browser does, so that its connection serves the stream's next reply; a
/// stream that does not end (`/events`) is left after the reply's last event.
struct Clients {
    addr: std::net::SocketAddr,
    /// Stream i's kept connection.
    slots: Vec<tokio::sync::Mutex<Option<tokio::net::TcpStream>>>,
}

/// What one stream saw: (arrival, lateness) per token in ms, tokens, first token's arrival.
type Seen = Option<(Vec<(f64, f64)>, u64, f64)>;

impl Clients {
    fn new(addr: std::net::SocketAddr, n: usize) -> Arc<Self> {
        Arc::new(Clients {
            addr,
            slots: (0..n).map(|_| tokio::sync::Mutex::new(None)).collect(),
        })
    }

    /// Sends `request` (head and body) as stream `i` and reads the SSE answer.
    async fn stream(
        &self,
        i: usize,
        request: Vec<u8>,
        start: Instant,
        text_of: fn(&str, &str) -> usize,
        endless: bool,
    ) -> Seen {
        use tokio::io::AsyncWriteExt;
        let mut slot = self.slots[i].lock().await;
        // A kept connection the server has closed meanwhile fails at once: try a new one.
        for kept in [true, false] {
            let mut s = match (kept, slot.take()) {
                (true, Some(s)) => s,
                (true, None) => continue,
                (false, _) => connect(self.addr).await?,
            };
            if s.write_all(&request).await.is_err() {
                continue;
            }
            match read_sse(&mut s, start, text_of, endless).await {
                Read::Done(seen) => {
                    if !endless {
                        *slot = Some(s);
                    }
                    return Some(seen);
                }
                Read::Closed if kept => continue,
                _ => return None,
            }
        }
        None
    }
}

enum Read {
    Done((Vec<(f64, f64)>, u64, f64)),
    /// The connection ended before a byte of the answer.
    Closed,
    Failed,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Bytes read from a connection and not yet used.
#[derive(Default)]
struct Wire {
    raw: Vec<u8>,
    pos: usize,
}

impl Wire {
    async fn more(&mut self, s: &mut tokio::net::TcpStream) -> bool {
        use tokio::io::AsyncReadExt;
        if self.pos > 8192 {
            self.raw.drain(..self.pos);
            self.pos = 0;
        }
        self.raw.reserve(8192);
        matches!(s.read_buf(&mut self.raw).await, Ok(n) if n > 0)
    }

    /// The head of a chunked `200` answer; otherwise how reading it failed.
    async fn head(&mut self, s: &mut tokio::net::TcpStream) -> Result<(), Read> {
        let body_at = loop {
            if let Some(p) = find(&self.raw[self.pos..], b"\r\n\r\n") {
                break self.pos + p + 4;
            }
            if !self.more(s).await {
                return Err(if self.raw.is_empty() {
                    Read::Closed
                } else {
                    Read::Failed
                });
            }
        };
        let head = String::from_utf8_lossy(&self.raw[self.pos..body_at]).to_ascii_lowercase();
        self.pos = body_at;
        if !head.starts_with("http/1.1 200") || !head.contains("transfer-encoding: chunked") {
            eprintln!("unexpected answer: {}", head.lines().next().unwrap_or(""));
            return Err(Read::Failed);
        }
        Ok(())
    }

    /// The SSE events of a chunked body, to its end (or, `endless`, to `message_complete`).
    async fn events(
        &mut self,
        s: &mut tokio::net::TcpStream,
        start: Instant,
        text_of: fn(&str, &str) -> usize,
        endless: bool,
    ) -> Read {
        let interval = 1000.0 / RATE;
        let mut sse: Vec<u8> = Vec::new();
        let (mut bytes, mut late, mut first) = (0usize, Vec::new(), None::<(f64, f64)>);
        loop {
            // Every whole chunk received so far.
            let mut ended = false;
            while let Some(eol) = find(&self.raw[self.pos..], b"\r\n") {
                let line = &self.raw[self.pos..self.pos + eol];
                let size = std::str::from_utf8(line).ok().and_then(|l| {
                    usize::from_str_radix(l.split(';').next().unwrap_or("").trim(), 16).ok()
                });
                let Some(size) = size else {
                    return Read::Failed;
                };
                let data = self.pos + eol + 2;
                if self.raw.len() < data + size + 2 {
                    break;
                }
                sse.extend_from_slice(&self.raw[data..data + size]);
                self.pos = data + size + 2;
                if size == 0 {
                    ended = true;
                    break;
                }
            }
            // Every whole event in them.
            let mut done = 0;
            while let Some(end) = find(&sse[done..], b"\n\n") {
                let block = &sse[done..done + end];
                done += end + 2;
                let (mut name, mut data) = ("message", "");
                for line in block.split(|&b| b == b'\n') {
                    let line = std::str::from_utf8(line).unwrap_or("");
                    if let Some(n) = line.strip_prefix("event: ") {
                        name = n;
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data = d;
                    }
                }
                let n = text_of(name, data);
                if n > 0 {
                    bytes += n;
                    let k = (bytes / 4) as f64;
                    let now = start.elapsed().as_secs_f64() * 1000.0;
                    let (t0, k0) = *first.get_or_insert((now, k));
                    late.push((now, now - t0 - (k - k0) * interval));
                }
                if endless && name == "message_complete" {
                    ended = true;
                    break;
                }
            }
            sse.drain(..done);
            if ended {
                return Read::Done((late, (bytes / 4) as u64, first.map_or(f64::NAN, |f| f.0)));
            }
            if !self.more(s).await {
                return Read::Failed;
            }
        }
    }
}

/// Reads a chunked `200` answer of SSE events from `s`.
async fn read_sse(
    s: &mut tokio::net::TcpStream,
    start: Instant,
    text_of: fn(&str, &str) -> usize,
    endless: bool,
) -> Read {
    let mut w = Wire::default();
    match w.head(s).await {
        Ok(()) => w.events(s, start, text_of, endless).await,
        Err(e) => e,
    }
}

async fn connect(addr: std::net::SocketAddr) -> Option<tokio::net::TcpStream> {
    let s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.set_nodelay(true).ok()?;
    Some(s)
}

/// An HTTP/1.1 POST of `body` as JSON, with `extra` header lines.
fn post_request(path: &str, extra: &str, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[derive(serde::Deserialize)]
struct Text<'a> {
    #[serde(borrow)]
    text: std::borrow::Cow<'a, str>,
}

#[derive(serde::Deserialize)]
struct AnthropicDelta<'a> {
    #[serde(borrow)]
    delta: Text<'a>,
}

fn anthropic_text(event: &str, data: &str) -> usize {
    if event != "content_block_delta" {
        return 0;
    }
    serde_json::from_str::<AnthropicDelta<'_>>(data).map_or(0, |d| d.delta.text.len())
}

#[derive(serde::Deserialize)]
struct Chunk<'a> {
    #[serde(borrow)]
    content: std::borrow::Cow<'a, str>,
}

fn chunk_text(event: &str, data: &str) -> usize {
    if event != "message_chunk" {
        return 0;
    }
    serde_json::from_str::<Chunk<'_>>(data).map_or(0, |d| d.content.len())
}

fn hero_text(event: &str, data: &str) -> usize {
    if event != "text" {
        return 0;
    }
    serde_json::from_str::<Text<'_>>(data).map_or(0, |d| d.text.len())
}

/// `n` streams started by `go`, and what they cost the threads of `middle`.
async fn phase<F, Fut>(n: usize, middle: &'static str, go: F) -> Outcome
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Option<(Vec<(f64, f64)>, u64, f64)>> + Send + 'static,
{
    let (base_rss, base_heap) = (rss_kib(), heap_kib());
    let peak = Arc::new(AtomicU64::new(0));
    let peak_heap = Arc::new(std::sync::atomic::AtomicI64::new(base_heap));
    let running = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, peak_heap, running) = (peak.clone(), peak_heap.clone(), running.clone());
        tokio::spawn(async move {
            while running.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(), Ordering::Relaxed);
                peak_heap.fetch_max(heap_kib(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let cpu0 = cpu_seconds();
    let mid0 = middle_cpu_seconds(middle);
    let sw0 = middle_switches(middle);
    let tasks: Vec<_> = (0..n).map(|i| tokio::spawn(go(i))).collect();
    let mut out = Outcome::default();
    let mut lates = Vec::new();
    for t in tasks {
        match t.await.ok().flatten() {
            Some((late, tokens, first)) => {
                lates.push(late);
                out.first_token_ms.push(first);
                out.tokens += tokens;
            }
            None => out.failed_streams += 1,
        }
    }
    let all_started = out
        .first_token_ms
        .iter()
        .copied()
        .filter(|f| f.is_finite())
        .fold(0.0, f64::max);
    for (at, late) in lates.into_iter().flatten() {
        out.lateness_ms.push(late);
        if at > all_started {
            out.steady_lateness_ms.push(late);
        }
    }
    out.cpu = cpu_seconds() - cpu0;
    let mid1 = middle_cpu_seconds(middle);
    let sw1 = middle_switches(middle);
    out.switches = sw1.0 + sw1.1 - sw0.0 - sw0.1;
    out.preempted = sw1.1 - sw0.1;
    out.db_cpu = mid1.1 - mid0.1;
    out.middle_cpu = mid1.0 - mid0.0 + out.db_cpu;
    out.middle_user = mid1.2 - mid0.2;
    running.store(false, Ordering::Relaxed);
    let _ = sampler.await;
    out.peak_rss_growth_kib = peak.load(Ordering::Relaxed).saturating_sub(base_rss);
    out.peak_heap_growth_kib = peak_heap.load(Ordering::Relaxed) - base_heap;
    out
}

/// Posts `body` to `url` (signed in with `token`, if given) and reads the JSON answer.
async fn post_json(client: &reqwest::Client, url: &str, token: Option<&str>, body: Value) -> Value {
    let mut req = client.post(url).json(&body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap().json().await.unwrap()
}

/// Posts `content` to a session's streaming endpoint; the answer is the reply's SSE.
async fn post_message(
    c: &reqwest::Client,
    hero: &str,
    token: &str,
    session: i64,
    content: &str,
) -> Option<reqwest::Response> {
    c.post(format!("{hero}/api/sessions/{session}/messages/stream"))
        .bearer_auth(token)
        .json(&json!({"content": content}))
        .send()
        .await
        .ok()
}

fn answer_text(tokens: usize) -> String {
    // Plain prose: every byte reaches Hero's clients as `text`, so delivery is countable.
    "word ".repeat(tokens).chars().take(tokens * 4).collect()
}

fn main() {
    let a = args();
    if a.heap {
        HEAP.start();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The relay and Hero on runtimes of their own, so that each one's CPU is read on its
    // own threads even while both run (`--together`).
    let middle = |name: &str| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(name)
            .enable_all()
            .build()
            .expect("middle runtime")
    };
    let (relay_rt, hero_rt) = (middle(RELAY), middle(HERO));
    rt.block_on(run(a, relay_rt.handle().clone(), hero_rt.handle().clone()));
}

async fn run(a: Args, relay_rt: tokio::runtime::Handle, hero_rt: tokio::runtime::Handle) {
    let text = answer_text(a.tokens);
    let mock = mock_llm::spawn(
        Config::default()
            .answers(vec![Answer::text(text.clone())])
            .tokens_per_sec(RATE)
            .stagger(true),
    )
    .await
    .expect("mock");
    let mock_url = mock.url();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(4096)
        .build()
        .expect("client");
    let body = json!({"model": "mock-model", "max_tokens": 4096, "stream": true, "messages": [{"role": "user", "content": "go"}]});

    // Phase 1: direct.
    let mock_addr: std::net::SocketAddr = mock_url
        .trim_start_matches("http://")
        .parse()
        .expect("mock address");
    let direct_clients = Clients::new(mock_addr, a.streams);
    let direct = phase(a.streams, "middle", |i| {
        let (clients, request) = (
            direct_clients.clone(),
            post_request("/v1/messages", "x-api-key: k\r\n", &body),
        );
        async move {
            clients
                .stream(i, request, Instant::now(), anthropic_text, false)
                .await
        }
    })
    .await;

    // Phase 2: a bare relay.
    let relay_addr = {
        let upstream = format!("{mock_url}/v1/messages");
        // A client of its own: the direct phase's pooled connections live on the main
        // runtime, and reading the upstream through them would hide the relay's reads from
        // the middle's CPU figure. Hero has its own client too.
        let c = reqwest::Client::builder()
            .pool_max_idle_per_host(4096)
            .build()
            .expect("client");
        let app = axum::Router::new().route(
            "/relay",
            axum::routing::post(move |b: axum::body::Bytes| {
                let (c, upstream) = (c.clone(), upstream.clone());
                async move {
                    let r = c
                        .post(upstream)
                        .header("x-api-key", "k")
                        .header("content-type", "application/json")
                        .body(b)
                        .send()
                        .await
                        .unwrap();
                    axum::response::Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(axum::body::Body::from_stream(r.bytes_stream()))
                        .unwrap()
                }
            }),
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        // Served as Hero serves (TCP_NODELAY), so that only what happens per request differs.
        relay_rt.spawn(async move {
            axum::serve(server::web::listener(l), app.into_make_service())
                .await
                .unwrap()
        });
        addr
    };
    // Hero, set up the same way on the middle runtime.
    // Allowed to reach the mock on loopback, and nothing else that is not public.
    let settings = Settings {
        egress: hero_backend::execution::egress::EgressPolicy::default().allowing(mock_addr),
        // One user stands for the N users whose replies stream at once: the per-user
        // bounds would refuse all but a few of them.
        limits: hero_backend::limits::Limits {
            turns_per_user: usize::MAX,
            live_streams_per_user: usize::MAX,
            ..Default::default()
        },
        ..Settings::default()
    };
    let test_support::TestState { st, dir } = test_support::state_with(settings).await;
    // On PostgreSQL (`HERO_TEST_BACKEND=postgres`), joined as `hero serve` joins: alone on
    // its database, it sends nothing for other instances.
    hero_backend::conversation::cluster::join(&st)
        .await
        .expect("joins the instances");
    accounts::create(&st.db, &st.keys, "bench", "bench-password", false)
        .await
        .expect("user");
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hero_addr = l.local_addr().unwrap();
    let app = server::web::router(
        st.clone(),
        server::web::leptos_options(hero_addr, &dir.path().join("site")),
    );
    hero_rt.spawn(async move {
        axum::serve(server::web::listener(l), app.into_make_service())
            .await
            .unwrap()
    });
    let hero = format!("http://{hero_addr}");
    let login = post_json(
        &client,
        &format!("{hero}/api/auth/login"),
        None,
        json!({"username": "bench", "password": "bench-password"}),
    )
    .await;
    let token = login["token"].as_str().unwrap().to_owned();
    let agent = post_json(
        &client,
        &format!("{hero}/api/agents"),
        Some(&token),
        json!({"name": "bench", "provider": "anthropic", "model": "mock-model", "base_url": mock_url, "api_key": "k"}),
    )
    .await;
    let mut sessions = Vec::new();
    for i in 0..a.streams {
        let body = json!({"name": format!("s{i}"), "agent_id": agent["id"]});
        let s = post_json(&client, &format!("{hero}/api/sessions"), Some(&token), body).await;
        sessions.push(s["id"].as_i64().unwrap());
    }
    if a.history > 0 {
        use hero_backend::store::testing::{Arg, bytes, int};
        let bench = [Arg::Text("bench".into())];
        let user_id = int(&st.db, "SELECT id FROM users WHERE username = $1", &bench)
            .await
            .expect("user");
        let wrapped = bytes(
            &st.db,
            "SELECT data_key FROM users WHERE username = $1",
            &bench,
        )
        .await
        .expect("user");
        let dk = st
            .keys
            .unwrap_data_key(user_id, &wrapped)
            .expect("data key");
        let reply = answer_text(a.tokens);
        for &s in &sessions {
            st.db
                .write_with(async |tx| {
                    for k in 0..a.history {
                        let (author, payload) = match k % 2 {
                            0 => (
                                AuthorType::User,
                                json!({"role": "user", "content": "a question of a few words"}),
                            ),
                            _ => (
                                AuthorType::Agent,
                                json!({"role": "agent", "content": reply, "agent_id": agent["id"]}),
                            ),
                        };
                        frames::seal(&dk, frames::NewFrame::message(s, author, None, payload))?
                            .insert(tx)
                            .await?;
                    }
                    Ok(())
                })
                .await
                .expect("history");
        }
    }
    let sessions = Arc::new(sessions);
    // Relay and Hero take turns, so that neither always runs on a warmer (or more worn)
    // process than the other.
    let mut relay = Outcome::default();
    let mut hero_out = Outcome::default();
    let (relay_clients, hero_clients) = (
        Clients::new(relay_addr, a.streams),
        Clients::new(hero_addr, a.streams),
    );
    let relay_run = |content: String| {
        let (clients, mut body) = (relay_clients.clone(), body.clone());
        body["messages"][0]["content"] = json!(content);
        let request = post_request("/relay", "", &body);
        phase(a.streams, RELAY, move |i| {
            let (clients, request) = (clients.clone(), request.clone());
            async move {
                clients
                    .stream(i, request, Instant::now(), anthropic_text, false)
                    .await
            }
        })
    };
    let hero_run = |content: String| {
        let (clients, token, sessions) = (hero_clients.clone(), token.clone(), sessions.clone());
        let body = json!({"content": content});
        phase(a.streams, HERO, move |i| {
            let path = format!("/api/sessions/{}/messages/stream", sessions[i]);
            let request = post_request(&path, &format!("authorization: Bearer {token}\r\n"), &body);
            let clients = clients.clone();
            async move {
                clients
                    .stream(i, request, Instant::now(), hero_text, false)
                    .await
            }
        })
    };
    let watch_run = || {
        let (client, token, hero, sessions) = (
            client.clone(),
            token.clone(),
            hero.clone(),
            sessions.clone(),
        );
        phase(a.streams, HERO, move |i| {
            let (c, token, hero, sessions) = (
                client.clone(),
                token.clone(),
                hero.clone(),
                sessions.clone(),
            );
            async move {
                use tokio::io::AsyncWriteExt;
                let mut s = connect(hero_addr).await?;
                let get = format!(
                    "GET /api/sessions/{}/events HTTP/1.1\r\nhost: bench\r\nauthorization: Bearer {token}\r\n\r\n",
                    sessions[i]
                );
                s.write_all(get.as_bytes()).await.ok()?;
                let mut w = Wire::default();
                w.head(&mut s).await.ok()?;
                let start = Instant::now();
                // The reply's own stream is left at once, as the browser does.
                drop(post_message(&c, &hero, &token, sessions[i], "go").await?);
                match w.events(&mut s, start, chunk_text, true).await {
                    Read::Done(seen) => Some(seen),
                    _ => None,
                }
            }
        })
    };
    // A short answer, asked for through the mock's directive: what a turn costs apart from
    // its tokens.
    let short_content = format!("[[mock text=\"{}\"]]", answer_text(a.short));
    let (mut relay_short, mut hero_short) = (Outcome::default(), Outcome::default());
    let mut watched = Outcome::default();
    // Each round's own ratio too: how far apart they lie says how much the sum can be trusted.
    let mut round_ratios = Vec::new();
    for round in 0..a.rounds {
        let (r0, h0) = (relay.middle_cpu, hero_out.middle_cpu);
        let (rt0, ht0) = (relay.tokens, hero_out.tokens);
        // Which goes first alternates: neither always follows the other's leftovers (a
        // warmer cache, a longer write-ahead log, a fuller heap).
        let (with_relay, with_hero) = (
            a.only.as_deref() != Some("hero"),
            a.only.as_deref() != Some("relay"),
        );
        if a.together {
            let (r, h) = tokio::join!(relay_run("go".into()), hero_run("go".into()));
            relay.add(r);
            hero_out.add(h);
        } else if round % 2 == 0 {
            if with_relay {
                relay.add(relay_run("go".into()).await);
            }
            if with_hero {
                hero_out.add(hero_run("go".into()).await);
            }
        } else {
            if with_hero {
                hero_out.add(hero_run("go".into()).await);
            }
            if with_relay {
                relay.add(relay_run("go".into()).await);
            }
        }
        let (r, h) = (relay.middle_cpu - r0, hero_out.middle_cpu - h0);
        let per = |cpu: f64, tokens: u64| cpu / (tokens.max(1) as f64);
        round_ratios.push(per(h, hero_out.tokens - ht0) / per(r, relay.tokens - rt0));
        eprintln!("round {round}: middle cpu relay {r:.2} s, hero {h:.2} s");
        if a.watch {
            watched.add(watch_run().await);
        }
        if a.short > 0 {
            relay_short.add(relay_run(short_content.clone()).await);
            hero_short.add(hero_run(short_content.clone()).await);
        }
    }

    let expected = (a.streams * a.tokens * a.rounds) as f64;
    let report = |name: &str, o: &mut Outcome, rounds: usize| {
        let expected = (a.streams * a.tokens * rounds) as f64;
        let p50 = pct(&mut o.lateness_ms, 0.5);
        let p99 = pct(&mut o.lateness_ms, 0.99);
        let s99 = pct(&mut o.steady_lateness_ms, 0.99);
        let f50 = pct(&mut o.first_token_ms, 0.5);
        let f99 = pct(&mut o.first_token_ms, 0.99);
        println!(
            "{name:<6} streams={} delivered={:.2}% failed_streams={} lateness_ms p50={p50:.2} p99={p99:.2} steady_p99={s99:.2} first_token_ms p50={f50:.1} p99={f99:.1} cpu_s={:.2} middle_cpu_s={:.2} (db {:.2}) cpu_us_per_token={:.2} middle_user_us_per_token={:.2} middle_switches_per_token={:.3} (preempted {:.3}) rss_growth_kib_per_stream={:.1}",
            a.streams,
            100.0 * o.tokens as f64 / expected,
            o.failed_streams,
            o.cpu,
            o.middle_cpu,
            o.db_cpu,
            o.cpu * 1e6 / (o.tokens.max(1) as f64),
            o.middle_user * 1e6 / (o.tokens.max(1) as f64),
            o.switches as f64 / (o.tokens.max(1) as f64),
            o.preempted as f64 / (o.tokens.max(1) as f64),
            o.peak_rss_growth_kib as f64 / a.streams as f64
        );
        if a.heap {
            println!(
                "{name:<6} heap_growth_kib_per_stream={:.1}",
                o.peak_heap_growth_kib as f64 / a.streams as f64
            );
        }
        (p50, p99, s99)
    };
    let mut direct = direct;
    let (d50, d99, ds99) = report("direct", &mut direct, 1);
    let (r50, r99, _) = report("relay", &mut relay, a.rounds);
    let (h50, h99, hs99) = report("hero", &mut hero_out, a.rounds);
    if a.watch {
        report("watch", &mut watched, a.rounds);
        let w = watched.middle_cpu / (watched.tokens.max(1) as f64);
        let r = relay.middle_cpu / (relay.tokens.max(1) as f64);
        println!(
            "watch streams={} hero_events_cpu_us_per_token={:.2} cpu_ratio_to_relay={:.2}",
            a.streams,
            w * 1e6,
            w / r
        );
    }
    let mut sorted = round_ratios.clone();
    println!(
        "rounds cpu_ratio_hero_to_relay={} median={:.2}",
        round_ratios
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(","),
        pct(&mut sorted, 0.5)
    );
    let per_token = |o: &Outcome| o.middle_cpu / (o.tokens.max(1) as f64);
    let relay_added = per_token(&relay);
    let hero_added = per_token(&hero_out);
    println!(
        "added_by_relay_ms p50={:.2} p99={:.2}; added_by_hero_ms p50={:.2} p99={:.2}",
        r50 - d50,
        r99 - d99,
        h50 - d50,
        h99 - d99
    );
    println!(
        "summary streams={} hero_added_p50_ms={:.2} hero_added_p99_ms={:.2} hero_added_steady_p99_ms={:.2} hero_delivered_pct={:.2} hero_added_cpu_us_per_token={:.2} relay_added_cpu_us_per_token={:.2} cpu_ratio_hero_to_relay={:.2} hero_rss_kib_per_stream={:.1}",
        a.streams,
        h50 - d50,
        h99 - d99,
        hs99 - ds99,
        100.0 * hero_out.tokens as f64 / expected,
        hero_added * 1e6,
        relay_added * 1e6,
        if relay_added > 0.0 {
            hero_added / relay_added
        } else {
            f64::NAN
        },
        hero_out.peak_rss_growth_kib as f64 / a.streams as f64
    );
    if a.short > 0 && a.short < a.tokens {
        // Per token beyond the short answer, and per turn apart from its tokens.
        let turns = (a.streams * a.rounds) as f64;
        let marginal = |long: &Outcome, short: &Outcome| {
            (long.middle_cpu - short.middle_cpu)
                / (long.tokens as f64 - short.tokens as f64).max(1.0)
        };
        let fixed = |short: &Outcome, per_token: f64| {
            (short.middle_cpu - per_token * short.tokens as f64) / turns
        };
        let (rm, hm) = (
            marginal(&relay, &relay_short),
            marginal(&hero_out, &hero_short),
        );
        println!(
            "marginal streams={} hero_cpu_us_per_token={:.2} relay_cpu_us_per_token={:.2} marginal_cpu_ratio={:.2} hero_fixed_ms_per_turn={:.2} relay_fixed_ms_per_turn={:.2}",
            a.streams,
            hm * 1e6,
            rm * 1e6,
            hm / rm,
            fixed(&hero_short, hm) * 1e3,
            fixed(&relay_short, rm) * 1e3
        );
    }
}
