//! Parser behaviour, one case per rule, each also checked fed one byte at a time.

use expect_test::{Expect, expect};

use super::doc::TreeBuilder;
use super::*;

fn render(doc: &Document) -> String {
    fn node(out: &mut String, n: &Node, depth: usize) {
        let pad = "  ".repeat(depth);
        match n {
            Node::Text(t) => out.push_str(&format!("{pad}{t:?}\n")),
            Node::Element(e) => {
                let attrs: Vec<String> = e
                    .attributes
                    .iter()
                    .map(|(k, v)| format!(" {k}={v:?}"))
                    .collect();
                out.push_str(&format!("{pad}<{}#{}{}>", e.kind, e.id, attrs.concat()));
                if e.truncated {
                    out.push_str(" truncated");
                }
                if let Some(err) = &e.error {
                    out.push_str(&format!(" error={err:?}"));
                }
                let simple = match e.children.as_slice() {
                    [] => true,
                    [Node::Text(t)] => *t == e.content,
                    _ => false,
                };
                if simple {
                    out.push_str(&format!(" {:?}", e.content));
                }
                out.push('\n');
                if !simple {
                    for c in &e.children {
                        node(out, c, depth + 1);
                    }
                }
            }
        }
    }
    let mut out = String::new();
    for n in &doc.nodes {
        node(&mut out, n, 0);
    }
    for d in &doc.diagnostics {
        out.push_str(&format!("! {}: {:?}\n", d.offset, d.kind));
    }
    out
}

fn parse_chunked(text: &[u8], size: usize, opts: ParserOptions) -> Document {
    let mut p = StreamParser::with_options(opts);
    let mut tree = TreeBuilder::new();
    for c in text.chunks(size.max(1)) {
        p.feed_with(c, |e| tree.event(e));
    }
    p.finish_with(|e| tree.event(e));
    tree.finish()
}

fn check_with(text: &str, opts: ParserOptions, expect: Expect) {
    let doc = parse_with(text, opts);
    for size in [1, 2, 3, 7] {
        assert_eq!(
            parse_chunked(text.as_bytes(), size, opts),
            doc,
            "chunks of {size} differ for {text:?}"
        );
    }
    expect.assert_eq(&render(&doc));
}

fn check(text: &str, expect: Expect) {
    check_with(text, ParserOptions::default(), expect)
}

