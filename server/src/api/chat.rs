//! Talking to a session's agent and watching it: posting messages (streamed as SSE, or
//! whole), the live event stream with resume, and the frame log.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use bytes::Bytes;
use futures::Stream;
use hero_backend::hub::HubEvent;
use hero_backend::{AppState, frames, turn};
use hero_shared::api::{PostMessageRequest, PostMessageResponse};
use hero_shared::frame::{Frame, FrameStats, FrameType};
use hero_shared::wire::{CompiledView, FramesPage, SseEvent};
use serde::Deserialize;
use tokio::sync::broadcast;
use tokio_stream::StreamExt;

use super::sse::{self, SseBody, TurnSse};
use super::{ApiJson, ApiPath, ApiQuery, ApiResult, Authed};

fn sse_event(ev: &SseEvent) -> Bytes {
    // Writing into memory cannot fail; JSON keeps the data on one line.
    sse::frame(ev.event_name(), None, |out| {
        let _ = ev.write_data(out);
    })
}

fn frame_event(f: &Frame) -> Bytes {
    sse::frame("frame", Some(f.seq), |out| {
        let _ = serde_json::to_writer(out, f);
    })
}

fn error_event(message: &str) -> Bytes {
    sse::frame("error", None, |out| {
        let _ = serde_json::to_writer(out, &serde_json::json!({"error": message}));
    })
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
    Ok(Json(PostMessageResponse {
        message_id: handle.message_id,
        content,
        error,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Resume after this seq (the `Last-Event-ID` header wins when both are given).
    after: Option<i64>,
}

/// `GET /api/sessions/{id}/events`: persisted frames after the client's last seq, then live
/// frames and phantom events, with no gap and no duplicate.
///
/// The response body reads the hub itself (no forwarding task in between: one wake-up per
/// event, not two). A reader too slow for the hub's bound gets `Lagged`, is told, and its
/// stream ends; a reader that leaves drops the body and with it the subscription.
pub async fn events(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> ApiResult<SseBody<std::pin::Pin<Box<dyn Stream<Item = Bytes> + Send>>>> {
    let dk = frames::session_key(&st, &user, id).await?;
    let last_seen = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok())
        .or(q.after);
    // Subscribe before reading the log: a frame stored in between is then in both, and the
    // seq check below drops the second copy, instead of being in neither.
    let live = st.hub.subscribe_session(id);
    let sent = match last_seen {
        Some(after) => after,
        // A new subscriber starts after what is stored now; it read the rest over HTTP.
        None => frames::last_seq(&st.db, id).await?,
    };
    let every = st.settings.recheck_every;
    let state = Watcher {
        closing: Box::pin(st.hub.closed()),
        st,
        dk,
        user,
        session: id,
        sent,
        live,
        recheck: tokio::time::interval_at(tokio::time::Instant::now() + every, every),
        // Everything stored after `sent`, from the log, first.
        catch_up_to: Some(i64::MAX),
        ready: std::collections::VecDeque::new(),
        done: false,
        stored: std::collections::VecDeque::new(),
    };
    let events = futures::stream::unfold(state, |mut w| async move {
        let ev = w.next().await?;
        Some((ev, w))
    });
    Ok(SseBody::new(Box::pin(events)))
}

/// `message_chunk`'s data (reference 000), written from borrowed fields: one per token.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    session_id: i64,
    message_id: &'a str,
    content: &'a str,
}

/// One reader of a session's events.
struct Watcher {
    st: AppState,
    dk: hero_backend::crypto::SecretKey,
    user: hero_backend::auth::AuthUser,
    session: i64,
    /// The seq of the last frame sent.
    sent: i64,
    live: broadcast::Receiver<std::sync::Arc<HubEvent>>,
    recheck: tokio::time::Interval,
    /// Resolves when the server shuts down ([`hero_backend::hub::Hub::closed`]); made once,
    /// so that waiting on it costs nothing per event.
    closing: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    /// Stored frames up to this seq are still to be read from the log.
    catch_up_to: Option<i64>,
    ready: std::collections::VecDeque<Bytes>,
    done: bool,
    /// The ids of the last frames read from the log: the live events of such a message
    /// waited in the channel while its frame was read, and are not sent after it. (Live, a
    /// message's frame comes before its `message_complete`, which is sent.)
    stored: std::collections::VecDeque<String>,
}

/// How many frame ids read from the log a reader remembers ([`Watcher::stored`]).
const REMEMBERED: usize = 8;

impl Watcher {
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Some(ev);
            }
            if self.done {
                return None;
            }
            if let Some(upto) = self.catch_up_to.take() {
                self.catch_up(upto).await;
                continue;
            }
            let ev = tokio::select! {
                ev = self.live.recv() => ev,
                () = &mut self.closing => {
                    // The stream ends now; a browser's EventSource reconnects after `retry`
                    // and resumes from its last seq, on this server once it is back.
                    self.ready.push_back(sse::SHUTDOWN_HINT.clone());
                    self.done = true;
                    continue;
                }
                _ = self.recheck.tick() => {
                    if !hero_backend::auth::still_valid(&self.st, &self.user).await {
                        self.ready.push_back(error_event("this sign-in has ended"));
                        self.done = true;
                    }
                    continue;
                }
            };
            match ev.as_deref() {
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.ready.push_back(error_event(&format!(
                        "this stream fell {n} events behind and was closed; reconnect with Last-Event-ID to resume"
                    )));
                    self.done = true;
                }
                Err(broadcast::error::RecvError::Closed) => return None,
                Ok(HubEvent::Frame(f)) if f.seq <= self.sent => {}
                // Frames are published after they are stored, by different tasks, so a later
                // one can arrive first: the ones in between come from the log.
                Ok(HubEvent::Frame(f)) if f.seq > self.sent + 1 => self.catch_up_to = Some(f.seq),
                Ok(HubEvent::Frame(f)) => {
                    self.sent = f.seq;
                    return Some(frame_event(f));
                }
                Ok(HubEvent::Stream { event, .. })
                    if event.message_id().is_some_and(|m| self.has(m)) => {}
                Ok(HubEvent::Stream { event, .. }) => return Some(sse_event(event)),
                Ok(HubEvent::Chunk { message_id, .. }) if self.has(message_id) => {}
                Ok(HubEvent::Chunk {
                    session_id,
                    message_id,
                    delta,
                }) => {
                    let data = Chunk {
                        session_id: *session_id,
                        message_id,
                        content: delta,
                    };
                    return Some(sse::frame("message_chunk", None, |out| {
                        let _ = serde_json::to_writer(out, &data);
                    }));
                }
            }
        }
    }

    fn remember(&mut self, frame_id: &str) {
        if self.stored.len() == REMEMBERED {
            self.stored.pop_front();
        }
        self.stored.push_back(frame_id.to_owned());
    }

    /// Whether the frame of message `id` was read from the log.
    fn has(&self, id: &str) -> bool {
        self.stored.iter().any(|s| s == id)
    }

    /// Queues one page of the stored frames with `sent < seq <= upto`, and asks for the next
    /// page if there may be one; ends the stream when the log cannot be read.
    async fn catch_up(&mut self, upto: i64) {
        let filter = frames::Filter {
            after_seq: Some(self.sent),
            limit: Some(frames::MAX_LIST_LIMIT),
            ..Default::default()
        };
        let Ok(page) = frames::list(&self.st.db, &self.dk, self.session, &filter).await else {
            self.done = true;
            return;
        };
        let full = page.len() as i64 == frames::MAX_LIST_LIMIT;
        for f in page.iter().take_while(|f| f.seq <= upto) {
            self.ready.push_back(frame_event(f));
            self.sent = f.seq;
            self.remember(&f.id);
        }
        if full && self.sent < upto {
            self.catch_up_to = Some(upto);
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
    let filter = frames::Filter {
        frame_type: q.frame_type,
        after_seq: q.after,
        limit: q.limit,
    };
    let list = frames::list(&st.db, &dk, id, &filter).await?;
    let last = frames::last_seq(&st.db, id).await?;
    Ok(Json(FramesPage {
        session_id: id,
        frames: list,
        last_seq: (last > 0).then_some(last),
    }))
}

pub async fn frame_stats(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<FrameStats>> {
    let dk = frames::session_key(&st, &user, id).await?;
    Ok(Json(hero_shared::frame::frame_stats(
        &frames::all(&st.db, &dk, id).await?,
    )))
}

pub async fn get_frame(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((id, frame_id)): ApiPath<(i64, String)>,
) -> ApiResult<Json<Frame>> {
    let dk = frames::session_key(&st, &user, id).await?;
    Ok(Json(frames::get(&st.db, &dk, id, &frame_id).await?))
}

pub async fn view(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<CompiledView>> {
    Ok(Json(frames::view(&st, &user, id).await?))
}
