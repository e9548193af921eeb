//! Property tests: streaming equals batch for any input and any chunking; compiled frames
//! do not depend on duplication or delivery order.

use hero_shared::frame::{AuthorType, Frame, FrameType, compile_frames, frame_stats};
use hero_shared::hml::{
    Document, OwnedEvent, ParserOptions, StreamParser, TreeBuilder, parse_with,
};
use proptest::prelude::*;
use serde_json::json;

const FRAGMENTS: &[&str] = &[
    "<",
    ">",
    "/",
    "`",
    "``",
    "```",
    "~~~",
    "\n",
    "   ",
    " ",
    "\"",
    "'",
    "\\",
    "=",
    "&amp;",
    "&#60;",
    "abc",
    "é",
    "日本",
    "🚀",
    "<bash>",
    "</bash>",
    "<BASH cwd='/t'>",
    "</bash >",
    "<websearch>",
    "</websearch>",
    "<ask timeout=3>",
    "</ask>",
    "<thinking>",
    "</thinking>",
    "<todo title=\"t\">",
    "<item status=done>",
    "</item>",
    "</todo>",
    "<link href=x>",
    "</link>",
    "<copy>",
    "</copy>",
    "<result for=e1>",
    "</result>",
    "<progress value=1 max=2/>",
    "<progress value=1>",
    "</progress>",
    "<interaction>",
    "</interaction>",
    "{\"a\": \"",
    "\"}",
    "<hml-prompt id=p type=select>",
    "<data>",
    "</data>",
    "<response>",
    "</response>",
    "</hml-prompt>",
    "<div>",
    "Vec<T>",
    "a < b",
    "</ todo>",
    "<!-- c -->",
    "<ask id=e2>",
    "@system(websearch, {q: 'x'})",
];

fn text_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..120).prop_map(|v| v.concat())
}

/// Cut points into `len` bytes, anywhere (also inside UTF-8 sequences).
fn cuts(len: usize, raw: &[usize]) -> Vec<usize> {
    let mut c: Vec<usize> = raw
        .iter()
        .map(|r| if len == 0 { 0 } else { r % (len + 1) })
        .collect();
    c.sort_unstable();
    c
}

fn stream(
    bytes: &[u8],
    cut_points: &[usize],
    opts: ParserOptions,
) -> (Document, Vec<(String, String, String, bool)>) {
    let mut p = StreamParser::with_options(opts);
    let mut tree = TreeBuilder::new();
    let mut completions = Vec::new();
    let mut owned = Vec::new();
    let mut last = 0;
    let mut pieces: Vec<&[u8]> = Vec::new();
    for &c in cut_points {
        pieces.push(&bytes[last..c]);
        last = c;
    }
    pieces.push(&bytes[last..]);
    for piece in pieces {
        p.feed_with(piece, |e| {
            tree.event(e);
            owned.push(e.to_owned());
        });
    }
    p.finish_with(|e| {
        tree.event(e);
        owned.push(e.to_owned());
    });
    for e in owned {
        if let OwnedEvent::Complete {
            id,
            kind,
            content,
            truncated,
            ..
        } = e
        {
            completions.push((id, kind.name().to_owned(), content, truncated));
        }
    }
    (tree.finish(), completions)
}

fn opts(small: bool) -> ParserOptions {
    if small {
        ParserOptions {
            max_element_bytes: 24,
            max_tag_bytes: 20,
            max_depth: 2,
        }
    } else {
        ParserOptions::default()
    }
}

