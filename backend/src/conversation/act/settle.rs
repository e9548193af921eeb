//! Settling calls: running (or refusing) each decided call and storing its result, under
//! the message's lock; Stop recording every open call as stopped.

use hero_shared::calls::{CallOrigin, CallRequest, CallResult, CallStatus, Outcome};
use hero_shared::frame::{AuthorType, FrameType, TargetId};
use hero_shared::wire::{
    ElementErrorData, ElementRef, ElementResult, ElementSkipped, ExecutedElement, SseEvent,
    ToolResult,
};
use serde_json::{Value, json};

use super::*;
use crate::accounts::auth::AuthUser;
use crate::conversation::frames::{self, NewFrame};
use crate::drive::abort::Abort;
use crate::execution::functions::{self, Ctx};
use crate::{AppState, Error, Result, store};

/// Runs (or refuses) one call whose status is decided, stores its result and reports it
/// through `emit`. A Stop (`abort`) while it runs ends it as stopped.
pub async fn settle_one(
    st: &AppState,
    sc: &Scene,
    o: &Opened,
    emit: &(dyn Fn(SseEvent) + Send + Sync),
    abort: Option<&Abort>,
) -> Result<ExecutedElement> {
    let element_id = o.req.origin.element_id();
    let kind = match &o.req.origin {
        CallOrigin::Element { kind, .. } => kind.clone(),
        _ => o.req.function.clone(),
    };
    let (outcome, output) = match o.req.status {
        CallStatus::Pending | CallStatus::Asking => {
            return Err(Error::Internal(
                "a call waiting for the user cannot be settled".into(),
            ));
        }
        CallStatus::Invalid => (
            Outcome::Invalid,
            o.req
                .problem
                .clone()
                .unwrap_or_else(|| "not a valid call".into()),
        ),
        CallStatus::Denied => (
            Outcome::Denied,
            if o.req.decided_by.as_deref() == Some("never") {
                format!(
                    "{} is not allowed (its permission is never)",
                    o.req.function
                )
            } else {
                "the user denied it".to_owned()
            },
        ),
        CallStatus::Stopped => (Outcome::Stopped, "the user stopped it".to_owned()),
        CallStatus::Approved => {
            emit(SseEvent::ElementExecuting(ElementRef {
                message_id: sc.message_id.clone(),
                id: element_id.clone(),
                kind: kind.clone(),
                execution_id: Some(o.request_id.clone()),
                function: Some(o.req.function.clone()),
                command: Some(hero_shared::wire::call_line(&o.req.function, &o.req.args)),
            }));
            assertion(st, sc, &o.request_id, "running", Value::Null);
            let cx = Ctx {
                st,
                user_id: sc.user_id,
                session_id: sc.session_id,
                agent_id: sc.agent_id,
                registry: &sc.tools,
                request_id: &o.request_id,
            };
            let run = async {
                use futures::FutureExt;
                let Some((spec, f)) = sc.tools.get(&o.req.function) else {
                    return Err(format!("there is no function `{}`", o.req.function));
                };
                // Past the bus's subscribers and handlers (`functions::bus`), which may
                // change its arguments or answer it themselves.
                let routed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    sc.tools
                        .bus
                        .route(&cx, &o.req.function, &o.req.args, &o.request_id)
                }));
                let args = match routed {
                    // Arguments a handler changed are checked as the agent's were.
                    Ok(functions::bus::Routing::Run(std::borrow::Cow::Owned(changed))) => {
                        functions::schema::validate(&spec.name, &spec.schema, &changed).map_err(
                            |e| format!("a handler changed the call's arguments, and they no longer fit: {e}"),
                        )?;
                        std::borrow::Cow::Owned(changed)
                    }
                    Ok(functions::bus::Routing::Run(args)) => args,
                    Ok(functions::bus::Routing::Answered(_, answer)) => return answer,
                    Err(_) => {
                        tracing::error!(function = %o.req.function, "a handler of the bus failed unexpectedly");
                        return Err(
                            "the call could not be routed; the server log has the details".into(),
                        );
                    }
                };
                // A handler that panics is a failed call, not a call left open.
                std::panic::AssertUnwindSafe(f.run(&cx, &args))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|_| {
                        tracing::error!(function = %o.req.function, "a function failed unexpectedly");
                        Err("the function failed unexpectedly; the server log has the details".into())
                    })
            };
            let ran = match abort {
                Some(a) => tokio::select! {
                    r = run => Some(r),
                    () = a.aborted() => None,
                },
                None => Some(run.await),
            };
            match ran {
                Some(Ok(out)) => (Outcome::Ok, functions::cut(out)),
                Some(Err(e)) => (Outcome::Error, functions::cut(e)),
                None => (
                    Outcome::Stopped,
                    "the user stopped it while it ran".to_owned(),
                ),
            }
        }
    };
    record(st, sc, o, outcome, output, emit).await
}

