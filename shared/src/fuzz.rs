//! Fuzz entry points, shared by the cargo-fuzz targets in `fuzz/` and by unit tests
//! (cargo-fuzz runs them with sanitizers; these bodies also build and run in the normal tests).
//!
//! Each checks invariants rather than only "does not panic": streaming in the chunking
//! the input's first byte picks equals the batch parse, every started element ends once,
//! and the detector never reports a call from a truncated block.

use crate::hml::{Event, ParserOptions, StreamParser, TreeBuilder, parse_with};
use crate::interaction::{CallSource, detect};

/// Parser target: `data[0]` picks the chunk size and the element bound, the rest is text.
pub fn fuzz_parse(data: &[u8]) {
    let Some((&knob, bytes)) = data.split_first() else {
        return;
    };
    let chunk = (knob as usize % 17) + 1;
    let opts = if knob & 0x80 != 0 {
        ParserOptions {
            max_element_bytes: 32 + (knob as usize & 0x3f),
            max_tag_bytes: 24,
            max_depth: 1 + (knob as usize & 3),
        }
    } else {
        ParserOptions::default()
    };
    let mut parser = StreamParser::with_options(opts);
    let mut tree = TreeBuilder::new();
    let mut open: Vec<String> = Vec::new();
    let mut check = |e: Event<'_>| {
        match e {
            Event::Start { id, .. } => {
                assert!(
                    !open.iter().any(|o| o == id),
                    "element id {id} reused while open"
                );
                open.push(id.to_owned());
            }
            Event::Complete { id, .. } | Event::Error { id, .. } => {
                assert_eq!(
                    open.pop().as_deref(),
                    Some(id),
                    "elements end innermost first"
                );
            }
            _ => {}
        }
        tree.event(e);
    };
    for piece in bytes.chunks(chunk) {
        parser.feed_with(piece, &mut check);
    }
    parser.finish_with(&mut check);
    assert!(open.is_empty(), "every started element ends");
    let streamed = tree.finish();
    let text = String::from_utf8_lossy(bytes);
    assert_eq!(
        streamed,
        parse_with(&text, opts),
        "streaming differs from batch"
    );
}

/// Detector target: any text; a call never comes from a truncated or malformed block.
pub fn fuzz_detect(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let det = detect(&text);
    let doc = crate::hml::parse(&text);
    for call in &det.calls {
        assert!(!call.target_id.is_empty() && !call.target_property.is_empty());
        assert!(call.payload.get("sender_id").is_none());
        if let CallSource::Block { element_id } = &call.source {
            let el = doc
                .find(element_id)
                .expect("a block call names a parsed element");
            assert!(el.is_runnable(), "a call from an element that may not run");
        }
    }
}

/// Renderer target: any text renders to inert HTML, as markdown ([`crate::markdown::inert`])
/// and as a whole reply with its elements ([`crate::html::inert`]), also when cut where a
/// stream may cut it.
pub fn fuzz_markdown(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let check = |t: &str| {
        for part in crate::markdown::render(t) {
            if let crate::markdown::MdPart::Html(h) = part
                && let Err(e) = crate::markdown::inert(&h)
            {
                panic!("live markup ({e}) from {t:?}: {h}");
            }
        }
    };
    // The whole conversation renderer too: the text as a stored reply, and as the blocks of
    // one still streaming.
    let check_all = |t: &str| {
        check(t);
        let doc = crate::hml::parse(t);
        for live in [false, true] {
            let place = crate::html::Place {
                live,
                message_id: (!live).then_some("m"),
                calls: &[],
            };
            let h = crate::html::nodes_html(&doc.nodes, place);
            if let Err(e) = crate::html::inert(&h) {
                panic!("live markup ({e}) from {t:?}: {h}");
            }
        }
    };
    check_all(&text);
    if let Some(cut) = text.char_indices().map(|(i, _)| i).nth(text.len() / 2) {
        check_all(&text[..cut]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEEDS: &[&[u8]] = &[
        b"",
        b"\x05<thinking>a <bash cwd=/tmp>ls</bash> `<ask>` b</thinking>",
        b"\x81<todo><item status=done>aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa<item>b</todo>",
        b"\x02<interaction>{\"target_id\":\"@system\",\"target_property\":\"x\",\"sender_id\":1,\"payload\":{\"sender_id\":2}}</interaction>",
        b"\x03```\n<bash>no</bash>\n```\n@system(websearch, {q: [1, {a: 'b'}]}) \xff\xfe\xf0\x9f",
        b"[x](javascript:alert(1)) <img src=x onerror=alert(1)> ![a](https://e.com/?l=1) | a |\n|:-:|\n| <b> |",
        b"\x90<bash a=\"0123456789012345678901234567890\">x</bash><hml-prompt id=p><data>[\"</data>\"]</data><response>r",
    ];

    #[test]
    fn seeds_hold_the_invariants() {
        for seed in SEEDS {
            fuzz_parse(seed);
            fuzz_detect(seed);
            fuzz_markdown(seed);
        }
    }
}
