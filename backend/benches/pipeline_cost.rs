//! What one token costs in the provider-to-SSE pipeline (SSE decoding, the Anthropic
//! decoder, the HML parser, the SSE event and its bytes), warm on one thread, then with 1 to
//! 3,000 pipelines taken in turn, one token each per round, as a server meets them (each
//! stream's state cold when its next token comes). Prints figures; asserts none.
//!
//! `cargo bench -p hero-backend --features test-support --bench pipeline_cost`

use futures::{FutureExt, StreamExt};
use hero_backend::providers::Delta;
use hero_backend::test_support::anthropic_deltas;
use hero_shared::hml::StreamParser;
use hero_shared::wire::{ElementEvents, SseEvent, TextData};

const EVENT: &[u8] = b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word\"}}\n\n";
const MESSAGE_ID: &str = "0193a0b1-7c2d-7e3f-8a9b-0c1d2e3f4a5b";

/// One text delta through the parser into SSE bytes; returns the bytes written.
fn to_sse(parser: &mut StreamParser, text: &str, buf: &mut Vec<u8>) -> usize {
    let mut events = Vec::new();
    parser.feed_str_with(text, |ev| {
        if let Some(e) = SseEvent::from_parser_event(MESSAGE_ID, &ev, None) {
            events.push(e);
        }
    });
    buf.reserve(4096);
    for e in events {
        let _ = e.write_sse(&mut *buf);
    }
    std::hint::black_box(std::mem::take(buf)).len()
}

fn warm() {
    const N: usize = 200_000;
    let chunks = || futures::stream::iter((0..N).map(|_| Ok::<_, std::io::Error>(EVENT)));
    let t = std::time::Instant::now();
    let mut events = sseer::EventStream::new(chunks());
    let mut n = 0;
    while let Some(Some(Ok(_))) = events.next().now_or_never() {
        n += 1;
    }
    let sse = t.elapsed();
    assert_eq!(n, N, "every event decoded");
    let t = std::time::Instant::now();
    let mut deltas = anthropic_deltas(chunks());
    let mut parser = StreamParser::new();
    let (mut buf, mut out) = (Vec::new(), 0);
    while let Some(Some(Ok(Delta::Text(text)))) = deltas.next().now_or_never() {
        out += to_sse(&mut parser, &text, &mut buf);
    }
    let all = t.elapsed();
    assert!(out > 0, "the pipeline wrote SSE");
    println!(
        "warm, per token: sse decode {:.2} µs; decode + anthropic + hml + event + write {:.2} µs",
        sse.as_secs_f64() * 1e6 / N as f64,
        all.as_secs_f64() * 1e6 / N as f64
    );
}

/// One text delta through the parser into SSE bytes as replies make them now: the `text`
/// event is the chunk itself, element events come through [`ElementEvents`] (`content`,
/// the body so far, and `duration`).
fn to_sse_now(
    parser: &mut StreamParser,
    events: &mut ElementEvents,
    began: std::time::Instant,
    text: &str,
    buf: &mut Vec<u8>,
) -> usize {
    let mut out = vec![SseEvent::Text(TextData {
        message_id: MESSAGE_ID.to_owned(),
        text: text.to_owned(),
    })];
    let now = || began.elapsed().as_millis() as u64;
    parser.feed_str_with(text, |ev| {
        events.take(MESSAGE_ID, &ev, now, |e| out.push(e))
    });
    buf.reserve(4096);
    for e in out {
        let _ = e.write_sse(&mut *buf);
    }
    std::hint::black_box(std::mem::take(buf)).len()
}

/// The parser, its events and their bytes, per token, as before `content` and `duration`
/// (`from_parser_event`, prose as the parser's `text`) and as now, for prose and for tokens
/// inside an element, side by side.
fn side_by_side() {
    const N: usize = 200_000;
    for (label, open) in [("prose", ""), ("inside an element", "<thinking>")] {
        let mut parser = StreamParser::new();
        let mut buf = Vec::new();
        to_sse(&mut parser, open, &mut buf);
        let t = std::time::Instant::now();
        for _ in 0..N {
            to_sse(&mut parser, "word ", &mut buf);
        }
        let before = t.elapsed();
        let mut parser = StreamParser::new();
        let mut events = ElementEvents::default();
        let began = std::time::Instant::now();
        to_sse_now(&mut parser, &mut events, began, open, &mut buf);
        let t = std::time::Instant::now();
        for _ in 0..N {
            to_sse_now(&mut parser, &mut events, began, "word ", &mut buf);
        }
        let now = t.elapsed();
        println!(
            "{label}, per token, parser + events + write: before {:.3} µs, now {:.3} µs ({:.2}×)",
            before.as_secs_f64() * 1e6 / N as f64,
            now.as_secs_f64() * 1e6 / N as f64,
            now.as_secs_f64() / before.as_secs_f64()
        );
    }
}

fn interleaved() {
    for n in [1usize, 100, 1000, 3000] {
        let rounds = 300_000 / n;
        let mut pipes: Vec<_> = (0..n)
            .map(|_| {
                let (tx, rx) =
                    futures::channel::mpsc::unbounded::<Result<&'static [u8], std::io::Error>>();
                (
                    tx,
                    anthropic_deltas(rx),
                    StreamParser::new(),
                    Vec::<u8>::new(),
                )
            })
            .collect();
        let mut out = 0usize;
        let t = std::time::Instant::now();
        for _ in 0..rounds {
            for (tx, deltas, parser, buf) in pipes.iter_mut() {
                if tx.unbounded_send(Ok(EVENT)).is_err() {
                    panic!("the pipeline hung up");
                }
                let Some(Some(Ok(Delta::Text(text)))) = deltas.next().now_or_never() else {
                    panic!("no delta for a whole event");
                };
                out += to_sse(parser, &text, buf);
            }
        }
        let el = t.elapsed();
        assert!(out > 0, "the pipeline wrote SSE");
        println!(
            "{n} streams in turn: {:.2} µs per token",
            el.as_secs_f64() * 1e6 / (rounds * n) as f64
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing to run quickly.
    if !std::env::args().any(|a| a == "--bench") {
        println!("pipeline_cost: run with `cargo bench` to measure");
        return;
    }
    warm();
    side_by_side();
    interleaved();
}
