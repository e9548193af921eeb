//! What an agent's memory costs (reference 002 §14–§15), with its files made here from a
//! fixed vocabulary and vectors from the mock LLM on loopback (1,536 numbers each):
//! - `memory_search` over 10,000 chunks of one user, warm: BM25 alone, and hybrid (the
//!   query's vector asked of the mock at each search, the chunks' held open);
//! - the first search after a start-up (the sealed files and vectors opened, the files
//!   chunked and indexed), BM25 and hybrid;
//! - the embedding inputs a rewrite costs: an unchanged file, one paragraph changed in a
//!   100-chunk file;
//! - a 256 KiB write until a search sees it (embedding aside);
//! - the bytes an indexed chunk takes, and 20 users' indexes against a cache bound smaller
//!   than them all (the cache's count and the heap's, by the counting allocator).
//!
//! Prints p50 and p99; asserts nothing.
//!
//! `cargo bench -p server --bench memory_search -- [--chunks N] [--searches N]`
//! (defaults: 10,000 chunks, 200 searches).

use std::time::Instant;

use hero_backend::memory::{self, Of, Scope, Write};
use hero_backend::{AppState, Settings, search, test_support};

mod common;
use common::{arg, once, show};

#[global_allocator]
static HEAP: hero_shared::heap::CountingAlloc = hero_shared::heap::CountingAlloc::new();

const WORDS: &[&str] = &[
    "garden", "roses", "tulips", "deploy", "release", "invoice", "budget", "meeting", "notes",
    "database", "postgres", "backup", "travel", "train", "hotel", "review", "contract", "report",
    "chart", "python", "rust", "tests", "schema", "weather", "coffee", "tea", "birthday", "gift",
    "doctor", "dentist", "school", "homework",
];

/// A paragraph of about 600 characters for chunk `i`: a chunk of its own in a file.
fn paragraph(i: usize) -> String {
    let words: Vec<&str> = (0..90)
        .map(|k| WORDS[(i * 7 + k * 13 + k * k) % WORDS.len()])
        .collect();
    format!("Note {i}: {}.", words.join(" "))
}

/// A file of `chunks` paragraphs, numbered from `first`.
fn file(first: usize, chunks: usize) -> String {
    (first..first + chunks)
        .map(paragraph)
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn main() {
    let chunks = arg("--chunks", 10_000);
    let searches = arg("--searches", 200);
    let mock_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("mock")
        .enable_all()
        .build()
        .expect("mock runtime");
    let mock = mock_rt
        .block_on(mock_llm::spawn(
            mock_llm::Config::default().embedding_dimensions(1_536),
        ))
        .expect("mock");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(&mock, chunks, searches));
}

/// A user and an agent of theirs, with the user's data key.
async fn memory_of(t: &AppState, name: &str) -> (Of, hero_backend::crypto::SecretKey) {
    let user = test_support::signed_in(t, name).await;
    let agent = hero_backend::agents::create(
        &t.db,
        &t.keys,
        &t.settings.egress,
        &user,
        serde_json::from_value(serde_json::json!({
            "name": "memo", "provider": "anthropic", "model": "mock-model",
            "api_key": "sk-bench-key-123456"
        }))
        .expect("agent request"),
    )
    .await
    .expect("agent");
    let dk = hero_backend::accounts::users::data_key(&t.db, &t.keys, user.id())
        .await
        .expect("data key");
    (
        Of {
            agent_id: agent.id,
            user_id: user.id(),
        },
        dk,
    )
}

fn write<'a>(path: &'a str, content: &'a str) -> Write<'a> {
    Write {
        path,
        content,
        scope: Scope::User,
        append: false,
    }
}