#[test]
fn every_element_with_its_attributes() {
    check(
        r#"<websearch>rust streaming parser</websearch><bash cwd="/tmp" timeout=5>ls</bash><ask timeout="30" default='no' options="yes,no">Go on?</ask>"#,
        expect![[r#"
            <websearch#e1> "rust streaming parser"
            <bash#e2 cwd="/tmp" timeout="5"> "ls"
            <ask#e3 timeout="30" default="no" options="yes,no"> "Go on?"
        "#]],
    );
    check(
        r#"<thinking>hmm</thinking><todo title="Plan"><item status="done">a</item><item status=pending>b</item></todo><progress value="3" max="10" status="running"/><link href="https://a.b/?x=1&amp;y=2">docs</link><copy label="Copy">cargo run</copy><result for="e2" status="ok">done</result>"#,
        expect![[r#"
            <thinking#e1> "hmm"
            <todo#e2 title="Plan">
              <item#e3 status="done"> "a"
              <item#e4 status="pending"> "b"
            <progress#e5 value="3" max="10" status="running"> ""
            <link#e6 href="https://a.b/?x=1&y=2"> "docs"
            <copy#e7 label="Copy"> "cargo run"
            <result#e8 for="e2" status="ok"> "done"
        "#]],
    );
    check(
        r#"Pick: <hml-prompt id="fav" type="select">Colour?<data>["red","blue"]</data></hml-prompt> and <hml-prompt id=q2 answered>Name?<response>Ann &lt;3</response></hml-prompt>"#,
        expect![[r#"
            "Pick: "
            <hml-prompt#fav id="fav" type="select">
              "Colour?"
              <data#e2> "[\"red\",\"blue\"]"
            " and "
            <hml-prompt#q2 id="q2" answered="">
              "Name?"
              <response#e4> "Ann &lt;3"
        "#]],
    );
    check(
        "<interaction>{\"target_id\": \"@system\", \"note\": \"a </interaction> in a string\"}</interaction>after",
        expect![[r#"
            <interaction#e1> "{\"target_id\": \"@system\", \"note\": \"a </interaction> in a string\"}"
            "after"
        "#]],
    );
}

#[test]
fn what_is_not_hml_stays_text() {
    check(
        "<div>Vec<T> and a < b, x<y && y>z, <br> <!-- c --> < thinking> </ todo> <thinkingx>",
        expect![[r#"
            "<div>Vec<T> and a < b, x<y && y>z, <br> <!-- c --> < thinking> </ todo> <thinkingx>"
        "#]],
    );
    check(
        "use <<op>> and <3",
        expect![[r#"
        "use <<op>> and <3"
    "#]],
    );
}

#[test]
fn code_is_never_markup() {
    check(
        "Write `<bash>rm -rf /</bash>` to run.\n```sh\n<bash>echo hi</bash>\n```\nafter <thinking>x</thinking>",
        expect![[r#"
            "Write `<bash>rm -rf /</bash>` to run.\n```sh\n<bash>echo hi</bash>\n```\nafter "
            <thinking#e1> "x"
        "#]],
    );
    // A code span of two backticks is not closed by one; an unclosed span ends with its line.
    check(
        "``a ` <bash>x</bash>`` then ` open <ask>no</ask>\n<ask>yes</ask>",
        expect![[r#"
            "``a ` <bash>x</bash>`` then ` open <ask>no</ask>\n"
            <ask#e1> "yes"
        "#]],
    );
    // Tilde fences, indented fences, a longer closing run; a shorter run does not close.
    check(
        "~~~~\n<ask>a</ask>\n~~~\n<ask>b</ask>\n   ~~~~~\n<ask>c</ask>",
        expect![[r#"
            "~~~~\n<ask>a</ask>\n~~~\n<ask>b</ask>\n   ~~~~~\n"
            <ask#e1> "c"
        "#]],
    );
    // Four spaces in: not a fence. A fence right after a start tag, closed before a close tag.
    check(
        "    ```\n<copy>```rust\nlet v: Vec<u8> = x << 2; </copy>\n```</copy> ok",
        expect![[r#"
            "    ```\n"
            <copy#e1> "```rust\nlet v: Vec<u8> = x << 2; </copy>\n```"
            " ok"
        "#]],
    );
}

#[test]
fn raw_bodies_are_commands_not_markup() {
    check(
        "<bash>echo a > b && cat <<EOF | grep '<thinking>'\nx</BASH >tail",
        expect![[r#"
            <bash#e1> "echo a > b && cat <<EOF | grep '<thinking>'\nx"
            "tail"
        "#]],
    );
    check(
        "<websearch>a</websearc b</websearch><ask>is `x` </as ok?</ask>",
        expect![[r#"
            <websearch#e1> "a</websearc b"
            <ask#e2> "is `x` </as ok?"
        "#]],
    );
    // Escaped quotes and a newline inside a string (which ends it, for recovery).
    check(
        "<interaction>{\"a\": \"x\\\"</interaction>\"}</interaction><interaction>{\"b\": \"unclosed\n}</interaction>.",
        expect![[r#"
            <interaction#e1> "{\"a\": \"x\\\"</interaction>\"}"
            <interaction#e2> "{\"b\": \"unclosed\n}"
            "."
        "#]],
    );
}

#[test]
fn nesting_rules() {
    check(
        "<thinking>plan <todo><item status=done>a <link href=x>l</link><item>b</todo> then <bash>ls</bash></thinking>",
        expect![[r#"
            <thinking#e1>
              "plan "
              <todo#e2>
                <item#e3 status="done">
                  "a "
                  <link#e4 href="x"> "l"
                <item#e5> "b"
              " then "
              <bash#e6> "ls"
            ! 62: ImplicitlyClosed { id: "e3" }
            ! 69: ImplicitlyClosed { id: "e5" }
        "#]],
    );
    check(
        "<item>x</item> <data>[]</data> <response>r</response></thinking></progress>",
        expect![[r#"
            "x [] r"
            ! 0: Misplaced { element: "item" }
            ! 7: StrayCloseTag { element: "item" }
            ! 15: Misplaced { element: "data" }
            ! 23: StrayCloseTag { element: "data" }
            ! 31: Misplaced { element: "response" }
            ! 42: StrayCloseTag { element: "response" }
            ! 53: StrayCloseTag { element: "thinking" }
            ! 64: StrayCloseTag { element: "progress" }
        "#]],
    );
    check(
        "<THINKING>upper</Thinking><progress value=1 max=2>label</progress><progress value=1 max=2/>",
        expect![[r#"
            <thinking#e1> "upper"
            <progress#e2 value="1" max="2"> ""
            "label"
            <progress#e3 value="1" max="2/"> ""
            ! 55: StrayCloseTag { element: "progress" }
        "#]],
    );
}

#[test]
fn unquoted_value_keeps_its_trailing_slash() {
    // As in HTML: an unquoted value runs to whitespace, so `/>` right after it is the value's
    // `/` and the tag's `>`; only `/>` after whitespace or a quoted value closes the element.
    check(
        r#"<link href=https://x.com/>docs</link> <bash cwd=/>ls</bash> <link href="https://y.org"/>after <bash cwd=/tmp />"#,
        expect![[r#"
            <link#e1 href="https://x.com/"> "docs"
            " "
            <bash#e2 cwd="/"> "ls"
            " "
            <link#e3 href="https://y.org"> ""
            "after "
            <bash#e4 cwd="/tmp"> ""
        "#]],
    );
}

#[test]
fn truncation() {
    check(
        "<thinking>still <bash cwd=/tmp>rm -r",
        expect![[r#"
            <thinking#e1> truncated
              "still "
              <bash#e2 cwd="/tmp"> truncated "rm -r"
            ! 36: Truncated { id: "e2" }
            ! 36: Truncated { id: "e1" }
        "#]],
    );
    check(
        "text <bash cwd=\"/tm",
        expect![[r#"
            "text <bash cwd=\"/tm"
            ! 5: UnterminatedTag { element: "bash" }
        "#]],
    );
    check(
        "<interaction>{\"a\": 1} </interac",
        expect![[r#"
        <interaction#e1> truncated "{\"a\": 1} </interac"
        ! 31: Truncated { id: "e1" }
    "#]],
    );
    check(
        "ab <",
        expect![[r#"
        "ab <"
    "#]],
    );
}

#[test]
fn ids_are_deterministic_and_unique() {
    check(
        "<ask id=q>a</ask><ask id=q>b</ask><ask id=e3>c</ask><ask id=e9>d</ask><ask>e</ask><ask>f</ask><ask>g</ask><ask>h</ask><ask>i</ask>",
        expect![[r#"
            <ask#q id="q"> "a"
            <ask#q-2 id="q"> "b"
            <ask#e3-3 id="e3"> "c"
            <ask#e9 id="e9"> "d"
            <ask#e5> "e"
            <ask#e6> "f"
            <ask#e7> "g"
            <ask#e8> "h"
            <ask#e9-9> "i"
        "#]],
    );
}

#[test]
fn bounded_memory() {
    let opts = ParserOptions {
        max_element_bytes: 8,
        ..ParserOptions::default()
    };
    check_with(
        "<thinking>0123456789<ask>x</ask></thinking>|<bash>echo 0123456789 </bash> ok <ask>1234</ask><todo><item>12345678</item></todo>",
        opts,
        expect![[r#"
            <thinking#e1> error=TooLarge { limit: 8 } ""
            "89"
            <ask#e2> "x"
            "|"
            <bash#e3> error=TooLarge { limit: 8 } ""
            " ok "
            <ask#e4> "1234"
            <todo#e5> error=TooLarge { limit: 8 } ""
            "345678"
            ! 0: TooLarge { id: "e1", limit: 8 }
            ! 32: StrayCloseTag { element: "thinking" }
            ! 44: TooLarge { id: "e3", limit: 8 }
            ! 98: TooLarge { id: "e6", limit: 8 }
            ! 92: TooLarge { id: "e5", limit: 8 }
            ! 112: StrayCloseTag { element: "item" }
            ! 119: StrayCloseTag { element: "todo" }
        "#]],
    );
    let deep = ParserOptions {
        max_depth: 2,
        ..ParserOptions::default()
    };
    check_with(
        "<thinking><todo><item>x</item><thinking>y</thinking></todo></thinking>",
        deep,
        expect![[r#"
        <thinking#e1>
          <todo#e2> "<item>x<thinking>y"
        ! 16: TooDeep { element: "item", limit: 2 }
        ! 23: StrayCloseTag { element: "item" }
        ! 30: TooDeep { element: "thinking", limit: 2 }
        ! 41: ImplicitlyClosed { id: "e2" }
        ! 52: StrayCloseTag { element: "todo" }
        ! 59: StrayCloseTag { element: "thinking" }
    "#]],
    );
    let tag = ParserOptions {
        max_tag_bytes: 16,
        ..ParserOptions::default()
    };
    check_with(
        "<bash a=\"0123456789abcdef\">x</bash>",
        tag,
        expect![[r#"
        "<bash a=\"0123456789abcdef\">x"
        ! 0: UnterminatedTag { element: "bash" }
        ! 28: StrayCloseTag { element: "bash" }
    "#]],
    );
}

#[test]
fn utf8_cut_anywhere_and_repaired() {
    check(
        "é<ask>日本語 🚀</ask>",
        expect![[r#"
        "é"
        <ask#e1> "日本語 🚀"
    "#]],
    );
    let bad = b"a\xff\xe2\x82<ask>\xf0\x9f\x9a\x80\xf0\x80</ask>\xe2";
    let doc = parse_chunked(bad, 1000, ParserOptions::default());
    for size in 1..5 {
        assert_eq!(parse_chunked(bad, size, ParserOptions::default()), doc);
    }
    expect![[r#"
        "a��"
        <ask#e1> "🚀��"
        "�"
    "#]]
    .assert_eq(&render(&doc));
}

#[test]
fn events_for_the_sse_pipeline() {
    let mut p = StreamParser::new();
    let mut out = Vec::new();
    for chunk in [
        "Hi <thin",
        "king>hmm <bash cwd=/t",
        "mp>ls -",
        "la</bash> done</thinking>!",
        "<ask>Go?",
    ] {
        p.feed(chunk.as_bytes(), &mut out);
    }
    p.finish(&mut out);
    let lines: Vec<String> = out
        .iter()
        .map(|e| match e {
            OwnedEvent::Text { text, code } => format!("text {text:?} code={code}"),
            OwnedEvent::Start {
                id,
                kind,
                parent,
                attributes,
                offset,
            } => format!("start {kind}#{id} parent={parent:?} {attributes:?} @{offset}"),
            OwnedEvent::Update { id, delta, .. } => format!("update {id} {delta:?}"),
            OwnedEvent::Complete {
                id,
                content,
                truncated,
                ..
            } => {
                format!(
                    "complete {id} {content:?} truncated={truncated} run={}",
                    e.is_executable_completion()
                )
            }
            OwnedEvent::Error { id, .. } => format!("error {id}"),
            OwnedEvent::Diagnostic(d) => format!("diagnostic {:?}", d.kind),
        })
        .collect();
    expect![[r#"
        text "Hi " code=false
        start thinking#e1 parent=None [] @3
        update e1 "hmm "
        start bash#e2 parent=Some("e1") [("cwd", "/tmp")] @17
        update e2 "ls -la"
        complete e2 "ls -la" truncated=false run=true
        update e1 " done"
        complete e1 "hmm <bash cwd=/tmp>ls -la</bash> done" truncated=false run=false
        text "!" code=false
        start ask#e3 parent=None [] @62
        update e3 "Go?"
        complete e3 "Go?" truncated=true run=false
        diagnostic Truncated { id: "e3" }"#]]
    .assert_eq(&lines.join("\n"));
}

#[test]
fn code_flag_marks_quoted_text() {
    let mut out = Vec::new();
    let mut p = StreamParser::new();
    p.feed(b"a `b` c\n```\nd\n```\ne", &mut out);
    p.finish(&mut out);
    expect![[r#"
        [
            Text {
                text: "a ",
                code: false,
            },
            Text {
                text: "`b`",
                code: true,
            },
            Text {
                text: " c\n",
                code: false,
            },
            Text {
                text: "```\nd\n```",
                code: true,
            },
            Text {
                text: "\ne",
                code: false,
            },
        ]
    "#]]
    .assert_debug_eq(&out);
}

#[test]
fn documents_and_events_round_trip() {
    let doc =
        parse("a <todo title=T><item status=done>x</item></todo> <hml-prompt id=p>Q</hml-prompt>");
    let json = serde_json::to_string(&doc).unwrap();
    assert_eq!(serde_json::from_str::<Document>(&json).unwrap(), doc);
    assert!(json.contains(r#""kind":"hml-prompt""#), "{json}");
    let mut p = StreamParser::new();
    let mut out = Vec::new();
    p.feed(b"<bash>ls</bash>", &mut out);
    p.finish(&mut out);
    for e in &out {
        assert_eq!(&e.as_event().to_owned(), e);
    }
}
