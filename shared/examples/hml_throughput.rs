//! Parser throughput on a file fed in chunks of a given size.
//!
//! `cargo run --release -p hero-shared --example hml_throughput -- FILE CHUNK_BYTES [RUNS]`
//! (CHUNK_BYTES 0 feeds the file whole). The last line printed is
//! `bytes=N chunk=N elements=N secs=S mbps=M`, for the median run.
//! With `HERO_VERIFY=1` it first checks that the chunked feed builds the same document as
//! the batch parse, on this file.

use std::time::Instant;

use hero_shared::hml::{Event, StreamParser, TreeBuilder, parse};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: hml_throughput FILE CHUNK_BYTES [RUNS]");
        std::process::exit(2);
    }
    let data = match std::fs::read(&args[1]) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cannot read {}: {e}", args[1]);
            std::process::exit(1);
        }
    };
    let chunk: usize = args[2].parse().unwrap_or(0);
    let runs: usize = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(7).max(1);
    let size = if chunk == 0 { data.len().max(1) } else { chunk };

    if std::env::var_os("HERO_VERIFY").is_some() {
        let mut p = StreamParser::new();
        let mut tree = TreeBuilder::new();
        for piece in data.chunks(size) {
            p.feed_with(piece, |e| tree.event(e));
        }
        p.finish_with(|e| tree.event(e));
        let batch = parse(&String::from_utf8_lossy(&data));
        // Per response, when the corpus index is beside the file: one reply per parse,
        // as the server parses them.
        let index = args[1].replace(".hml", ".index.json");
        let ranges: Vec<(usize, usize)> = std::fs::read_to_string(&index)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_else(|| vec![(0, data.len())]);
        let docs: Vec<_> = ranges
            .iter()
            .map(|&(a, b)| parse(&String::from_utf8_lossy(&data[a..b.min(data.len())])))
            .collect();
        let mut kinds = std::collections::BTreeMap::new();
        for e in docs.iter().flat_map(|d| d.elements()) {
            let k = kinds.entry(e.kind.name()).or_insert((0, 0));
            k.0 += 1;
            k.1 += e.truncated as u32;
        }
        let mut diags = std::collections::BTreeMap::new();
        for d in docs.iter().flat_map(|d| &d.diagnostics) {
            let name = format!("{:?}", d.kind);
            *diags
                .entry(name.split([' ', '{']).next().unwrap_or("").to_owned())
                .or_insert(0) += 1;
        }
        eprintln!(
            "{} responses; elements (count, truncated): {kinds:?}\ndiagnostics: {diags:?}",
            docs.len()
        );
        let same = tree.finish() == batch;
        eprintln!(
            "verify: chunked document {} batch document",
            if same { "equals" } else { "DIFFERS FROM" }
        );
        if !same {
            std::process::exit(1);
        }
    }

    let mut times = Vec::with_capacity(runs);
    let mut elements = 0u64;
    let mut parser = StreamParser::new();
    for run in 0..runs {
        let mut count = 0u64;
        let mut text_bytes = 0u64;
        let start = Instant::now();
        for piece in data.chunks(size) {
            parser.feed_with(piece, |e| match e {
                Event::Complete { .. } | Event::Error { .. } => count += 1,
                Event::Text { text, .. } => text_bytes += text.len() as u64,
                _ => {}
            });
        }
        parser.finish_with(|e| {
            if let Event::Complete { .. } | Event::Error { .. } = e {
                count += 1
            }
        });
        let secs = start.elapsed().as_secs_f64();
        std::hint::black_box(text_bytes);
        elements = count;
        eprintln!(
            "run {run}: {:.4}s {:.0} MB/s",
            secs,
            data.len() as f64 / secs / 1e6
        );
        times.push(secs);
    }
    times.sort_by(f64::total_cmp);
    let secs = times[times.len() / 2];
    println!(
        "bytes={} chunk={} elements={} secs={:.4} mbps={:.0}",
        data.len(),
        chunk,
        elements,
        secs,
        data.len() as f64 / secs / 1e6
    );
}
