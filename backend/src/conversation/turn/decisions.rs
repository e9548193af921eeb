//! What follows a call settled outside a reply: the user's decision on a pending call, an
//! answer to a question, a timed question's time running out, and the calls a restart
//! left open. Each settles through [`act`]; when it settled the message's last open call,
//! the stage decided here is the agent's follow-up reply ([`super::follow_up`]). `act`
//! itself never starts a reply.

use hero_shared::calls::CallStatus;
use hero_shared::wire::{ErrorData, SseEvent};

use crate::accounts::auth::AuthUser;
use crate::conversation::act::{self, Answer, Timed};
use crate::conversation::turn::registry::Acting;
use crate::{AppState, Error, Result};

/// The user's decision on a pending call: recorded at once (a second decision is a 409);
/// the call then runs or is refused in a task of its own, and if it was the message's
/// last open call the agent is given the results.
pub async fn decide(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    request_id: &str,
    approved: bool,
) -> Result<CallStatus> {
    let decided = act::decide(st, user, session_id, request_id, approved).await?;
    let status = decided.status;
    let (st, user) = (st.clone(), user.clone());
    tokio::spawn(async move {
        // Registered first: a Stop from now on reaches the call, and the follow-up after it.
        let acting = st.turns.acting(session_id);
        let message_id = decided.message_id.clone();
        match act::carry_out(&st, &user, decided, acting.abort()).await {
            Ok(true) => follow_on(&st, &user, session_id, &message_id, &acting).await,
            Ok(false) => {}
            Err(e) => tracing::error!(error = %e, "a decided call could not be carried on"),
        }
        // Held until the follow-up is registered: a Stop in between reaches one of them.
        drop(acting);
    });
    Ok(status)
}

/// The answer to a question of the agent's, by its request frame id ([`act::answer_question`]);
/// if it settled the message's last open call, the agent is given the results in a task
/// of its own.
pub async fn answer_question(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    request_id: &str,
    answer: Answer,
) -> Result<()> {
    let acting = st.turns.acting(session_id);
    if let Some(message_id) = act::answer_question(st, user, session_id, request_id, answer).await?
    {
        let (st, user) = (st.clone(), user.clone());
        tokio::spawn(async move {
            follow_on(&st, &user, session_id, &message_id, &acting).await;
            drop(acting);
        });
    }
    Ok(())
}

/// The agent's reply to the user's message of answers that filled a message's last open
/// prompt ([`crate::conversation::answers`]), started in a task of its own as a follow-up
/// is; `message_id` is the message whose prompts were answered (where a failure to start is
/// said).
pub fn reply_to_answers(st: &AppState, user: &AuthUser, session_id: i64, message_id: &str) {
    let acting = st.turns.acting(session_id);
    let (st, user, message_id) = (st.clone(), user.clone(), message_id.to_owned());
    tokio::spawn(async move {
        follow_on(&st, &user, session_id, &message_id, &acting).await;
        drop(acting);
    });
}

/// Arms the timer of each timed question: at its time, one still open takes its default.
pub fn arm(st: &AppState, timed: Vec<Timed>) {
    for t in timed {
        let st = st.clone();
        tokio::spawn(async move {
            // Held while armed: if this instance dies first, another arms it again.
            let mark = crate::conversation::cluster::timer_mark(&t.request_id);
            let _owned = crate::conversation::cluster::hold_work(&st, mark).await;
            let wait = u64::try_from(t.at - act::now_ms()).unwrap_or(0);
            tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
            // A server shutting down leaves it to the next start-up's [`recover`] (or, with
            // several instances, to the one that takes its work over once it has left).
            if st.hub.is_closing() {
                return;
            }
            let user = AuthUser::on_behalf_of(t.user_id);
            match answer_question(&st, &user, t.session_id, &t.request_id, Answer::TimedOut).await {
                // Answered (or stopped) before its time: nothing to do.
                Ok(()) | Err(Error::Conflict(_) | Error::NotFound(_)) => {}
                Err(e) => tracing::warn!(error = %e, "a question's default could not be recorded"),
            }
        });
    }
}

/// After a restart ([`act::recover`]): replies left unwritten after their calls began are
/// written, approved calls that had begun are recorded as interrupted (how many is
/// returned), and timed questions still open are armed again.
pub async fn recover(st: &AppState) -> Result<usize> {
    let found = act::recover(st).await?;
    if found.replies > 0 {
        tracing::info!(
            replies = found.replies,
            "replies the last run stopped writing after their calls began are written, saying so"
        );
    }
    arm(st, found.timed);
    Ok(found.interrupted)
}

/// The agent is given the results of a message whose calls are all settled (or the answers
/// to its prompts), unless a Stop reached `acting` first. A failure to start is told where
/// the user looks.
async fn follow_on(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    message_id: &str,
    acting: &Acting,
) {
    if acting.abort().is_aborted() {
        return;
    }
    if let Err(e) = super::follow_up(st, user, session_id, Some(acting.abort())).await {
        // The results are stored; the agent's answer to them could not start. Say so
        // where the user looks, in words they can act on.
        tracing::warn!(error = %e, "a follow-up reply could not start");
        act::readers(st, user.id(), session_id)(SseEvent::Error(ErrorData {
            message_id: Some(message_id.to_owned()),
            error: format!(
                "the agent's next reply could not start: {}; send a message to go on",
                e.public_message()
            ),
        }));
    }
}
