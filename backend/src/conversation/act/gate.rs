//! The gate: each call's status from the user's level and the authority it carries, and
//! its request frame stored (one transaction for a message's calls).

use hero_shared::calls::{CallRequest, CallStatus, Permission};
use hero_shared::feed::ApprovalPrompt;
use hero_shared::frame::{AuthorType, FrameType, TargetId};
use serde_json::Value;

use super::questions::{now_ms, question_prompt};
use super::*;
use crate::conversation::frames::{self, NewFrame};
use crate::conversation::hub::HubEvent;
use crate::{AppState, Error, Result};

/// The status a call starts with, and who decided it. A question (`answers`: its function
/// is answered by the user) waits for its answer at any level but `never`.
pub(super) fn gate(
    asked: &Asked,
    level: Permission,
    authority: Authority,
    answers: bool,
) -> (CallStatus, Option<&'static str>) {
    if asked.problem.is_some() {
        return (
            CallStatus::Invalid,
            Some(if asked.bound { "bound" } else { "schema" }),
        );
    }
    match (level, authority) {
        (Permission::Never, _) => (CallStatus::Denied, Some("never")),
        _ if answers => (CallStatus::Asking, None),
        (Permission::Always, _) => (CallStatus::Approved, Some("always")),
        (Permission::Ask, Authority::User(_)) => (CallStatus::Approved, Some("sender")),
        (Permission::Ask, Authority::Agent(_)) => (CallStatus::Pending, None),
    }
}

/// Stores a request frame for each call (one transaction), gated: the levels are read in
/// it too. `over_bound` marks every call not run because the message's rounds are spent.
pub async fn open(
    st: &AppState,
    sc: &Scene,
    authority: Authority,
    mut asked: Vec<Asked>,
    over_bound: Option<usize>,
) -> Result<Vec<Opened>> {
    if let Some(max) = over_bound {
        for a in &mut asked {
            a.bound |= a.problem.is_none();
            a.problem.get_or_insert_with(|| format!(
                "not run: this conversation has had {max} rounds of calls since the user's message, the most it may; the user can ask to go on"
            ));
        }
    }
    let user_id = sc.user_id;
    let kept = st
        .db
        .write_with(async |tx| {
            let mut out = Vec::with_capacity(asked.len());
            for a in &mut asked {
                let spec = sc.tools.get(&a.function).map(|(s, _)| s);
                let answers = spec.is_some_and(|s| s.answered_by_user);
                if answers && matches!(authority, Authority::User(_)) {
                    a.problem.get_or_insert_with(|| {
                        "only the agent asks the user questions; a message of the user's own cannot".into()
                    });
                }
                let lv = crate::execution::permissions::level(tx, &sc.tools, user_id, &a.function).await?;
                let (mut status, mut by) = gate(a, lv, authority, answers);
                let id = frames::new_id();
                // A proposed change is kept with its request, against the version current
                // now, and shown on its card; one that cannot be is an invalid call, told why.
                let mut change = None;
                if status == CallStatus::Pending && a.function == crate::agents::config::PROPOSE {
                    match crate::agents::config::propose_in(
                        tx, &sc.tools, &sc.dk, user_id, sc.session_id, sc.agent_id, &id, &a.args,
                    )
                    .await?
                    {
                        Ok(proposed) => change = Some(proposed),
                        Err(why) => {
                            a.problem = Some(why);
                            (status, by) = (CallStatus::Invalid, Some("schema"));
                        }
                    }
                }
                let a = &*a;
                let expires_at = (status == CallStatus::Asking)
                    .then(|| a.args.get("timeout").and_then(Value::as_u64))
                    .flatten()
                    .map(|ms| now_ms() + ms as i64);
                let req = CallRequest {
                    function: a.function.clone(),
                    args: a.args.clone(),
                    origin: a.origin.clone(),
                    status,
                    decided_by: by.map(str::to_owned),
                    sender_id: match authority {
                        Authority::User(id) => Some(id),
                        Authority::Agent(_) => None,
                    },
                    problem: a.problem.clone(),
                    content: match &a.problem {
                        Some(p) => format!("{} — {p}", describe(&a.function, &a.args)),
                        None => describe(&a.function, &a.args),
                    },
                    expires_at,
                    permissions: spec.map(|s| s.permissions),
                    change,
                };
                let f = NewFrame {
                    id,
                    session_id: sc.session_id,
                    parent_id: Some(sc.message_id.clone()),
                    target_ids: vec![TargetId::System(a.function.clone())],
                    frame_type: FrameType::Request,
                    author_type: AuthorType::System,
                    author_id: None,
                    payload: serde_json::to_value(&req)
                        .map_err(|e| Error::Internal(e.to_string()))?,
                };
                let sealed = frames::seal(&sc.dk, f)?;
                let seq = sealed.insert(tx).await?;
                crate::conversation::frames::full_session(st, seq)?;
                out.push((sealed.kept(seq), req));
            }
            Ok(out)
        })
        .await?;
    let mut opened = Vec::with_capacity(kept.len());
    for (k, req) in kept {
        let request_id = k.frame.id.clone();
        publish(st, user_id, k);
        match req.status {
            CallStatus::Pending => {
                super::settle::assertion(st, sc, &request_id, "pending", Value::Null)
            }
            CallStatus::Asking => {
                super::settle::assertion(st, sc, &request_id, "asking", Value::Null)
            }
            _ => {}
        }
        if req.status == CallStatus::Pending {
            st.hub.publish(
                user_id,
                sc.session_id,
                HubEvent::Approval(ApprovalPrompt {
                    session_id: sc.session_id,
                    execution_id: request_id.clone(),
                    ability: req.function.clone(),
                    summary: req.content.clone(),
                    details: req.args.clone(),
                    permissions: req.permissions,
                }),
            );
        }
        if let (CallStatus::Pending, Some(change)) = (req.status, &req.change) {
            super::decide::config_changed(
                st,
                user_id,
                sc.session_id,
                &request_id,
                &change.key,
                "pending",
                None,
            );
        }
        if req.status == CallStatus::Asking {
            st.hub.publish(
                user_id,
                sc.session_id,
                HubEvent::Question(question_prompt(sc, &request_id, &req)),
            );
        }
        opened.push(Opened { request_id, req });
    }
    Ok(opened)
}