/// Stores a call's result (what the agent is told) and reports it through `emit`.
pub(super) async fn record(
    st: &AppState,
    sc: &Scene,
    o: &Opened,
    outcome: Outcome,
    output: String,
    emit: &(dyn Fn(SseEvent) + Send + Sync),
) -> Result<ExecutedElement> {
    let element_id = o.req.origin.element_id();
    let kind = match &o.req.origin {
        CallOrigin::Element { kind, .. } => kind.clone(),
        _ => o.req.function.clone(),
    };
    let named = describe(&o.req.function, &o.req.args);
    let question = (o.req.status == CallStatus::Asking)
        .then(|| o.req.args.get("question").and_then(Value::as_str))
        .flatten();
    let content = match outcome {
        Outcome::Ok if question.is_some() => format!(
            "The user's answer to your question {:?}: {output}",
            question.unwrap_or_default()
        ),
        Outcome::Ok => format!("The call {named} returned:\n{output}"),
        Outcome::Error => format!("The call {named} failed: {output}"),
        Outcome::Denied => format!("The call {named} was denied: {output}. It did not run."),
        Outcome::Invalid => format!("The call {named} was not run: {output}"),
        Outcome::Stopped => format!("The call {named} did not finish: {output}."),
    };
    let tool_use_id = match &o.req.origin {
        CallOrigin::Tool { tool_use_id } => Some(tool_use_id.clone()),
        _ => None,
    };
    let result = CallResult {
        function: o.req.function.clone(),
        outcome,
        content,
        output: output.clone(),
        tool_use_id: tool_use_id.clone(),
    };
    let f = NewFrame {
        id: frames::new_id(),
        session_id: sc.session_id,
        parent_id: Some(o.request_id.clone()),
        target_ids: sc
            .agent_id
            .map(|a| vec![TargetId::Agent(a.to_string())])
            .unwrap_or_default(),
        frame_type: FrameType::Result,
        author_type: AuthorType::System,
        author_id: None,
        payload: serde_json::to_value(&result).map_err(|e| Error::Internal(e.to_string()))?,
    };
    let sealed = frames::seal(&sc.dk, f)?;
    // A proposed change whose call ends any way but approved (stopped, refused, a Stop
    // while it ran) is rejected with the result, under the session's lock a decision takes
    // too: no change stays pending once its call is settled.
    let proposal = o.req.function == crate::agents::config::PROPOSE && outcome != Outcome::Ok;
    let (seq, rejected) = st
        .db
        .write_with(async |tx| {
            let mut rejected = false;
            if proposal {
                store::sessions::lock(tx, sc.session_id).await?;
                rejected =
                    crate::agents::config::reject_pending(tx, sc.user_id, &o.request_id).await?;
            }
            Ok((sealed.insert(tx).await?, rejected))
        })
        .await?;
    if let (true, Some(change)) = (rejected, &o.req.change) {
        super::decide::config_changed(
            st,
            sc.user_id,
            sc.session_id,
            &o.request_id,
            &change.key,
            "rejected",
            None,
        );
    }
    publish(st, sc.user_id, sealed.kept(seq));
    let skipped = skip_reason(&o.req, outcome);
    let status = match (skipped, outcome) {
        (Some(reason), _) => reason,
        (None, Outcome::Ok) => "completed",
        (None, Outcome::Stopped) => "stopped",
        (None, _) => "failed",
    };
    let told = match (skipped, outcome) {
        (Some(reason), _) => json!({"reason": reason, "message": output}),
        (None, Outcome::Ok) => json!({"outcome": "ok", "output": output}),
        (None, _) => json!({"error": output}),
    };
    assertion(st, sc, &o.request_id, status, told);
    let (message_id, execution_id) = (sc.message_id.clone(), Some(o.request_id.clone()));
    emit(match (skipped, outcome) {
        (Some(reason), _) => SseEvent::ElementSkipped(ElementSkipped {
            message_id,
            id: element_id.clone(),
            kind: kind.clone(),
            execution_id,
            reason: reason.to_owned(),
            message: output.clone(),
        }),
        (None, Outcome::Ok) => SseEvent::ElementResult(ElementResult {
            message_id,
            id: element_id.clone(),
            kind: kind.clone(),
            result: json!({"outcome": "ok", "output": output}),
            execution_id,
        }),
        (None, _) => SseEvent::ElementError(ElementErrorData {
            message_id,
            id: element_id.clone(),
            kind: kind.clone(),
            error: output.clone(),
            execution_id,
        }),
    });
    if let Some(id) = tool_use_id {
        emit(SseEvent::ToolResult(ToolResult {
            message_id: sc.message_id.clone(),
            tool_id: id,
            content: result.content.clone(),
        }));
    }
    Ok(ExecutedElement {
        id: element_id,
        kind,
        result: (outcome == Outcome::Ok).then(|| json!(output)),
        error: (outcome != Outcome::Ok).then_some(output),
        status: status.to_owned(),
    })
}

