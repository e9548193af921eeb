//! `GET /ws`: the WebSocket of reference 000, authenticated by the same cookie. It mirrors
//! every session of the user (frames, phantom frames and the stream events of replies in
//! flight), serves a session's feed after `subscribe {sessionId, afterSeq}` (the log from
//! that seq, then live, with no gap and no duplicate) until `unsubscribe`, and takes
//! `abort`. A connection that falls behind the hub's bound is told so and closed.

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use hero_backend::AppState;
use hero_backend::accounts::auth::AuthUser;
use hero_backend::conversation::feed::SessionFeed;
use hero_backend::conversation::hub::HubEvent;
use hero_shared::feed::{MessageChunk, SessionEvent};
use hero_shared::wire::{WsClientMessage, WsServerMessage};
use std::pin::Pin;
use tokio::sync::broadcast;
use tokio_stream::{Stream, StreamMap};

use super::Authed;

/// Longest client message read; anything larger is refused.
const MAX_CLIENT_MESSAGE: usize = 64 * 1024;

pub async fn ws(
    State(st): State<AppState>,
    Authed(user): Authed,
    upgrade: WebSocketUpgrade,
) -> Response {
    let permit = match hero_backend::conversation::cluster::stream_slot(&st, user.id()).await {
        Ok(p) => p,
        Err(e) => return axum::response::IntoResponse::into_response(super::ApiError::from(e)),
    };
    upgrade
        .max_message_size(MAX_CLIENT_MESSAGE)
        .on_upgrade(move |socket| async move {
            serve(st, user, socket).await;
            drop(permit);
        })
}

/// What the WebSocket's mirror of every session sends for a hub event, if anything: the
/// same message a session's feed would send for it.
pub fn to_ws(ev: &HubEvent) -> Option<WsServerMessage> {
    let (session_id, ev) = match ev {
        HubEvent::TaskChanged {
            task_id,
            identifier,
            status,
        } => {
            return Some(WsServerMessage::TaskChanged {
                task_id: *task_id,
                identifier: identifier.clone(),
                status: status.clone(),
            });
        }
        HubEvent::ConfigChange(c) => {
            return Some(WsServerMessage::ConfigChange {
                change_id: c.change_id.clone(),
                session_id: c.session_id,
                key: c.key.clone(),
                status: c.status.clone(),
                version: c.version,
            });
        }
        HubEvent::AgentStatus {
            agent_id,
            status,
            detail,
        } => {
            return Some(WsServerMessage::AgentStatus {
                agent_id: *agent_id,
                status: status.clone(),
                detail: detail.clone(),
            });
        }
        HubEvent::Notification {
            session_id,
            message,
            level,
        } => {
            return Some(WsServerMessage::Notification {
                session_id: *session_id,
                message: message.clone(),
                level: level.clone(),
            });
        }
        HubEvent::Frame(f) => (
            f.session_id,
            SessionEvent::Frame(hero_backend::conversation::feed::for_readers(f.clone())),
        ),
        HubEvent::Stream { session_id, event } => (*session_id, SessionEvent::Reply(event.clone())),
        HubEvent::Chunk {
            session_id,
            message_id,
            delta,
            ..
        } => (
            *session_id,
            SessionEvent::Chunk(MessageChunk {
                session_id: *session_id,
                message_id: message_id.clone(),
                content: delta.clone(),
            }),
        ),
        // Published before any of the reply's text, which follows it as chunks: a snapshot
        // here would repeat what the turn pushed before this socket read the start.
        HubEvent::Started(live) => (live.session_id, SessionEvent::Phantom(live.started())),
        HubEvent::Approval(a) => (a.session_id, SessionEvent::Approval(a.clone())),
        HubEvent::Question(q) => (q.session_id, SessionEvent::Question(q.clone())),
        HubEvent::Assertion(a) => (a.session_id, SessionEvent::Assertion(a.clone())),
    };
    ev.to_ws(session_id)
}

