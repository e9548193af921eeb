//! What the user's tasks cost to list (reference 004: `list_tasks` over 1,000 tasks, the
//! goal at most 10 ms at p99): 1,000 tasks made for one user (the time to make them
//! printed too), then the list read and opened, as the route answers it and as the
//! `tasks` capability's `list_tasks` tool does (its open tasks, in lines), on a real
//! SQLite file. Prints p50 and p99; asserts nothing.
//!
//! `cargo bench -p hero-backend --features test-support --bench task_cost`

use std::time::{Duration, Instant};

use hero_backend::execution::functions::Ctx;
use hero_backend::tasks::{self, Actor};
use hero_backend::test_support;
use hero_shared::api::CreateTaskRequest;
use serde_json::json;

const TASKS: usize = 1_000;
const RUNS: usize = 300;

fn quantiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

#[tokio::main]
async fn main() {
    let (_dir, st) = test_support::state().await;
    let user = test_support::signed_in(&st, "bench").await;
    let statuses = [
        "triage",
        "backlog",
        "todo",
        "in_progress",
        "done",
        "canceled",
    ];
    let mut made = Vec::with_capacity(TASKS);
    for i in 0..TASKS {
        let req = CreateTaskRequest {
            title: format!("Task number {i}: something to do before the end of the week"),
            description: Some("A line or two of what it is about.\n".repeat(3)),
            status: Some(statuses[i % statuses.len()].to_owned()),
            priority: Some((i % 5) as i64),
            project: Some(format!("Project {}", i % 7)),
            labels: Some(vec!["work".into(), format!("l{}", i % 3)]),
            ..Default::default()
        };
        let t0 = Instant::now();
        tasks::create(&st, user.id(), Actor::User, req)
            .await
            .unwrap();
        made.push(t0.elapsed());
    }
    let (p50, p99) = quantiles(made);
    println!("create a task (of {TASKS}): p50 {p50:.3} ms, p99 {p99:.3} ms");

    let mut listed = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t0 = Instant::now();
        let all = tasks::list(&st, user.id(), None, None).await.unwrap();
        listed.push(t0.elapsed());
        assert_eq!(all.len(), TASKS);
    }
    let (p50, p99) = quantiles(listed);
    println!("list all {TASKS} tasks, opened: p50 {p50:.3} ms, p99 {p99:.3} ms ({RUNS} runs)");

    let cx = Ctx {
        st: &st,
        user_id: user.id(),
        session_id: 0,
        agent_id: None,
        registry: &st.functions,
        request_id: "bench",
    };
    let mut tool = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t0 = Instant::now();
        let out = st
            .functions
            .handle_tool_call(&cx, "list_tasks", &json!({}))
            .await
            .unwrap()
            .unwrap();
        tool.push(t0.elapsed());
        std::hint::black_box(out);
    }
    let (p50, p99) = quantiles(tool);
    println!(
        "list_tasks over {TASKS} tasks (the open ones, in lines): p50 {p50:.3} ms, p99 {p99:.3} ms ({RUNS} runs; the goal: at most 10 ms at p99)"
    );
}
