//! A deterministic generator of LLM-like replies with HML in them, for tests, fuzz seeds
//! and benchmarks that need realistic input without a file from outside the repository.
//!
//! Each reply mixes markdown prose (headings, lists, quotes, inline code, links, unicode,
//! stray `<`), fenced code full of `<` and `>` (sometimes with HML-looking tags inside),
//! every HML element with nesting, JSON bodies (an `</interaction>` inside a JSON string
//! among them), and the malformations real output has: unquoted and single-quoted
//! attributes, upper-case names, stray close tags, unknown tags, comments, an element left
//! open or a tag cut off at the end of a reply. The same seed and size give the same bytes.
//!
//! It is not the team's reference corpus (whose figures are quoted in docs/perf.md); the
//! benchmarks take that one as a file.

use std::ops::Range;

/// Replies joined by a blank line, and the byte range of each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Corpus {
    pub text: String,
    pub replies: Vec<Range<usize>>,
}

impl Corpus {
    /// Reply `i`'s text.
    pub fn reply(&self, i: usize) -> &str {
        &self.text[self.replies[i].clone()]
    }

    /// The ranges as `[start, end)` pairs, the shape of a corpus index file.
    pub fn index(&self) -> Vec<(usize, usize)> {
        self.replies.iter().map(|r| (r.start, r.end)).collect()
    }
}

/// About `size` bytes of replies (at least one), each 1–12 KB.
pub fn generate(seed: u64, size: usize) -> Corpus {
    let mut g = Gen {
        rng: Rng(seed ^ 0x9e37_79b9_7f4a_7c15),
        out: String::with_capacity(size + 16 * 1024),
        ids: 0,
    };
    let mut replies = Vec::new();
    while replies.is_empty() || g.out.len() < size {
        if !g.out.is_empty() {
            g.out.push_str("\n\n");
        }
        let start = g.out.len();
        let target = g
            .rng
            .range(1_000, 12_000)
            .min(size.saturating_sub(start).max(400));
        g.reply(target);
        replies.push(start..g.out.len());
    }
    Corpus {
        text: g.out,
        replies,
    }
}

/// splitmix64: tiny, fast and fixed forever, so the corpus never changes under a test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo).max(1) as u64) as usize
    }

    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.range(0, items.len())]
    }
}

const WORDS: &[&str] = &[
    "the",
    "a",
    "of",
    "to",
    "in",
    "for",
    "with",
    "from",
    "this",
    "that",
    "it",
    "we",
    "you",
    "is",
    "are",
    "was",
    "be",
    "has",
    "can",
    "should",
    "will",
    "not",
    "only",
    "then",
    "so",
    "each",
    "every",
    "first",
    "next",
    "streaming",
    "parser",
    "token",
    "chunk",
    "buffer",
    "event",
    "element",
    "attribute",
    "state",
    "server",
    "client",
    "browser",
    "request",
    "response",
    "latency",
    "memory",
    "bytes",
    "string",
    "unicode",
    "input",
    "output",
    "error",
    "nested",
    "tag",
    "close",
    "content",
    "update",
    "model",
    "prompt",
    "user",
    "tool",
    "result",
    "command",
    "shell",
    "file",
    "path",
    "value",
    "function",
    "type",
    "trait",
    "async",
    "future",
    "task",
    "thread",
    "channel",
    "socket",
    "header",
    "cache",
    "query",
    "search",
    "page",
    "link",
    "render",
    "signal",
    "view",
    "test",
    "benchmark",
    "budget",
    "because",
    "however",
    "while",
    "before",
    "after",
];
const UNICODE: &[&str] = &[
    "café",
    "naïve",
    "Zürich",
    "—",
    "…",
    "“quoted”",
    "日本語",
    "한국어",
    "Ελληνικά",
    "→",
    "≤",
    "✅",
    "🚀",
    "µs",
    "½",
];
const STRAY_LT: &[&str] = &[
    "if x < 3",
    "a<b",
    "i <- 0",
    "I <3 Rust",
    "n <= 10",
    "x<y && y>z",
    "< not a tag",
    "List<String>",
    "a < b > c",
];
const INLINE_CODE: &[&str] = &[
    "`Vec<u8>`",
    "`&str`",
    "`Option<T>`",
    "`<progress/>`",
    "`a < b`",
    "`<bash>`",
    "`Result<(), E>`",
];
const DOMAINS: &[&str] = &[
    "docs.rs",
    "example.com",
    "github.com",
    "crates.io",
    "tokio.rs",
    "leptos.dev",
];
const CODE_LINES: &[&str] = &[
    "let v: Vec<Option<String>> = Vec::with_capacity(16);",
    "fn f<'a, T: AsRef<str>>(x: &'a T) -> Result<(), Box<dyn Error>> {",
    "    if n < 10 && m > 0 { return Ok(()); }",
    "const el = <div className=\"x\">{a < b ? 1 : 2}</div>;",
    "cat file.txt | grep -v '^#' > out.txt 2>&1",
    "<ul><li>one</li><li>two</li></ul>",
    "if a <= b and c >> 2: print(\"<tag>\")",
    "}",
];
const FAKE_HML_IN_CODE: &[&str] = &[
    "<thinking>not a real element</thinking>",
    "<progress value=\"1\" max=\"2\"/>",
    "<bash cwd=\"/tmp\">echo hi</bash>",
    "</interaction>",
];

