//! Checks that keep the style (STYLE.md) over every Rust file of the repository: no ignored
//! test, `inner_html` only with the shared renderers, a `//!` at the top of every module, no
//! `eprintln!` in library code, no SQL outside the store, no secret-holding type that can
//! be serialised, and no import circle among a crate's modules.

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

/// Library code: a crate's `src/`, less the binaries' entry points (`main.rs`, `src/bin/`).
fn is_library(path: &str) -> bool {
    path.contains("/src/")
        && !path.ends_with("/main.rs")
        && !path.contains("/src/bin/")
        && !path.starts_with("fuzz/")
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
    "app/src/chat/client/dom.rs",
    "app/src/chat/client/composer.rs",
    "app/src/chat/client/attach.rs",
    "app/src/chat/client/header.rs",
    "app/src/chat/client/list.rs",
    "app/src/chat/client/reply.rs",
    "app/src/files.rs",
    "app/src/abilities.rs",
    "app/src/enhance.rs",
];

/// The ways HTML text reaches the DOM.
const HTML_SINKS: &[&str] = &["inner_html", "outer_html", "insert_adjacent_html"];

#[test]
fn inner_html_only_with_the_shared_renderers() {
    let found: Vec<String> = sources()
        .iter()
        .filter(|(p, _)| !INNER_HTML_FILES.contains(&p.as_str()) && p != "server/tests/tidy.rs")
        .flat_map(|(p, t)| HTML_SINKS.iter().flat_map(|s| hits(p, t, s)))
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
            let sink = HTML_SINKS.iter().any(|s| line.contains(s));
            if !sink || line.trim_start().starts_with("//") {
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
                    "outer_html(&html)",
                    ", &html)",
                    "inner_html=preview>",
                    "inner_html=stored>",
                    "inner_html=data>",
                ]
                .iter()
                .any(|ok| call.contains(ok)),
                "{p}:{}: HTML from something else than the shared renderers: {line}",
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
    use hero_backend::{accounts::auth, agents, crypto};
    // The master and data keys, an agent with its API key, a fresh sign-in's token.
    <crypto::SecretKey as NotSerialize<_>>::holds();
    <crypto::Keyring as NotSerialize<_>>::holds();
    <agents::AgentRuntime as NotSerialize<_>>::holds();
    <auth::Login as NotSerialize<_>>::holds();
}

/// A crate's modules and, for each, the modules its code names: by a `crate::` path, a
/// `super::` or `self::` path, or a path into a module it declares (its `use` lines and
/// paths written in full; comments and the tests at its foot left out). A module naming
/// one of its ancestors is no edge: a folder's `mod.rs` is the shared vocabulary of its
/// files, and the crate root is the composition root, which every module may name.
type ModuleGraph = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

/// The module a file under a crate's `src/` holds: `a/b.rs` and `a/b/mod.rs` are `a::b`;
/// the root and the binaries are none.
fn module_of(rel: &str) -> Option<String> {
    let stem = rel.strip_suffix(".rs")?;
    if stem == "lib" || stem == "main" || stem.starts_with("bin/") {
        return None;
    }
    Some(stem.strip_suffix("/mod").unwrap_or(stem).replace('/', "::"))
}

/// The code of a file less its comments and its `#[cfg(test)] mod …` at the foot.
fn code_of(text: &str) -> String {
    let mut end = text.len();
    let mut from = 0;
    while let Some(i) = text[from..].find("#[cfg(test)]") {
        let at = from + i;
        if text[at + "#[cfg(test)]".len()..]
            .trim_start()
            .starts_with("mod ")
        {
            end = at;
            break;
        }
        from = at + 1;
    }
    text[..end]
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path written after `prefix` (`crate::`, `super::`, a module's name and `::`), a
/// `use` group (`crate::{a, b::{c, d}}`) expanded.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    fn tree(code: &[u8], mut i: usize, mut segs: Vec<String>, out: &mut Vec<Vec<String>>) {
        loop {
            if code.get(i) == Some(&b'{') {
                let (mut depth, mut start) = (0, i + 1);
                for j in i + 1..code.len() {
                    match code[j] {
                        b'{' => depth += 1,
                        b'}' if depth > 0 => depth -= 1,
                        b',' | b'}' if depth == 0 => {
                            let item = start
                                + code[start..j]
                                    .iter()
                                    .take_while(|c| c.is_ascii_whitespace())
                                    .count();
                            if item < j {
                                tree(code, item, segs.clone(), out);
                            }
                            if code[j] == b'}' {
                                return;
                            }
                            start = j + 1;
                        }
                        _ => {}
                    }
                }
                return;
            }
            let len = code[i..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            if len == 0 {
                out.push(segs);
                return;
            }
            segs.push(String::from_utf8_lossy(&code[i..i + len]).into_owned());
            i += len;
            if code[i..].starts_with(b"::") {
                i += 2;
            } else {
                out.push(segs);
                return;
            }
        }
    }
    let mut out = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
            tree(code.as_bytes(), at + prefix.len(), Vec::new(), &mut out);
        }
    }
    out
}

/// Every path `code` of module `module` writes, from the crate's root.
fn paths_of(module: &str, code: &str) -> Vec<Vec<String>> {
    let me: Vec<String> = module.split("::").map(str::to_owned).collect();
    fn from(base: &[String], paths: Vec<Vec<String>>) -> Vec<Vec<String>> {
        paths.into_iter().map(|p| [base, &p].concat()).collect()
    }
    let mut out = paths_after(code, "crate::");
    out.extend(from(&me[..me.len() - 1], paths_after(code, "super::")));
    out.extend(from(&me, paths_after(code, "self::")));
    // The modules it declares (`mod x;`, `pub mod x;`), by name.
    for line in code.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [.., "mod", name] = words[..]
            && let Some(name) = name.strip_suffix(';')
        {
            let inside = paths_after(code, &format!("{name}::"));
            out.extend(from(&[&me[..], &[name.to_owned()]].concat(), inside));
        }
    }
    out
}

