//! Questions of the agent's (`ask`): their answers, given or timed out, as the call's
//! result, and the prompt the feed shows.

use hero_shared::calls::{CallRequest, CallStatus, Outcome};
use hero_shared::feed::QuestionPrompt;
use serde_json::Value;

use super::settle::record;
use super::*;
use crate::accounts::auth::AuthUser;
use crate::conversation::frames::{self};
use crate::execution::functions::{self};
use crate::{AppState, Error, Result, store};

/// How a question is answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The user's answer.
    Given(Value),
    /// The question's time ran out: its default (if it has one) is the answer.
    TimedOut,
}

/// The answer to a question of the agent's (an `ask` call waiting, by its request frame
/// id): stored as the call's result, under the message's lock and only while the question
/// is open (a second answer is a 409). When it was its message's last open call, the
/// message's id (the agent may be given the results).
pub(crate) async fn answer_question(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    request_id: &str,
    answer: Answer,
) -> Result<Option<String>> {
    let dk = frames::session_key(st, user, session_id).await?;
    let row = st
        .db
        .read_with(async |c| store::frames::get_hot(c, session_id, request_id).await)
        .await?
        .filter(|r| r.frame_type == "request")
        .ok_or(Error::NotFound("question"))?;
    let request = row.open(&dk)?;
    let req: CallRequest = serde_json::from_value(request.payload)
        .map_err(|_| Error::Internal("a request frame is unreadable".into()))?;
    let message_id = request.parent_id.unwrap_or_default();
    if req.status != CallStatus::Asking {
        return Err(Error::NotFound("question"));
    }
    let output = match &answer {
        Answer::Given(v) => {
            let text = functions::ask::answer_text(v);
            if text.trim().is_empty() {
                return Err(Error::Invalid("the answer is empty".into()));
            }
            text
        }
        Answer::TimedOut => {
            let waited = req.args.get("timeout").and_then(Value::as_u64).unwrap_or(0);
            let waited = hero_shared::calls::stored_timeout_ms(waited) as f64 / 1000.0;
            match req.args.get("default").and_then(Value::as_str) {
                Some(d) => format!("{d} (the default: no answer came within {waited} s)"),
                None => format!("no answer came within {waited} s"),
            }
        }
    };
    let _lock = st.message_locks.lock(st, &message_id).await?;
    if !open_calls(st, session_id, &message_id)
        .await?
        .contains(&request_id.to_owned())
    {
        return Err(Error::Conflict("this question was already answered".into()));
    }
    let (agent_id, tools) = st
        .db
        .read_with(async |c| {
            let agent = store::sessions::agent_of(c, user.id(), session_id).await?;
            Ok((
                agent,
                crate::execution::mcp::registry(st, c, user.id()).await?,
            ))
        })
        .await?;
    let sc = Scene {
        user_id: user.id(),
        session_id,
        dk,
        message_id: message_id.clone(),
        agent_id,
        tools: tools.clone(),
    };
    let emit = readers(st, user.id(), session_id);
    let o = Opened {
        request_id: request_id.to_owned(),
        req,
    };
    record(st, &sc, &o, Outcome::Ok, output, &emit).await?;
    let done = super::settle::all_settled(st, session_id, &message_id).await?;
    Ok(done.then_some(message_id))
}

/// `question_prompt`'s data for a question as its request holds it.
pub(super) fn question_prompt(sc: &Scene, request_id: &str, req: &CallRequest) -> QuestionPrompt {
    let arg = |k: &str| req.arg(k).map(str::to_owned);
    QuestionPrompt {
        session_id: sc.session_id,
        message_id: sc.message_id.clone(),
        assertion_id: request_id.to_owned(),
        question: arg("question").unwrap_or_default(),
        mode: if req.expires_at.is_some() {
            "timeout"
        } else {
            "demand"
        }
        .to_owned(),
        timeout: req.expires_at.map(|at| (at - now_ms()).max(0) as u64),
        options: req.arg_list("options"),
        default: arg("default"),
    }
}

pub(crate) use crate::now_ms;