/// Tells the session's readers a call's state (reference 000's `assertion_update`, over
/// the WebSocket and `/events`), in either mode.
pub(super) fn assertion(st: &AppState, sc: &Scene, request_id: &str, status: &str, result: Value) {
    let update = hero_shared::feed::AssertionUpdate {
        session_id: sc.session_id,
        message_id: sc.message_id.clone(),
        assertion_id: request_id.to_owned(),
        status: status.to_owned(),
        result,
    };
    st.hub.publish(
        sc.user_id,
        sc.session_id,
        crate::conversation::hub::HubEvent::Assertion(update),
    );
}

/// Why a call never ran (`element_skipped`'s `reason`), or `None` for one that ran (or a
/// question answered): denied by the user, by its level (`never`), not valid, past a
/// bound, or stopped before it ran.
fn skip_reason(req: &CallRequest, outcome: Outcome) -> Option<&'static str> {
    let by = req.decided_by.as_deref();
    match (req.status, outcome) {
        (CallStatus::Approved, _) | (CallStatus::Asking, Outcome::Ok) => None,
        (CallStatus::Denied, _) if by == Some("never") => Some("never"),
        (CallStatus::Denied, _) => Some("denied"),
        (CallStatus::Invalid, _) if by == Some("bound") => Some("bound"),
        (CallStatus::Invalid, _) => Some("invalid"),
        _ => Some("stopped"),
    }
}

/// Opens the calls a message asked for and settles those decided, under the message's lock
/// from before the first is stored: a decision or an answer that comes meanwhile waits for
/// this settling to end, so the message's last call is settled by exactly one of them and
/// the agent goes on once.
pub async fn open_and_settle(
    st: &AppState,
    sc: &Scene,
    authority: Authority,
    asked: Vec<Asked>,
    over_bound: Option<usize>,
    emit: &(dyn Fn(SseEvent) + Send + Sync),
    abort: Option<&Abort>,
) -> Result<Settled> {
    open_and_settle_saying(st, sc, authority, asked, over_bound, emit, abort, &|| {}).await
}

/// [`open_and_settle`], saying through `opened` when the calls' requests are recorded
/// (before they run): what a reply still streaming waits for before it is stored, so that
/// its calls' requests come before it in the log.
#[allow(clippy::too_many_arguments)]
pub async fn open_and_settle_saying(
    st: &AppState,
    sc: &Scene,
    authority: Authority,
    asked: Vec<Asked>,
    over_bound: Option<usize>,
    emit: &(dyn Fn(SseEvent) + Send + Sync),
    abort: Option<&Abort>,
    opened: &(dyn Fn() + Send + Sync),
) -> Result<Settled> {
    let _lock = st.message_locks.lock(st, &sc.message_id).await?;
    open_and_settle_held(st, sc, authority, asked, over_bound, emit, abort, opened).await
}

/// The turn's act stage at the end of a reply whose calls may have begun while it streamed
/// ([`MessageLocks::begin_streaming`]): under the message's lock, the reply is no longer
/// streaming, the calls found only now are opened and settled, and `done` says whether every
/// call of the message has its result. A decision before this left the follow-up to the
/// turn; one after it sees the reply closed and follows up itself: exactly one of them does.
pub async fn close(
    st: &AppState,
    sc: &Scene,
    authority: Authority,
    asked: Vec<Asked>,
    over_bound: Option<usize>,
    emit: &(dyn Fn(SseEvent) + Send + Sync),
    abort: Option<&Abort>,
) -> Result<Settled> {
    let _lock = st.message_locks.lock(st, &sc.message_id).await?;
    st.message_locks.end_streaming(&sc.message_id);
    crate::conversation::cluster::disown(st, &super::locks::streaming_mark(&sc.message_id)).await;
    open_and_settle_held(st, sc, authority, asked, over_bound, emit, abort, &|| {}).await
}

