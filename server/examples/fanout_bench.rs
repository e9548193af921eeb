//! Fan-out across two instances on one PostgreSQL: how long a reply's token takes from
//! instance A's hub to a subscriber of the session on instance B
//! (`conversation::cluster`: batched, sealed notifications, opened and published on B).
//!
//! `HERO_TEST_BACKEND=postgres HERO_TEST_POSTGRES=URL cargo run --release -p server
//!  --example fanout_bench -- [--streams 100] [--tokens 500] [--rate 50]`
//! (`scripts/postgres.sh start` prints a URL). A and B are two `AppState`s in this process,
//! each joined to the database as `hero serve` joins it (its own listening connection and
//! sender), so that one clock times both ends. Each of `streams` replies on A publishes
//! `tokens` tokens at `rate` tokens a second, as a turn publishes them (a `text` event and
//! a `message_chunk` each); one subscriber per session on B times every chunk. Prints the
//! latency's p50, p90, p99 and maximum, the tokens relayed a second, and the process's CPU
//! per token (both ends, and the measuring).

use std::time::{Duration, Instant};

use hero_backend::conversation::cluster;
use hero_backend::conversation::hub::HubEvent;
use hero_backend::{Settings, test_support};
use hero_shared::wire::{SseEvent, TextData};

struct Args {
    streams: usize,
    tokens: usize,
    rate: u64,
}

fn args() -> Args {
    let mut a = Args {
        streams: 100,
        tokens: 500,
        rate: 50,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let n = pair.get(1).and_then(|v| v.parse::<u64>().ok());
        match (pair[0].as_str(), n) {
            ("--streams", Some(n)) if n > 0 => a.streams = n as usize,
            ("--tokens", Some(n)) if n > 0 => a.tokens = n as usize,
            ("--rate", Some(n)) if n > 0 => a.rate = n,
            _ => {
                eprintln!("usage: fanout_bench [--streams N] [--tokens N] [--rate TOKENS_PER_SEC]");
                std::process::exit(2);
            }
        }
    }
    a
}

/// utime + stime of this process, in seconds (from `/proc/self/stat`, in 10 ms ticks).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let field = |n: usize| {
        after
            .split_whitespace()
            .nth(n)
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (field(11) + field(12)) / 100.0
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let args = args();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(run(args));
}

async fn run(args: Args) {
    let a = test_support::state_with(Settings::default()).await;
    if a.st.db.sqlite_pool().is_some() {
        eprintln!(
            "fanout_bench needs PostgreSQL: set HERO_TEST_BACKEND=postgres and HERO_TEST_POSTGRES"
        );
        std::process::exit(2);
    }
    let b = a.st.restarted();
    cluster::join(&a.st).await.expect("A joins");
    cluster::join(&b).await.expect("B joins");
    // A sends to B once it has heard B's hello.
    while !a.st.hub.has_listeners(0, 0) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let base = Instant::now();
    let user_id = 1;

    let mut readers = Vec::new();
    for s in 0..args.streams {
        let session_id = s as i64 + 1;
        let mut sub = b.hub.subscribe_session(session_id);
        let tokens = args.tokens;
        readers.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(tokens);
            while lat.len() < tokens {
                let ev = match tokio::time::timeout(Duration::from_secs(30), sub.recv()).await {
                    Ok(Ok(ev)) => ev,
                    Ok(Err(e)) => panic!("session {session_id}'s subscriber: {e}"),
                    Err(_) => panic!(
                        "session {session_id}: {} of {tokens} tokens came",
                        lat.len()
                    ),
                };
                if let HubEvent::Chunk { delta, .. } = &*ev {
                    let sent: u64 = delta.trim().parse().expect("a timestamp");
                    lat.push(base.elapsed().as_nanos() as u64 - sent);
                }
            }
            lat
        }));
    }

    let cpu0 = cpu_seconds();
    let start = Instant::now();
    let every = Duration::from_nanos(1_000_000_000 / args.rate);
    let hub = a.st.hub.clone();
    let mut writers = Vec::new();
    for s in 0..args.streams {
        let hub = hub.clone();
        let session_id = s as i64 + 1;
        let tokens = args.tokens;
        // Spread over one interval, as replies that began at different times.
        let first = tokio::time::Instant::now() + every * s as u32 / args.streams as u32;
        writers.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(first, every);
            let mut offset = 0;
            for _ in 0..tokens {
                tick.tick().await;
                let delta = format!("{} ", base.elapsed().as_nanos());
                let text = SseEvent::Text(TextData {
                    message_id: "m".into(),
                    text: delta.clone(),
                });
                hub.publish(
                    user_id,
                    session_id,
                    HubEvent::Stream {
                        session_id,
                        event: text,
                    },
                );
                let len = delta.len();
                hub.publish(
                    user_id,
                    session_id,
                    HubEvent::Chunk {
                        session_id,
                        message_id: "m".into(),
                        delta,
                        offset,
                    },
                );
                offset += len;
            }
        }));
    }
    for w in writers {
        w.await.expect("a writer");
    }
    let mut all = Vec::with_capacity(args.streams * args.tokens);
    for r in readers {
        all.extend(r.await.expect("a reader"));
    }
    let wall = start.elapsed();
    let cpu = cpu_seconds() - cpu0;
    all.sort_unstable();
    let ms = |ns: u64| ns as f64 / 1e6;
    println!(
        "fan-out A -> B over PostgreSQL: {} streams x {} tokens at {} tokens/s",
        args.streams, args.tokens, args.rate
    );
    println!(
        "latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        ms(percentile(&all, 0.50)),
        ms(percentile(&all, 0.90)),
        ms(percentile(&all, 0.99)),
        ms(*all.last().unwrap())
    );
    println!(
        "relayed {:.0} tokens/s; process CPU {:.1} µs per token (both instances)",
        all.len() as f64 / wall.as_secs_f64(),
        cpu * 1e6 / all.len() as f64
    );
}
