//! The sandbox's Landlock helper as a binary of its own, for this crate's tests (the server
//! is its own helper: `hero __hero-landlock …`). Usage: `hero-landlock PROGRAM ARGS…`.

fn main() {
    hero_backend::sandbox::landlock::helper(std::env::args_os().skip(1).collect()).finish();
}