/// The session a hub event belongs to.
fn session_of(ev: &HubEvent) -> Option<i64> {
    Some(match ev {
        HubEvent::Frame(f) => f.session_id,
        HubEvent::Stream { session_id, .. } | HubEvent::Chunk { session_id, .. } => *session_id,
        HubEvent::Started(live) => live.session_id,
        HubEvent::Approval(a) => a.session_id,
        HubEvent::Question(q) => q.session_id,
        HubEvent::Assertion(a) => a.session_id,
        HubEvent::AgentStatus { .. }
        | HubEvent::Notification { .. }
        | HubEvent::ConfigChange(_)
        | HubEvent::TaskChanged { .. } => return None,
    })
}

async fn send(
    sink: &mut futures::stream::SplitSink<WebSocket, Message>,
    msg: &WsServerMessage,
) -> bool {
    match serde_json::to_string(msg) {
        // A client that reads nothing fills the socket's buffers and the write waits: one
        // that has not moved for WRITE_STALL is given up on (false: the socket closes).
        Ok(text) => matches!(
            tokio::time::timeout(WRITE_STALL, sink.send(Message::Text(text.into()))).await,
            Ok(Ok(()))
        ),
        Err(_) => true,
    }
}

/// How long one write to a WebSocket may wait for the client before the socket is closed.
pub const WRITE_STALL: std::time::Duration = std::time::Duration::from_secs(10);

/// Sessions one socket may subscribe to at once: each holds a feed and its channel.
pub const MAX_SUBSCRIPTIONS: usize = 64;

type Feeds = StreamMap<i64, Pin<Box<dyn Stream<Item = SessionEvent> + Send>>>;

/// `subscribe`: the session's feed after `after_seq` (the log, then live) replaces the
/// mirror for that session.
async fn subscribe(
    st: &AppState,
    user: &AuthUser,
    feeds: &mut Feeds,
    session_id: i64,
    after: Option<i64>,
) -> Option<WsServerMessage> {
    if !feeds.contains_key(&session_id) && feeds.len() >= MAX_SUBSCRIPTIONS {
        return Some(WsServerMessage::error(format!(
            "at most {MAX_SUBSCRIPTIONS} sessions can be subscribed on one connection"
        )));
    }
    match SessionFeed::open(st, user, session_id, after).await {
        Ok(feed) => {
            feeds.insert(session_id, Box::pin(feed.into_stream()));
            None
        }
        Err(e) => Some(WsServerMessage::error(e.public_message())),
    }
}

/// `ability_approval_response`: the decision on the call whose request frame is
/// `execution_id`, in whichever of the user's sessions it is.
async fn approve(
    st: &AppState,
    user: &AuthUser,
    execution_id: &str,
    approved: bool,
) -> Option<WsServerMessage> {
    let decided = match hero_backend::conversation::frames::session_of(st, user, execution_id).await
    {
        Ok(session_id) => {
            hero_backend::conversation::turn::decide(st, user, session_id, execution_id, approved)
                .await
        }
        Err(e) => Err(e),
    };
    decided
        .err()
        .map(|e| WsServerMessage::error(e.public_message()))
}

