//! Parser throughput on a file fed in chunks of a given size.
//!
//! `cargo run --release -p hero-shared --example hml_throughput -- FILE CHUNK_BYTES [RUNS]`
//! (CHUNK_BYTES 0 feeds the file whole). The last line printed is
//! `bytes=N chunk=N elements=N secs=S mbps=M`, for the median run.

use std::time::Instant;

use hero_shared::hml::{Event, StreamParser};

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
        eprintln!("run {run}: {:.4}s {:.0} MB/s", secs, data.len() as f64 / secs / 1e6);
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
