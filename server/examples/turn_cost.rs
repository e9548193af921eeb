//! What one turn costs the server as its session grows: a session of a few frames against
//! one of many frames whose last compact is a few frames back. A turn reads nothing before
//! the compact, so the two should cost about the same, the first turn after start-up (no
//! conversation kept in memory yet) included.
//!
//! `cargo run --release -p server --example turn_cost -- [--turns N] [--starts N]
//!  [--small FRAMES] [--large FRAMES] [--compact-back K] [--real-compaction 1] [--words N]
//!  [--batch 1] [--startup N]` (defaults: 100 turns, 5 starts, 10 frames, 10,000 frames, compact 10 frames
//! back, replies of 50 words). With `--real-compaction 1` the compact is the agent's own
//! summary (`compact::compact`, the mock writing it), not a frame written in. With
//! `--batch 1` the sessions are in batch mode (`/stream off`): each reply is asked for whole.
//!
//! Each scenario runs `starts` times on a fresh database and a fresh `AppState` (nothing in
//! memory, the session's frames appended one write each, as turns append them), on a
//! current-thread runtime: a turn is posted through `turn::post` and its events read to
//! `message_complete`, as the HTTP route does. The provider is the mock LLM on loopback,
//! on threads of its own (`mock-*`), answering 50 words at once. CPU is each turn's CPU
//! time in every thread of the process but the mock's (from `/proc/self/task/*/schedstat`),
//! so the wait for the provider is not counted, nor the measurement's own reads of `/proc`
//! (measured on empty spans and subtracted; printed). It prints the first turn's CPU (the median
//! over the starts), p50 and p99
//! of all turns, and the large session's figures as ratios of the small one's.
//!
//! With `--startup N` it measures instead a session's first message, which its startup
//! processes precede (reference 000 "Startup Abilities"): the user has N processes named
//! `_onstart_…` (each rendered and stored before the message) against none of their own
//! (Hero's `__onstart_` alone), `--turns` fresh sessions each, and prints the ratio.

use std::time::Duration;

use futures::StreamExt;
use hero_backend::conversation::frames::{self, NewFrame};
use hero_backend::{Settings, agents, conversation::sessions, conversation::turn, test_support};
use hero_shared::api::{CreateAgentRequest, CreateSessionRequest, ProviderKind};
use hero_shared::frame::{AuthorType, FrameType};
use hero_shared::wire::SseEvent;
use serde_json::json;

struct Args {
    turns: usize,
    starts: usize,
    small: usize,
    large: usize,
    compact_back: usize,
    real_compaction: bool,
    words: usize,
    batch: bool,
    startup: usize,
}

fn args() -> Args {
    let mut a = Args {
        turns: 100,
        starts: 5,
        small: 10,
        large: 10_000,
        compact_back: 10,
        real_compaction: false,
        words: 50,
        batch: false,
        startup: 0,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let n = pair.get(1).and_then(|v| v.parse().ok());
        match (pair[0].as_str(), n) {
            ("--turns", Some(n)) => a.turns = n,
            ("--starts", Some(n)) if n > 0 => a.starts = n,
            ("--small", Some(n)) => a.small = n,
            ("--large", Some(n)) => a.large = n,
            ("--compact-back", Some(n)) => a.compact_back = n,
            ("--real-compaction", Some(n)) => a.real_compaction = n != 0,
            ("--words", Some(n)) if n > 0 => a.words = n,
            ("--batch", Some(n)) => a.batch = n != 0,
            ("--startup", Some(n)) => a.startup = n,
            _ => {
                println!(
                    "usage: turn_cost [--turns N] [--starts N] [--small FRAMES] [--large FRAMES] [--compact-back K] [--real-compaction 1] [--words N] [--batch 1] [--startup N]"
                );
                std::process::exit(2);
            }
        }
    }
    a
}

/// CPU time, in µs, of every thread of this process but the mock's.
fn server_cpu_us() -> f64 {
    let mut ns = 0u64;
    for t in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.starts_with("mock") {
            continue;
        }
        ns += std::fs::read_to_string(t.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
    }
    ns as f64 / 1e3
}

struct Figures {
    first: f64,
    p50: f64,
    p99: f64,
}

