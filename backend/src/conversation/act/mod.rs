//! Acting on what a message asks for (reference 000, "Detection & Execution Flow"): find
//! the calls (executable elements, `<interaction>` blocks, `@system(...)` in prose, native
//! tool calls), strip `sender_id`, check each against its function's schema, gate it by the
//! user's permission level, run what may run, and record it all in the log:
//!
//! ```text
//! message (the agent's reply, or the user's own)
//!   └── request  (parent: the message; target system:<function>; status as gated)
//!         ├── update  (the user's decision, when the level is `ask`)
//!         └── result  (parent: the request; target agent:<id>; what the agent is told)
//! ```
//!
//! Authority is the code path's, never the text's: calls found in an agent's reply are the
//! agent's ([`Authority::Agent`]); only calls in the signed-in user's own message carry
//! their authority ([`Authority::User`], recorded as `sender_id`). A decision arrives only
//! through the user's own request ([`decide`]).
//!
//! The log is the state: a call is open while its request has no result; a message's calls
//! are settled when none is open. Whoever records the last result of a message reports it
//! (`Settled::done`, `carry_out`'s and `answer_question`'s answers), and the stage above
//! decides what follows: the turn gives the agent the results in a follow-up reply (within
//! the round bound), or `turn::decisions` does after a decision, an answer or a question's
//! time. Nothing here starts a reply. Work on one message's calls is serialised by
//! [`MessageLocks`].
//!
//! The folder: [`find`](find()) (the calls in a message), `gate` (each call's status and its
//! request frame: [`open`]), `settle` (running decided calls, their results, Stop),
//! `decide` (the user's decision), `questions` (answers to `ask`), `recover` (after a
//! restart), `locks`.

mod decide;
mod find;
mod gate;
mod locks;
mod questions;
mod recover;
mod settle;

pub use decide::Decided;
pub(crate) use decide::{carry_out, decide};
pub use find::{bound, check, closed, find};
pub use gate::open;
pub use locks::{MessageGuard, MessageLocks, streaming_mark};
pub use questions::Answer;
pub(crate) use questions::{answer_question, now_ms};
pub(crate) use recover::recover;
pub use recover::{Recovered, write_interrupted};
pub use settle::{
    close, open_and_settle, open_and_settle_saying, open_calls, settle, settle_one, stop_open,
};

use hero_shared::calls::{CallOrigin, CallRequest, CallStatus};
use hero_shared::wire::{ExecutedElement, SseEvent};
use serde_json::Value;

use crate::AppState;
use crate::conversation::hub::HubEvent;
use crate::crypto::SecretKey;

/// The most calls one message may make; the rest are told they were not run.
pub const MAX_CALLS_PER_MESSAGE: usize = 16;

/// Whose authority a message's calls carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    /// The agent's reply: every call passes the user's permission levels.
    Agent(i64),
    /// The signed-in user's own message: `ask` needs no approval (they asked), `never`
    /// still refuses.
    User(i64),
}

/// A call found in a message, before the gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub function: String,
    pub args: Value,
    pub origin: CallOrigin,
    /// Why it cannot run, if it cannot (told to the agent as the call's result).
    pub problem: Option<String>,
    /// The problem is a bound (the message's calls, the rounds since the user's message),
    /// not the call itself.
    pub bound: bool,
}

/// What a message's calls act for: its session, its owner, and the message.
#[derive(Clone)]
pub struct Scene {
    /// The session's owner, whose levels gate the calls.
    pub user_id: i64,
    pub session_id: i64,
    pub dk: SecretKey,
    /// The message whose calls these are.
    pub message_id: String,
    /// The agent the results are for (the session's), if known.
    pub agent_id: Option<i64>,
    /// The user's chain of tools: what the calls are found, gated and run in.
    pub tools: std::sync::Arc<crate::execution::functions::Registry>,
}

/// A request as stored.
#[derive(Debug, Clone)]
pub struct Opened {
    pub request_id: String,
    pub req: CallRequest,
}

/// Reply events of calls worked on outside a turn (a decision's, an answer's, a Stop's):
/// to the session's readers.
pub(crate) fn readers(
    st: &AppState,
    user_id: i64,
    session_id: i64,
) -> impl Fn(SseEvent) + Send + Sync + '_ {
    move |ev| {
        st.hub.publish(
            user_id,
            session_id,
            HubEvent::Stream {
                session_id,
                event: ev,
            },
        )
    }
}

/// A stored frame goes to the session's readers and to the conversation kept in memory.
fn publish(st: &AppState, user_id: i64, k: crate::conversation::history::Kept) {
    st.hub.publish(
        user_id,
        k.frame.session_id,
        HubEvent::Frame((*k.frame).clone()),
    );
    st.history.append(k);
}

/// How a message's calls stand after [`settle`].
pub struct Settled {
    pub executed: Vec<ExecutedElement>,
    /// Every call of the message has its result.
    pub done: bool,
    /// The questions opened with a time limit: the caller arms their timers.
    pub timed: Vec<Timed>,
}

/// A question that takes its default at a time, unless answered before.
#[derive(Debug, Clone)]
pub struct Timed {
    pub user_id: i64,
    pub session_id: i64,
    pub request_id: String,
    /// Unix milliseconds.
    pub at: i64,
}

impl Timed {
    fn of(sc_user: i64, session_id: i64, o: &Opened) -> Option<Timed> {
        (o.req.status == CallStatus::Asking).then_some(())?;
        Some(Timed {
            user_id: sc_user,
            session_id,
            request_id: o.request_id.clone(),
            at: o.req.expires_at?,
        })
    }
}

/// One line naming a call, for the log and the agent.
fn describe(function: &str, args: &Value) -> String {
    match args {
        Value::Null => format!("{function}()"),
        Value::Object(o) if o.is_empty() => format!("{function}()"),
        a => format!("{function}({a})"),
    }
}

#[cfg(test)]
mod tests;
