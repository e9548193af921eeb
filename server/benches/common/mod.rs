//! What the benchmark binaries share: percentiles, how a figure is printed, and reading an
//! argument.

use std::time::Duration;

/// The value at quantile `q` of `sorted`.
pub fn at(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// A figure's p50 and p99.
pub fn show(label: &str, mut took: Vec<Duration>) {
    took.sort();
    println!(
        "{label:<62} p50 {:>8.3} ms   p99 {:>8.3} ms",
        at(&took, 0.5).as_secs_f64() * 1e3,
        at(&took, 0.99).as_secs_f64() * 1e3
    );
}

/// A figure measured once.
pub fn once(label: &str, took: Duration) {
    println!("{label:<62} {:>8.3} ms", took.as_secs_f64() * 1e3);
}

/// The number after `name` on the command line, else `default`.
pub fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
