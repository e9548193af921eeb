//! What a long session's page costs: a session of many frames (by default 10,000: 5,000
//! exchanges, no summary), its page `GET /s/{id}` served over real HTTP on loopback, many
//! times. Prints the server-rendered page's size and the time to answer it (p50, p99),
//! and the same for a 10-frame session.
//!
//! `cargo run --release -p server --example page_cost -- [--frames N] [--gets N]`

use std::time::{Duration, Instant};

use hero_backend::conversation::frames::{self, NewFrame};
use hero_backend::{Settings, conversation::sessions, test_support};
use hero_shared::api::CreateSessionRequest;
use hero_shared::frame::AuthorType;
use serde_json::json;

/// An agent's reply of a realistic size, with some markup.
const REPLY: &str = "Here is what I found.\n\n<todo title=\"Plan\"><item status=\"done\">Read the logs</item><item status=\"pending\">Fix the bug</item></todo>\n\nThe error comes from the parser: it reads one byte too far when a tag is cut at the end of a chunk. I changed `feed` to keep the tail and added a test.\n\n```rust\nfn main() { println!(\"fixed\"); }\n```";

async fn session_of(frames_n: usize) -> (Vec<f64>, usize) {
    let t = test_support::state_with(Settings::default()).await;
    let user = test_support::signed_in(&t, "bench").await;
    let session = sessions::create(
        &t,
        &user,
        CreateSessionRequest {
            name: "long".into(),
            ..Default::default()
        },
    )
    .await
    .expect("session")
    .id;
    let dk = frames::session_key(&t, &user, session).await.expect("key");
    for k in 0..frames_n {
        let (author, payload) = if k % 2 == 0 {
            (
                AuthorType::User,
                json!({"role": "user", "content": format!("question number {k}: what about this?")}),
            )
        } else {
            (
                AuthorType::Agent,
                json!({"role": "agent", "content": REPLY, "agent_name": "Bench"}),
            )
        };
        frames::append(&t, &dk, NewFrame::message(session, author, None, payload))
            .await
            .expect("frame");
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = server::web::router(
        (*t).clone(),
        server::web::leptos_options(addr, &t.dir.path().join("site")),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let c = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .unwrap();
    let r = c
        .post(format!("http://{addr}/api/auth/login"))
        .json(&json!({"username": "bench", "password": test_support::password_of("bench")}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let url = format!("http://{addr}/s/{session}");
    let mut size = 0;
    for _ in 0..3 {
        size = c
            .get(&url)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .len();
    }
    let gets = gets();
    let mut took = Vec::with_capacity(gets);
    for _ in 0..gets {
        let t0 = Instant::now();
        let body = c.get(&url).send().await.unwrap().bytes().await.unwrap();
        took.push(t0.elapsed().as_secs_f64() * 1e3);
        assert_eq!(body.len(), size);
    }
    took.sort_by(f64::total_cmp);
    (took, size)
}

fn arg(name: &str, default: usize) -> usize {
    let argv: Vec<String> = std::env::args().collect();
    argv.iter()
        .position(|a| a == name)
        .and_then(|i| argv.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn gets() -> usize {
    arg("--gets", 50)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for n in [10, arg("--frames", 10_000)] {
        let (took, size) = rt.block_on(session_of(n));
        let p = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
        println!(
            "session page, {n} frames: {size} bytes of HTML, answered in p50 {:.1} ms, p99 {:.1} ms ({} gets)",
            p(0.5),
            p(0.99),
            took.len()
        );
    }
    std::thread::sleep(Duration::from_millis(10));
}
