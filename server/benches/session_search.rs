//! What a search across a user's sessions costs (issue 34's figures), with its messages
//! made here from a fixed vocabulary and sealed as every frame is:
//! - the first search after a start-up (every message frame opened, its words indexed),
//!   over 10,000 messages of one user in 50 sessions;
//! - warm searches (the index held; each brings it up to date from the sessions' stamps
//!   first): two words, a quoted phrase, newest first;
//! - a search right after one new message (that message read and added);
//! - the bytes the index is counted as.
//!
//! Prints p50 and p99; asserts nothing.
//!
//! `cargo bench -p server --bench session_search -- [--messages N] [--searches N]`
//! (defaults: 10,000 messages, 200 searches).

use std::time::{Duration, Instant};

use hero_backend::conversation::frames::{self, NewFrame};
use hero_backend::conversation::search::{self, Order};
use hero_backend::conversation::sessions;
use hero_backend::{Settings, test_support};
use hero_shared::frame::AuthorType;

const WORDS: &[&str] = &[
    "garden", "roses", "tulips", "deploy", "release", "invoice", "budget", "meeting", "notes",
    "database", "postgres", "backup", "travel", "train", "hotel", "review", "contract", "report",
    "chart", "python", "rust", "tests", "schema", "weather", "coffee", "tea", "birthday", "gift",
    "doctor", "dentist", "school", "homework",
];

/// A message of about 300 characters for message `i`.
fn message(i: usize) -> String {
    let words: Vec<&str> = (0..45)
        .map(|k| WORDS[(i * 7 + k * 13 + k * k) % WORDS.len()])
        .collect();
    format!("Message {i}: {}.", words.join(" "))
}

fn at(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn show(label: &str, mut took: Vec<Duration>) {
    took.sort();
    println!(
        "{label:<62} p50 {:>8.3} ms   p99 {:>8.3} ms",
        at(&took, 0.5).as_secs_f64() * 1e3,
        at(&took, 0.99).as_secs_f64() * 1e3
    );
}

fn once(label: &str, took: Duration) {
    println!("{label:<62} {:>8.3} ms", took.as_secs_f64() * 1e3);
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let messages = arg("--messages", 10_000);
    let searches = arg("--searches", 200);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(messages, searches));
}

async fn run(messages: usize, searches: usize) {
    let settings = Settings {
        index_cache_bytes: 512 << 20,
        ..Settings::default()
    };
    let t = test_support::state_with(settings).await;
    let user = test_support::signed_in(&t, "bench").await;
    let dk = hero_backend::accounts::users::data_key(&t.db, &t.keys, user.id())
        .await
        .expect("data key");
    let per_session = messages.div_ceil(50).max(1);
    let began = Instant::now();
    let mut ids = Vec::new();
    for i in 0..messages {
        if i % per_session == 0 {
            let s = sessions::create(
                &t,
                &user,
                serde_json::from_value(
                    serde_json::json!({"name": format!("Session {}", i / per_session)}),
                )
                .expect("request"),
            )
            .await
            .expect("session");
            ids.push(s.id);
        }
        let (author, role) = if i % 2 == 0 {
            (AuthorType::User, "user")
        } else {
            (AuthorType::Agent, "assistant")
        };
        let f = NewFrame::message(
            *ids.last().expect("a session"),
            author,
            None,
            serde_json::json!({"role": role, "content": message(i)}),
        );
        frames::append(&t, &dk, f).await.expect("append");
    }
    println!(
        "{:<62} {:>8.1} s",
        format!("{messages} messages in {} sessions stored", ids.len()),
        began.elapsed().as_secs_f64()
    );

    let fresh = t.restarted();
    let began = Instant::now();
    let found = search::search(&fresh, &user, "garden roses", Order::Relevance, None)
        .await
        .expect("search");
    once(
        &format!("first search after start-up, {messages} messages"),
        began.elapsed(),
    );
    assert!(!found.is_empty());

    let queries: Vec<String> = (0..searches)
        .map(|i| {
            format!(
                "{} {}",
                WORDS[i % WORDS.len()],
                WORDS[(i * 5 + 3) % WORDS.len()]
            )
        })
        .collect();
    for (label, order, quote) in [
        ("two words, by relevance", Order::Relevance, false),
        ("a quoted phrase, by relevance", Order::Relevance, true),
        ("two words, newest first", Order::Recent, false),
    ] {
        let mut took = Vec::with_capacity(searches);
        for q in &queries {
            let q = if quote { format!("\"{q}\"") } else { q.clone() };
            let began = Instant::now();
            let hits = search::search(&fresh, &user, &q, order, None)
                .await
                .expect("search");
            took.push(began.elapsed());
            std::hint::black_box(hits);
        }
        show(&format!("warm search, {messages} messages, {label}"), took);
    }

    let mut took = Vec::new();
    for i in 0..20 {
        let f = NewFrame::message(
            ids[i % ids.len()],
            AuthorType::User,
            None,
            serde_json::json!({"role": "user", "content": format!("fresh zebra note {i}")}),
        );
        frames::append(&fresh, &dk, f).await.expect("append");
        let began = Instant::now();
        let hits = search::search(&fresh, &user, "zebra", Order::Relevance, None)
            .await
            .expect("search");
        took.push(began.elapsed());
        assert_eq!(hits.len(), i + 1);
    }
    show("search right after a new message (it is added first)", took);
    println!(
        "{:<62} {:>8.1} MiB ({:.0} bytes a message)",
        "the index, as the cache counts it",
        fresh.index_cache.bytes() as f64 / (1 << 20) as f64,
        fresh.index_cache.bytes() as f64 / messages as f64
    );
}
