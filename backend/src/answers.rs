//! Answers to the questions in a reply: an `<hml-prompt>` answered inline. An answer is a
//! `result` frame whose parent is the message holding the prompt and whose target is
//! `element:<id>` (reference 003); compiling the log writes it into the prompt as
//! `<response>`, which is how the page shows it (in every tab) and how the agent reads it
//! in its next context. It does not start a reply of its own: answering several prompts
//! should not make the agent answer after each, and the user's next message carries them
//! all. One answer per prompt: a second is a 409.

use hero_shared::frame::{AuthorType, FrameType, TargetId};
use hero_shared::hml::{ElementKind, parse};
use serde_json::{Value, json};

use crate::auth::AuthUser;
use crate::frames::{self, NewFrame};
use crate::hub::HubEvent;
use crate::{AppState, Error, Result, store};

/// The most an answer may hold, as JSON.
pub const MAX_ANSWER_BYTES: usize = 16 << 10;

/// Records the user's answer to the prompt `element_id` of message `message_id`.
pub async fn answer(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    message_id: &str,
    element_id: &str,
    answer: Value,
) -> Result<()> {
    if serde_json::to_vec(&answer).map_or(0, |v| v.len()) > MAX_ANSWER_BYTES {
        return Err(Error::Invalid(format!(
            "the answer is too long (at most {} KiB)",
            MAX_ANSWER_BYTES >> 10
        )));
    }
    let dk = frames::session_key(st, user, session_id).await?;
    let kept = st
        .hot_db
        .write(&st.db, |tx| {
            let row = store::frames::get_hot(tx, session_id, message_id)?
                .filter(|r| r.frame_type == "message")
                .ok_or(Error::NotFound("message"))?;
            let message = row.open(&dk)?;
            let content = message
                .payload
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let asks = parse(content)
                .elements()
                .any(|e| e.id == element_id && e.kind == ElementKind::HmlPrompt && !e.truncated);
            if !asks {
                return Err(Error::NotFound("question"));
            }
            let target = TargetId::Element(element_id.to_owned());
            let answered = store::frames::children_hot(tx, session_id, message_id)?
                .iter()
                .any(|r| {
                    serde_json::from_str::<Vec<TargetId>>(&r.target_ids)
                        .is_ok_and(|t| t.contains(&target))
                });
            if answered {
                return Err(Error::Conflict("this question was already answered".into()));
            }
            let f = NewFrame {
                id: frames::new_id(),
                session_id,
                parent_id: Some(message_id.to_owned()),
                target_ids: vec![target],
                frame_type: FrameType::Result,
                author_type: AuthorType::User,
                author_id: Some(user.id()),
                payload: json!({"answer": answer, "element_id": element_id}),
            };
            let sealed = frames::seal(&dk, f)?;
            let seq = sealed.insert(tx)?;
            crate::turn::full_session(st, seq)?;
            Ok(sealed.kept(seq))
        })
        .await?;
    st.hub.publish(
        user.id(),
        session_id,
        HubEvent::Frame((*kept.frame).clone()),
    );
    st.history.append(kept);
    Ok(())
}
