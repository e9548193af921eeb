//! The `hero` binary's library: settings, the command line's actions, and the HTTP surface.
//!
//! - [`config`]: flags > `HERO_*` environment > TOML file > defaults.
//! - [`api`]: the JSON API under `/api`.
//! - [`web`]: the full router (API + Leptos pages + static site).
//! - [`cli`]: `serve`, `migrate` and `user …`.
//! - [`ops`]: health checks, readiness and the metrics, for the operator's tools.
//! - [`site`]: the built site, inside the binary or in a directory.

pub mod api;
pub mod cli;
pub mod config;
pub mod ops;
pub mod site;
pub mod web;
