//! Checks that keep the style (STYLE.md) over every Rust file of the repository: no ignored
//! test, `inner_html` only with the shared renderers, a `//!` at the top of every module, no
//! `eprintln!` in library code, no SQL outside the store, and no secret-holding type that can
//! be serialised.

use std::path::{Path, PathBuf};

/// Every `.rs` file under the repository's crates, as (path relative to the root, text).
fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = [
        "shared", "backend", "app", "frontend", "server", "mock-llm", "fuzz",
    ]
    .iter()
    .map(|d| root.join(d))
    .collect();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if !matches!(name, "target" | "corpus" | "artifacts" | "node_modules") {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") {
                let text = std::fs::read_to_string(&path).expect("read source");
                let rel = path
                    .strip_prefix(&root)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push((rel, text));
            }
        }
    }
    out.sort();
    assert!(out.len() > 50, "the walk found only {} files", out.len());
    out
}

/// Library code: a crate's `src/`, less the binaries' entry points.
fn is_library(path: &str) -> bool {
    path.contains("/src/") && !path.ends_with("/main.rs") && !path.starts_with("fuzz/")
}

/// Lines of `text` holding `needle` outside `//` comments, as "path:line".
fn hits(path: &str, text: &str, needle: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.split("//").next().unwrap_or("").contains(needle))
        .map(|(i, _)| format!("{path}:{}", i + 1))
        .collect()
}

#[test]
fn no_test_is_ignored() {
    // Measurements that are not tests are benchmarks (benches/, examples/), not ignored tests.
    let attr = concat!("#[", "ignore");
    let found: Vec<String> = sources()
        .iter()
        .flat_map(|(p, t)| hits(p, t, attr))
        .collect();
    assert!(found.is_empty(), "ignored tests: {found:?}");
}

/// HTML reaches the DOM only from the shared renderers (`hero_shared::html`,
/// `hero_shared::markdown`), and only in these files; a line that passes a variable names
/// one these files fill from the renderers (`html`, `preview`, `stored`, a block's; `data`,
/// JSON through `html::json_for_script`).
const INNER_HTML_FILES: &[&str] = &[
    "app/src/chat/mod.rs",
    "app/src/chat/client.rs",
    "app/src/files.rs",
    "app/src/enhance.rs",
];

#[test]
fn inner_html_only_with_the_shared_renderers() {
    let found: Vec<String> = sources()
        .iter()
        .filter(|(p, _)| !INNER_HTML_FILES.contains(&p.as_str()) && p != "server/tests/tidy.rs")
        .flat_map(|(p, t)| hits(p, t, "inner_html"))
        .collect();
    assert!(
        found.is_empty(),
        "inner_html outside {INNER_HTML_FILES:?}: {found:?}"
    );
    for (p, t) in sources()
        .iter()
        .filter(|(p, _)| INNER_HTML_FILES.contains(&p.as_str()))
    {
        let lines: Vec<&str> = t.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.contains("inner_html") || line.trim_start().starts_with("//") {
                continue;
            }
            // The call and its argument, which rustfmt may put on the next line.
            let call = format!("{line}{}", lines.get(i + 1).copied().unwrap_or_default());
            assert!(
                [
                    "hero_shared::html::",
                    "markdown::to_html",
                    "live::block_html(",
                    "inner_html(&html)",
                    "inner_html=preview>",
                    "inner_html=stored>",
                    "inner_html=data>",
                ]
                .iter()
                .any(|ok| call.contains(ok)),
                "{p}:{}: inner_html with something else than the shared renderers: {line}",
                i + 1
            );
        }
    }
}

#[test]
fn every_module_says_what_it_owns() {
    let missing: Vec<String> = sources()
        .into_iter()
        .filter(|(_, t)| {
            let first = t
                .lines()
                .find(|l| !l.starts_with("#![") && !l.trim().is_empty());
            !first.is_some_and(|l| l.starts_with("//!"))
        })
        .map(|(p, _)| p)
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` comment at the top: {missing:?}"
    );
}

#[test]
fn library_code_logs_through_tracing() {
    let found: Vec<String> = sources()
        .iter()
        .filter(|(p, _)| is_library(p))
        .flat_map(|(p, t)| hits(p, t, "eprintln!"))
        .collect();
    assert!(
        found.is_empty(),
        "eprintln! in library code (use tracing): {found:?}"
    );
}

#[test]
fn only_the_store_touches_the_database() {
    // What runs SQL on either connection: the pool's query builders and the hot
    // connection's statements. Tests may look at raw rows; library code goes through
    // `hero_backend::store`, where each row type is decoded once.
    let sql = [
        "sqlx::query",
        ".prepare_cached(",
        ".prepare(",
        ".query_row(",
        ".execute_batch(",
        "rusqlite::params",
        "FromRow",
    ];
    let found: Vec<String> = sources()
        .iter()
        .filter(|(p, _)| is_library(p) && !p.starts_with("backend/src/store/"))
        .flat_map(|(p, t)| {
            // Unit tests at the foot of a module may read raw rows to check what is stored.
            let code = t.split("#[cfg(test)]").next().unwrap_or(t);
            sql.iter().flat_map(move |n| hits(p, code, n))
        })
        .collect();
    assert!(
        found.is_empty(),
        "SQL outside backend/src/store (add a function there): {found:?}"
    );
}

/// A compile-time proof: the call below is ambiguous, and does not compile, for a type that
/// implements `Serialize` (the trick of `static_assertions::assert_not_impl_any!`).
trait NotSerialize<A> {
    fn holds() {}
}
impl<T: ?Sized> NotSerialize<()> for T {}
#[allow(dead_code)]
struct IsSerialize;
impl<T: ?Sized + serde::Serialize> NotSerialize<IsSerialize> for T {}

#[test]
fn secret_holding_types_cannot_be_serialised() {
    use hero_backend::{agents, auth, crypto};
    // The master and data keys, an agent with its API key, a fresh sign-in's token.
    <crypto::SecretKey as NotSerialize<_>>::holds();
    <crypto::Keyring as NotSerialize<_>>::holds();
    <agents::AgentRuntime as NotSerialize<_>>::holds();
    <auth::Login as NotSerialize<_>>::holds();
}
