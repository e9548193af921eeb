//! After a restart (or another instance's death): a reply that a crash left unwritten
//! while its calls had begun is written (so no call's message is missing), approved calls
//! that never finished are recorded as interrupted, and timed questions still open are
//! handed back to be armed again. What an instance that is alive works on is left alone:
//! its replies and timers by their marks ([`crate::conversation::cluster::own`]), its
//! running calls by their message's lock, which it holds while they run.

use hero_shared::calls::{CallRequest, CallStatus, Outcome};
use hero_shared::frame::AuthorType;
use serde_json::json;

use super::settle::record;
use super::*;
use crate::conversation::cluster;
use crate::{AppState, Result, store};

/// What [`recover`] found.
#[derive(Default)]
pub struct Recovered {
    /// Calls recorded as interrupted.
    pub interrupted: usize,
    /// Replies written because a crash left them unwritten while their calls had begun.
    pub replies: usize,
    /// Timed questions still open: the caller arms their timers again.
    pub timed: Vec<Timed>,
}

/// After a restart: a call that was approved and had begun, but has no result, will never
/// finish; it is recorded as interrupted, so that its card and the agent say so (calls still
/// waiting for a decision wait on). Runs at start-up, before requests are served, and on
/// PostgreSQL when another instance's work is taken over.
pub(crate) async fn recover(st: &AppState) -> Result<Recovered> {
    let mut found = Recovered::default();
    for (session_id, message_id, user_id) in store::frames::missing_replies(&st.db).await? {
        let reply = cluster::reply_mark(user_id, session_id, &message_id);
        if cluster::owned_alive(st, &reply).await?
            || cluster::owned_alive(st, &super::streaming_mark(&message_id)).await?
        {
            continue;
        }
        match write_interrupted(st, session_id, &message_id, user_id, None).await {
            Ok(()) => found.replies += 1,
            Err(e) => tracing::warn!(
                error = %e,
                session = session_id,
                message = %message_id,
                "a reply left unwritten by the last run could not be written"
            ),
        }
    }
    for (row, user_id) in store::frames::open_requests_everywhere(&st.db).await? {
        let (session_id, request_id) = (row.session_id, row.id.clone());
        // One row that cannot be read (damaged, or its user's key gone) is passed over:
        // the others are still recovered.
        match recover_one(st, row, user_id).await {
            Ok(Some(RecoveredOne::Interrupted)) => found.interrupted += 1,
            Ok(Some(RecoveredOne::Timed(t))) => found.timed.push(t),
            Ok(None) => {}
            Err(e) => tracing::warn!(
                error = %e,
                session = session_id,
                request = %request_id,
                "a call left open by the last run could not be recovered"
            ),
        }
    }
    Ok(found)
}

/// What one open request came to after a restart.
enum RecoveredOne {
    Interrupted,
    Timed(Timed),
}

/// [`recover`] for one open request: a timed question to re-arm, or an approved call
/// recorded as interrupted.
async fn recover_one(
    st: &AppState,
    row: store::frames::FrameRow,
    user_id: i64,
) -> Result<Option<RecoveredOne>> {
    let (session_id, request_id) = (row.session_id, row.id.clone());
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user_id).await?;
    let Some(message_id) = row.parent_id.clone() else {
        return Ok(None);
    };
    let request = row.open(&dk)?;
    // The request as last decided: its latest update, if any.
    let updates = st
        .db
        .read_with(async |c| store::frames::children_hot(c, session_id, &request_id).await)
        .await?;
    let (latest, decided_at) = match updates.into_iter().rfind(|r| r.frame_type == "update") {
        Some(u) => {
            let u = u.open(&dk)?;
            (u.payload, Some(u.timestamp))
        }
        None => (request.payload, None),
    };
    let Ok(req) = serde_json::from_value::<CallRequest>(latest) else {
        return Ok(None);
    };
    // A timed question waits on, to its time (or takes its default now), unless an
    // instance alive has armed it.
    if let (CallStatus::Asking, Some(at)) = (req.status, req.expires_at) {
        if cluster::owned_alive(st, &cluster::timer_mark(&request_id)).await? {
            return Ok(None);
        }
        return Ok(Some(RecoveredOne::Timed(Timed {
            user_id,
            session_id,
            request_id,
            at,
        })));
    }
    if req.status != CallStatus::Approved {
        return Ok(None);
    }
    // With several instances, a call approved moments ago may be about to run on the one
    // that recorded the decision (which takes the message's lock right after): it is left
    // to it. A call of a dead instance is older than its death, which is older than this.
    if st.instance.get().is_some() && decided_at.as_deref().is_some_and(just_now) {
        return Ok(None);
    }
    // An instance alive running the call holds its message's lock: left to it.
    let Some(_lock) = st.message_locks.try_lock(st, &message_id).await? else {
        return Ok(None);
    };
    if !open_calls(st, session_id, &message_id)
        .await?
        .contains(&request_id)
    {
        return Ok(None);
    }
    let (agent_id, tools) = st
        .db
        .read_with(async |c| {
            let agent = store::sessions::agent_of(c, user_id, session_id).await?;
            Ok((
                agent,
                crate::execution::mcp::registry(st, c, user_id).await?,
            ))
        })
        .await?;
    let sc = Scene {
        user_id,
        session_id,
        dk,
        message_id,
        agent_id,
        tools: tools.clone(),
    };
    let o = Opened { request_id, req };
    record(
        st,
        &sc,
        &o,
        Outcome::Error,
        "interrupted: the server stopped before the call finished; ask for it again".into(),
        &|_| {},
    )
    .await?;
    Ok(Some(RecoveredOne::Interrupted))
}

