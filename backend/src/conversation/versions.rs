//! A message's versions (`hero_shared::frame`'s "Versions"): the user's message edited, the
//! agent's reply regenerated, and a switch between versions. Each is a new frame (an edit
//! and a regeneration a message whose parent is the first version, a switch an `update`);
//! nothing is replaced or deleted, and every version stays reachable.
//!
//! Only a message in the conversation as shown (its current versions, since the last
//! summary) changes, and never while a reply or a call runs for the session: a reply in
//! flight goes on from the versions shown when it started.

use hero_shared::frame::{AuthorType, CompiledMessage, FrameType, Role, compile_frames};
use serde_json::{Value, json};

use crate::accounts::auth::AuthUser;
use crate::conversation::history::Kept;
use crate::conversation::{context, frames, turn};
use crate::crypto::SecretKey;
use crate::{AppState, Error, Result};

/// Sends `content` as a new version of the user's message `frame_id` and starts the agent's
/// reply to it; the reply's id.
pub async fn edit(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    frame_id: &str,
    content: &str,
) -> Result<String> {
    let c = Conversation::read(st, user, session_id).await?;
    let m = c.shown(st, session_id, frame_id).await?;
    let own = m.author_type == AuthorType::User
        && m.role == Role::User
        && m.payload.get("private") != Some(&Value::Bool(true));
    if !own {
        return Err(Error::Conflict(
            "only your own messages can be edited (an agent's reply is regenerated instead)".into(),
        ));
    }
    c.idle(st, session_id)?;
    let of = c.first_version(frame_id).to_owned();
    // The files the message carried go with its new version, and the skills it named.
    let carried = turn::Carried {
        attachments: m.payload.get("attachments").cloned(),
        skill_filter: m
            .payload
            .get("skill_filter")
            .and_then(|f| serde_json::from_value(f.clone()).ok()),
    };
    let handle = turn::edit(st, user, session_id, of, content, carried).await?;
    Ok(handle.message_id)
}

/// Asks the agent for a new version of its reply `frame_id`, answering the conversation
/// before it again; the new reply's id.
pub async fn regenerate(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    frame_id: &str,
) -> Result<String> {
    let c = Conversation::read(st, user, session_id).await?;
    let m = c.shown(st, session_id, frame_id).await?;
    if m.author_type != AuthorType::Agent || m.role != Role::Agent {
        return Err(Error::Conflict(
            "only an agent's reply can be regenerated (your own message is edited instead)".into(),
        ));
    }
    c.idle(st, session_id)?;
    let of = c.first_version(frame_id).to_owned();
    turn::regenerate(st, user, session_id, of, frame_id).await
}

/// Shows version `version` (from 1) of the message that `frame_id`, any of its versions,
/// is a version of.
pub async fn switch(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    frame_id: &str,
    version: usize,
) -> Result<()> {
    let c = Conversation::read(st, user, session_id).await?;
    let of = c.first_version(frame_id);
    let shown = c
        .view
        .iter()
        .find(|m| m.versions.as_ref().is_some_and(|v| v.of == of));
    let versions = match shown {
        Some(m) => m.versions.as_ref().expect("found by its versions"),
        None => {
            c.shown(st, session_id, frame_id).await?;
            return Err(Error::Conflict("that message has only one version".into()));
        }
    };
    if !(1..=versions.count).contains(&version) {
        return Err(Error::Invalid(format!(
            "there is no version {version}: the message has versions 1 to {}",
            versions.count
        )));
    }
    c.idle(st, session_id)?;
    let payload = json!({ "current": version });
    frames::update_message(st, user, &c.dk, session_id, &versions.of, payload).await
}

/// The session's conversation since its last summary: its frames and what they show.
struct Conversation {
    dk: SecretKey,
    kept: Vec<Kept>,
    view: Vec<CompiledMessage>,
}

impl Conversation {
    /// 404 for a session that is not the user's.
    async fn read(st: &AppState, user: &AuthUser, session_id: i64) -> Result<Conversation> {
        let dk = frames::session_key(st, user, session_id).await?;
        let kept = context::load(st, &dk, session_id).await?;
        let view = compile_frames(&kept);
        Ok(Conversation { dk, kept, view })
    }

    /// The message `frame_id` as the conversation shows it: 404 if the session has no such
    /// message, 409 if it is not shown (another version is, or it is before the summary).
    async fn shown(
        &self,
        st: &AppState,
        session_id: i64,
        frame_id: &str,
    ) -> Result<&CompiledMessage> {
        let found = self
            .view
            .iter()
            .find(|m| m.frame_id == frame_id && m.frame_type == FrameType::Message);
        if let Some(m) = found {
            return Ok(m);
        }
        if self.kept.iter().any(|k| k.frame.id == frame_id) {
            return Err(Error::Conflict(
                "that message is in a version not shown: switch to it first".into(),
            ));
        }
        match frames::get(&st.db, &self.dk, session_id, frame_id).await {
            Ok(f) if f.frame_type == FrameType::Message => Err(Error::Conflict(
                "that message is before the conversation's summary, and no longer changes".into(),
            )),
            _ => Err(Error::NotFound("message")),
        }
    }

    /// The id a message's versions go by: its first version's, found by following the
    /// messages' parents.
    fn first_version<'a>(&'a self, mut frame_id: &'a str) -> &'a str {
        let message = |id: &str| {
            self.kept
                .iter()
                .map(|k| &*k.frame)
                .find(|f| f.id == id && f.frame_type == FrameType::Message)
        };
        // Bounded by the frames: a log holds no circle of parents, and a bound holds if one
        // ever did.
        for _ in 0..self.kept.len() {
            match message(frame_id)
                .and_then(|f| f.parent_id.as_deref())
                .filter(|p| message(p).is_some())
            {
                Some(parent) => frame_id = parent,
                None => break,
            }
        }
        frame_id
    }
}

impl Conversation {
    /// 409 while a reply or a call runs for the session, or a call waits for the user in
    /// the conversation shown: its decision would answer a version no longer shown.
    fn idle(&self, st: &AppState, session_id: i64) -> Result<()> {
        if !st.turns.is_idle(session_id) {
            return Err(Error::Conflict(
                "a reply is in flight: stop it or wait for it to finish".into(),
            ));
        }
        let waiting = hero_shared::calls::calls(&self.view).into_iter().any(|c| {
            c.result.is_none()
                && matches!(
                    c.request.status,
                    hero_shared::calls::CallStatus::Pending
                        | hero_shared::calls::CallStatus::Asking
                )
        });
        if waiting {
            return Err(Error::Conflict(
                "a call waits for your answer or approval: decide it, or Stop, first".into(),
            ));
        }
        Ok(())
    }
}
