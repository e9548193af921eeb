//! One turn (DESIGN.md "One turn"), as a pipeline of named stages:
//!
//! - post ([`post`](self::post()), `post`): the message is read; a command (`/stream`, a
//!   private note, `/compact`) is answered without a reply.
//! - prepare (`prepare`): the agent, its prompt and the conversation so far, read in the
//!   transaction that appends the user's message.
//! - reply (`reply`): the provider's stream through the shared HML parser to the poster and
//!   every subscriber; what arrived bounded as it comes (`reply::Accumulated`). Each
//!   executable element at the top of the reply runs as it closes (`early`), while the
//!   reply streams on.
//! - store (`store`): the reply appended with its usage, whatever ended it.
//! - act (`crate::conversation::act`): the calls found only in the whole reply (prose,
//!   native tool calls) found, gated, settled, and the reply closed (`act::close`).
//! - follow-up (`converse`): while a reply's calls all settle at once and the rounds allow,
//!   the agent is given their results in a new reply.
//!
//! `converse` owns the loop of rounds; `decisions` starts a follow-up after a decision, an
//! answer or a question's time. `message_complete` fires on every path: success, provider
//! error and abort alike.
//!
//! The poster's event stream drives the turn ([`TurnEvents`]); a poster that goes away or
//! stops reading does not stop it: the turn finishes in a task of its own (other tabs are
//! still watching). An `abort` does stop it, through its stop signal in the [`Registry`],
//! which drops the provider request. What streamed before an abort or a failure is kept in
//! the frame.

use crate::accounts::auth::AuthUser;
use crate::conversation::hub::HubEvent;
use crate::conversation::{act, context, frames, sessions};
use crate::{AppState, Error, Result};

pub const MAX_MESSAGE_CHARS: usize = 100_000;
/// A reply longer than this is ended: a provider that never stops must not fill memory.
pub const MAX_REPLY_BYTES: usize = 4 << 20;
/// The most of a model's thinking one reply keeps; past it the reply is ended (the thinking
/// is stored with the reply, and nothing else bounds it).
pub const MAX_THINKING_BYTES: usize = 1 << 20;
/// The most tool-call arguments one reply may stream (they are not kept yet; bounded all
/// the same, so a model cannot stream them for the whole turn deadline).
pub const MAX_TOOL_INPUT_BYTES: usize = 1 << 20;

mod converse;
pub mod decisions;
mod early;
mod out;
mod post;
mod prepare;
pub mod registry;
mod reply;
mod store;

pub use crate::drive::events::{STALL_CHECK, TurnEvents, Watch};
pub use converse::{follow_up, regenerate};
pub use decisions::{answer_question, decide, recover, reply_to_answers};
pub use registry::{Acting, Registry};

/// A started turn: its id (the agent frame's id) and the events for the poster. Reading the
/// events drives the turn; dropping them leaves it to finish on its own.
pub struct TurnHandle {
    pub message_id: String,
    pub events: TurnEvents,
}

/// Validates, stores the user's message and starts the agent's reply (a private message is
/// stored only; `/compact` summarises the conversation; `/stream on|off` switches modes).
pub async fn post(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    req: hero_shared::api::PostMessageRequest,
) -> Result<TurnHandle> {
    let posted = post::read(&req.content, req.private)?;
    if st.hub.is_closing() {
        return Err(Error::Unavailable(
            "the server is shutting down; send the message again in a moment",
        ));
    }
    // A regeneration in flight files its reply where the answer it replaces was: a
    // message sent meanwhile would go into that answer's first version, out of sight.
    if st
        .turns
        .in_flight(session_id)
        .iter()
        .any(|l| l.version_of.is_some())
    {
        return Err(Error::Conflict(
            "another answer to an earlier message is being written: wait for it, or Stop it".into(),
        ));
    }
    let attached = match (&posted, req.attachments.is_empty()) {
        (_, true) => Vec::new(),
        (post::Posted::Message(_), false) => {
            let dk = frames::session_key(st, user, session_id).await?;
            let ids = &req.attachments;
            crate::conversation::attachments::for_message(st, user, &dk, session_id, ids).await?
        }
        (_, false) => {
            return Err(Error::Invalid(
                "attachments go with a message to the agent, not with a command or a private note"
                    .into(),
            ));
        }
    };
    let mut events = TurnEvents::new();
    let message_id = frames::new_id();
    let out = out::Out::new(st, user.id(), session_id, events.sink());
    let content = match posted {
        post::Posted::Streaming(on) => {
            post::switch_streaming(&out, user, &message_id, on).await?;
            return Ok(TurnHandle { message_id, events });
        }
        post::Posted::Private(text) => {
            post::store_private(&out, user, &message_id, text).await?;
            return Ok(TurnHandle { message_id, events });
        }
        post::Posted::UpdateUsage(cost) => {
            post::update_usage(&out, user, &message_id, cost).await?;
            return Ok(TurnHandle { message_id, events });
        }
        post::Posted::Compact => {
            let summary = post::summarise(out, user, message_id.clone()).await?;
            events.start(summary, &st.turns.watch);
            return Ok(TurnHandle { message_id, events });
        }
        post::Posted::Command {
            text,
            function,
            args,
        } => {
            post::run_command(&out, user, &message_id, text, function, args).await?;
            return Ok(TurnHandle { message_id, events });
        }
        post::Posted::Bad(note) => {
            post::bad_command(&out, user, &message_id, note).await?;
            return Ok(TurnHandle { message_id, events });
        }
        post::Posted::Message(c) => c,
    };
    let skill_filter = req
        .skill_filter
        .as_deref()
        .map(crate::agents::checked_skill_names)
        .transpose()?;
    let mut input = prepare::Input::user(user, &content, skill_filter);
    if !attached.is_empty() {
        input.payload["attachments"] = serde_json::Value::Array(attached);
    }
    // Calls in the user's own message run with their authority, before the agent replies.
    start(out, events, message_id, user, input, Some(&content), None).await
}

