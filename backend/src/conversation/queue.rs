//! Messages agents queue for a session (reference 000's `@agent(queue, {message, session?,
//! agent?})`, run by the `agent_queue` function): into another session of the user's, into
//! a new sub-session with the agent named, or into the calling session once its round is
//! over. The message is stored as the session's next input (`role: user`, its payload's
//! `queued` saying whose it is; the agent reads it as another agent's, never the user's) and
//! the session's agent answers it, as it answers the user.
//!
//! A queued message carries none of the user's authority (its text runs no calls; the reply
//! to it is gated as every reply is). It waits for its session to be idle
//! ([`crate::conversation::turn::Registry::idle`]), one sender at a time per session, and a
//! Stop in the session it goes to or comes from ends it (the originating session gets a
//! private notice of any message not sent, as of one refused later). It is bounded three
//! ways: a chain of messages queued in answer to queued messages stops at `max_rounds` links
//! (each message's `chain` counts them); an answer to a queued message may queue one
//! message, so a chain is a line; and at most [`crate::limits::Limits::queued_per_user`] wait
//! at once per user on each instance. What waits is held in memory: a restart, or the loss of
//! the instance, forgets a message not yet sent.

use hero_shared::api::{CreateSessionRequest, SessionStatus};
use hero_shared::frame::{AuthorType, Frame, FrameType};
use serde_json::{Value, json};

use crate::accounts::auth::AuthUser;
use crate::conversation::{frames, sessions, turn};
use crate::crypto::SecretKey;
use crate::drive::abort::Abort;
use crate::{AppState, Error, Result};

/// Where a queued message goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// The calling session, once its round is over.
    This,
    /// Another session of the user's.
    Session(i64),
    /// A new sub-session of the calling one, with this agent (its id or its name).
    NewWith(AgentRef),
}

/// An agent as a call names it.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentRef {
    Id(i64),
    Name(String),
}

/// Who queues: the calling session and its agent.
pub struct From {
    pub user_id: i64,
    pub session_id: i64,
    pub agent_id: Option<i64>,
}

/// Queues `message` for `target`: what the calling agent is told, or why it was refused
/// (one line for the agent). The message is sent in a task of its own once its session has
/// no reply in flight; Stop in either session ends it first.
pub async fn enqueue(
    st: &AppState,
    from: From,
    target: Target,
    message: String,
) -> std::result::Result<String, String> {
    let user = AuthUser::on_behalf_of(from.user_id);
    let said = |e: Error| e.public_message();
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id())
        .await
        .map_err(said)?;
    let link = link_of(st, &dk, from.session_id).await.map_err(said)?;
    let chain = link.chain + 1;
    let max = st.settings.limits.rounds_per_message;
    if chain > max as u64 {
        return Err(format!(
            "this chain of queued messages has reached max_rounds ({max} links): nothing was queued; tell the user instead"
        ));
    }
    // A reply to a queued message passes one on at most: a chain is a line, not a tree.
    if link.chain > 0 && link.queued > 0 {
        return Err(
            "an answer to a queued message may queue one message, and this one already did: nothing was queued"
                .into(),
        );
    }
    let most = st.settings.limits.queued_per_user;
    let place = st
        .queued
        .acquire(user.id(), most, "queued messages")
        .map_err(|_| {
            format!("the queue is full: {most} queued messages already wait (queued_per_user); nothing was queued")
        })?;
    let this = "queued for this session: it comes once this round is over, and you answer it then";
    let (session_id, told) = match target {
        Target::This => (from.session_id, this.to_owned()),
        Target::Session(id) if id == from.session_id => (id, this.to_owned()),
        Target::Session(id) => {
            let s = sessions::get(&st.db, &user, id)
                .await
                .map_err(|_| format!("no such session: {id}"))?;
            (
                id,
                format!(
                    "queued for session {id} ({:?}): its agent answers it there once no reply is in flight",
                    s.name
                ),
            )
        }
        Target::NewWith(agent) => {
            let agent = find_agent(st, &user, &agent).await?;
            let s = sessions::create(
                st,
                &user,
                CreateSessionRequest {
                    name: sub_session_name(&agent.name, &message),
                    parent_session_id: Some(from.session_id),
                    status: Some(SessionStatus::Agent),
                    agent_id: Some(agent.id),
                },
            )
            .await
            .map_err(said)?;
            (
                s.id,
                format!(
                    "opened session {} ({:?}) with the agent {:?} and queued the message there",
                    s.id, s.name, agent.name
                ),
            )
        }
    };
    let agent_name = match from.agent_id {
        Some(a) => crate::agents::get(&st.db, &st.keys, &user, a)
            .await
            .map(|a| a.name)
            .ok(),
        None => None,
    };
    let payload = json!({
        "role": "user",
        "content": message,
        "queued": {
            "from_session": from.session_id,
            "from_agent": from.agent_id,
            "agent_name": agent_name,
            "chain": chain,
        },
    });
    // Registered before the call returns: a Stop from now on reaches it.
    let waiting = st.turns.waiting(session_id, from.session_id);
    let st = st.clone();
    tokio::spawn(async move {
        if let Err(why) = send(&st, &user, session_id, payload, waiting.abort()).await {
            tracing::warn!(session_id, why, "a queued message was not sent");
            let text = format!(
                "The message the agent queued for session {session_id} was not sent: {why}."
            );
            if let Err(e) =
                frames::append_notice(&st, &dk, user.id(), from.session_id, text, "warning").await
            {
                tracing::warn!(error = %e, "a queued message's failure could not be noted");
            }
        }
        drop((waiting, place));
    });
    Ok(told)
}