struct Gen {
    rng: Rng,
    out: String,
    ids: u32,
}

impl Gen {
    fn reply(&mut self, target: usize) {
        let start = self.out.len();
        while self.out.len() - start < target {
            let gap = self.rng.range(300, 800);
            self.prose(gap);
            self.out
                .push_str(if self.rng.chance(50) { "\n\n" } else { " " });
            self.element(0);
            self.out
                .push_str(if self.rng.chance(50) { "\n\n" } else { " " });
        }
        // One reply in four ends the way a cut stream does.
        if self.rng.chance(25) {
            let cut = self.rng.pick(&[
                "<thinking>and then the stream was cut mid-",
                "<bash cwd=\"/tm",
                "<todo title='Plan'><item status=done>one",
                "<",
            ]);
            self.out.push_str("\n\n");
            self.out.push_str(cut);
        }
    }

    fn word(&mut self) -> &'static str {
        match self.rng.range(0, 100) {
            0..=1 => self.rng.pick(UNICODE),
            2..=3 => self.rng.pick(INLINE_CODE),
            _ => self.rng.pick(WORDS),
        }
    }

    fn sentence(&mut self) {
        let n = self.rng.range(5, 18);
        for i in 0..n {
            if i > 0 {
                self.out.push(' ');
            }
            if self.rng.chance(1) {
                let s = self.rng.pick(STRAY_LT);
                self.out.push_str(s);
            } else if self.rng.chance(1) {
                let (w, d) = (self.rng.pick(WORDS), self.rng.pick(DOMAINS));
                self.out.push_str(&format!("[{w}](https://{d}/{w})"));
            } else {
                let w = self.word();
                self.out.push_str(w);
            }
        }
        let end = self.rng.pick(&[".", ".", "?", "!", ":"]);
        self.out.push_str(end);
    }

    fn prose(&mut self, bytes: usize) {
        let start = self.out.len();
        while self.out.len() - start < bytes {
            match self.rng.range(0, 100) {
                0..=6 => {
                    let hashes = "#".repeat(self.rng.range(1, 4));
                    self.out.push_str(&format!("{hashes} "));
                    self.sentence();
                }
                7..=16 => {
                    for _ in 0..self.rng.range(2, 5) {
                        self.out.push_str("- ");
                        self.sentence();
                        self.out.push('\n');
                    }
                }
                17..=23 => self.code_block(),
                24..=25 => {
                    self.out.push_str("> ");
                    self.sentence();
                }
                _ => {
                    for _ in 0..self.rng.range(1, 4) {
                        self.sentence();
                        self.out.push(' ');
                    }
                }
            }
            self.out.push_str("\n\n");
        }
    }

    fn code_block(&mut self) {
        let lang = self.rng.pick(&["rust", "ts", "sh", "python", "html", ""]);
        self.out.push_str(&format!("```{lang}\n"));
        for _ in 0..self.rng.range(2, 10) {
            let line = if self.rng.chance(8) {
                self.rng.pick(FAKE_HML_IN_CODE)
            } else {
                self.rng.pick(CODE_LINES)
            };
            self.out.push_str(line);
            self.out.push('\n');
        }
        self.out.push_str("```");
    }

    fn id(&mut self, prefix: &str) -> String {
        self.ids += 1;
        format!("{prefix}-{}", self.ids)
    }

    /// One element (with what nests in it, `depth` deep at most 2).
    fn element(&mut self, depth: u32) {
        let w = self.rng.pick(WORDS);
        match self.rng.range(0, 16) {
            0 | 1 => {
                self.out
                    .push_str(self.rng.pick(&["<thinking>", "<THINKING>", "<Thinking>"]));
                self.sentence();
                if depth < 2 && self.rng.chance(40) {
                    self.out.push(' ');
                    self.element(depth + 1);
                }
                self.out.push_str("</thinking>");
            }
            2 => {
                let title = self
                    .rng
                    .pick(&["title=\"Plan\"", "title='Next steps'", "title=Plan"]);
                self.out.push_str(&format!("<todo {title}>\n"));
                for _ in 0..self.rng.range(2, 6) {
                    let status = self.rng.pick(&["done", "pending", "in_progress", "failed"]);
                    self.out.push_str(&format!("<item status=\"{status}\">"));
                    self.sentence();
                    // A missing `</item>` now and then.
                    if !self.rng.chance(6) {
                        self.out.push_str("</item>");
                    }
                    self.out.push('\n');
                }
                self.out.push_str("</todo>");
            }
            3 => {
                let (v, m) = (self.rng.range(0, 10), 10);
                let form = self.rng.pick(&[
                    "value=\"{v}\" max=\"{m}\"/>",
                    "value={v} max={m} />",
                    "value='{v}' max='{m}'></progress>",
                ]);
                self.out.push_str(&format!(
                    "<progress {}",
                    form.replace("{v}", &v.to_string())
                        .replace("{m}", &m.to_string())
                ));
            }
            4 => {
                let d = self.rng.pick(DOMAINS);
                let href = if self.rng.chance(30) {
                    format!("https://{d}/{w}/")
                } else {
                    format!("\"https://{d}/{w}?q=1&amp;r=2\"")
                };
                self.out
                    .push_str(&format!("<link href={href}>{w} docs</link>"));
            }
            5 => {
                self.out.push_str("<copy label=\"Copy\">");
                if self.rng.chance(50) {
                    self.code_block();
                } else {
                    self.out.push_str("cargo run --release");
                }
                self.out.push_str("</copy>");
            }
            6 => {
                let status = self.rng.pick(&["ok", "error", "timeout"]);
                self.out.push_str(&format!(
                    "<result for=\"e1\" status={status}>exit code 0 &gt; done</result>"
                ));
            }
            7 => self
                .out
                .push_str(&format!("<websearch>{w} streaming parser</websearch>")),
            8 => {
                let cwd = self
                    .rng
                    .pick(&["cwd=\"/tmp\"", "cwd=/tmp", "cwd='/work dir'", "cwd=/"]);
                self.out.push_str(&format!(
                    "<bash {cwd} timeout=30>ls -la | grep '<x>' > out.txt</bash>"
                ));
            }
            9 => self.out.push_str(
                "<ask timeout=\"30000\" default='no' options=\"yes,no\">Shall I go on?</ask>",
            ),
            10 => {
                let id = self.id("p");
                self.out.push_str(&format!(
                    "<hml-prompt id=\"{id}\" type=\"select\" title=\"Pick one\"><data>{{\"options\": [\"a\", \"b <c>\"], \"default\": \"a\"}}</data></hml-prompt>"
                ));
            }
            11 => {
                let query = if self.rng.chance(30) {
                    "the </interaction> tag"
                } else {
                    w
                };
                let id = self.id("i");
                self.out.push_str(&format!(
                    "<interaction>{{\"id\": \"{id}\", \"target\": \"system\", \"method\": \"websearch\", \"args\": {{\"query\": \"{query}\"}}}}</interaction>"
                ));
            }
            12 => self
                .out
                .push_str(&format!("@system(websearch, {{query: \"{w} docs\"}})")),
            13 => {
                let junk = self.rng.pick(&[
                    "</bash>",
                    "<foo>bar</foo>",
                    "<br>",
                    "<!-- a comment -->",
                    "< b",
                    "</item>",
                ]);
                self.out.push_str(junk);
            }
            _ => {
                self.out.push_str("<thinking>");
                self.sentence();
                self.out.push_str("</thinking>");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hml::{ElementKind, Node, parse};

    #[test]
    fn deterministic_sized_and_indexed() {
        let a = generate(7, 60_000);
        assert_eq!(a, generate(7, 60_000));
        assert_ne!(a.text, generate(8, 60_000).text);
        assert!(
            a.text.len() >= 60_000 && a.text.len() < 80_000,
            "{}",
            a.text.len()
        );
        assert!(a.replies.len() >= 3);
        for pair in a.replies.windows(2) {
            assert_eq!(&a.text[pair[0].end..pair[1].start], "\n\n");
        }
        assert_eq!(a.replies.last().map(|r| r.end), Some(a.text.len()));
        assert_eq!(generate(1, 0).replies.len(), 1);
    }

    #[test]
    fn holds_every_executable_element() {
        let c = generate(7, 200_000);
        let mut seen = std::collections::BTreeSet::new();
        fn walk(nodes: &[Node], seen: &mut std::collections::BTreeSet<String>) {
            for n in nodes {
                if let Node::Element(e) = n {
                    seen.insert(e.kind.name().to_owned());
                    walk(&e.children, seen);
                }
            }
        }
        for i in 0..c.replies.len() {
            walk(&parse(c.reply(i)).nodes, &mut seen);
        }
        for kind in [
            ElementKind::Bash,
            ElementKind::Websearch,
            ElementKind::Ask,
            ElementKind::Interaction,
            ElementKind::Todo,
            ElementKind::Progress,
        ] {
            assert!(
                seen.contains(kind.name()),
                "{} missing from {seen:?}",
                kind.name()
            );
        }
    }
}
