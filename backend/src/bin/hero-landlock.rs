//! The sandbox's Landlock helper as a binary of its own, for this crate's tests. It is
//! started exactly as the server's own executable is (`hero __hero-landlock …`), so the
//! tests go through the same arguments. Usage: `hero-landlock __hero-landlock PROGRAM ARGS…`.

use hero_backend::execution::sandbox::landlock::{ARG, Exit, main_if_asked};

fn main() {
    main_if_asked();
    Exit {
        code: 2,
        out: None,
        err: Some(format!("usage: hero-landlock {ARG} PROGRAM ARGS…")),
    }
    .finish()
}