/// Sends a queued message once its session is idle, one sender at a time per session; the
/// user's replies at their bound are waited out. `Err`: why it was not sent (a Stop, the
/// server shutting down, the session gone or full).
async fn send(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    payload: Value,
    stop: &Abort,
) -> std::result::Result<(), String> {
    let stopped = || async {
        tokio::select! {
            () = stop.aborted() => {}
            () = st.hub.closed() => {}
        }
    };
    let halted = |_| "Stop ended it, or the server was shutting down".to_owned();
    // Held until its reply is registered: the next sender then finds the session busy.
    let sender = st.turns.sender(session_id);
    let _one = tokio::select! {
        held = sender.lock_owned() => held,
        () = stopped() => return Err(halted(())),
    };
    loop {
        tokio::select! {
            () = st.turns.idle(session_id) => {}
            () = stopped() => return Err(halted(())),
        }
        let slot = match crate::conversation::cluster::turn_slot(st, user.id()).await {
            Ok(slot) => slot,
            // The user's replies in flight are at their bound: wait for one to end.
            Err(Error::Limit(_)) => {
                tokio::select! {
                    () = tokio::time::sleep(std::time::Duration::from_millis(250)) => continue,
                    () = stopped() => return Err(halted(())),
                }
            }
            Err(e) => return Err(e.public_message()),
        };
        // A reply may have begun there while the slot was waited for.
        if !st.turns.is_idle(session_id) {
            continue;
        }
        return turn::post_queued(st, user, session_id, payload, slot)
            .await
            .map(drop)
            .map_err(|e| e.public_message());
    }
}

/// A sub-session's name: its agent's, and the message's first sentence (or its start).
fn sub_session_name(agent: &str, message: &str) -> String {
    let first: String = message
        .trim()
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let first = first.as_str();
    let sentence = first.find(". ").map_or(first, |at| &first[..=at]).trim();
    let name = format!("{agent}: {sentence}");
    match name
        .char_indices()
        .nth(hero_shared::api::MAX_SESSION_NAME_CHARS.min(60))
    {
        Some((at, _)) => format!("{}…", name[..at].trim_end()),
        None => name,
    }
}

/// The agent a call names: by id, or by name (case aside), among the user's.
async fn find_agent(
    st: &AppState,
    user: &AuthUser,
    agent: &AgentRef,
) -> std::result::Result<hero_shared::api::AgentDto, String> {
    let all = crate::agents::list(&st.db, &st.keys, user)
        .await
        .map_err(|e| e.public_message())?;
    all.into_iter()
        .find(|a| match agent {
            AgentRef::Id(id) => a.id == *id,
            AgentRef::Name(n) => a.name.eq_ignore_ascii_case(n.trim()),
        })
        .ok_or_else(|| match agent {
            AgentRef::Id(id) => format!("no such agent: {id}"),
            AgentRef::Name(n) => format!("no such agent: {n:?}"),
        })
}

