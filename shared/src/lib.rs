//! Hero's isomorphic core: the code that must give the same answer on the server, while a
//! reply streams, and in the browser (wasm32), when a page renders.
//!
//! Layout:
//! - [`hml`]: the Hero Markup Language: element vocabulary ([`hml::ElementKind`]), the
//!   chunk-fed parser ([`hml::StreamParser`]) and the document tree ([`hml::parse`]).
//! - [`interaction`]: finds `<interaction>` blocks and `@target(method, args)` calls in a
//!   reply and turns them into validated [`interaction::InteractionCall`]s.
//! - [`legacy`]: reference 000's legacy assertions (JSON objects with an `assertion`), read
//!   as the HML they stand for, for the page and for finding calls alike.
//! - [`calls`]: what an agent asked the system to run, as its `request` and `result`
//!   frames record it, and the permission levels.
//! - [`frame`]: the event log of a conversation and [`frame::compile_frames`], which
//!   replays it into the messages the page and the agent see.
//! - [`command`]: the commands a message may be (`/session`, `/start`, …), their usage,
//!   and the one parser of their typed form.
//! - [`process`]: processes (instruction macros): their closed set of variables, rendering
//!   and the startup rule.
//! - [`api`]: JSON API and server-function bodies (sessions, users); owned by the
//!   server/app side, kept here so the browser shares one definition.
//! - [`wire`]: SSE events and WebSocket messages, shared by server and browser.
//! - [`feed`]: the session event feed ([`feed::SessionEvent`]) and its SSE and WebSocket
//!   encodings.
//! - [`markdown`]: markdown to HTML that is safe by construction (no sanitizer needed),
//!   the one renderer of server and browser.
//! - [`heap`]: a counting global allocator for benchmarks (the one other `unsafe` here).
//! - [`corpus`]: a deterministic generator of HML-laden replies, for tests and benchmarks.
//!
//! ```
//! use hero_shared::hml::{Event, StreamParser, parse};
//!
//! // The server, while a reply streams: events as the text arrives, in any pieces.
//! let mut parser = StreamParser::new();
//! let mut run = Vec::new();
//! for piece in ["Let me look. <bash cwd=/tmp>ls -", "la</bash> and `<bash>` is quoted."] {
//!     parser.feed_with(piece.as_bytes(), |e| {
//!         if e.is_executable_completion() {
//!             if let Event::Complete { id, content, .. } = e {
//!                 run.push((id.to_owned(), content.to_owned()));
//!             }
//!         }
//!     });
//! }
//! parser.finish_with(|_| {});
//! assert_eq!(run, [("e1".to_owned(), "ls -la".to_owned())]);
//!
//! // The page: the same text gives the same tree, ids included.
//! let doc = parse("Let me look. <bash cwd=/tmp>ls -la</bash> and `<bash>` is quoted.");
//! assert_eq!(doc.find("e1").map(|e| e.content.as_str()), Some("ls -la"));
//! ```
//!
//! Invariants: this crate does no I/O, knows nothing of axum, sqlx, tokio or the DOM, and
//! its parsers never fail: they return a value and diagnostics.

pub mod api;
pub mod calls;
pub mod command;
pub mod corpus;
pub mod feed;
pub mod frame;
pub mod fuzz;
pub mod heap;
pub mod hml;
pub mod hooks;
pub mod html;
pub mod interaction;
pub mod legacy;
pub mod markdown;
pub mod process;
pub mod wire;