/// A log built from generated operations: messages (some with prompts), edits, hides,
/// answers, compacts, requests and results, versions and their switches, seq 1, 2, 3...
fn log_of(ops: Vec<(u8, usize, bool)>) -> Vec<Frame> {
    let mut frames = Vec::new();
    for (seq, (op, target, flag)) in ops.into_iter().enumerate() {
        let seq = seq as i64 + 1;
        let (ty, targets, payload) = match op {
            0 => (
                FrameType::Message,
                vec![],
                json!({"role": "user", "content": format!("m{seq} <hml-prompt id=p{target}>Q?</hml-prompt>")}),
            ),
            1 => (
                FrameType::Message,
                vec![],
                json!({"role": "agent", "content": format!("a{seq}"), "hidden": flag}),
            ),
            2 => (
                FrameType::Update,
                vec![format!("frame:f{target}")],
                if flag {
                    json!({"hidden": true})
                } else {
                    json!({"content": format!("u{seq}")})
                },
            ),
            3 => (
                FrameType::Update,
                vec![format!("element:p{target}")],
                json!({"answer": format!("ans{seq}")}),
            ),
            4 => (
                FrameType::Compact,
                vec![],
                json!({"content": format!("summary {seq}")}),
            ),
            5 => (
                FrameType::Result,
                vec![format!("agent:{target}")],
                json!({"content": format!("r{seq}")}),
            ),
            6 => (
                FrameType::Request,
                vec![format!("system:fn{target}")],
                json!({"content": format!("q{seq}")}),
            ),
            // A new version of a message (its parent below), and a switch of versions.
            8 => (
                FrameType::Message,
                vec![],
                json!({"role": "user", "content": format!("v{seq}")}),
            ),
            9 => (
                FrameType::Update,
                vec![format!("frame:f{target}")],
                json!({"current": if flag { 1 } else { 2 }}),
            ),
            _ => (
                FrameType::Result,
                vec![format!("element:p{target}")],
                json!({"answer": format!("res{seq}")}),
            ),
        };
        // A request's parent: the next frame (as for a call begun while its reply
        // streamed, stored before the reply), or any frame, before or after. A version's:
        // a frame before it (an edit or a regeneration is made of a message shown, so it
        // is always stored after it).
        let parent_id = match op {
            6 if flag => Some(format!("f{}", seq + 1)),
            6 => Some(format!("f{}", target + 1)),
            8 if seq > 1 => Some(format!("f{}", target as i64 % (seq - 1) + 1)),
            _ => None,
        };
        frames.push(Frame {
            id: format!("f{seq}"),
            session_id: 1,
            seq,
            parent_id,
            target_ids: targets.iter().map(|t| t.parse().unwrap()).collect(),
            timestamp: String::new(),
            frame_type: ty,
            author_type: AuthorType::User,
            author_id: None,
            payload,
        });
    }
    frames
}

proptest! {
    // PROPTEST_CASES=N for a longer run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        .. ProptestConfig::default()
    })]

    #[test]
    fn streaming_equals_batch(text in text_strategy(), raw in prop::collection::vec(any::<usize>(), 0..12), small in any::<bool>()) {
        let o = opts(small);
        let batch = parse_with(&text, o);
        let (whole, whole_completions) = stream(text.as_bytes(), &[], o);
        prop_assert_eq!(&whole, &batch);
        let (chunked, chunked_completions) = stream(text.as_bytes(), &cuts(text.len(), &raw), o);
        prop_assert_eq!(&chunked, &batch);
        prop_assert_eq!(chunked_completions, whole_completions);
    }

    #[test]
    fn byte_at_a_time_equals_batch(text in text_strategy(), small in any::<bool>()) {
        let o = opts(small);
        let all: Vec<usize> = (1..text.len()).collect();
        prop_assert_eq!(stream(text.as_bytes(), &all, o).0, parse_with(&text, o));
    }

    #[test]
    fn any_bytes_any_chunks(bytes in prop::collection::vec(any::<u8>(), 0..200), raw in prop::collection::vec(any::<usize>(), 0..12)) {
        let o = ParserOptions::default();
        let (whole, wc) = stream(&bytes, &[], o);
        let (chunked, cc) = stream(&bytes, &cuts(bytes.len(), &raw), o);
        prop_assert_eq!(&chunked, &whole);
        prop_assert_eq!(cc, wc);
        prop_assert_eq!(whole, parse_with(&String::from_utf8_lossy(&bytes), o));
    }

    #[test]
    fn compile_ignores_duplication_and_delivery_order(
        ops in prop::collection::vec((0u8..10, 0usize..8, any::<bool>()), 1..24),
        dups in prop::collection::vec(any::<usize>(), 0..24),
        perm in any::<u64>(),
    ) {
        let frames = log_of(ops);
        let expected = compile_frames(&frames);
        let stats = frame_stats(&frames);
        let mut shuffled = frames.clone();
        for d in &dups {
            shuffled.push(frames[d % frames.len()].clone());
        }
        // A deterministic shuffle from `perm`.
        let mut state = perm | 1;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            shuffled.swap(i, (state % (i as u64 + 1)) as usize);
        }
        prop_assert_eq!(compile_frames(&shuffled), expected);
        prop_assert_eq!(frame_stats(&shuffled), stats);
    }

    #[test]
    fn a_view_fed_frame_by_frame_equals_the_compiled_log(
        ops in prop::collection::vec((0u8..10, 0usize..8, any::<bool>()), 1..24),
        start in 0usize..24,
    ) {
        use hero_shared::wire::{Applied, CompiledView};
        let frames = log_of(ops);
        let view_of = |upto: usize| CompiledView {
            session_id: 1,
            messages: compile_frames(&frames[..upto]),
            stats: frame_stats(&frames[..upto]),
            earlier_before: None,
        };
        let start = start % (frames.len() + 1);
        let mut view = view_of(start);
        for (i, f) in frames.iter().enumerate().skip(start) {
            match view.apply(f) {
                Applied::Added => {}
                Applied::Recompile => view = view_of(i + 1),
                Applied::AlreadyIn => prop_assert!(false, "frame {} was new", f.seq),
            }
            // A frame seen again changes nothing.
            let before = view.clone();
            prop_assert_eq!(view.apply(f), Applied::AlreadyIn);
            prop_assert_eq!(&view, &before);
        }
        prop_assert_eq!(view, view_of(frames.len()));
    }
}

