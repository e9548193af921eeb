//! What skills cost (reference 002 §8–10): `skill_search` over 1,000 skills (BM25: the
//! index is built from the names and descriptions at each search, as `skill_search` does
//! it); the prompt's `## Skills` section for 1,000 (search mode), 20 (inline) and none; and
//! reading 1,000 skill folders from disk, as start-up reads the administrator's. Prints
//! p50 and p99; asserts nothing. The skills are made here, from a fixed vocabulary.
//!
//! `cargo bench -p hero-backend --bench skill_search`

use std::sync::Arc;
use std::time::{Duration, Instant};

use hero_backend::skills::{self, Skill, Tier, format::SkillMd};

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

/// A deterministic description of `n` words for skill `i`.
fn words(i: usize, n: usize) -> String {
    (0..n)
        .map(|k| WORDS[(i * 7 + k * 13 + k * k) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn skill(i: usize) -> Arc<Skill> {
    Arc::new(Skill {
        tier: Tier::Global,
        md: SkillMd {
            name: format!("skill-{i:04}"),
            description: format!("Helps with {}.", words(i, 16)),
            license: None,
            compatibility: None,
            metadata: Default::default(),
            allowed_tools: None,
            other: Default::default(),
            body: String::new(),
        },
        dir: None,
        texts: None,
        files: Vec::new(),
        version: format!("{i:016x}"),
    })
}

fn quantiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

fn timed(n: usize, mut f: impl FnMut(usize)) -> (f64, f64) {
    for i in 0..n / 10 {
        f(i);
    }
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let t0 = Instant::now();
        f(i);
        took.push(t0.elapsed());
    }
    quantiles(took)
}

fn main() {
    let thousand: Vec<Arc<Skill>> = (0..1_000).map(skill).collect();
    let (p50, p99) = timed(1_000, |i| {
        let hits = skills::search(&thousand, &words(i, 3), 5).unwrap();
        std::hint::black_box(hits);
    });
    println!(
        "skill_search over 1,000 skills (BM25): p50 {p50:.3} ms, p99 {p99:.3} ms (1,000 queries)"
    );

    for (label, among) in [
        ("1,000 skills (search mode)", &thousand[..]),
        ("20 skills (inline)", &thousand[..20]),
        ("none", &thousand[..0]),
    ] {
        let (p50, p99) = timed(2_000, |_| {
            std::hint::black_box(skills::prompt_section(among));
            std::hint::black_box(skills::fingerprint(among));
        });
        println!(
            "the prompt's Skills section and its fingerprint, {label}: p50 {p50:.4} ms, p99 {p99:.4} ms"
        );
    }

    let root = tempfile::tempdir().unwrap();
    for s in &thousand {
        let dir = root.path().join(s.name());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: {}\ndescription: {}\n---\n# {}\n\n{}\n",
                s.name(),
                s.md.description,
                s.name(),
                words(s.name().len(), 200)
            ),
        )
        .unwrap();
    }
    let mut took = Vec::new();
    for _ in 0..10 {
        let t0 = Instant::now();
        let read = skills::read_root(root.path(), Tier::Global, skills::MAX_SKILLS_PER_ROOT);
        took.push(t0.elapsed());
        assert_eq!(read.skills.len(), 1_000);
    }
    let (p50, p99) = quantiles(took);
    println!(
        "reading 1,000 skill folders from disk: p50 {p50:.1} ms, worst {p99:.1} ms (10 reads)"
    );

    // Hot reload: from a new SKILL.md in the administrator's folder to the user's skills
    // listing it (what the next prompt is built from), the watcher's debounce included.
    let global = tempfile::tempdir().unwrap();
    let workspaces = tempfile::tempdir().unwrap();
    let library = Arc::new(skills::Library::load(
        Some(global.path()),
        workspaces.path(),
        skills::MAX_SKILLS_PER_ROOT,
    ));
    library.watch().unwrap();
    const WRITES: usize = 20;
    let mut took = Vec::with_capacity(WRITES);
    for i in 0..WRITES {
        let name = format!("hot-{i:02}");
        let dir = global.path().join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let t0 = Instant::now();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: Written while watched.\n---\nBody\n"),
        )
        .unwrap();
        while library.for_user(1, Default::default()).get(&name).is_none() {
            assert!(t0.elapsed() < Duration::from_secs(10), "never listed");
            std::thread::sleep(Duration::from_millis(2));
        }
        took.push(t0.elapsed());
        // Let the watcher go quiet before the next write.
        std::thread::sleep(Duration::from_millis(700));
    }
    let (p50, p99) = quantiles(took);
    println!(
        "hot reload: a SKILL.md written to its first listing: p50 {p50:.0} ms, p99 {p99:.0} ms ({WRITES} writes)"
    );
}
