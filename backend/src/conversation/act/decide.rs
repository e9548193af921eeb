//! The user's decision on a pending call: recorded as an `update` of its request, then
//! carried out by the caller ([`carry_out`]).

use hero_shared::calls::{CallRequest, CallStatus};
use hero_shared::frame::{AuthorType, FrameType, TargetId};

use super::*;
use crate::accounts::auth::AuthUser;
use crate::conversation::frames::{self, NewFrame};
use crate::crypto::SecretKey;
use crate::drive::abort::Abort;
use crate::{AppState, Error, Result, store};

/// The user's decision on a pending call, recorded as an `update` of its request (one
/// transaction with the check that nothing decided it before: a second decision is a 409).
/// What it decided is then the caller's to carry out ([`carry_out`]).
pub(crate) async fn decide(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    request_id: &str,
    approved: bool,
) -> Result<Decided> {
    let dk = frames::session_key(st, user, session_id).await?;
    let status = if approved {
        CallStatus::Approved
    } else {
        CallStatus::Denied
    };
    let (kept, req) = st
        .db
        .write_with(async |tx| {
            store::sessions::lock(tx, session_id).await?;
            let row = store::frames::get_hot(tx, session_id, request_id)
                .await?
                .filter(|r| r.frame_type == "request")
                .ok_or(Error::NotFound("call"))?;
            let request = row.open(&dk)?;
            let mut req: CallRequest = serde_json::from_value(request.payload.clone())
                .map_err(|_| Error::Internal("a request frame is unreadable".into()))?;
            let decided = !store::frames::children_hot(tx, session_id, request_id)
                .await?
                .is_empty();
            if decided || req.status != CallStatus::Pending {
                return Err(Error::Conflict("this call was already decided".into()));
            }
            // A proposed change is decided with its call, in this transaction.
            let change = match req.function == crate::agents::config::PROPOSE {
                true => {
                    let tools = crate::execution::mcp::registry(st, tx, user.id()).await?;
                    crate::agents::config::decide_in(
                        tx,
                        &tools,
                        &dk,
                        user.id(),
                        request_id,
                        approved,
                    )
                    .await?
                }
                false => None,
            };
            req.status = status;
            req.decided_by = Some("user".into());
            let f = NewFrame {
                id: frames::new_id(),
                session_id,
                parent_id: Some(request_id.to_owned()),
                target_ids: vec![TargetId::Frame(request_id.to_owned())],
                frame_type: FrameType::Update,
                author_type: AuthorType::User,
                author_id: Some(user.id()),
                payload: serde_json::to_value(&req).map_err(|e| Error::Internal(e.to_string()))?,
            };
            let sealed = frames::seal(&dk, f)?;
            let seq = sealed.insert(tx).await?;
            crate::conversation::frames::full_session(st, seq)?;
            Ok((
                sealed.kept(seq),
                (req, request.parent_id.unwrap_or_default(), change),
            ))
        })
        .await?;
    publish(st, user.id(), kept);
    let (req, message_id, change) = req;
    if let Some(c) = change {
        config_changed(
            st,
            user.id(),
            session_id,
            request_id,
            &c.key,
            c.status,
            c.version,
        );
    }
    Ok(Decided {
        status,
        session_id,
        dk,
        message_id,
        opened: Opened {
            request_id: request_id.to_owned(),
            req,
        },
    })
}

/// The user's sockets hear that a proposed configuration change was proposed or decided.
pub(super) fn config_changed(
    st: &AppState,
    user_id: i64,
    session_id: i64,
    change_id: &str,
    key: &str,
    status: &str,
    version: Option<i64>,
) {
    st.hub.publish_user(
        user_id,
        crate::conversation::hub::HubEvent::ConfigChange(crate::conversation::hub::ConfigChanged {
            change_id: change_id.to_owned(),
            session_id,
            key: key.to_owned(),
            status: status.to_owned(),
            version,
        }),
    );
}

/// A decision recorded, its call not yet run or refused.
#[must_use = "a decision recorded is carried out with `carry_out`"]
pub struct Decided {
    pub status: CallStatus,
    pub session_id: i64,
    dk: SecretKey,
    pub message_id: String,
    opened: Opened,
}

/// Runs or refuses the call a decision settled; true when it was the message's last open
/// call (the agent may be given the results). A Stop reaching `abort` stops the call.
pub(crate) async fn carry_out(
    st: &AppState,
    user: &AuthUser,
    d: Decided,
    abort: &Abort,
) -> Result<bool> {
    let (agent_id, tools) = st
        .db
        .read_with(async |c| {
            let agent = store::sessions::agent_of(c, user.id(), d.session_id).await?;
            Ok((
                agent,
                crate::execution::mcp::registry(st, c, user.id()).await?,
            ))
        })
        .await?;
    let sc = Scene {
        user_id: user.id(),
        session_id: d.session_id,
        dk: d.dk,
        message_id: d.message_id,
        agent_id,
        tools: tools.clone(),
    };
    let emit = readers(st, user.id(), d.session_id);
    let settled = settle(st, &sc, std::slice::from_ref(&d.opened), &emit, Some(abort)).await?;
    Ok(settled.done)
}
