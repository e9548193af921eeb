//! Compaction (reference 003, phase 6, "Compact Frames"): when a session's conversation
//! since its last summary has grown past its agent's threshold (messages, or tokens: the
//! provider's usage where known, else an estimate), or when the user types `/compact`, the
//! agent is asked for a summary that keeps decisions, open questions and a TODO list
//! ([`crate::agents::prompt::COMPACT`], a section after its own prompt). The summary is stored as a
//! `compact` frame: the next call sends only it and what follows, and the page starts
//! there (the older frames stay in the log, never deleted).
//!
//! A summary that fails (a provider error, a timeout, an empty or oversized reply, a Stop)
//! stores nothing and says why; so does one the conversation outran (a frame appended while
//! it was written: it would hide that frame).

use hero_shared::frame::{AuthorType, Frame, FrameType};
use serde_json::json;

use crate::accounts::auth::AuthUser;
use crate::agents::Thresholds;
use crate::conversation::frames::{self, NewFrame};
use crate::conversation::history::Kept;
use crate::conversation::hub::HubEvent;
use crate::drive::abort::Abort;
use crate::providers::{self, Call, ChatMessage, Role};
use crate::{AppState, Error, Result};

/// The longest a summary may be.
pub const MAX_SUMMARY_BYTES: usize = 64 << 10;

/// The longest a summary may take.
pub const WITHIN: std::time::Duration = std::time::Duration::from_secs(180);

/// Messages since the last summary in `kept` (the frames from it on).
pub fn messages(kept: &[Kept]) -> u64 {
    // The startup processes a summary is followed by are not the conversation, nor is a
    // memory flush's exchange or its note.
    kept.iter().filter(|k| k.counts.message).count() as u64
}

/// The conversation's size in tokens: what the provider counted for the last reply (its
/// input and its output) when it said, else a quarter of the characters.
pub fn tokens(kept: &[Kept]) -> u64 {
    let reported = kept.iter().rev().find_map(|k| k.counts.usage);
    reported.unwrap_or_else(|| kept.iter().map(|k| k.counts.content_len).sum::<u64>() / 4)
}

/// Whether a turn ending on `kept` starts a memory flush ([`crate::conversation::flush`]):
/// past the flush point, and none since the last summary.
pub fn flush_due(kept: &[Kept], t: Thresholds) -> bool {
    let at = t.flush_at();
    at > 0 && !crate::conversation::flush::flushed(kept) && tokens(kept) >= at
}

/// Whether the conversation in `kept` has crossed the thresholds.
pub fn due(kept: &[Kept], t: Thresholds) -> bool {
    messages(kept) >= t.messages || tokens(kept) >= t.tokens
}

/// Asks the session's agent for a summary and stores it as a `compact` frame; `Err` says
/// why nothing was stored.
pub async fn compact(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    abort: Option<&Abort>,
) -> Result<Frame> {
    crate::skills::grants::ready(st).await?;
    let (agent, dk, _) = st
        .db
        .read_with(async |c| {
            crate::agents::persona::prepared(c, st, user, session_id, false, None).await
        })
        .await?;
    let mut kept = crate::conversation::context::load(st, &dk, session_id).await?;
    if messages(&kept) == 0 {
        return Err(Error::Invalid(
            "there is nothing to summarise since the last summary".into(),
        ));
    }
    // The agent saves what should last before the details are folded away, once a cycle
    // (reference 002 §16); how the flush went is in its note, and the summary goes on.
    if !crate::conversation::flush::flushed(&kept) {
        crate::conversation::flush::flush(st, user, session_id, abort).await?;
        kept = crate::conversation::context::load(st, &dk, session_id).await?;
    }
    if abort.is_some_and(Abort::is_aborted) {
        return Err(Error::Invalid(
            "the summary was stopped; nothing was changed".into(),
        ));
    }
    let through = kept.last().map_or(0, |k| k.frame.seq);
    let mut messages = crate::conversation::context::messages(&kept);
    messages.push(std::sync::Arc::new(ChatMessage::text(
        Role::User,
        "[System] Write the summary now, as your task says.",
    )));
    let call = Call {
        endpoint: &agent.endpoint,
        system: crate::providers::SystemPrompt::new(crate::agents::prompt::with_task(
            &agent.system,
            crate::agents::prompt::COMPACT,
        )),
        messages,
        tools: Vec::new(),
        whole: false,
    };
    let summary = providers::collect(
        &st.http,
        &st.call_options,
        call,
        WITHIN,
        MAX_SUMMARY_BYTES,
        abort,
    )
    .await
    .map_err(|why| Error::Invalid(format!("the summary failed: {why}; nothing was changed")))?;
    let summary = summary.trim();
    if summary.is_empty() {
        return Err(Error::Invalid(
            "the summary failed: the agent wrote nothing; nothing was changed".into(),
        ));
    }
    let f = NewFrame {
        id: frames::new_id(),
        session_id,
        parent_id: None,
        target_ids: Vec::new(),
        frame_type: FrameType::Compact,
        author_type: AuthorType::Agent,
        author_id: Some(agent.id),
        payload: json!({
            "role": "system",
            "content": summary,
            "agent_name": agent.name,
            "through_seq": through,
            "messages": crate::conversation::compact::messages(&kept),
        }),
    };
    let kept = st
        .db
        .write_with(async |tx| {
            let sealed = frames::seal(&dk, f.clone())?;
            let seq = sealed.insert(tx).await?;
            // Rolled back: a frame appended while the summary was written would be hidden
            // behind it.
            if seq != through + 1 {
                return Err(Error::Conflict(
                    "the conversation moved on while it was being summarised; nothing was changed"
                        .into(),
                ));
            }
            crate::conversation::frames::full_session(st, seq)?;
            // The startup processes follow the summary: a summarised session keeps them (and
            // one summarised before its first message is begun, not given them twice).
            crate::store::sessions::begin(tx, user.id(), session_id).await?;
            let startup =
                crate::conversation::startup::append(tx, st, &dk, user.id(), session_id).await?;
            Ok((sealed.kept(seq), startup))
        })
        .await?;
    let (kept, startup) = kept;
    let frame = (*kept.frame).clone();
    st.hub
        .publish(user.id(), session_id, HubEvent::Frame(frame.clone()));
    for k in &startup {
        st.hub
            .publish(user.id(), session_id, HubEvent::Frame((*k.frame).clone()));
    }
    // The conversation kept in memory starts again at the summary.
    let mut history = vec![kept];
    history.extend(startup);
    st.history.put(session_id, history);
    Ok(frame)
}

