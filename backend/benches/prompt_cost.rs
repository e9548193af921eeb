//! The system prompt builder's cost: a full prompt with every context file at its limit
//! (each longer than 20,000 characters, so that the truncation pipeline cuts each one and
//! the total budget stops the rest), the HML section and the whole function list. Then the
//! same with 20 default processes of 1,000 characters in full and 480 more listed (reference
//! 000's abilities: the goal is at most 2 ms more at p99). Then the same as the first with
//! 12 capabilities' instructions of 1,000 characters each under `## Available Capabilities`
//! (reference 004: at most 2 ms more at p99). Prints p50 and p99 over many builds; the goal
//! is well under 1 ms.
//!
//! `cargo bench -p hero-backend --bench prompt_cost`

use std::time::Instant;

use hero_backend::agents::context_files::availability;
use hero_backend::agents::persona::{HML, SANDBOX};
use hero_backend::agents::prompt::{Input, Mode, build};
use hero_backend::execution::functions::{builtin, help};

const RUNS: usize = 5_000;

fn main() {
    let names = hero_shared::api::CONTEXT_FILES;
    // Mixed text (ASCII, accents, CJK), 24,000 characters a file.
    let line = "The agent keeps its notes here — café, naïve, 漢字 — and goes on.\n";
    let body: String = line
        .repeat(24_000 / line.chars().count() + 1)
        .chars()
        .take(24_000)
        .collect();
    let files: Vec<(&str, &str)> = names.iter().map(|n| (*n, body.as_str())).collect();
    let registry = builtin::registry();
    let specs: Vec<_> = registry.specs().collect();
    let functions = help::describe(&specs);
    let avail = availability();
    let virtual_files = [("AVAILABILITY.md", avail.as_str())];
    let input = Input {
        mode: Some(Mode::Full),
        agent_name: "Bench agent",
        hml: HML,
        functions: &functions,
        sandbox: Some(SANDBOX),
        user: "alice",
        today: "2026-11-26",
        extra: Some("A sub-task's extra context."),
        files: &files,
        virtual_files: &virtual_files,
        runtime: "Hero; provider anthropic; model bench",
        ..Input::default()
    };
    let (len, p50, p99) = measure(&input);
    println!(
        "system prompt, every file at its limit ({} files x {} chars; prompt {len} bytes): p50 {p50:.1} µs, p99 {p99:.1} µs ({RUNS} builds)",
        names.len(),
        body.chars().count(),
    );
    // 20 default processes in full, 480 more listed.
    let text: String = line
        .repeat(1_000 / line.chars().count() + 1)
        .chars()
        .take(1_000)
        .collect();
    let names_of: Vec<String> = (0..500).map(|i| format!("process-{i:03}")).collect();
    let defaults: Vec<(&str, &str)> = names_of[..20]
        .iter()
        .map(|n| (n.as_str(), text.as_str()))
        .collect();
    let others: Vec<(&str, &str)> = names_of[20..]
        .iter()
        .map(|n| (n.as_str(), "What this process is for, in a line."))
        .collect();
    let with = Input {
        default_processes: &defaults,
        other_processes: &others,
        ..input.clone()
    };
    let (len, p50_with, p99_with) = measure(&with);
    println!(
        "the same with 20 default processes and 480 listed (prompt {len} bytes): p50 {p50_with:.1} µs, p99 {p99_with:.1} µs; the processes add {:.1} µs at p99",
        p99_with - p99
    );
    // 12 capabilities' instructions, 1,000 characters each.
    let cap_names: Vec<String> = (0..12).map(|i| format!("capability-{i:02}")).collect();
    let capabilities: Vec<(&str, &str)> = cap_names
        .iter()
        .map(|n| (n.as_str(), text.as_str()))
        .collect();
    let with_caps = Input {
        capabilities: &capabilities,
        ..input.clone()
    };
    let (len, p50_caps, p99_caps) = measure(&with_caps);
    println!(
        "the first with 12 capabilities' instructions of 1,000 characters (prompt {len} bytes): p50 {p50_caps:.1} µs, p99 {p99_caps:.1} µs; the capabilities add {:.1} µs at p99",
        p99_caps - p99
    );
}

/// The prompt's length, and p50 and p99 of its build in µs.
fn measure(input: &Input<'_>) -> (usize, f64, f64) {
    let mut len = 0;
    for _ in 0..200 {
        len = build(input).len();
    }
    let mut took: Vec<f64> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            let p = build(input);
            std::hint::black_box(&p);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    took.sort_by(f64::total_cmp);
    let p = |q: f64| took[((RUNS as f64 * q) as usize).min(RUNS - 1)];
    (len, p(0.5), p(0.99))
}
