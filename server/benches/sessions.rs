//! What search and export across a user's sessions cost (issue 34's figures), with their
//! messages made here from a fixed vocabulary and sealed as every frame is:
//! - the first search after a start-up (every message frame opened, its words indexed),
//!   over 10,000 messages of one user in 50 sessions;
//! - warm searches (the index held; each brings it up to date from the sessions' stamps
//!   first): two words, a quoted phrase, newest first;
//! - a search right after one new message (that message read and added);
//! - the bytes the index is counted as;
//! - the export of one 10,000-frame session, as JSON and as Markdown: its time, its bytes
//!   and the most heap it held at once (the counting allocator).
//!
//! Prints p50 and p99; asserts nothing.
//!
//! `cargo bench -p server --bench sessions -- [--messages N] [--searches N] [--frames N]`
//! (defaults: 10,000 messages, 200 searches, a 10,000-frame session to export).

use std::time::Instant;

use futures::StreamExt;
use hero_backend::conversation::export::{self, Format};
use hero_backend::conversation::frames::{self, NewFrame};
use hero_backend::conversation::search::{self, Order};
use hero_backend::conversation::sessions;
use hero_backend::{Settings, test_support};
use hero_shared::frame::AuthorType;

mod common;
use common::{arg, once, show};

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

#[global_allocator]
static HEAP: hero_shared::heap::CountingAlloc = hero_shared::heap::CountingAlloc::new();

fn main() {
    let messages = arg("--messages", 10_000);
    let searches = arg("--searches", 200);
    let export_frames = arg("--frames", 10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(messages, searches));
    rt.block_on(exports(export_frames));
}

/// One session of `frames` messages exported, each way.
async fn exports(frames_n: usize) {
    let t = test_support::state_with(Settings::default()).await;
    let user = test_support::signed_in(&t, "exporter").await;
    let dk = hero_backend::accounts::users::data_key(&t.db, &t.keys, user.id())
        .await
        .expect("data key");
    let session = sessions::create(
        &t,
        &user,
        serde_json::from_value(serde_json::json!({"name": "Long"})).expect("request"),
    )
    .await
    .expect("session");
    let mut first = None;
    for i in 0..frames_n {
        let (author, role) = if i % 2 == 0 {
            (AuthorType::User, "user")
        } else {
            (AuthorType::Agent, "assistant")
        };
        let f = NewFrame::message(
            session.id,
            author,
            None,
            serde_json::json!({"role": role, "content": message(i)}),
        );
        let stored = frames::append(&t, &dk, f).await.expect("append");
        first.get_or_insert(stored.id);
    }
    HEAP.start();
    export_each_way(
        &t,
        &user,
        session.id,
        &format!("a {frames_n}-frame session"),
    )
    .await;
    // The first message edited: every frame is then in the part of the log that holds
    // versions, which the Markdown export compiles whole (the worst case for its memory).
    let mut edit = NewFrame::message(
        session.id,
        AuthorType::User,
        None,
        serde_json::json!({"role": "user", "content": "the first message, edited"}),
    );
    edit.parent_id = first.clone();
    frames::append(&t, &dk, edit).await.expect("append");
    // The first version shown again, so that the Markdown holds every message.
    let first = first.expect("a first message");
    hero_backend::conversation::versions::switch(&t, &user, session.id, &first, 1)
        .await
        .expect("switch");
    let what = format!("a {frames_n}-frame session edited at its start, the original shown");
    export_each_way(&t, &user, session.id, &what).await;
}

/// The session exported as JSON and as Markdown: the time, the bytes and the heap's peak.
async fn export_each_way(
    t: &hero_backend::AppState,
    user: &hero_backend::accounts::auth::AuthUser,
    session: i64,
    what: &str,
) {
    for format in [Format::Json, Format::Markdown] {
        let began = Instant::now();
        HEAP.reset_peak();
        let before = HEAP.live_bytes();
        let (_, stream) = export::session(t, user, session, format)
            .await
            .expect("export");
        let mut stream = std::pin::pin!(stream);
        let mut bytes = 0usize;
        while let Some(chunk) = stream.next().await {
            bytes += chunk.expect("chunk").len();
        }
        let took = began.elapsed();
        println!(
            "{:<62} {:>8.1} ms   {:>6.1} MiB written, heap at most +{:.1} MiB",
            format!("export of {what}, {format:?}"),
            took.as_secs_f64() * 1e3,
            bytes as f64 / (1 << 20) as f64,
            (HEAP.peak_bytes() - before) as f64 / (1 << 20) as f64
        );
    }
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
