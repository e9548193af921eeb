//! Talking to a session's agent and watching it: posting messages (streamed as SSE, or
//! whole), the live event stream with resume, and the frame log.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use bytes::Bytes;
use futures::Stream;
use hero_backend::conversation::feed::SessionFeed;
use hero_backend::conversation::versions;
use hero_backend::{AppState, conversation::frames, conversation::sessions, conversation::turn};
use hero_shared::api::{PostMessageRequest, PostMessageResponse};
use hero_shared::frame::{Frame, FrameStats, FrameType};
use hero_shared::wire::{CompiledView, FramesPage, SseEvent};
use serde::Deserialize;
use tokio_stream::StreamExt;

use super::sse::{SseBody, TurnSse};
use super::{ApiJson, ApiPath, ApiQuery, ApiResult, Authed};
use axum::response::NoContent;

/// `POST /api/sessions/{id}/messages/stream`: the reply as reference 000's SSE events.
pub async fn post_stream(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<PostMessageRequest>,
) -> ApiResult<TurnSse> {
    let handle = turn::post(&st, &user, id, req).await?;
    Ok(TurnSse::new(handle.events))
}

/// `POST /api/sessions/{id}/messages`: batch mode, the whole reply at once.
pub async fn post_batch(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<PostMessageRequest>,
) -> ApiResult<Json<PostMessageResponse>> {
    let mut handle = turn::post(&st, &user, id, req).await?;
    let mut error = None;
    let mut content = String::new();
    let mut message_id = handle.message_id;
    // The turn's last reply: after calls that ran at once, the agent replied again.
    while let Some(ev) = handle.events.next().await {
        match ev {
            SseEvent::Error(e) => error = Some(e.error),
            SseEvent::MessageStart(m) => {
                message_id = m.message_id;
                error = None;
            }
            SseEvent::MessageComplete(c) => content = c.content,
            _ => {}
        }
    }
    Ok(Json(PostMessageResponse {
        message_id,
        content,
        error,
    }))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Resume after this seq (the `Last-Event-ID` header wins when both are given).
    after: Option<i64>,
}

