//! The prepare stage: what a turn needs (the session's agent, its system prompt, the user's
//! key, the conversation so far) read in the transaction that appends the user's message.

use hero_shared::frame::AuthorType;
use serde_json::json;

use crate::accounts::auth::AuthUser;
use crate::agents::AgentRuntime;
use crate::conversation::frames::{self, NewFrame};
use crate::conversation::history::Kept;
use crate::crypto::SecretKey;
use crate::{AppState, Result};

/// What a turn starts from.
pub(super) struct Started {
    pub(super) agent: AgentRuntime,
    pub(super) dk: SecretKey,
    /// The user's chain of tools ([`crate::execution::mcp::registry`]).
    pub(super) tools: std::sync::Arc<crate::execution::functions::Registry>,
    /// The conversation since the last compact, the user's message last.
    pub(super) history: Vec<Kept>,
    pub(super) user_frame: hero_shared::frame::Frame,
    /// The startup processes' frames stored before it (the session's first message).
    pub(super) startup: Vec<hero_shared::frame::Frame>,
    /// In batch mode, the session's queue, held until the turn ends.
    pub(super) queued: Option<tokio::sync::OwnedMutexGuard<()>>,
}

/// The message a turn answers, as it is stored: the user's own, or one an agent queued
/// ([`crate::conversation::queue`]).
pub(super) struct Input {
    pub(super) author: AuthorType,
    pub(super) author_id: Option<i64>,
    pub(super) payload: serde_json::Value,
    /// The skills the message limits its turn to (kept in its payload too).
    pub(super) skill_filter: Option<Vec<String>>,
    /// An edit's: the message it is a new version of (its frame's parent,
    /// `hero_shared::frame`'s "Versions").
    pub(super) version_of: Option<String>,
}

impl Input {
    /// The signed-in user's message; `skill_filter`, checked, is kept with it.
    pub(super) fn user(user: &AuthUser, content: &str, skill_filter: Option<Vec<String>>) -> Input {
        let mut payload = json!({"role": "user", "content": content});
        if let Some(names) = &skill_filter {
            payload["skill_filter"] = json!(names);
        }
        Input {
            author: AuthorType::User,
            author_id: Some(user.id()),
            payload,
            skill_filter,
            version_of: None,
        }
    }
}

/// What preparing a turn came to.
pub(super) enum Prepared {
    Started(Box<Started>),
    /// The session is in batch mode and answering another message: nothing was stored;
    /// wait for its queue, then prepare again holding it.
    Queued(crate::conversation::turn::registry::BatchQueue),
}

/// Reads what the turn needs and appends the user's message: one transaction, so that no
/// message is stored for a session without an agent. The conversation before the message is
/// the one the session's last turn left in memory ([`crate::conversation::history`]) if nothing was
/// appended since; otherwise it is read in the same transaction, and decrypted once the
/// connection is let go. A history too long to read on the hot connection is read through
/// the pool afterwards: the frames before the message, which are what they were.
pub(super) async fn prepare(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    input: &Input,
    mut queued: Option<tokio::sync::OwnedMutexGuard<()>>,
) -> Result<Prepared> {
    // Who may see the administrator's skills, read again if stale (not inside the write).
    crate::skills::grants::ready(st).await?;
    let prepared = st
        .db
        .write_with(async |tx| {
            // The agent's files, seeded on its first use, make its system prompt.
            let (agent, dk, tools) = crate::agents::persona::prepared(
                tx,
                st,
                user,
                session_id,
                true,
                input.skill_filter.as_deref(),
            )
            .await?;
            // In batch mode one message at a time: stored when its turn comes.
            if agent.batch && queued.is_none() {
                let queue = st.turns.batch_queue(session_id);
                match queue.clone().try_lock_owned() {
                    Ok(held) => queued = Some(held),
                    Err(_) => return Ok(Err(queue)),
                }
            }
            // A session's first message is preceded by its startup processes.
            let startup =
                crate::conversation::startup::begin(tx, st, &dk, user.id(), session_id).await?;
            let mut message = NewFrame::message(
                session_id,
                input.author,
                input.author_id,
                input.payload.clone(),
            );
            message.parent_id = input.version_of.clone();
            let sealed = frames::seal(&dk, message)?;
            let seq = sealed.insert(tx).await?;
            // The insert is rolled back with the refusal: a full session takes nothing more.
            // A message needs room for its reply too.
            frames::full_session(st, seq + 1)?;
            let kept = st.history.get(session_id, seq - 1);
            let rows = match kept {
                Some(_) => None,
                None => Some(frames::since_last_compact(tx, session_id, seq).await?),
            };
            Ok(Ok((
                (agent, tools),
                dk,
                kept,
                rows,
                sealed.kept(seq),
                startup,
                queued.take(),
            )))
        })
        .await?;
    let ((agent, tools), dk, kept, rows, user_frame, startup, queued) = match prepared {
        Ok(p) => p,
        Err(queue) => return Ok(Prepared::Queued(queue)),
    };
    let seq = user_frame.frame.seq;
    let history = match (kept, rows) {
        (Some(mut kept), _) => {
            st.history.append(user_frame.clone());
            kept.push(user_frame.clone());
            kept
        }
        (None, rows) => {
            let mut read = match rows.flatten() {
                Some(rows) => rows.open(&dk)?,
                None => frames::before(&st.db, &dk, session_id, seq).await?,
            };
            read.push(user_frame.clone());
            st.history.put(session_id, read.clone());
            read
        }
    };
    Ok(Prepared::Started(Box::new(Started {
        agent,
        dk,
        tools,
        history,
        user_frame: (*user_frame.frame).clone(),
        startup: startup.iter().map(|k| (*k.frame).clone()).collect(),
        queued,
    })))
}
