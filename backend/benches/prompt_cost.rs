//! The system prompt builder's cost: a full prompt with every context file at its limit
//! (each longer than 20,000 characters, so that the truncation pipeline cuts each one and
//! the total budget stops the rest), the HML section and the whole function list. Prints
//! p50 and p99 over many builds; the goal is well under 1 ms.
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
    };
    let mut len = 0;
    for _ in 0..200 {
        len = build(&input).len();
    }
    let mut took: Vec<f64> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            let p = build(&input);
            std::hint::black_box(&p);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    took.sort_by(f64::total_cmp);
    let p = |q: f64| took[((RUNS as f64 * q) as usize).min(RUNS - 1)];
    println!(
        "system prompt, every file at its limit ({} files x {} chars; prompt {} bytes): p50 {:.1} µs, p99 {:.1} µs ({RUNS} builds)",
        names.len(),
        body.chars().count(),
        len,
        p(0.5),
        p(0.99)
    );
}
