//! The sandbox's Landlock helper as a binary of its own, for this crate's tests. It is
//! started exactly as the server's own executable is (`hero __hero-landlock …`), so the
//! tests go through the same arguments. Usage: `hero-landlock __hero-landlock PROGRAM ARGS…`.

fn main() {
    hero_backend::sandbox::landlock::main_if_asked();
    eprintln!(
        "usage: hero-landlock {} PROGRAM ARGS…",
        hero_backend::sandbox::landlock::ARG
    );
    std::process::exit(2);
}