/// `question_response`: the answer to the question whose request frame is `assertion_id`,
/// in whichever of the user's sessions it is.
async fn respond(
    st: &AppState,
    user: &AuthUser,
    assertion_id: &str,
    answer: serde_json::Value,
) -> Option<WsServerMessage> {
    let answered =
        match hero_backend::conversation::frames::session_of(st, user, assertion_id).await {
            Ok(session_id) => match hero_backend::conversation::answers::check_size(&answer) {
                Ok(()) => {
                    hero_backend::conversation::turn::answer_question(
                        st,
                        user,
                        session_id,
                        assertion_id,
                        hero_backend::conversation::act::Answer::Given(answer),
                    )
                    .await
                }
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
    answered
        .err()
        .map(|e| WsServerMessage::error(e.public_message()))
}

async fn serve(st: AppState, user: AuthUser, socket: WebSocket) {
    let (mut sink, mut incoming) = socket.split();
    let mut live = st.hub.subscribe_user(user.id());
    let mut feeds = Feeds::new();
    let every = st.settings.recheck_every;
    let mut recheck = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut closing = std::pin::pin!(st.hub.closed());
    loop {
        tokio::select! {
            () = &mut closing => {
                // 1012, "service restart": the client may reconnect, and should.
                let frame = axum::extract::ws::CloseFrame {
                    code: 1012,
                    reason: "the server is restarting; reconnect".into(),
                };
                let _ = sink.send(Message::Close(Some(frame))).await;
                return;
            }
            _ = recheck.tick() => {
                // Logout, a password change or a disabled account ends the socket too.
                let error = match hero_backend::accounts::auth::still_valid(&st, &user).await {
                    Ok(true) => continue,
                    Ok(false) => "this sign-in has ended".to_owned(),
                    // The database cannot say: not signed out, but nothing here can go on.
                    Err(e) => format!("{}; reconnect", e.public_message()),
                };
                let _ = send(&mut sink, &WsServerMessage::error(error)).await;
                let _ = sink.close().await;
                return;
            }
            msg = incoming.next() => {
                let text = match msg {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    Some(Ok(_)) => continue,
                };
                let reply = match serde_json::from_str::<WsClientMessage>(&text) {
                    Err(e) => Some(WsServerMessage::error(format!("unreadable message: {e}"))),
                    Ok(WsClientMessage::Abort { session_id }) => match hero_backend::conversation::turn::stop(&st, &user, session_id).await {
                        Ok(_) => None,
                        Err(e) => Some(WsServerMessage::error(e.public_message())),
                    },
                    Ok(WsClientMessage::Subscribe { session_id, after_seq }) => {
                        subscribe(&st, &user, &mut feeds, session_id, after_seq).await
                    }
                    Ok(WsClientMessage::Unsubscribe { session_id }) => {
                        feeds.remove(&session_id);
                        None
                    }
                    Ok(WsClientMessage::AbilityApprovalResponse { execution_id, approved }) => {
                        approve(&st, &user, &execution_id, approved).await
                    }
                    Ok(WsClientMessage::QuestionResponse { assertion_id, answer }) => {
                        respond(&st, &user, &assertion_id, answer).await
                    }
                };
                if let Some(r) = reply
                    && !send(&mut sink, &r).await {
                        return;
                    }
            }
            Some((session_id, ev)) = feeds.next(), if !feeds.is_empty() => {
                if let Some(m) = ev.to_ws(session_id)
                    && !send(&mut sink, &m).await {
                        return;
                    }
            }
            ev = live.recv() => match ev {
                // A subscribed session's events come from its feed.
                Ok(ev) if session_of(&ev).is_some_and(|s| feeds.contains_key(&s)) => {}
                Ok(ev) => {
                    if let Some(m) = to_ws(&ev)
                        && !send(&mut sink, &m).await {
                            return;
                        }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    st.metrics.lagged();
                    let m = WsServerMessage::error(format!("this connection fell {n} events behind and was closed; reconnect"));
                    let _ = send(&mut sink, &m).await;
                    let _ = sink.close().await;
                    return;
                }
                // Live events were lost on their way here (`Hub::resync`).
                Err(broadcast::error::RecvError::Closed) => {
                    let m = WsServerMessage::error("this connection's live events were interrupted; reconnect");
                    let _ = send(&mut sink, &m).await;
                    let _ = sink.close().await;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replys_start_is_an_empty_phantom_its_chunks_carry_the_text() {
        let live = std::sync::Arc::new(hero_backend::conversation::in_flight::InFlight::new(
            "reply-1", 7, 4, "Agent", 3,
        ));
        // Pushed before the socket read the start: its chunk follows on the channel.
        live.push("Hello");
        match to_ws(&HubEvent::Started(live)) {
            Some(WsServerMessage::Frame { frame, phantom }) => {
                assert!(phantom);
                assert_eq!(
                    (frame.id.as_str(), frame.payload["content"].as_str()),
                    ("reply-1", Some(""))
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