async fn run(mock: &mock_llm::MockServer, chunks: usize, searches: usize) {
    let at = search::embed::Endpoint {
        base: format!("{}/v1", mock.url()),
        key: Some("sk-bench".into()),
        model: "embed-mock".into(),
    };
    let settings = Settings {
        egress: hero_backend::execution::egress::EgressPolicy::default().allowing(mock.addr()),
        embeddings: search::embed::Settings {
            model: Some(at.model.clone()),
            url: Some(at.base.clone()),
            api_key: at.key.clone(),
        },
        max_memory_bytes: 64 << 20,
        index_cache_bytes: 512 << 20,
        ..Settings::default()
    };
    let t = test_support::state_with(settings).await;
    let (of, dk) = memory_of(&t, "bench").await;
    let embedded = || mock.stats()["embedded_inputs"].as_u64().unwrap_or(0);

    // 10,000 chunks: files of 100, written as the API writes them (each file's chunks
    // embedded, 64 a call).
    let began = Instant::now();
    let per_file = 100;
    for f in 0..chunks.div_ceil(per_file) {
        let path = format!("memory/projects/p{f:03}.md");
        let text = file(f * per_file, per_file.min(chunks - f * per_file));
        memory::write_now(&t, &dk, of, write(&path, &text), Some(&at))
            .await
            .expect("write");
    }
    println!(
        "{:<62} {:>8.1} s ({} inputs embedded)",
        format!("{chunks} chunks written and embedded on loopback"),
        began.elapsed().as_secs_f64(),
        embedded()
    );

    let queries: Vec<String> = (0..searches)
        .map(|i| {
            format!(
                "{} {}",
                WORDS[i % WORDS.len()],
                WORDS[(i * 5 + 3) % WORDS.len()]
            )
        })
        .collect();
    // The first search after a start-up: nothing held open.
    let fresh = t.restarted();
    let began = Instant::now();
    let found = memory::search(&fresh, &dk, of, None, "garden roses", 6)
        .await
        .expect("search");
    once(
        &format!("first search after start-up, {chunks} chunks, BM25"),
        began.elapsed(),
    );
    assert!(!found.hits.is_empty());
    let fresh = t.restarted();
    let began = Instant::now();
    let found = memory::search(&fresh, &dk, of, Some(&at), "garden roses", 6)
        .await
        .expect("search");
    once(
        &format!("first search after start-up, {chunks} chunks, hybrid"),
        began.elapsed(),
    );
    assert!(found.hybrid, "{:?}", found.note);

    let mut took = Vec::new();
    for q in &queries {
        let began = Instant::now();
        let found = memory::search(&t, &dk, of, None, q, 6)
            .await
            .expect("search");
        took.push(began.elapsed());
        assert!(!found.hybrid);
    }
    show(&format!("memory_search, {chunks} chunks, warm, BM25"), took);
    // Warm: the chunks' vectors held; each query embedded on loopback (a new one each time).
    memory::search(&t, &dk, of, Some(&at), "warm up", 6)
        .await
        .expect("search");
    let mut took = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let q = format!("{q} {i}");
        let began = Instant::now();
        let found = memory::search(&t, &dk, of, Some(&at), &q, 6)
            .await
            .expect("search");
        took.push(began.elapsed());
        assert!(found.hybrid, "{:?}", found.note);
    }
    show(
        &format!("memory_search, {chunks} chunks, warm, hybrid (query on loopback)"),
        took,
    );
    // The same with each query's vector held (asked once before): the search's own part.
    for q in &queries {
        memory::search(&t, &dk, of, Some(&at), q, 6)
            .await
            .expect("search");
    }
    let mut took = Vec::new();
    for q in &queries {
        let began = Instant::now();
        memory::search(&t, &dk, of, Some(&at), q, 6)
            .await
            .expect("search");
        took.push(began.elapsed());
    }
    show(
        &format!("memory_search, {chunks} chunks, warm, hybrid (query held)"),
        took,
    );

    // Rewrites: unchanged, then one paragraph of a 100-chunk file.
    let path = "memory/projects/p000.md";
    let text = file(0, per_file);
    let before = embedded();
    memory::write_now(&t, &dk, of, write(path, &text), Some(&at))
        .await
        .expect("write");
    println!(
        "{:<62} {}",
        "embedding inputs: an unchanged file written again",
        embedded() - before
    );
    let changed = text.replacen("Note 42:", "Note forty-two:", 1);
    let before = embedded();
    memory::write_now(&t, &dk, of, write(path, &changed), Some(&at))
        .await
        .expect("write");
    println!(
        "{:<62} {}",
        "embedding inputs: one paragraph changed in a 100-chunk file",
        embedded() - before
    );

    // A 256 KiB write until a search sees it, embedding aside (BM25).
    let mut took = Vec::new();
    for i in 0..20 {
        let marker = format!("zebra{i}");
        let mut big = file(50_000 + i * 1_000, 440);
        big.truncate(memory::MAX_FILE_BYTES - 64);
        big.push_str(&format!("\n\n{marker}"));
        let began = Instant::now();
        memory::write_now(&t, &dk, of, write("memory/big.md", &big), None)
            .await
            .expect("write");
        let found = memory::search(&t, &dk, of, None, &marker, 6)
            .await
            .expect("search");
        took.push(began.elapsed());
        assert_eq!(found.hits.len(), 1, "{marker}");
    }
    show("a 256 KiB write until a search sees it (BM25)", took);

    // Bytes per chunk: the index's own count (its vectors included), over its chunks.
    let index = memory::index(&t, &dk, of).await.expect("index");
    let (n, bytes) = {
        let i = index.index.lock().expect("index");
        (i.len(), i.approx_bytes())
    };
    let vector = 1_536 * 4;
    println!(
        "{:<62} {} bytes, {} besides its vector ({} chunks, {} KiB)",
        "bytes per indexed chunk",
        bytes / n.max(1),
        (bytes / n.max(1)).saturating_sub(vector),
        n,
        bytes / 1024,
    );

    // 20 users, each an index of 1,000 chunks, under a cache of 4 MiB.
    let bound = 4 << 20;
    let t = test_support::state_with(Settings {
        index_cache_bytes: bound,
        max_memory_bytes: 64 << 20,
        ..Settings::default()
    })
    .await;
    let mut users = Vec::new();
    for u in 0..20 {
        let (of, dk) = memory_of(&t, &format!("user{u}")).await;
        for f in 0..10 {
            memory::write_now(
                &t,
                &dk,
                of,
                write(&format!("memory/f{f}.md"), &file(u * 1_000 + f * 100, 100)),
                None,
            )
            .await
            .expect("write");
        }
        users.push((of, dk));
    }
    HEAP.start();
    let mut largest = 0;
    for (of, dk) in &users {
        memory::search(&t, dk, *of, None, "garden", 6)
            .await
            .expect("search");
        largest = largest.max(t.index_cache.bytes());
    }
    println!(
        "{:<62} {} KiB held (bound {} KiB, most seen {} KiB); heap {:+} KiB after",
        "20 users' indexes of 1,000 chunks each, searched in turn",
        t.index_cache.bytes() / 1024,
        bound / 1024,
        largest / 1024,
        HEAP.live_bytes() / 1024
    );
}