/// Where the session's last input stands in a chain of queued messages.
#[derive(Debug, Default, PartialEq)]
struct Link {
    /// The input's `chain` if another agent queued it; 0 if the user wrote it (or none is
    /// left since the last compact).
    chain: u64,
    /// Messages queued since that input (`agent_queue` calls that returned).
    queued: usize,
}

/// The session's [`Link`], from the conversation kept in memory or read.
async fn link_of(st: &AppState, dk: &SecretKey, session_id: i64) -> Result<Link> {
    let last = frames::last_seq(&st.db, session_id).await?;
    let kept = st.history.look(session_id, last, |kept| {
        link(kept.iter().map(|k| &*k.frame))
    });
    match kept {
        Some(l) => Ok(l),
        None => {
            let read = frames::before(&st.db, dk, session_id, last + 1).await?;
            Ok(link(read.iter().map(|k| &*k.frame)))
        }
    }
}

/// The [`Link`] of the last input among `frames` (oldest first).
fn link<'a>(frames: impl DoubleEndedIterator<Item = &'a Frame>) -> Link {
    let mut queued = 0;
    for f in frames.rev() {
        match f.frame_type {
            FrameType::Result => {
                let ok = f.payload.get("outcome").and_then(Value::as_str) == Some("ok");
                let queuing =
                    f.payload.get("function").and_then(Value::as_str) == Some("agent_queue");
                queued += usize::from(ok && queuing);
                continue;
            }
            FrameType::Message => {}
            _ => continue,
        }
        let private = f.payload.get("private") == Some(&Value::Bool(true));
        match (f.author_type, f.payload.get("queued")) {
            (AuthorType::User, _) if !private => return Link { chain: 0, queued },
            (AuthorType::System, Some(q)) => {
                let chain = q.get("chain").and_then(Value::as_u64).unwrap_or(0);
                return Link { chain, queued };
            }
            _ => {}
        }
    }
    Link { chain: 0, queued }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(author: AuthorType, payload: Value) -> Frame {
        Frame {
            id: "f".into(),
            session_id: 1,
            seq: 1,
            parent_id: None,
            target_ids: vec![],
            timestamp: String::new(),
            frame_type: FrameType::Message,
            author_type: author,
            author_id: None,
            payload,
        }
    }

    #[test]
    fn a_sub_session_is_named_from_the_first_sentence() {
        assert_eq!(
            sub_session_name("Analyst", "Check the figures. Then the rest.\nMore"),
            "Analyst: Check the figures."
        );
        let long = sub_session_name("A", &"word ".repeat(40));
        assert!(long.ends_with('…') && long.chars().count() <= 61, "{long}");
        assert_eq!(
            sub_session_name("A", "é".repeat(70).as_str())
                .chars()
                .count(),
            61
        );
    }

    #[test]
    fn the_link_is_the_last_inputs() {
        let user = message(AuthorType::User, json!({"role": "user", "content": "hi"}));
        let note = message(
            AuthorType::User,
            json!({"role": "user", "content": "n", "private": true}),
        );
        let queued = |n: u64| {
            message(
                AuthorType::System,
                json!({"role": "user", "content": "q", "queued": {"chain": n}}),
            )
        };
        let reply = message(AuthorType::Agent, json!({"role": "agent", "content": "ok"}));
        let notice = message(
            AuthorType::System,
            json!({"role": "system", "content": "x"}),
        );
        let result = |function: &str, outcome: &str| Frame {
            frame_type: FrameType::Result,
            author_type: AuthorType::System,
            ..message(
                AuthorType::System,
                json!({"function": function, "outcome": outcome}),
            )
        };
        let at = |chain, queued| Link { chain, queued };
        assert_eq!(link([].iter()), at(0, 0));
        assert_eq!(link([user.clone(), reply.clone()].iter()), at(0, 0));
        let fs = [user.clone(), queued(3), reply.clone(), note, notice];
        assert_eq!(link(fs.iter()), at(3, 0), "a note or a notice is no input");
        assert_eq!(
            link([queued(2), reply.clone(), user.clone()].iter()),
            at(0, 0),
            "the user spoke since"
        );
        let fs = [
            result("agent_queue", "ok"),
            queued(1),
            reply,
            result("agent_queue", "ok"),
            result("agent_queue", "invalid"),
            result("help", "ok"),
        ];
        assert_eq!(
            link(fs.iter()),
            at(1, 1),
            "only what returned since the input counts"
        );
    }
}