/// A fresh state (on a fresh database) allowed to reach the mock, joined as `hero serve`
/// joins, with a signed-in user and an agent at the mock that never summarises.
async fn bench_state(
    mock_url: &str,
) -> (
    test_support::TestState,
    hero_backend::accounts::auth::AuthUser,
    hero_shared::api::AgentDto,
) {
    // Allowed to reach the mock on loopback, and nothing else that is not public.
    let mock_addr = mock_url
        .trim_start_matches("http://")
        .parse()
        .expect("mock address");
    let settings = Settings {
        egress: hero_backend::execution::egress::EgressPolicy::default().allowing(mock_addr),
        ..Settings::default()
    };
    let t = test_support::state_with(settings).await;
    // On PostgreSQL (`HERO_TEST_BACKEND=postgres`), joined as `hero serve` joins (alone: a
    // reply's mark is written and removed, nothing is sent for other instances).
    hero_backend::conversation::cluster::join(&t)
        .await
        .expect("joins the instances");
    let user = test_support::signed_in(&t, "bench").await;
    let agent = agents::create(
        &t.db,
        &t.keys,
        &t.settings.egress,
        &user,
        CreateAgentRequest {
            name: "bench".into(),
            provider: ProviderKind::Anthropic,
            model: "mock-model".into(),
            base_url: Some(mock_url.into()),
            api_key: Some("k".into()),
            config: None,
            kind: Default::default(),
            // Turns are measured, not the summaries (nor the memory flushes) a long run of
            // them would set off.
            compact_after_messages: Some(u64::MAX >> 2),
            compact_after_tokens: Some(u64::MAX >> 2),
            context_window: Some(u64::MAX >> 2),
        },
    )
    .await
    .expect("agent");
    (t, user, agent)
}

/// `turns` turns in a fresh session of `frames` frames, a compact `compact_back` frames
/// before the end (none when `compact_back` is 0 or not less than `frames`).
async fn scenario(
    mock_url: &str,
    frames_before: usize,
    compact_back: usize,
    turns: usize,
    real_compaction: bool,
    batch: bool,
) -> Vec<f64> {
    let (t, user, agent) = bench_state(mock_url).await;
    let session = sessions::create(
        &t,
        &user,
        CreateSessionRequest {
            name: "bench".into(),
            agent_id: Some(agent.id),
            ..Default::default()
        },
    )
    .await
    .expect("session")
    .id;
    let dk = frames::session_key(&t, &user, session).await.expect("key");
    if batch {
        let post = hero_shared::api::PostMessageRequest {
            content: "/stream off".into(),
            private: false,
            skill_filter: None,
            attachments: Vec::new(),
        };
        turn::post(&t, &user, session, post)
            .await
            .expect("batch mode");
    }
    let reply = "word ".repeat(50);
    // One write per frame, as turns append them: the write-ahead log is checkpointed along
    // the way as in a server that lived through them.
    for k in 0..frames_before {
        let (author, payload) = if k % 2 == 0 {
            (
                AuthorType::User,
                json!({"role": "user", "content": "a question of a few words"}),
            )
        } else {
            (
                AuthorType::Agent,
                json!({"role": "agent", "content": reply, "agent_id": agent.id}),
            )
        };
        let mut f = NewFrame::message(session, author, None, payload);
        if compact_back > 0 && k + compact_back == frames_before {
            if real_compaction {
                // The agent summarises what came before (the mock writes the summary).
                hero_backend::conversation::compact::compact(&t, &user, session, None)
                    .await
                    .expect("a summary");
            } else {
                f.frame_type = FrameType::Compact;
                f.payload = json!({"role": "system", "content": "Summary of everything so far."});
            }
        }
        frames::append(&t, &dk, f).await.expect("history");
    }
    // A checkpoint the appends started runs in the background on this runtime: let it
    // finish, so that it is not counted as the first turn's (both scenarios wait alike).
    tokio::time::sleep(Duration::from_millis(300)).await;
    // What a measurement adds to the figure it takes (its own reads of /proc, with as many
    // threads as the turns will meet), subtracted from each turn's.
    let own = measurement_cost();
    println!("  (a measurement's own cost, subtracted from each turn's: {own:.0} µs)");
    let mut cpu = Vec::with_capacity(turns);
    for _ in 0..turns {
        let before = server_cpu_us();
        let mut handle = turn::post(
            &t,
            &user,
            session,
            hero_shared::api::PostMessageRequest {
                content: "and then?".into(),
                private: false,
                skill_filter: None,
                attachments: Vec::new(),
            },
        )
        .await
        .expect("turn");
        while let Some(ev) = handle.events.next().await {
            match ev {
                SseEvent::Error(e) => panic!("the turn failed: {}", e.error),
                SseEvent::MessageComplete(_) => break,
                _ => {}
            }
        }
        cpu.push(server_cpu_us() - before - own);
    }
    cpu
}

/// The CPU of the first message of `sessions` fresh sessions, for a user with `startup`
/// startup processes of their own (and Hero's `__onstart_`).
async fn first_messages(mock_url: &str, startup: usize, sessions: usize) -> Vec<f64> {
    let (t, user, agent) = bench_state(mock_url).await;
    for i in 0..startup {
        hero_backend::agents::abilities::create(
            &t,
            &user,
            hero_shared::api::CreateProcessRequest {
                name: format!("_onstart_{i:03}"),
                description: "a startup process".into(),
                content: format!(
                    "Startup note {i} for {{{{user.name}}}} in {{{{session.name}}}} on {{{{date}}}}: keep answers short, cite sources, and ask before anything irreversible."
                ),
            },
        )
        .await
        .expect("a startup process");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let own = measurement_cost();
    let mut cpu = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let session = sessions::create(
            &t,
            &user,
            CreateSessionRequest {
                name: format!("bench {i}"),
                agent_id: Some(agent.id),
                ..Default::default()
            },
        )
        .await
        .expect("session")
        .id;
        let before = server_cpu_us();
        let mut handle = turn::post(
            &t,
            &user,
            session,
            hero_shared::api::PostMessageRequest {
                content: "hello".into(),
                private: false,
                skill_filter: None,
                attachments: Vec::new(),
            },
        )
        .await
        .expect("turn");
        while let Some(ev) = handle.events.next().await {
            match ev {
                SseEvent::Error(e) => panic!("the turn failed: {}", e.error),
                SseEvent::MessageComplete(_) => break,
                _ => {}
            }
        }
        cpu.push(server_cpu_us() - before - own);
    }
    cpu
}

