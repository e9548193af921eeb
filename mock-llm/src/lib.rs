//! mock-llm: a mock LLM server that speaks Anthropic's Messages API and OpenAI's Chat
//! Completions API, streaming and not, faithfully enough that Hero's real provider code
//! cannot tell it from the real thing on loopback. Tests, browser tests and benchmarks run it
//! in-process (`spawn`) or as the `mock-llm` binary.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use mock_llm::{Answer, Config};
//! let server = mock_llm::spawn(Config::default().answers(vec![Answer::text("Hi!")]).chunk_bytes(4)).await?;
//! let base_url = server.url(); // http://127.0.0.1:PORT; POST {base_url}/v1/messages
//! # Ok(()) }
//! ```
//!
//! Layout:
//! - `script`: what it says (scripted answers, the corpus, faults, pacing) — plain data.
//! - `directive`: `[[mock …]]` instructions read from the last user message.
//! - `config`: the `Config` builder.
//! - `request`: the validated request both wire formats reduce to.
//! - `reply`: the format-independent reply and the lazy cursor that chunks it.
//! - `anthropic`, `openai`: each wire format's validation, frames and bodies.
//! - `body`: the paced body stream and its four endings (complete, cut, stall, error event).
//! - `search`: a mock web search service (SearXNG's and Brave's JSON APIs) and pages.
//! - `server`: routes, auth, the request log, and starting and stopping.

mod anthropic;
mod body;
mod config;
mod directive;
mod embed;
mod flush;
mod openai;
mod reply;
mod request;
mod script;
mod search;
mod server;

pub use config::Config;
pub use script::{
    Answer, Corpus, DEFAULT_ANSWER, FaultKind, FaultSpec, LoadError, Pacing, StopReason, ToolCall,
};
pub use server::{MockServer, serve, serve_until, spawn, spawn_on};
