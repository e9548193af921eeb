//! What skills cost a running server (reference 002 §9–13), with 1,000 of the
//! administrator's skills made here from a fixed vocabulary:
//! - reading and indexing them at start-up (`Library::load`);
//! - `skill_search` hybrid, its query's vector asked of the mock LLM on loopback
//!   (`POST /v1/embeddings`) at each search, the skills' vectors held open
//!   (`search::IndexCache`), against BM25 alone; the first hybrid search, which embeds
//!   every skill, apart;
//! - the embedding inputs a rescan of unchanged skills costs, and the bytes the index
//!   takes;
//! - what the skills add to a turn's prompt, its kept prompt checked against the skills on
//!   disk (`persona::for_session`): 1,000 (search mode) and 20 (inline) against none.
//!
//! Prints p50 and p99; asserts nothing.
//!
//! `cargo run --release -p server --example skill_cost -- [--skills N] [--searches N]`
//! (defaults: 1,000 skills, 200 searches).

use std::path::Path;
use std::time::{Duration, Instant};

use hero_backend::skills;
use hero_backend::{Settings, search, test_support};

const WORDS: &[&str] = &[
    "pdf",
    "forms",
    "git",
    "history",
    "mail",
    "merge",
    "spreadsheet",
    "formula",
    "invoice",
    "report",
    "chart",
    "image",
    "resize",
    "translate",
    "summary",
    "meeting",
    "notes",
    "calendar",
    "deploy",
    "docker",
    "test",
    "rust",
    "python",
    "database",
    "backup",
    "weather",
    "travel",
    "budget",
    "tax",
    "contract",
    "review",
    "release",
    "changelog",
    "api",
    "schema",
    "slides",
];