/// After a turn that found the session past its agent's thresholds ([`due`]): summarises
/// it as a reply would ([`crate::conversation::cluster::spawn_as_reply`]: a summary counts
/// as a reply in flight; with none to spare, the next turn tries again).
pub fn maybe(st: &AppState, user: &AuthUser, session_id: i64) {
    crate::conversation::cluster::spawn_as_reply(
        st,
        user,
        session_id,
        move |st, user, abort| async move {
            match compact(&st, &user, session_id, Some(&abort)).await {
                Ok(_) => tracing::info!(session = session_id, "the session was summarised"),
                Err(e) => {
                    tracing::warn!(session = session_id, error = %e, "the session could not be summarised")
                }
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use hero_shared::frame::AuthorType;
    use serde_json::{Value, json};

    fn kept(seq: i64, frame_type: FrameType, payload: Value) -> Kept {
        let frame = crate::test_support::frame(seq, frame_type, AuthorType::User, payload);
        Kept::new(frame, 0)
    }

    /// The measures read what each frame's payload says, once: startup processes and a
    /// memory flush's exchange are not messages, the last reported usage is the size, and
    /// without one a quarter of the characters is.
    #[test]
    fn the_thresholds_measure_what_the_frames_say() {
        let startup = kept(
            1,
            FrameType::Message,
            json!({"content": "aaaa", "startup": true}),
        );
        let asked = kept(
            2,
            FrameType::Message,
            json!({"role": "user", "content": "a".repeat(40)}),
        );
        let request = kept(3, FrameType::Request, json!({"content": "bbbb"}));
        assert_eq!(
            messages(&[startup.clone(), asked.clone(), request.clone()]),
            1
        );
        assert_eq!(
            tokens(&[startup.clone(), asked.clone(), request.clone()]),
            (4 + 40 + 4) / 4
        );

        let reply = |seq, usage: Value| {
            kept(
                seq,
                FrameType::Message,
                json!({"role": "assistant", "content": "ok", "usage": usage}),
            )
        };
        let said = vec![
            asked.clone(),
            reply(4, json!({"input_tokens": 900, "output_tokens": 100})),
        ];
        assert_eq!(tokens(&said), 1000);
        // The latest report counts, one side of it alone too; a report of neither is none.
        let later = vec![
            said[0].clone(),
            said[1].clone(),
            reply(5, json!({"output_tokens": 7})),
        ];
        assert_eq!(tokens(&later), 7);
        let neither = vec![said[0].clone(), said[1].clone(), reply(5, json!({}))];
        assert_eq!(tokens(&neither), 1000);

        let note = kept(
            6,
            FrameType::Message,
            json!({"content": "Saved", "memory_flush": {}}),
        );
        let flush = kept(
            7,
            FrameType::Message,
            json!({"content": "x", "flush": true}),
        );
        assert!(!crate::conversation::flush::flushed(&said));
        assert!(crate::conversation::flush::flushed(&[
            asked.clone(),
            note.clone()
        ]));
        assert_eq!(messages(&[asked, note, flush]), 1);
        let t = Thresholds {
            messages: 10,
            tokens: 1000,
            ..Thresholds::default()
        };
        assert!(due(&said, t), "1,000 tokens reach the bound");
        assert!(!due(&said[..1], t));
    }
}
