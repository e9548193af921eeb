//! Parser throughput over the reference corpus (shared/bench/README.md): whole, and fed
//! in 16- and 4-byte chunks.
//!
//! The corpus is generated once into `target/bench/corpus-10MB.hml` by
//! `gen_hml_corpus.py --seed 20251122 --size 10000000 --exact`. The generator is
//! `$HERO_BENCH_GEN`, else the `shared/bench/gen_hml_corpus.py` found walking up from
//! the workspace root.

use std::path::{Path, PathBuf};
use std::process::Command;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hero_shared::hml::{Event, StreamParser, parse};

fn generator(workspace: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("HERO_BENCH_GEN") {
        return PathBuf::from(p);
    }
    for dir in workspace.ancestors() {
        let candidate = dir.join("shared/bench/gen_hml_corpus.py");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!("gen_hml_corpus.py not found above {}; set HERO_BENCH_GEN", workspace.display());
}

fn corpus() -> Vec<u8> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest.parent().unwrap_or(manifest);
    let dir = workspace.join("target/bench");
    let path = dir.join("corpus-10MB.hml");
    if !path.is_file() {
        std::fs::create_dir_all(&dir).expect("create target/bench");
        let status = Command::new("python3")
            .arg(generator(workspace))
            .args(["--seed", "20251122", "--size", "10000000", "--exact", "-o"])
            .arg(&path)
            .arg("--index")
            .arg(dir.join("corpus-10MB.index.json"))
            .status()
            .expect("run python3");
        assert!(status.success(), "corpus generator failed");
    }
    std::fs::read(&path).expect("read corpus")
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