/// `--startup N`: a first message with N startup processes of the user's against one with
/// none, alternating, `starts` times each.
fn startup_figures(rt: &tokio::runtime::Runtime, url: &str, a: &Args) {
    let p50 = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mut none, mut with) = (Vec::new(), Vec::new());
    for _ in 0..a.starts {
        none.extend(rt.block_on(first_messages(url, 0, a.turns)));
        with.extend(rt.block_on(first_messages(url, a.startup, a.turns)));
    }
    let (none, with) = (p50(none), p50(with));
    println!(
        "a session's first message, {} sessions × {} starts each",
        a.turns, a.starts
    );
    println!("no startup process of the user's (Hero's alone)   p50_cpu_us={none:>7.0}");
    println!(
        "{:>2} startup processes of the user's                p50_cpu_us={with:>7.0}",
        a.startup
    );
    println!("ratio={:.2}", with / none);
}

/// The CPU one measurement adds to the span it measures, in µs: the median of empty spans
/// (two measurements with a short sleep between, as a turn's wait for the provider: a
/// thread's `schedstat` moves only when it is switched out). Reading every thread's
/// `schedstat` costs a good part of a short turn, so a turn's figure is its span less this.
fn measurement_cost() -> f64 {
    let mut spans: Vec<f64> = (0..41)
        .map(|_| {
            let a = server_cpu_us();
            std::thread::sleep(Duration::from_micros(200));
            server_cpu_us() - a
        })
        .collect();
    spans.sort_by(f64::total_cmp);
    spans[spans.len() / 2]
}

/// `starts` fresh scenarios: the median of their first turns, and p50 and p99 of all turns.
async fn scenarios(mock_url: &str, frames_before: usize, compact_back: usize, a: &Args) -> Figures {
    let (mut firsts, mut all) = (Vec::new(), Vec::new());
    for _ in 0..a.starts {
        let cpu = scenario(
            mock_url,
            frames_before,
            compact_back,
            a.turns,
            a.real_compaction,
            a.batch,
        )
        .await;
        firsts.push(cpu[0]);
        all.extend(cpu);
    }
    let at = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * q).round() as usize]
    };
    Figures {
        first: at(&mut firsts, 0.5),
        p50: at(&mut all, 0.5),
        p99: at(&mut all, 0.99),
    }
}

fn main() {
    let a = args();
    let mock_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("mock")
        .enable_all()
        .build()
        .expect("mock runtime");
    let mock = mock_rt
        .block_on(mock_llm::spawn(
            mock_llm::Config::default()
                .answers(vec![mock_llm::Answer::text("word ".repeat(a.words))]),
        ))
        .expect("mock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let url = mock.url();
    if a.startup > 0 {
        return startup_figures(&rt, &url, &a);
    }
    let small = rt.block_on(scenarios(&url, a.small, 0, &a));
    let large = rt.block_on(scenarios(&url, a.large, a.compact_back, &a));
    // And the small one again: the machine's speed drifts between runs.
    let small2 = rt.block_on(scenarios(&url, a.small, 0, &a));
    println!(
        "replies of {} words, {}",
        a.words,
        if a.batch {
            "batch mode (asked for whole)"
        } else {
            "streaming"
        }
    );
    let show = |name: String, f: &Figures| {
        println!(
            "{name:<44} first_turn_cpu_us={:>8.0} p50_cpu_us={:>7.0} p99_cpu_us={:>7.0}",
            f.first, f.p50, f.p99
        );
    };
    show(format!("small: {} frames", a.small), &small);
    show(
        format!(
            "large: {} frames, {} compact {} back",
            a.large,
            if a.real_compaction {
                "a real"
            } else {
                "a written"
            },
            a.compact_back
        ),
        &large,
    );
    show(format!("small again: {} frames", a.small), &small2);
    let base = |g: fn(&Figures) -> f64| (g(&small) + g(&small2)) / 2.0;
    println!(
        "ratio large/small: first_turn={:.2} p50={:.2} p99={:.2}",
        large.first / base(|f| f.first),
        large.p50 / base(|f| f.p50),
        large.p99 / base(|f| f.p99)
    );
    drop(mock_rt);
    std::thread::sleep(Duration::from_millis(10));
}
