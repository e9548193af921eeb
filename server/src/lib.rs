//! The `hero` binary's library: settings, the command line's actions, and the HTTP surface.
//!
//! - [`config`]: flags > `HERO_*` environment > TOML file > defaults.
//! - [`api`]: the JSON API under `/api`.
//! - [`web`]: the full router (API + Leptos pages + static site).
//! - [`cli`]: `serve`, `migrate` and `user …`.

pub mod api;
pub mod cli;
pub mod config;
pub mod web;