/// Whether an RFC 3339 time is within the instances' expiry of now.
fn just_now(at: &str) -> bool {
    let Ok(at) = time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
    else {
        return false;
    };
    (time::OffsetDateTime::now_utc() - at).whole_milliseconds()
        < cluster::EXPIRY.as_millis() as i128
}

/// What follows the text kept of a reply whose server stopped while writing it.
const STOPPED: &str = "*The server stopped while this reply was being written: the rest is lost.*";

/// What a reply the server stopped writing says in place of its lost text (the agent reads
/// it too, before the results of the calls it had begun).
const CUT_OFF: &str = "*The server stopped while this reply was being written: its text is lost. The calls it had begun are below.*";

/// The message of a reply the process stopped before storing (its calls may have begun
/// while it streamed): the text `kept` of it (another instance's mirror), else a note that
/// its text is lost; marked aborted by shutdown. Its calls show under it and the agent
/// reads their results after it, as for any reply. Nothing if it is stored already. The
/// readers still showing it in flight are told it is complete.
pub async fn write_interrupted(
    st: &AppState,
    session_id: i64,
    message_id: &str,
    user_id: i64,
    kept: Option<String>,
) -> Result<()> {
    let stored = st
        .db
        .read_with(async |c| store::frames::get_hot(c, session_id, message_id).await)
        .await?;
    if stored.is_some() {
        return Ok(());
    }
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user_id).await?;
    let content = match kept.filter(|k| !k.trim().is_empty()) {
        Some(text) => format!("{text}\n\n{STOPPED}"),
        None => CUT_OFF.to_owned(),
    };
    let agent_id = st
        .db
        .read_with(async |c| store::sessions::agent_of(c, user_id, session_id).await)
        .await?;
    let agent_name = match agent_id {
        Some(id) => store::agents::get(&mut st.db.conn().await?, user_id, id)
            .await?
            .map(|a| a.name),
        None => None,
    };
    let mut f = crate::conversation::frames::NewFrame::message(
        session_id,
        AuthorType::Agent,
        agent_id,
        json!({
            "role": "agent",
            "content": content,
            "agent_id": agent_id,
            "agent_name": agent_name.as_deref().unwrap_or("Agent"),
            "aborted": true,
            "aborted_by": "shutdown",
        }),
    );
    f.id = message_id.to_owned();
    let stored = crate::conversation::frames::append(st, &dk, f).await?;
    st.hub.publish(
        user_id,
        session_id,
        crate::conversation::hub::HubEvent::Frame(stored),
    );
    let complete = hero_shared::wire::MessageComplete {
        message_id: message_id.to_owned(),
        content: String::new(),
        executed_elements: Vec::new(),
    };
    st.hub.publish(
        user_id,
        session_id,
        crate::conversation::hub::HubEvent::Stream {
            session_id,
            event: hero_shared::wire::SseEvent::MessageComplete(complete),
        },
    );
    Ok(())
}
