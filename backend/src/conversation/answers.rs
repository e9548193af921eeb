//! Answers to the questions in a reply. A question of the agent's (`<ask>`, a call waiting
//! for the user) is answered through its call ([`crate::conversation::turn::answer_question`]): the answer
//! is the call's result and the agent is given it. An `<hml-prompt>` answered inline is a
//! `result` frame whose parent is the message holding the prompt and whose target is
//! `element:<id>` (reference 003); compiling the log writes it into the prompt as
//! `<response>`, which is how the page shows it (in every tab) and how the agent reads it
//! in its next context. It does not start a reply of its own: answering several prompts
//! should not make the agent answer after each, and the user's next message carries them
//! all. One answer per prompt: a second is a 409, but for an answer the agent recorded from
//! the chat (`update_prompt`), which the user may still correct in the prompt.

use hero_shared::calls::CallRequest;
use hero_shared::frame::{AuthorType, FrameType, TargetId};
use hero_shared::hml::{ElementKind, parse};
use serde_json::{Value, json};

use crate::accounts::auth::AuthUser;
use crate::conversation::frames::{self, NewFrame};
use crate::conversation::hub::HubEvent;
use crate::{AppState, Error, Result, store};

/// The most an answer may hold, as JSON.
pub const MAX_ANSWER_BYTES: usize = 16 << 10;

/// Records the user's answer to the question or prompt `element_id` of message
/// `message_id`.
pub async fn answer(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    message_id: &str,
    element_id: &str,
    answer: Value,
) -> Result<()> {
    check_size(&answer)?;
    let dk = frames::session_key(st, user, session_id).await?;
    if let Some(request_id) = question_of(st, &dk, session_id, message_id, element_id).await? {
        return crate::conversation::turn::answer_question(
            st,
            user,
            session_id,
            &request_id,
            crate::conversation::act::Answer::Given(answer),
        )
        .await;
    }
    answer_prompt(
        st,
        Answerer {
            user_id: user.id(),
            author_type: AuthorType::User,
            author_id: Some(user.id()),
        },
        &dk,
        session_id,
        message_id,
        element_id,
        answer,
    )
    .await
}

/// Refuses an answer larger than [`MAX_ANSWER_BYTES`].
pub fn check_size(answer: &Value) -> Result<()> {
    if serde_json::to_vec(answer).map_or(0, |v| v.len()) > MAX_ANSWER_BYTES {
        return Err(Error::Invalid(format!(
            "the answer is too long (at most {} KiB)",
            MAX_ANSWER_BYTES >> 10
        )));
    }
    Ok(())
}

/// The request of the question (a call answered by the user) that element `element_id` of
/// the message stands for, if it is one.
async fn question_of(
    st: &AppState,
    dk: &crate::crypto::SecretKey,
    session_id: i64,
    message_id: &str,
    element_id: &str,
) -> Result<Option<String>> {
    let rows = st
        .db
        .read_with(async |c| store::frames::children_hot(c, session_id, message_id).await)
        .await?;
    for r in rows.into_iter().filter(|r| r.frame_type == "request") {
        let f = r.open(dk)?;
        let Ok(req) = serde_json::from_value::<CallRequest>(f.payload) else {
            continue;
        };
        let answered_by_user = st
            .functions
            .get(&req.function)
            .is_some_and(|(s, _)| s.answered_by_user);
        if answered_by_user && req.origin.element_id() == element_id {
            return Ok(Some(f.id));
        }
    }
    Ok(None)
}

/// Records an answer to the prompt `element_id` of message `message_id`, by `author` (the
/// user through the page, or the agent's `update_prompt` for an answer given in chat).
/// Who records an answer: the session's owner (whose readers hear of it), and the answer
/// frame's author (the user, or the agent through `update_prompt`).
pub(crate) struct Answerer {
    pub user_id: i64,
    pub author_type: AuthorType,
    pub author_id: Option<i64>,
}

pub(crate) async fn answer_prompt(
    st: &AppState,
    by: Answerer,
    dk: &crate::crypto::SecretKey,
    session_id: i64,
    message_id: &str,
    element_id: &str,
    answer: Value,
) -> Result<()> {
    let kept = st
        .db
        .write_with(async |tx| {
            store::sessions::lock(tx, session_id).await?;
            let row = store::frames::get_hot(tx, session_id, message_id)
                .await?
                .filter(|r| r.frame_type == "message")
                .ok_or(Error::NotFound("message"))?;
            let message = row.open(dk)?;
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
            let children = store::frames::children_hot(tx, session_id, message_id).await?;
            let mut answers = children.iter().filter(|r| {
                serde_json::from_str::<Vec<TargetId>>(&r.target_ids)
                    .is_ok_and(|t| t.contains(&target))
            });
            // The user's own answer is final; one the agent recorded from the chat, the user
            // may still correct (once: their answer is then final too).
            let answered = match by.author_type {
                AuthorType::User => answers.any(|r| r.author_type == "user"),
                _ => answers.next().is_some(),
            };
            if answered {
                return Err(Error::Conflict("this question was already answered".into()));
            }
            let f = NewFrame {
                id: frames::new_id(),
                session_id,
                parent_id: Some(message_id.to_owned()),
                target_ids: vec![target],
                frame_type: FrameType::Result,
                author_type: by.author_type,
                author_id: by.author_id,
                payload: json!({"answer": answer, "element_id": element_id}),
            };
            let sealed = frames::seal(dk, f)?;
            let seq = sealed.insert(tx).await?;
            crate::conversation::frames::full_session(st, seq)?;
            Ok(sealed.kept(seq))
        })
        .await?;
    st.hub.publish(
        by.user_id,
        session_id,
        HubEvent::Frame((*kept.frame).clone()),
    );
    st.history.append(kept);
    Ok(())
}