/// A reply of raw elements (bodies up to a few KiB, one past a small bound) and prose,
/// for the element events' invariants.
fn element_reply() -> impl Strategy<Value = (String, Vec<usize>)> {
    let body = prop_oneof![
        "[a-z ]{0,40}",
        (500usize..3000).prop_map(|n| "x".repeat(n)),
        (20_000usize..40_000).prop_map(|n| "y".repeat(n)),
    ];
    let kinds = prop::sample::select(vec!["bash", "thinking", "websearch", "copy"]);
    (
        prop::collection::vec((kinds, body, "[a-z ]{0,8}"), 1..5),
        prop::collection::vec(1usize..700, 1..60),
    )
        .prop_map(|(parts, cuts)| {
            let mut text = String::new();
            for (kind, body, prose) in parts {
                text.push_str(&format!("{prose}<{kind}>{body}</{kind}>"));
            }
            // One left open: it completes truncated at the end.
            text.push_str("<thinking>cut");
            (text, cuts)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Over any chunking: each element starts once and completes once; each update's
    /// `content` is its deltas so far, concatenated, and the last is the element's content;
    /// an element's `content` bytes stay under 10 × its size + 512 KiB; `duration` is the
    /// clock's difference; one that outgrew the bound completes truncated with its limit.
    #[test]
    fn element_updates_carry_the_body_and_stay_bounded((text, cuts) in element_reply()) {
        use hero_shared::wire::{ElementEvents, SseEvent};
        use std::collections::HashMap;
        let mut parser = StreamParser::with_options(ParserOptions { max_element_bytes: 30_000, ..Default::default() });
        let mut events = ElementEvents::default();
        let mut out = Vec::new();
        let mut at = 0;
        let mut clock = 0u64;
        for cut in cuts.iter().cycle() {
            if at >= text.len() {
                break;
            }
            let mut end = (at + cut).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            clock += 7;
            parser.feed_str_with(&text[at..end], |ev| events.take("m", &ev, || clock, |e| out.push(e)));
            at = end;
        }
        clock += 7;
        parser.finish_with(|ev| events.take("m", &ev, || clock, |e| out.push(e)));
        #[derive(Default)]
        struct Seen { starts: usize, completes: usize, deltas: String, content_bytes: usize }
        let mut seen: HashMap<String, Seen> = HashMap::new();
        for e in &out {
            match e {
                SseEvent::ElementStart(s) => seen.entry(s.id.clone()).or_default().starts += 1,
                SseEvent::ElementUpdate(u) => {
                    let s = seen.entry(u.id.clone()).or_default();
                    prop_assert_eq!(s.starts, 1);
                    s.deltas.push_str(&u.delta);
                    let content = u.content.as_deref().unwrap_or_default();
                    prop_assert_eq!(content, s.deltas.as_str());
                    s.content_bytes += content.len();
                }
                SseEvent::ElementComplete(c) => {
                    let s = seen.entry(c.id.clone()).or_default();
                    s.completes += 1;
                    prop_assert_eq!(&c.content, &s.deltas);
                    prop_assert!(c.duration.is_some_and(|d| d <= clock && d % 7 == 0));
                    if let Some(limit) = c.limit {
                        prop_assert!(c.truncated && !c.executable && limit == 30_000);
                    }
                    let bound = 10 * c.content.len() + (512 << 10);
                    prop_assert!(s.content_bytes < bound, "{} >= {}", s.content_bytes, bound);
                }
                other => prop_assert!(false, "no element event: {:?}", other),
            }
        }
        prop_assert!(!seen.is_empty());
        for (id, s) in &seen {
            prop_assert_eq!((s.starts, s.completes), (1, 1), "{}", id);
        }
    }
}