fn words(i: usize, n: usize) -> String {
    (0..n)
        .map(|k| WORDS[(i * 7 + k * 13 + k * k) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

/// `n` skills in folders under `root`.
fn write_skills(root: &Path, n: usize) {
    for i in 0..n {
        let name = format!("skill-{i:04}");
        let dir = root.join(&name);
        std::fs::create_dir_all(&dir).expect("folder");
        std::fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: {name}\ndescription: {}\n---\nDo it step by step.\n",
                words(i, 12)
            ),
        )
        .expect("SKILL.md");
    }
}

fn at(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn show(label: &str, mut took: Vec<Duration>) -> (Duration, Duration) {
    took.sort();
    let (p50, p99) = (at(&took, 0.5), at(&took, 0.99));
    println!(
        "{label:<58} p50 {:>8.3} ms   p99 {:>8.3} ms",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    (p50, p99)
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
    let n = arg("--skills", 1_000);
    let searches = arg("--searches", 200);
    let mock_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("mock")
        .enable_all()
        .build()
        .expect("mock runtime");
    let mock = mock_rt
        .block_on(mock_llm::spawn(
            mock_llm::Config::default().embedding_dimensions(256),
        ))
        .expect("mock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(&mock, n, searches));
}

async fn run(mock: &mock_llm::MockServer, n: usize, searches: usize) {
    let global = tempfile::tempdir().expect("temp dir");
    write_skills(global.path(), n);
    let empty = tempfile::tempdir().expect("temp dir");

    // Start-up: the administrator's folder read and checked.
    let mut took = Vec::new();
    for _ in 0..5 {
        let began = Instant::now();
        let library = skills::Library::load(
            Some(global.path()),
            empty.path(),
            skills::MAX_SKILLS_PER_ROOT,
        );
        took.push(began.elapsed());
        assert_eq!(library.global().len(), n);
    }
    show(&format!("start-up: {n} global skills read"), took);

    let at = search::embed::Endpoint {
        base: format!("{}/v1", mock.url()),
        key: Some("sk-bench".into()),
        model: "embed-mock".into(),
    };
    let settings = Settings {
        egress: hero_backend::execution::egress::EgressPolicy::default().allowing(mock.addr()),
        skills_dir: Some(global.path().to_path_buf()),
        embeddings: search::embed::Settings {
            model: Some(at.model.clone()),
            url: Some(at.base.clone()),
            api_key: at.key.clone(),
        },
        ..Settings::default()
    };
    let t = test_support::state_with(settings).await;
    let user = test_support::signed_in(&t, "bench").await;
    let dk = hero_backend::accounts::users::data_key(&t.db, &t.keys, user.id())
        .await
        .expect("data key");
    let among = skills::of_user(
        &t,
        skills::Seer::User {
            id: user.id(),
            admin: false,
        },
    )
    .await
    .expect("skills")
    .skills;
    let queries: Vec<String> = (0..searches).map(|i| words(i * 31 + 5, 3)).collect();

    let mut took = Vec::new();
    for q in &queries {
        let began = Instant::now();
        let found = skills::vectors::search(&t, None, Some((user.id(), &dk)), &among, q, 5)
            .await
            .expect("search");
        took.push(began.elapsed());
        assert!(!found.hybrid);
    }
    show(
        &format!("skill_search over {} skills, BM25", among.len()),
        took,
    );

    let before = mock.stats()["embedded_inputs"].as_u64().unwrap_or(0);
    let began = Instant::now();
    skills::vectors::search(&t, Some(&at), Some((user.id(), &dk)), &among, "deploy", 5)
        .await
        .expect("search");
    println!(
        "{:<58} {:>8.3} ms ({} inputs embedded)",
        "the first hybrid search (skills backfilled at start-up)",
        began.elapsed().as_secs_f64() * 1e3,
        mock.stats()["embedded_inputs"].as_u64().unwrap_or(0) - before
    );
    // Every skill embedded, as the backfill does it (another model: nothing held yet).
    let cold = search::embed::Endpoint {
        model: "embed-mock-cold".into(),
        ..at.clone()
    };
    let began = Instant::now();
    skills::vectors::of_skills(&t, &cold, Some((user.id(), &dk)), &among)
        .await
        .expect("vectors");
    println!(
        "{:<58} {:>8.3} ms",
        format!("{} skills embedded on loopback, 64 a call", among.len()),
        began.elapsed().as_secs_f64() * 1e3
    );
    let mut took = Vec::new();
    for q in &queries {
        let began = Instant::now();
        let found = skills::vectors::search(&t, Some(&at), Some((user.id(), &dk)), &among, q, 5)
            .await
            .expect("search");
        took.push(began.elapsed());
        assert!(found.hybrid, "{:?}", found.note);
    }
    show(
        &format!(
            "skill_search over {} skills, hybrid (query on loopback)",
            among.len()
        ),
        took,
    );

    // A rescan of unchanged skills: the folder read again, a search embeds its query alone.
    t.skills.reload();
    let before = mock.stats()["embedded_inputs"].as_u64().unwrap_or(0);
    let among = skills::of_user(
        &t,
        skills::Seer::User {
            id: user.id(),
            admin: false,
        },
    )
    .await
    .expect("skills")
    .skills;
    skills::vectors::search(
        &t,
        Some(&at),
        Some((user.id(), &dk)),
        &among,
        "a query never asked",
        5,
    )
    .await
    .expect("search");
    println!(
        "{:<58} {}",
        "embedding inputs of a new search after a rescan (query: 1)",
        mock.stats()["embedded_inputs"].as_u64().unwrap_or(0) - before
    );
    let texts: Vec<String> = among
        .iter()
        .map(|s| format!("{} {}", s.md.name, s.md.description))
        .collect();
    let index = search::Bm25::new(texts.iter().map(String::as_str));
    println!(
        "{:<58} {} KiB vectors held open, {} KiB BM25 index",
        format!("index bytes for {} skills", among.len()),
        t.index_cache.bytes() / 1024,
        index.approx_bytes() / 1024
    );

    // A turn's prompt: its kept prompt checked against the skills on disk.
    for (label, count) in [("none", 0), ("20 (inline)", 20), ("1,000 (search)", n)] {
        let dir = tempfile::tempdir().expect("temp dir");
        write_skills(dir.path(), count);
        let t = test_support::state_with(Settings {
            skills_dir: Some(dir.path().to_path_buf()),
            ..Settings::default()
        })
        .await;
        let user = test_support::signed_in(&t, "bench").await;
        let session = test_support::session(&t, &user, "bench").await.id;
        let mut took = Vec::new();
        for i in 0..(searches + 10) {
            let began = Instant::now();
            let prompt = hero_backend::agents::persona::for_session(&t, &user, session)
                .await
                .expect("prompt");
            if i >= 10 {
                took.push(began.elapsed());
            }
            assert!(prompt.contains("## Skills"));
        }
        show(
            &format!("a turn's prompt, kept, with {label} global skills"),
            took,
        );
    }
}