/// `GET /api/sessions/{id}/events`: the session's feed ([`SessionFeed`]) as SSE: persisted
/// frames after the client's last seq, then live frames, phantom frames and reply events,
/// with no gap and no duplicate.
///
/// The response body reads the feed itself (no forwarding task in between: one wake-up per
/// event, not two). A reader that leaves drops the body and with it the subscription.
pub async fn events(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> ApiResult<SseBody<std::pin::Pin<Box<dyn Stream<Item = Bytes> + Send>>>> {
    let last_seen = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok())
        .or(q.after);
    let permit = hero_backend::conversation::cluster::stream_slot(&st, user.id()).await?;
    let feed = SessionFeed::open(&st, &user, id, last_seen).await?;
    let events = feed.into_stream().map(move |ev| {
        // Held as long as the stream is: it counts among the user's live streams.
        let _held = &permit;
        let mut out = Vec::with_capacity(128);
        ev.write_sse(&mut out);
        Bytes::from(out)
    });
    Ok(SseBody::new(Box::pin(events)))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FramesQuery {
    #[serde(rename = "type")]
    frame_type: Option<FrameType>,
    after: Option<i64>,
    limit: Option<i64>,
    /// The whole log: without it (and without `after`), the list starts at the last compact,
    /// as the conversation does (reference 003).
    #[serde(default)]
    all: bool,
}

pub async fn list_frames(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<FramesQuery>,
) -> ApiResult<Json<FramesPage>> {
    let dk = frames::session_key(&st, &user, id).await?;
    let after_seq = match q.after {
        Some(after) => Some(after),
        None if q.all => None,
        // From the compact frame itself on.
        None => frames::last_compact_seq(&st.db, id)
            .await?
            .map(|seq| seq - 1),
    };
    let filter = frames::Filter {
        frame_type: q.frame_type,
        after_seq,
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
    // The session must be the user's; its statistics need none of its payloads.
    sessions::get(&st.db, &user, id).await?;
    Ok(Json(frames::stats(&st.db, id).await?))
}

pub async fn get_frame(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((id, frame_id)): ApiPath<(i64, String)>,
) -> ApiResult<Json<Frame>> {
    let dk = frames::session_key(&st, &user, id).await?;
    Ok(Json(frames::get(&st.db, &dk, id, &frame_id).await?))
}

/// `GET …/view[?from_seq=N]`: the latest page of the conversation (or all of it from seq
/// N on), compiled.
pub async fn view(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<ViewQuery>,
) -> ApiResult<Json<CompiledView>> {
    Ok(Json(frames::view(&st, &user, id, q.from_seq).await?))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct ViewQuery {
    #[serde(default)]
    from_seq: Option<i64>,
}

/// `GET …/view/earlier?before_seq=N`: what the summary at seq N stands for, compiled.
pub async fn earlier(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<EarlierQuery>,
) -> ApiResult<Json<CompiledView>> {
    Ok(Json(frames::earlier(&st, &user, id, q.before_seq).await?))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct EarlierQuery {
    before_seq: i64,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HiddenRequest {
    hidden: bool,
}

/// `PUT …/frames/{frame_id}/hidden`: hides a message, or shows it again (an update frame).
pub async fn set_hidden(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((id, frame_id)): ApiPath<(i64, String)>,
    ApiJson(req): ApiJson<HiddenRequest>,
) -> ApiResult<NoContent> {
    frames::set_hidden(&st, &user, id, &frame_id, req.hidden).await?;
    Ok(NoContent)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditRequest {
    content: String,
}

/// A reply started by an edit or a regeneration: it streams through the session's feed.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct ReplyStarted {
    message_id: String,
}

/// `PUT …/messages/{frame_id}`: the user's message edited (a new version of it), and the
/// agent's reply to the edit started.
pub async fn edit_message(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((id, frame_id)): ApiPath<(i64, String)>,
    ApiJson(req): ApiJson<EditRequest>,
) -> ApiResult<Json<ReplyStarted>> {
    let message_id = versions::edit(&st, &user, id, &frame_id, &req.content).await?;
    Ok(Json(ReplyStarted { message_id }))
}

/// `POST …/messages/{frame_id}/regenerate`: a new version of an agent's reply started.
pub async fn regenerate(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((id, frame_id)): ApiPath<(i64, String)>,
) -> ApiResult<Json<ReplyStarted>> {
    let message_id = versions::regenerate(&st, &user, id, &frame_id).await?;
    Ok(Json(ReplyStarted { message_id }))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CurrentRequest {
    version: usize,
}

/// `POST …/messages/{frame_id}/current`: another version of a message shown (`version`
/// from 1).
pub async fn set_current(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((id, frame_id)): ApiPath<(i64, String)>,
    ApiJson(req): ApiJson<CurrentRequest>,
) -> ApiResult<NoContent> {
    versions::switch(&st, &user, id, &frame_id, req.version).await?;
    Ok(NoContent)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    q: String,
    limit: Option<usize>,
    sort: Option<String>,
}

/// `GET /api/search?q=&limit=&sort=relevance|recent`: the user's messages and sessions
/// found (`hero_backend::conversation::search`).
pub async fn search(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiQuery(q): ApiQuery<SearchQuery>,
) -> ApiResult<Json<Vec<hero_shared::api::SearchHitDto>>> {
    use hero_backend::conversation::search::{self, Order};
    let order = q
        .sort
        .as_deref()
        .map(Order::parse)
        .transpose()?
        .unwrap_or_default();
    let hits = search::search(&st, &user, &q.q, order, q.limit).await?;
    Ok(Json(hits.into_iter().map(search::Hit::dto).collect()))
}
