//! Talking to a session's agent and watching it: posting messages (streamed as SSE, or
//! whole), the live event stream with resume, and the frame log.

use std::convert::Infallible;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use hero_backend::hub::HubEvent;
use hero_backend::{AppState, frames, turn};
use hero_shared::api::{PostMessageRequest, PostMessageResponse};
use hero_shared::frame::{Frame, FrameStats, FrameType};
use hero_shared::wire::{CompiledView, FramesPage, SseEvent};
use serde::Deserialize;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::sse::TurnSse;
use super::{ApiJson, ApiPath, ApiQuery, ApiResult, Authed};

fn sse_event(ev: &SseEvent) -> Event {
    Event::default().event(ev.event_name()).data(ev.data_json())
}

fn frame_event(f: &Frame) -> Event {
    Event::default()
        .event("frame")
        .id(f.seq.to_string())
        .data(serde_json::to_string(f).unwrap_or_default())
}

/// `POST /api/sessions/{id}/messages/stream`: the reply as reference 000's SSE events.
pub async fn post_stream(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<PostMessageRequest>,
) -> ApiResult<TurnSse> {
    let handle = turn::post(&st, &user, id, req.content).await?;
    Ok(TurnSse::new(handle.events))
}

/// `POST /api/sessions/{id}/messages`: batch mode, the whole reply at once.
pub async fn post_batch(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<PostMessageRequest>,
) -> ApiResult<Json<PostMessageResponse>> {
    let mut handle = turn::post(&st, &user, id, req.content).await?;
    let mut error = None;
    let mut content = String::new();
    while let Some(ev) = handle.events.next().await {
        match ev {
            SseEvent::Error(e) => error = Some(e.error),
            SseEvent::MessageComplete(c) => {
                content = c.content;
                break;
            }
            _ => {}
        }
    }
    Ok(Json(PostMessageResponse { message_id: handle.message_id, content, error }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Resume after this seq (the `Last-Event-ID` header wins when both are given).
    after: Option<i64>,
}

/// How many events may wait for one slow reader before its live forwarding stalls and the
/// hub's own bound (which drops the reader) takes over.
const FORWARD_BUFFER: usize = 256;

/// `GET /api/sessions/{id}/events`: persisted frames after the client's last seq, then live
/// frames and phantom events, with no gap and no duplicate.
pub async fn events(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let dk = frames::session_key(&st, &user, id).await?;
    let last_seen = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok())
        .or(q.after);
    // Subscribe before reading the log: a frame stored in between is then in both, and the
    // seq check below drops the second copy, instead of being in neither.
    let mut live = st.hub.subscribe_session(id);
    let sent = match last_seen {
        Some(after) => after,
        // A new subscriber starts after what is stored now; it read the rest over HTTP.
        None => frames::last_seq(&st.db, id).await?,
    };
    let (tx, rx) = mpsc::channel::<Event>(FORWARD_BUFFER);
    tokio::spawn(async move {
        let mut sent = sent;
        // Everything stored after `sent`, from the log, in pages.
        if !catch_up(&st, &dk, id, &mut sent, i64::MAX, &tx).await {
            return;
        }
        let mut recheck = tokio::time::interval(hero_backend::auth::RECHECK_EVERY);
        recheck.tick().await;
        loop {
            let ev = tokio::select! {
                ev = live.recv() => ev,
                // A reader that left is noticed even on a quiet session.
                _ = tx.closed() => return,
                _ = recheck.tick() => {
                    if hero_backend::auth::still_valid(&st, &user).await {
                        continue;
                    }
                    let _ = tx.send(Event::default().event("error").data("{\"error\":\"this sign-in has ended\"}")).await;
                    return;
                }
            };
            let ev = match ev {
                Ok(ev) => ev,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let msg = format!(
                        "{{\"error\":\"this stream fell {n} events behind and was closed; reconnect with Last-Event-ID to resume\"}}"
                    );
                    let _ = tx.send(Event::default().event("error").data(msg)).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            let out = match &*ev {
                HubEvent::Frame(f) if f.seq <= sent => continue,
                HubEvent::Frame(f) if f.seq > sent + 1 => {
                    // Frames are published after they are stored, by different tasks, so
                    // a later one can arrive first: the ones in between come from the log.
                    if !catch_up(&st, &dk, id, &mut sent, f.seq, &tx).await {
                        return;
                    }
                    continue;
                }
                HubEvent::Frame(f) => {
                    sent = f.seq;
                    frame_event(f)
                }
                HubEvent::Stream { event, .. } => sse_event(event),
                HubEvent::Chunk { session_id, message_id, delta } => Event::default().event("message_chunk").data(
                    serde_json::json!({"sessionId": session_id, "messageId": message_id, "content": delta}).to_string(),
                ),
            };
            if tx.send(out).await.is_err() {
                return;
            }
        }
    });
    Ok(Sse::new(ReceiverStream::new(rx).map(Ok)).keep_alive(KeepAlive::default()))
}

/// Sends the stored frames with `sent < seq <= upto`, in order, page by page; false when
/// the reader has gone or the log cannot be read.
async fn catch_up(
    st: &AppState,
    dk: &hero_backend::crypto::SecretKey,
    session: i64,
    sent: &mut i64,
    upto: i64,
    tx: &mpsc::Sender<Event>,
) -> bool {
    loop {
        let filter = frames::Filter { after_seq: Some(*sent), limit: Some(frames::MAX_LIST_LIMIT), ..Default::default() };
        let Ok(page) = frames::list(&st.db, dk, session, &filter).await else { return false };
        let full = page.len() as i64 == frames::MAX_LIST_LIMIT;
        for f in page.iter().take_while(|f| f.seq <= upto) {
            if tx.send(frame_event(f)).await.is_err() {
                return false;
            }
            *sent = f.seq;
        }
        if !full || *sent >= upto {
            return true;
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FramesQuery {
    #[serde(rename = "type")]
    frame_type: Option<FrameType>,
    after: Option<i64>,
    limit: Option<i64>,
}

pub async fn list_frames(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<FramesQuery>,
) -> ApiResult<Json<FramesPage>> {
    let dk = frames::session_key(&st, &user, id).await?;
    let filter = frames::Filter { frame_type: q.frame_type, after_seq: q.after, limit: q.limit };
    let list = frames::list(&st.db, &dk, id, &filter).await?;
    let last = frames::last_seq(&st.db, id).await?;
    Ok(Json(FramesPage { session_id: id, frames: list, last_seq: (last > 0).then_some(last) }))
}

pub async fn frame_stats(State(st): State<AppState>, Authed(user): Authed, ApiPath(id): ApiPath<i64>) -> ApiResult<Json<FrameStats>> {
    let dk = frames::session_key(&st, &user, id).await?;
    Ok(Json(hero_shared::frame::frame_stats(&frames::all(&st.db, &dk, id).await?)))
}

pub async fn get_frame(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((id, frame_id)): ApiPath<(i64, String)>,
) -> ApiResult<Json<Frame>> {
    let dk = frames::session_key(&st, &user, id).await?;
    Ok(Json(frames::get(&st.db, &dk, id, &frame_id).await?))
}

pub async fn view(State(st): State<AppState>, Authed(user): Authed, ApiPath(id): ApiPath<i64>) -> ApiResult<Json<CompiledView>> {
    Ok(Json(frames::view(&st, &user, id).await?))
}
