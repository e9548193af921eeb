//! Answers to the questions in a reply. A question of the agent's (`<ask>`, a call waiting
//! for the user) is answered through its call ([`crate::conversation::turn::answer_question`]): the answer
//! is the call's result and the agent is given it. An `<hml-prompt>` answered inline is a
//! `result` frame whose parent is the message holding the prompt and whose target is
//! `element:<id>` (reference 003); compiling the log writes it into the prompt as
//! `<response>`, which is how the page shows it (in every tab) and how the agent reads it
//! in its next context. Each answer is first checked against its prompt
//! ([`hero_shared::hml::Prompt::check`]): one the widget could not have given is refused,
//! naming the rule, and nothing is stored.
//!
//! Answering prompts one by one does not make the agent answer after each: the answer that
//! fills the message's last open prompt (reference 000 "Answer Flow") also appends a user
//! message listing the answers the agent has not seen (its payload's `answers`; it runs no
//! calls), in the same transaction, and the agent's reply to it starts. The transaction
//! holds the session's lock, so of two tabs answering the last two prompts at once exactly
//! one sees none left open. An answer the agent recorded from the chat (`update_prompt`)
//! starts nothing: the agent is already answering. One answer per prompt: a second is a
//! 409, but for an answer the agent recorded, which the user may still correct in the
//! prompt (a correction starts no reply either: the prompt was not open).

use hero_shared::calls::CallRequest;
use hero_shared::frame::{AuthorType, FrameType, TargetId};
use hero_shared::hml::{Prompt, parse};
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
    let filled = answer_prompt(
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
    .await?;
    if filled {
        crate::conversation::turn::reply_to_answers(st, user, session_id, message_id);
    }
    Ok(())
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

/// Records the answer and returns whether it filled the message's last open prompt (then,
/// for the user's answer, the user's message of answers is stored with it).
pub(crate) async fn answer_prompt(
    st: &AppState,
    by: Answerer,
    dk: &crate::crypto::SecretKey,
    session_id: i64,
    message_id: &str,
    element_id: &str,
    answer: Value,
) -> Result<bool> {
    let (kept, answers) = st
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
            // A prompt cut short was never a question.
            let doc = parse(content);
            let prompts: Vec<Prompt> = doc
                .elements()
                .filter(|e| !e.truncated)
                .filter_map(Prompt::from_element)
                .collect();
            let prompt = prompts
                .iter()
                .find(|p| p.id == element_id)
                .ok_or(Error::NotFound("question"))?;
            prompt.check(&answer).map_err(Error::Invalid)?;
            let children = store::frames::children_hot(tx, session_id, message_id).await?;
            let answered = answered_prompts(children);
            let earlier = answered.iter().filter(|(id, _)| id == element_id);
            // The user's own answer is final; one the agent recorded from the chat, the user
            // may still correct (once: their answer is then final too).
            let taken = match by.author_type {
                AuthorType::User => earlier.clone().any(|(_, r)| r.author_type == "user"),
                _ => earlier.clone().next().is_some(),
            };
            if taken {
                return Err(Error::Conflict("this question was already answered".into()));
            }
            // Open: no answer frame yet (what the model wrote in the prompt says nothing).
            let was_open = earlier.count() == 0;
            let f = NewFrame {
                id: frames::new_id(),
                session_id,
                parent_id: Some(message_id.to_owned()),
                target_ids: vec![TargetId::Element(element_id.to_owned())],
                frame_type: FrameType::Result,
                author_type: by.author_type,
                author_id: by.author_id,
                payload: json!({"answer": answer, "element_id": element_id}),
            };
            let sealed = frames::seal(dk, f)?;
            let seq = sealed.insert(tx).await?;
            crate::conversation::frames::full_session(st, seq)?;
            let kept = sealed.kept(seq);
            let none_open = prompts
                .iter()
                .all(|p| p.id == element_id || answered.iter().any(|(id, _)| *id == p.id));
            if !(was_open && none_open && by.author_type == AuthorType::User) {
                return Ok((kept, None));
            }
            // The answers given since the agent last replied, in the prompts' order.
            let seen = store::frames::last_agent_message(tx, session_id).await?;
            let mut given = Vec::new();
            for (id, r) in answered {
                if r.author_type == "user" && r.seq > seen {
                    let f = r.open(dk)?;
                    given.push((id, f.payload.get("answer").cloned().unwrap_or(Value::Null)));
                }
            }
            given.push((element_id.to_owned(), answer.clone()));
            let message = answers_message(session_id, by.author_id, &prompts, given);
            let sealed = frames::seal(dk, message)?;
            let seq = sealed.insert(tx).await?;
            // The reply it starts needs room too.
            crate::conversation::frames::full_session(st, seq + 1)?;
            Ok((kept, Some(sealed.kept(seq))))
        })
        .await?;
    for k in std::iter::once(kept).chain(answers.clone()) {
        st.hub
            .publish(by.user_id, session_id, HubEvent::Frame((*k.frame).clone()));
        st.history.append(k);
    }
    Ok(answers.is_some())
}

/// The answers among a message's children: (the prompt's id, the answer's frame), oldest
/// first.
fn answered_prompts(
    children: Vec<store::frames::FrameRow>,
) -> Vec<(String, store::frames::FrameRow)> {
    children
        .into_iter()
        .filter(|r| r.frame_type == "result")
        .filter_map(|r| {
            let targets = serde_json::from_str::<Vec<TargetId>>(&r.target_ids).ok()?;
            let id = targets.into_iter().find_map(|t| match t {
                TargetId::Element(id) => Some(id),
                _ => None,
            })?;
            Some((id, r))
        })
        .collect()
}

/// The user's message that hands the agent the answers it has not seen: each prompt's
/// question and answer as a line of text, and the same in `answers`, in the prompts' order.
fn answers_message(
    session_id: i64,
    user_id: Option<i64>,
    prompts: &[Prompt],
    given: Vec<(String, Value)>,
) -> NewFrame {
    let mut lines = vec!["My answers to your prompts:".to_owned()];
    let mut listed = Vec::new();
    for p in prompts {
        let Some((_, answer)) = given.iter().rev().find(|(id, _)| *id == p.id) else {
            continue;
        };
        lines.push(format!("- {}: {}", p.question, answer_text(p, answer)));
        listed.push(json!({"element_id": p.id, "question": p.question, "answer": answer}));
    }
    NewFrame::message(
        session_id,
        AuthorType::User,
        user_id,
        json!({"role": "user", "content": lines.join("\n"), "answers": listed}),
    )
}

/// An answer as a person reads it: an option by its label, a box as yes or no.
fn answer_text(p: &Prompt, answer: &Value) -> String {
    let label = |v: &str| {
        p.options
            .iter()
            .find(|o| o.value == v)
            .map_or_else(|| v.to_owned(), |o| o.label.clone())
    };
    match answer {
        Value::String(s) => label(s),
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_owned(),
        Value::Array(items) => {
            let chosen: Vec<String> = items
                .iter()
                .map(|i| i.as_str().map_or_else(|| i.to_string(), label))
                .collect();
            if chosen.is_empty() {
                "none".to_owned()
            } else {
                chosen.join(", ")
            }
        }
        other => other.to_string(),
    }
}