/// Stores a message an agent queued for the session (`@agent(queue, …)`, through
/// [`crate::conversation::queue`]) and starts the session's agent's reply to it. The message
/// is the payload as stored (`role: user`, its `queued` saying whose it is); it carries no
/// authority of the user's, and its text runs no calls. `slot`: the user's turn slot, taken
/// by the sender (which waits for one rather than be refused).
pub(crate) async fn post_queued(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    payload: serde_json::Value,
    slot: crate::limits::Permit,
) -> Result<TurnHandle> {
    if st.hub.is_closing() {
        return Err(Error::Unavailable(
            "the server is shutting down; the queued message was not sent",
        ));
    }
    let events = TurnEvents::new();
    let message_id = frames::new_id();
    let out = out::Out::new(st, user.id(), session_id, events.sink());
    let input = prepare::Input {
        author: hero_shared::frame::AuthorType::System,
        author_id: None,
        payload,
        skill_filter: None,
        version_of: None,
    };
    start(out, events, message_id, user, input, None, Some(slot)).await
}

/// What an edit keeps of the message it is a version of: its files and the skills it
/// limited its turn to.
pub(crate) struct Carried {
    pub(crate) attachments: Option<serde_json::Value>,
    pub(crate) skill_filter: Option<Vec<String>>,
}

/// Stores an edit of the user's message as a new version of it (`of`: the first version's
/// frame id, which the caller checked) and starts the agent's reply to it: the
/// conversation goes on from the edit, as from a message posted there.
pub(crate) async fn edit(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    of: String,
    content: &str,
    carried: Carried,
) -> Result<TurnHandle> {
    let Carried {
        attachments,
        skill_filter,
    } = carried;
    let post::Posted::Message(content) = post::read(content, false)? else {
        return Err(Error::Invalid(
            "an edit is sent as a message: a command or a private note goes in a message of its own"
                .into(),
        ));
    };
    if st.hub.is_closing() {
        return Err(Error::Unavailable(
            "the server is shutting down; edit the message again in a moment",
        ));
    }
    let events = TurnEvents::new();
    let message_id = frames::new_id();
    let out = out::Out::new(st, user.id(), session_id, events.sink());
    let mut input = prepare::Input::user(user, &content, skill_filter);
    input.version_of = Some(of);
    if let Some(a) = attachments {
        input.payload["attachments"] = a;
    }
    start(out, events, message_id, user, input, Some(&content), None).await
}

/// Stores the turn's input message and starts the reply: the stages from prepare on.
/// `calls_of`: the text whose calls run with the user's authority first (their own
/// message's), if any; `slot`: the user's turn slot if taken already.
async fn start(
    out: out::Out,
    mut events: TurnEvents,
    message_id: String,
    user: &AuthUser,
    input: prepare::Input,
    calls_of: Option<&str>,
    slot: Option<crate::limits::Permit>,
) -> Result<TurnHandle> {
    // The state outlives `out`, which the turn takes.
    let st = out.st.clone();
    let (st, session_id) = (&st, out.session_id);
    // Taken before anything is stored, given back when the turn ends, however it ends.
    let slot = match slot {
        Some(slot) => slot,
        None => crate::conversation::cluster::turn_slot(st, user.id()).await?,
    };
    // In batch mode, the session's messages wait their turn (nothing stored meanwhile).
    let mut queued = None;
    let started = loop {
        match prepare::prepare(st, user, session_id, &input, queued.take()).await? {
            prepare::Prepared::Started(s) => break s,
            prepare::Prepared::Queued(queue) => queued = Some(queue.lock_owned().await),
        }
    };
    let prepare::Started {
        agent,
        dk,
        tools,
        history,
        user_frame,
        startup,
        queued,
    } = *started;
    let messages = context::messages(&history);
    let (after_seq, user_frame_id) = (user_frame.seq, user_frame.id.clone());
    for frame in startup {
        st.hub
            .publish(user.id(), session_id, HubEvent::Frame(frame));
    }
    st.hub
        .publish(user.id(), session_id, HubEvent::Frame(user_frame));
    let (live, cancel) = out.begin_reply(&message_id, &agent, after_seq, None);
    let asked = calls_of.map_or_else(Vec::new, |text| act::find(&tools, text, &[]));
    let user_calls = (!asked.is_empty()).then_some((user_frame_id, asked));
    let user = user.clone();
    let turn = converse::Turn {
        user,
        agent,
        tools,
        dk,
        skill_filter: input.skill_filter,
        user_calls,
        live,
        cancel,
        round: 0,
        _queued: queued,
    };
    let turn = converse::guarded(out, message_id.clone(), slot, turn, messages);
    events.start(turn, &st.turns.watch);
    Ok(TurnHandle { message_id, events })
}

/// Stop: the session's replies in flight end (keeping what they have), messages agents
/// queued to or from it that still wait are not sent, calls running for
/// it end as stopped, and calls waiting for approval are recorded as stopped too.
pub async fn stop(st: &AppState, user: &AuthUser, session_id: i64) -> Result<usize> {
    sessions::get(&st.db, user, session_id).await?;
    let n = st.turns.abort(session_id);
    // A reply or call running on another instance stops there.
    st.hub
        .tell_elsewhere(crate::conversation::hub::Wire::Stop { session_id });
    Ok(n + act::stop_open(st, user, session_id).await?)
}
