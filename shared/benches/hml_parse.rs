//! Parser throughput over a corpus: whole, and fed in 16- and 4-byte chunks.
//!
//! `HERO_BENCH_CORPUS=FILE cargo bench -p hero-shared` measures FILE (the figures in
//! docs/perf.md are of the team's 10 MB reference corpus); without it, 10 MB of the
//! project's own generator ([`hero_shared::corpus`]) are measured.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hero_shared::hml::{Event, StreamParser, parse};

fn corpus() -> Vec<u8> {
    match std::env::var_os("HERO_BENCH_CORPUS") {
        Some(path) => std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "cannot read HERO_BENCH_CORPUS {}: {e}",
                path.to_string_lossy()
            )
        }),
        None => hero_shared::corpus::generate(20251122, 10_000_000)
            .text
            .into_bytes(),
    }
}

fn feed(data: &[u8], chunk: usize) -> u64 {
    let mut parser = StreamParser::new();
    let mut elements = 0u64;
    let mut count = |e: Event<'_>| {
        if let Event::Complete { .. } | Event::Error { .. } = e {
            elements += 1;
        }
    };
    for piece in data.chunks(chunk) {
        parser.feed_with(piece, &mut count);
    }
    parser.finish_with(&mut count);
    elements
}

fn bench(c: &mut Criterion) {
    let data = corpus();
    let mut g = c.benchmark_group("hml_stream");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(10);
    g.bench_function("whole", |b| b.iter(|| feed(&data, data.len())));
    g.bench_function("chunks_16", |b| b.iter(|| feed(&data, 16)));
    g.bench_function("chunks_4", |b| b.iter(|| feed(&data, 4)));
    let text = String::from_utf8_lossy(&data).into_owned();
    g.bench_function("parse_tree", |b| b.iter(|| parse(&text).nodes.len()));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
