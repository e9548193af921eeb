//! `GET /ws`: the WebSocket of reference 000, authenticated by the same cookie. It mirrors
//! every session of the user (frames and the stream events of replies in flight) and takes
//! `abort`. A connection that falls behind the hub's bound is told so and closed.

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use hero_backend::auth::AuthUser;
use hero_backend::hub::HubEvent;
use hero_backend::{AppState, sessions};
use hero_shared::wire::{SseEvent, WsClientMessage, WsServerMessage};
use tokio::sync::broadcast;

use super::Authed;

/// Longest client message read; anything larger is refused.
const MAX_CLIENT_MESSAGE: usize = 64 * 1024;

pub async fn ws(
    State(st): State<AppState>,
    Authed(user): Authed,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade
        .max_message_size(MAX_CLIENT_MESSAGE)
        .on_upgrade(move |socket| serve(st, user, socket))
}

/// What the WebSocket sends for a hub event, if anything.
pub fn to_ws(ev: &HubEvent) -> Option<WsServerMessage> {
    Some(match ev {
        HubEvent::Frame(f) => WsServerMessage::Frame {
            frame: f.clone(),
            phantom: false,
        },
        HubEvent::Chunk {
            session_id,
            message_id,
            delta,
        } => WsServerMessage::MessageChunk {
            session_id: *session_id,
            message_id: message_id.clone(),
            content: delta.clone(),
        },
        HubEvent::Stream { session_id, event } => {
            let session_id = *session_id;
            match event {
                SseEvent::MessageStart(m) => WsServerMessage::MessageStart {
                    session_id,
                    message_id: m.message_id.clone(),
                },
                SseEvent::Text(t) => WsServerMessage::StreamText {
                    session_id,
                    message_id: t.message_id.clone(),
                    text: t.text.clone(),
                },
                SseEvent::ElementStart(e) => WsServerMessage::StreamElementStart {
                    session_id,
                    element: e.clone(),
                },
                SseEvent::ElementComplete(e) => WsServerMessage::StreamElementComplete {
                    session_id,
                    element: e.clone(),
                },
                SseEvent::MessageComplete(m) => WsServerMessage::MessageEnd {
                    session_id,
                    message_id: m.message_id.clone(),
                },
                SseEvent::Error(e) => WsServerMessage::Error {
                    error: e.error.clone(),
                },
                _ => return None,
            }
        }
    })
}

async fn send(
    sink: &mut futures::stream::SplitSink<WebSocket, Message>,
    msg: &WsServerMessage,
) -> bool {
    match serde_json::to_string(msg) {
        Ok(text) => sink.send(Message::Text(text.into())).await.is_ok(),
        Err(_) => true,
    }
}

async fn serve(st: AppState, user: AuthUser, socket: WebSocket) {
    let (mut sink, mut incoming) = socket.split();
    let mut live = st.hub.subscribe_user(user.id());
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
                if !hero_backend::auth::still_valid(&st, &user).await {
                    let _ = send(&mut sink, &WsServerMessage::Error { error: "this sign-in has ended".into() }).await;
                    let _ = sink.close().await;
                    return;
                }
            }
            msg = incoming.next() => {
                let text = match msg {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    Some(Ok(_)) => continue,
                };
                let reply = match serde_json::from_str::<WsClientMessage>(&text) {
                    Err(e) => Some(WsServerMessage::Error { error: format!("unreadable message: {e}") }),
                    Ok(WsClientMessage::Abort { session_id }) => match sessions::get(&st.db, &user, session_id).await {
                        Ok(_) => {
                            st.hub.abort(session_id);
                            None
                        }
                        Err(e) => Some(WsServerMessage::Error { error: e.public_message() }),
                    },
                    Ok(WsClientMessage::Subscribe { .. } | WsClientMessage::Unsubscribe { .. }) => None,
                    Ok(WsClientMessage::QuestionResponse { .. } | WsClientMessage::AbilityApprovalResponse { .. }) => {
                        Some(WsServerMessage::Error { error: "nothing is waiting for that answer".into() })
                    }
                };
                if let Some(r) = reply
                    && !send(&mut sink, &r).await {
                        return;
                    }
            }
            ev = live.recv() => match ev {
                Ok(ev) => {
                    if let Some(m) = to_ws(&ev)
                        && !send(&mut sink, &m).await {
                            return;
                        }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let m = WsServerMessage::Error { error: format!("this connection fell {n} events behind and was closed; reconnect") };
                    let _ = send(&mut sink, &m).await;
                    let _ = sink.close().await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}