/// [`open_and_settle`], for a caller that holds the message's lock; `said` once the
/// requests are recorded (or could not be).
#[allow(clippy::too_many_arguments)]
async fn open_and_settle_held(
    st: &AppState,
    sc: &Scene,
    authority: Authority,
    asked: Vec<Asked>,
    over_bound: Option<usize>,
    emit: &(dyn Fn(SseEvent) + Send + Sync),
    abort: Option<&Abort>,
    said: &(dyn Fn() + Send + Sync),
) -> Result<Settled> {
    let opened = match asked.is_empty() {
        true => Ok(Vec::new()),
        false => open(st, sc, authority, asked, over_bound).await,
    };
    said();
    let opened = opened?;
    let mut settled = settle_held(st, sc, &opened, emit, abort).await?;
    settled.timed = opened
        .iter()
        .filter_map(|o| Timed::of(sc.user_id, sc.session_id, o))
        .collect();
    Ok(settled)
}

/// Settles every call of `opened` that is decided, in order, under the message's lock;
/// pending ones are left for the user's decision.
pub async fn settle(
    st: &AppState,
    sc: &Scene,
    opened: &[Opened],
    emit: &(dyn Fn(SseEvent) + Send + Sync),
    abort: Option<&Abort>,
) -> Result<Settled> {
    let _lock = st.message_locks.lock(st, &sc.message_id).await?;
    settle_held(st, sc, opened, emit, abort).await
}

/// [`settle`], for a caller that holds the message's lock.
pub(super) async fn settle_held(
    st: &AppState,
    sc: &Scene,
    opened: &[Opened],
    emit: &(dyn Fn(SseEvent) + Send + Sync),
    abort: Option<&Abort>,
) -> Result<Settled> {
    let mut executed = Vec::new();
    let open = open_calls(st, sc.session_id, &sc.message_id).await?;
    for o in opened {
        let stopped = abort.is_some_and(Abort::is_aborted);
        // Pending calls wait for the user (unless Stop came first); one settled meanwhile
        // is left alone.
        let waits = matches!(o.req.status, CallStatus::Pending | CallStatus::Asking);
        if (waits && !stopped) || !open.contains(&o.request_id) {
            continue;
        }
        let mut o = o.clone();
        if stopped
            && matches!(
                o.req.status,
                CallStatus::Approved | CallStatus::Pending | CallStatus::Asking
            )
        {
            o.req.status = CallStatus::Stopped;
        }
        executed.push(settle_one(st, sc, &o, emit, abort).await?);
    }
    let done = all_settled(st, sc.session_id, &sc.message_id).await?;
    Ok(Settled {
        executed,
        done,
        timed: Vec::new(),
    })
}

/// Every call of the message has its result, and its reply streams no more (a reply still
/// streaming may ask for more).
pub(super) async fn all_settled(st: &AppState, session_id: i64, message_id: &str) -> Result<bool> {
    Ok(!st
        .message_locks
        .is_streaming_anywhere(st, message_id)
        .await?
        && open_calls(st, session_id, message_id).await?.is_empty())
}

/// The message's requests that have no result yet (with their state as last decided).
pub async fn open_calls(st: &AppState, session_id: i64, message_id: &str) -> Result<Vec<String>> {
    st.db
        .read_with(async |c| {
            let mut open = Vec::new();
            for r in store::frames::children_hot(c, session_id, message_id).await? {
                if r.frame_type != "request" {
                    continue;
                }
                let resolved = store::frames::children_hot(c, session_id, &r.id)
                    .await?
                    .iter()
                    .any(|k| k.frame_type == "result");
                if !resolved {
                    open.push(r.id);
                }
            }
            Ok(open)
        })
        .await
}

/// Stop with calls waiting: every open call of the session is recorded as stopped, so the
/// agent is not run on them.
pub async fn stop_open(st: &AppState, user: &AuthUser, session_id: i64) -> Result<usize> {
    let dk = frames::session_key(st, user, session_id).await?;
    let rows = store::frames::open_requests(&st.db, session_id).await?;
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
    let mut n = 0;
    for row in rows {
        let f = row.open(&dk)?;
        let Ok(mut req) = serde_json::from_value::<CallRequest>(f.payload.clone()) else {
            continue;
        };
        let Some(message_id) = f.parent_id.clone() else {
            continue;
        };
        let sc = Scene {
            user_id: user.id(),
            session_id,
            dk: dk.clone(),
            message_id: message_id.clone(),
            agent_id,
            tools: tools.clone(),
        };
        let _lock = st.message_locks.lock(st, &message_id).await?;
        if !open_calls(st, session_id, &message_id)
            .await?
            .contains(&f.id)
        {
            continue;
        }
        req.status = CallStatus::Stopped;
        let emit = readers(st, user.id(), session_id);
        settle_one(
            st,
            &sc,
            &Opened {
                request_id: f.id.clone(),
                req,
            },
            &emit,
            None,
        )
        .await?;
        n += 1;
    }
    Ok(n)
}
