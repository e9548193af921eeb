//! A session's conversation: its append-only log of frames and everything that moves it.
//!
//! - [`sessions`]: the user's sessions, every query scoped by the user.
//! - [`frames`]: the log's storage (sealed payloads, per-session seq) and its bound.
//! - [`turn`]: one turn, from the user's message to the agent's frame, and the turns in
//!   flight ([`turn::Registry`]).
//! - [`act`]: acting on what a message asks for: finding calls, the permission gate,
//!   request and result frames, decisions, questions, recovery after a restart.
//! - [`answers`]: answers to the questions in a reply (`ask`, `hml-prompt`), as frames.
//! - [`context`]: the conversation as a model reads it, calls' results quoted.
//! - [`compact`]: a long session's older messages folded into a summary; [`flush`]: the
//!   agent's turn to save what should last to its memory before that.
//! - [`startup`]: the startup processes, appended hidden before a session's first message,
//!   again on `/start` and after a summary.
//! - [`queue`]: messages agents queue for a session (`@agent(queue, …)`), sent once it is
//!   idle.
//! - [`attachments`]: files attached to messages (text, PDFs' text, images), sealed, bounded,
//!   named in the message's payload; an image's bytes put in the call when it is made.
//! - [`versions`]: a message's versions: an edit of the user's, a regeneration of the
//!   agent's, and a switch between them, each a new frame.
//! - [`export`]: a session exported (Markdown, JSON, streamed), everything as a tar
//!   archive, and a JSON export imported into a new session.
//! - [`search`]: search across the user's sessions, an index in memory per user, brought
//!   up to date from the log at each search.
//! - [`feed`]: one reader of a session's events (the resume algorithm behind `/events` and
//!   the WebSocket's `subscribe`).
//! - [`history`]: the conversations turns were last given, kept decrypted between turns.
//! - [`in_flight`]: a reply in flight as far as it has come (what a late reader is sent).
//! - [`hub`]: live fan-out to subscribers, and the shutdown signal of live streams.
//! - [`cluster`]: the hub's fan-out to the other instances on one PostgreSQL database,
//!   and what they share (work marks, locks, limits); [`takeover`]: a dead one's work.
//!
//! May use every other folder; nothing outside it names it except the crate root and
//! [`crate::agents::summon`] (which streams its progress through [`hub`]) and the one function
//! handlers that act on a conversation ([`crate::execution::functions`]'s `update_prompt`,
//! which records an answer, `user_notify`'s notice and `agent_queue`, which queues).
//! Invariant: a frame is stored before anyone is told of it, and its `seq` is the log's order.

pub mod act;
pub mod answers;
pub mod attachments;
pub mod cluster;
pub mod compact;
pub mod context;
pub mod export;
pub mod feed;
pub mod flush;
pub mod frames;
pub mod history;
pub mod hub;
pub mod in_flight;
pub mod queue;
pub mod search;
pub mod sessions;
pub mod startup;
pub mod takeover;
pub mod turn;
pub mod versions;