/// The module graph of one crate, from its files as (path under `src/`, text).
fn module_graph(files: &[(String, String)]) -> ModuleGraph {
    let modules: std::collections::BTreeSet<String> =
        files.iter().filter_map(|(p, _)| module_of(p)).collect();
    let mut graph = ModuleGraph::new();
    for (path, text) in files {
        let Some(from) = module_of(path) else {
            continue;
        };
        let named = paths_of(&from, &code_of(text))
            .into_iter()
            .filter_map(|segs| {
                // The longest prefix of the path that is a module (the rest is an item).
                (1..=segs.len())
                    .rev()
                    .map(|n| segs[..n].join("::"))
                    .find(|m| modules.contains(m))
            })
            .filter(|to| *to != from && !from.starts_with(&format!("{to}::")))
            .collect();
        graph.insert(from, named);
    }
    graph
}

/// Every circle of the graph, each written as one path around it ("a -> b -> a"): one per
/// strongly connected component of more than one module (Tarjan's algorithm).
fn cycles(graph: &ModuleGraph) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    struct Walk<'g> {
        graph: &'g ModuleGraph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        components: Vec<Vec<&'g str>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    self.low.insert(v, self.low[v].min(self.low[w]));
                } else if self.on_stack.contains(w) {
                    self.low.insert(v, self.low[v].min(self.index[w]));
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.components.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    // Within each component, the shortest way from its first module back to itself.
    walk.components
        .iter()
        .map(|component| {
            let inside: BTreeSet<&str> = component.iter().copied().collect();
            let start = *inside.iter().next().expect("a component has modules");
            let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            'search: while let Some(v) = queue.pop_front() {
                for w in graph[v]
                    .iter()
                    .map(String::as_str)
                    .filter(|w| inside.contains(w))
                {
                    if w == start {
                        came_from.insert(start, v);
                        break 'search;
                    }
                    if !came_from.contains_key(w) {
                        came_from.insert(w, v);
                        queue.push_back(w);
                    }
                }
            }
            let mut path = vec![start];
            let mut at = came_from[start];
            while at != start {
                path.push(at);
                at = came_from[at];
            }
            path.push(start);
            path.reverse();
            path.join(" -> ")
        })
        .collect()
}

/// The files of one crate's `src/`, as (path under `src/`, text).
fn crate_files(src: &str) -> Vec<(String, String)> {
    sources()
        .into_iter()
        .filter_map(|(p, t)| Some((p.strip_prefix(src)?.to_owned(), t)))
        .collect()
}

#[test]
fn the_module_check_finds_a_planted_cycle() {
    let file = |p: &str, t: &str| (p.to_owned(), t.to_owned());
    let files = vec![
        file("lib.rs", "pub mod a; pub mod b; use crate::a::f;"),
        file(
            "a.rs",
            "//! A.\nuse crate::b::Thing; // crate::c is a comment\n",
        ),
        file(
            "b/mod.rs",
            "pub mod c;\nuse crate::{b::c::{self, g}, lib};\n",
        ),
        file(
            "b/c.rs",
            "pub fn g() { crate::a::f() }\n#[cfg(test)]\nmod tests { use crate::d; }\n",
        ),
        file("d.rs", "use crate::a;\n"),
    ];
    let graph = module_graph(&files);
    assert_eq!(graph["b"].iter().collect::<Vec<_>>(), ["b::c"]);
    assert_eq!(cycles(&graph), ["a -> b -> b::c -> a"]);
    // Relative paths: a folder's files may use its `mod.rs` (no edge), and it theirs; a way
    // back to the folder through another module is a circle.
    let files = vec![
        file("e/mod.rs", "pub mod f;\nmod g;\npub fn go() { f::run() }\n"),
        file("e/f.rs", "use super::{go, g::Thing};\n"),
        file("e/g.rs", "use crate::h;\n"),
        file("h.rs", "pub fn x() {}\n"),
    ];
    let graph = module_graph(&files);
    assert_eq!(graph["e::f"].iter().collect::<Vec<_>>(), ["e::g"]);
    assert!(cycles(&graph).is_empty(), "{:?}", cycles(&graph));
    let mut files = files;
    files[3].1 = "pub fn x() { crate::e::go() }\n".into();
    assert_eq!(
        cycles(&module_graph(&files)),
        ["e -> e::f -> e::g -> h -> e"]
    );
    // The backend as it is, with one planted line: the store naming the turn.
    let mut backend = crate_files("backend/src/");
    let store = backend
        .iter_mut()
        .find(|(p, _)| p == "store/mod.rs")
        .expect("the store's module");
    store
        .1
        .insert_str(0, "use crate::conversation::turn::Registry;\n");
    let found = cycles(&module_graph(&backend));
    assert!(
        found
            .iter()
            .any(|c| c.contains("store -> conversation::turn")),
        "the planted cycle was not found: {found:?}"
    );
}

#[test]
fn no_crate_has_an_import_circle() {
    for (src, at_least) in [
        ("backend/src/", 60),
        ("shared/src/", 10),
        ("app/src/", 10),
        ("server/src/", 5),
    ] {
        let graph = module_graph(&crate_files(src));
        assert!(
            graph.len() > at_least,
            "{src}: only {} modules found",
            graph.len()
        );
        let found = cycles(&graph);
        assert!(
            found.is_empty(),
            "import circles among {src}'s modules: {found:#?}"
        );
    }
}
