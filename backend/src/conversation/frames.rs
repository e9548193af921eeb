//! The frame log: append (the store assigns the per-session `seq` inside the insert, so
//! concurrent appends never share or skip a number) and reads. Payloads are sealed with the
//! session owner's data key, bound to the frame id, here; [`crate::store::frames`] holds the
//! rows. Frames are never updated or deleted.
//!
//! Callers check that the session belongs to the user first (`sessions::get`, or
//! `agents::turn_setup` in the same transaction); these functions take a session id that is
//! already known to be the user's.

use crate::store::Db;
use hero_shared::frame::{AuthorType, Frame, FrameType, TargetId};
use serde_json::Value;

use crate::crypto::{self, SecretKey};
use crate::store::{self, frames::FrameRow};
use crate::{Error, Result};

/// How new frames are sealed: the associated data binds every stored field but `seq`
/// (assigned inside the insert), so no field can be changed in the database without the
/// payload failing to open. Frames of seal 1, stored before, bind their id alone.
const SEAL: i64 = 2;

/// The associated data of a frame's payload, as `seal` defines it.
fn payload_aad(seal: i64, f: &FrameMeta<'_>) -> Vec<u8> {
    match seal {
        1 => format!("frames.payload:{}", f.id).into_bytes(),
        // NUL between fields: none can hold one (the targets are JSON, which escapes it).
        _ => format!(
            "frames.payload.v2\0{}\0{}\0{}\0{}\0{}\0{}\0{}\0{}",
            f.id,
            f.session_id,
            f.frame_type,
            f.author_type,
            f.author_id.map(|a| a.to_string()).unwrap_or_default(),
            f.parent_id.unwrap_or(""),
            f.target_ids,
            f.timestamp,
        )
        .into_bytes(),
    }
}

/// The stored fields a payload's associated data names.
struct FrameMeta<'a> {
    id: &'a str,
    session_id: i64,
    frame_type: &'a str,
    author_type: &'a str,
    author_id: Option<i64>,
    parent_id: Option<&'a str>,
    target_ids: &'a str,
    timestamp: &'a str,
}

/// A frame to append; the store assigns `seq` and the timestamp.
#[derive(Debug, Clone)]
pub struct NewFrame {
    pub id: String,
    pub session_id: i64,
    pub parent_id: Option<String>,
    pub target_ids: Vec<TargetId>,
    pub frame_type: FrameType,
    pub author_type: AuthorType,
    pub author_id: Option<i64>,
    pub payload: Value,
}

impl NewFrame {
    pub fn message(
        session_id: i64,
        author_type: AuthorType,
        author_id: Option<i64>,
        payload: Value,
    ) -> Self {
        NewFrame {
            id: new_id(),
            session_id,
            parent_id: None,
            target_ids: Vec::new(),
            frame_type: FrameType::Message,
            author_type,
            author_id,
            payload,
        }
    }
}

/// Frame ids are UUID v7: unique, and sortable by creation time for people reading logs.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

fn now_precise() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn type_str(t: FrameType) -> &'static str {
    match t {
        FrameType::Message => "message",
        FrameType::Request => "request",
        FrameType::Result => "result",
        FrameType::Update => "update",
        FrameType::Compact => "compact",
    }
}

fn author_str(a: AuthorType) -> &'static str {
    match a {
        AuthorType::User => "user",
        AuthorType::Agent => "agent",
        AuthorType::System => "system",
    }
}

/// A frame ready to store, serialised and sealed; [`Sealed::insert`] may run more than once
/// (again when the database was busy).
pub struct Sealed {
    frame: NewFrame,
    timestamp: String,
    targets: String,
    payload: Vec<u8>,
}

pub fn seal(dk: &SecretKey, f: NewFrame) -> Result<Sealed> {
    seal_at(dk, f, now_precise())
}

/// [`seal`] with the frame's time given (an imported frame keeps its own).
pub fn seal_at(dk: &SecretKey, f: NewFrame, timestamp: String) -> Result<Sealed> {
    let plain = serde_json::to_vec(&f.payload).map_err(|e| Error::Internal(e.to_string()))?;
    let targets =
        serde_json::to_string(&f.target_ids).map_err(|e| Error::Internal(e.to_string()))?;
    let aad = payload_aad(
        SEAL,
        &FrameMeta {
            id: &f.id,
            session_id: f.session_id,
            frame_type: type_str(f.frame_type),
            author_type: author_str(f.author_type),
            author_id: f.author_id,
            parent_id: f.parent_id.as_deref(),
            target_ids: &targets,
            timestamp: &timestamp,
        },
    );
    Ok(Sealed {
        payload: crypto::seal(dk, &aad, &plain),
        timestamp,
        targets,
        frame: f,
    })
}

impl Sealed {
    /// Inserts the frame and returns its `seq` ([`store::frames::insert`]).
    pub async fn insert(&self, tx: &mut crate::store::Write<'_>) -> Result<i64> {
        let f = &self.frame;
        store::frames::insert(
            tx,
            &store::frames::NewFrameRow {
                id: &f.id,
                session_id: f.session_id,
                parent_id: f.parent_id.as_deref(),
                target_ids: &self.targets,
                timestamp: &self.timestamp,
                frame_type: type_str(f.frame_type),
                author_type: author_str(f.author_type),
                author_id: f.author_id,
                payload: &self.payload,
                seal: SEAL,
            },
        )
        .await
    }

    /// The frame as stored with `seq`, counted as [`crate::conversation::history`] counts it.
    pub fn kept(self, seq: i64) -> crate::conversation::history::Kept {
        let sealed = self.payload.len();
        crate::conversation::history::Kept::new(self.stored(seq), sealed)
    }

    /// The frame as stored with `seq`.
    pub fn stored(self, seq: i64) -> Frame {
        let f = self.frame;
        Frame {
            id: f.id,
            session_id: f.session_id,
            seq,
            parent_id: f.parent_id,
            target_ids: f.target_ids,
            timestamp: self.timestamp,
            frame_type: f.frame_type,
            author_type: f.author_type,
            author_id: f.author_id,
            payload: f.payload,
        }
    }
}

/// Appends a frame (on the hot connection, in a transaction of its own).
pub async fn append(st: &crate::AppState, dk: &SecretKey, f: NewFrame) -> Result<Frame> {
    let sealed = seal(dk, f)?;
    let seq = st.db.write_with(async |tx| sealed.insert(tx).await).await?;
    Ok(sealed.stored(seq))
}

/// Appends a private notice line to the session (`notice`: its level, how the page shows
/// it; the agent is not sent it) and tells the session's readers.
pub async fn append_notice(
    st: &crate::AppState,
    dk: &SecretKey,
    user_id: i64,
    session_id: i64,
    text: String,
    level: &str,
) -> Result<()> {
    let f = NewFrame::message(
        session_id,
        hero_shared::frame::AuthorType::System,
        None,
        serde_json::json!({"role": "system", "content": text, "private": true, "notice": level}),
    );
    let kept = append(st, dk, f).await?;
    st.hub.publish(
        user_id,
        session_id,
        crate::conversation::hub::HubEvent::Frame(kept),
    );
    Ok(())
}

/// Opening a stored frame: its payload unsealed with the session owner's key and checked.
impl FrameRow {
    pub(crate) fn open(self, dk: &SecretKey) -> Result<Frame> {
        let bad = |what: &str| Error::Internal(format!("frame {} has a bad {what}", self.id));
        let meta = FrameMeta {
            id: &self.id,
            session_id: self.session_id,
            frame_type: &self.frame_type,
            author_type: &self.author_type,
            author_id: self.author_id,
            parent_id: self.parent_id.as_deref(),
            target_ids: &self.target_ids,
            timestamp: &self.timestamp,
        };
        let plain = crypto::open(dk, &payload_aad(self.seal, &meta), &self.payload)?;
        let payload: Value = serde_json::from_slice(&plain).map_err(|_| bad("payload"))?;
        let frame_type = serde_json::from_value(Value::String(self.frame_type.clone()))
            .map_err(|_| bad("type"))?;
        let author_type = serde_json::from_value(Value::String(self.author_type.clone()))
            .map_err(|_| bad("author"))?;
        let target_ids: Vec<TargetId> =
            serde_json::from_str(&self.target_ids).map_err(|_| bad("target list"))?;
        Ok(Frame {
            id: self.id,
            session_id: self.session_id,
            seq: self.seq,
            parent_id: self.parent_id,
            target_ids,
            timestamp: self.timestamp,
            frame_type,
            author_type,
            author_id: self.author_id,
            payload,
        })
    }
}

/// What `list` returns.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub frame_type: Option<FrameType>,
    pub after_seq: Option<i64>,
    pub limit: Option<i64>,
}

pub const MAX_LIST_LIMIT: i64 = 1000;

pub async fn list(db: &Db, dk: &SecretKey, session_id: i64, f: &Filter) -> Result<Vec<Frame>> {
    let limit = f.limit.unwrap_or(MAX_LIST_LIMIT).clamp(1, MAX_LIST_LIMIT);
    let rows = store::frames::list(
        db,
        session_id,
        f.after_seq.unwrap_or(0),
        f.frame_type.map(type_str),
        limit,
    )
    .await?;
    rows.into_iter().map(|r| r.open(dk)).collect()
}

pub use store::frames::{
    HOT_HISTORY_BYTES, HOT_HISTORY_FRAMES, current_seq, last_compact_seq, last_seq,
};

/// Every frame before `seq` from the last `compact` on (all of them when there is none): the
/// context the agent is sent, read on the hot connection (see [`Rows`]). `None` when there
/// is more than [`HOT_HISTORY_FRAMES`] or [`HOT_HISTORY_BYTES`] of it: reading stops there.
pub async fn since_last_compact(
    c: &mut crate::store::Conn<'_>,
    session_id: i64,
    seq: i64,
) -> Result<Option<Rows>> {
    Ok(store::frames::since_last_compact(c, session_id, seq)
        .await?
        .map(Rows))
}

/// The frames from the last `compact` before `seq` up to `seq` (excluded), through the pool:
/// what [`since_last_compact`] saw just before the frame `seq` was appended (frames are only
/// ever appended), when it was too much to read on the hot connection.
pub async fn before(
    db: &Db,
    dk: &SecretKey,
    session_id: i64,
    seq: i64,
) -> Result<Vec<crate::conversation::history::Kept>> {
    let rows = store::frames::before(db, session_id, seq).await?;
    Rows(rows).open(dk)
}

/// Frames read but still sealed: opened with [`Rows::open`] once the hot connection is let
/// go, so that decryption does not hold it.
pub struct Rows(Vec<FrameRow>);

impl Rows {
    /// Opened, each counted by its sealed size, as [`crate::conversation::history`] keeps them.
    pub fn open(self, dk: &SecretKey) -> Result<Vec<crate::conversation::history::Kept>> {
        self.0
            .into_iter()
            .map(|r| {
                let sealed = r.payload.len();
                Ok(crate::conversation::history::Kept::new(r.open(dk)?, sealed))
            })
            .collect()
    }
}

/// Every frame of the session, opened (tests compare against it; requests page instead).
pub async fn all(db: &Db, dk: &SecretKey, session_id: i64) -> Result<Vec<Frame>> {
    let rows = store::frames::all(db, session_id).await?;
    rows.into_iter().map(|r| r.open(dk)).collect()
}

pub async fn get(db: &Db, dk: &SecretKey, session_id: i64, frame_id: &str) -> Result<Frame> {
    let row = store::frames::get(db, session_id, frame_id).await?;
    row.ok_or(Error::NotFound("frame"))?.open(dk)
}

/// The session a frame of the user's belongs to (another user's frame is a missing one).
pub async fn session_of(
    st: &crate::AppState,
    user: &crate::accounts::auth::AuthUser,
    frame_id: &str,
) -> Result<i64> {
    store::frames::session_of(&st.db, user.id(), frame_id)
        .await?
        .ok_or(Error::NotFound("call"))
}

/// The key that opens a session's frames, once the session is known to be the user's: the
/// check every frame read starts with.
pub async fn session_key(
    st: &crate::AppState,
    user: &crate::accounts::auth::AuthUser,
    session_id: i64,
) -> Result<SecretKey> {
    crate::conversation::sessions::get(&st.db, user, session_id).await?;
    crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await
}

/// A session's statistics, from its frames' metadata alone: no payload is read or
/// decrypted, however long the session.
pub async fn stats(db: &Db, session_id: i64) -> Result<hero_shared::frame::FrameStats> {
    let mut st = hero_shared::frame::FrameStats::default();
    for (frame_type, n, max_seq) in store::frames::counts(db, session_id).await? {
        let n = n.max(0) as u64;
        st.total += n;
        st.last_seq = st.last_seq.max(Some(max_seq));
        match frame_type.as_str() {
            "message" => st.messages = n,
            "request" => st.requests = n,
            "result" => st.results = n,
            "update" => st.updates = n,
            "compact" => {
                st.compacts = n;
                st.last_compact_seq = Some(max_seq);
            }
            other => tracing::warn!(frame_type = other, "a frame of an unknown type"),
        }
    }
    st.messages_since_compact = store::frames::messages_since_last_compact(db, session_id)
        .await?
        .max(0) as u64;
    Ok(st)
}

/// The most messages a page of the conversation holds: the page renders them, and "show
/// earlier" (or scrolling up) pages in the ones before.
pub const PAGE_MESSAGES: i64 = 50;

/// The page's view of a session: its latest [`PAGE_MESSAGES`] messages since the last
/// compact (what follows them, calls and answers, included), with the statistics of every
/// frame. Reads and decrypts only what it returns. With `from`, the view starts there
/// instead (a page that recompiles keeps the part it shows).
pub async fn view(
    st: &crate::AppState,
    user: &crate::accounts::auth::AuthUser,
    session_id: i64,
    from: Option<i64>,
) -> Result<hero_shared::wire::CompiledView> {
    let dk = session_key(st, user, session_id).await?;
    let stats = stats(&st.db, session_id).await?;

    let versioned = store::frames::versioned_part(&st.db, session_id, i64::MAX).await?;
    let (messages, earlier_before) = match (versioned, from) {
        (Some(part), from) => versioned_page(st, &dk, session_id, part, i64::MAX, from).await?,
        (None, Some(from)) => {
            let (_, lower) =
                store::frames::page_start(&st.db, session_id, i64::MAX, PAGE_MESSAGES).await?;
            let from = from.max(lower);
            (
                compiled_range(st, &dk, session_id, from, i64::MAX).await?,
                (from > lower).then_some(from),
            )
        }
        (None, None) => page(st, &dk, session_id, i64::MAX).await?,
    };
    let messages = for_readers(messages);
    Ok(hero_shared::wire::CompiledView {
        session_id,
        messages,
        stats,
        earlier_before,
    })
}

/// The page of the conversation before `before_seq`, compiled, and where the page before
/// it ends, if there is one in the same part (between two summaries).
async fn page(
    st: &crate::AppState,
    dk: &SecretKey,
    session_id: i64,
    before_seq: i64,
) -> Result<(Vec<hero_shared::frame::CompiledMessage>, Option<i64>)> {
    let (start, lower) =
        store::frames::page_start(&st.db, session_id, before_seq, PAGE_MESSAGES).await?;
    let messages = compiled_range(st, dk, session_id, start, before_seq).await?;
    Ok((messages, (start > lower).then_some(start)))
}

/// The frames with `from <= seq < to`, compiled.
async fn compiled_range(
    st: &crate::AppState,
    dk: &SecretKey,
    session_id: i64,
    from: i64,
    to: i64,
) -> Result<Vec<hero_shared::frame::CompiledMessage>> {
    let mut rows = store::frames::range(&st.db, session_id, from, to).await?;
    // A page of the past: what later frames did to it (a hide, an answer, a call's result).
    if to != i64::MAX {
        rows.extend(store::frames::late_children(&st.db, session_id, from, to).await?);
    }
    let frames: Vec<Frame> = rows
        .into_iter()
        .map(|r| r.open(dk))
        .collect::<Result<_>>()?;
    Ok(hero_shared::frame::compile_frames(&frames))
}

/// Messages as a page is sent them: without the text read from their attachments
/// (`hero_shared::frame::without_attached_text`).
fn for_readers(
    mut messages: Vec<hero_shared::frame::CompiledMessage>,
) -> Vec<hero_shared::frame::CompiledMessage> {
    for m in &mut messages {
        hero_shared::frame::without_attached_text(&mut m.payload);
    }
    messages
}

/// A page of a part of the conversation whose messages have versions: the frames of the
/// part (`(from, to)`, from its summary up to the next) compiled whole, since the versions
/// decide which messages are in view, then [`cut`] as [`page`] cuts the log.
async fn versioned_page(
    st: &crate::AppState,
    dk: &SecretKey,
    session_id: i64,
    (from, to): (i64, i64),
    before_seq: i64,
    shown_from: Option<i64>,
) -> Result<(Vec<hero_shared::frame::CompiledMessage>, Option<i64>)> {
    let frames: Vec<Frame> = store::frames::range(&st.db, session_id, from, to)
        .await?
        .into_iter()
        .map(|r| r.open(dk))
        .collect::<Result<_>>()?;
    let view = hero_shared::frame::compile_frames(&frames);
    Ok(cut(view, before_seq, shown_from, PAGE_MESSAGES as usize))
}

/// The messages of a compiled `view` before `before_seq`, each with what follows it up to
/// the next message (its calls and their results): those from `from` on, or else the last
/// `n`; and, if more of the view comes before them, the seq the page before them ends at.
/// Along the versions in view, seqs only grow, so a seq marks a place in the view as it
/// does in the log.
fn cut(
    view: Vec<hero_shared::frame::CompiledMessage>,
    before_seq: i64,
    from: Option<i64>,
    n: usize,
) -> (Vec<hero_shared::frame::CompiledMessage>, Option<i64>) {
    let heads: Vec<usize> = (0..view.len())
        .filter(|&i| matches!(view[i].frame_type, FrameType::Message | FrameType::Compact))
        .filter(|&i| view[i].seq < before_seq)
        .collect();
    let end = heads.last().map_or(0, |&last| {
        (last + 1..view.len())
            .find(|&i| matches!(view[i].frame_type, FrameType::Message | FrameType::Compact))
            .unwrap_or(view.len())
    });
    // From `from` on, but never fewer than `n` messages: after a switch between versions
    // the ones shown may all come before the seq the page started at.
    let last_n = heads.len().saturating_sub(n);
    let first = match from {
        Some(from) => heads
            .iter()
            .position(|&i| view[i].seq >= from)
            .unwrap_or(heads.len())
            .min(last_n),
        None => last_n,
    };
    let (start, earlier) = match (first, heads.get(first)) {
        (0, _) => (0, None),
        (_, Some(&i)) => (i, Some(view[i].seq)),
        (_, None) => (end, Some(view[heads[first - 1]].seq + 1)),
    };
    let mut view = view;
    view.truncate(end);
    (view.split_off(start.min(end)), earlier)
}

/// The page of the conversation before `before_seq` ("show earlier"): up to
/// [`PAGE_MESSAGES`] messages, back to the summary before it at most; before a summary, the
/// part it stands for.
pub async fn earlier(
    st: &crate::AppState,
    user: &crate::accounts::auth::AuthUser,
    session_id: i64,
    before_seq: i64,
) -> Result<hero_shared::wire::CompiledView> {
    let dk = session_key(st, user, session_id).await?;
    let before = before_seq.max(0);
    let (messages, earlier_before) =
        match store::frames::versioned_part(&st.db, session_id, before).await? {
            Some(part) => versioned_page(st, &dk, session_id, part, before, None).await?,
            None => page(st, &dk, session_id, before).await?,
        };
    Ok(hero_shared::wire::CompiledView {
        session_id,
        messages: for_readers(messages),
        stats: Default::default(),
        earlier_before,
    })
}

/// Hides a message of the session (or shows it again): an `update` of it whose only key is
/// `hidden` (reference 003: nothing is deleted). Hidden messages are still sent to the
/// agent; the page shows them on request.
pub async fn set_hidden(
    st: &crate::AppState,
    user: &crate::accounts::auth::AuthUser,
    session_id: i64,
    frame_id: &str,
    hidden: bool,
) -> Result<()> {
    let dk = session_key(st, user, session_id).await?;
    let payload = serde_json::json!({ "hidden": hidden });
    update_message(st, user, &dk, session_id, frame_id, payload).await
}

/// Appends the user's `update` of message `frame_id` (its parent and target), tells the
/// session's readers and keeps it with the conversation in memory: 404 unless the session
/// has that message.
pub(crate) async fn update_message(
    st: &crate::AppState,
    user: &crate::accounts::auth::AuthUser,
    dk: &SecretKey,
    session_id: i64,
    frame_id: &str,
    payload: Value,
) -> Result<()> {
    let kept = st
        .db
        .write_with(async |tx| {
            store::sessions::lock(tx, session_id).await?;
            store::frames::get_hot(tx, session_id, frame_id)
                .await?
                .filter(|r| r.frame_type == "message")
                .ok_or(Error::NotFound("message"))?;
            let f = NewFrame {
                id: new_id(),
                session_id,
                parent_id: Some(frame_id.to_owned()),
                target_ids: vec![TargetId::Frame(frame_id.to_owned())],
                frame_type: FrameType::Update,
                author_type: AuthorType::User,
                author_id: Some(user.id()),
                payload,
            };
            let sealed = seal(dk, f)?;
            let seq = sealed.insert(tx).await?;
            full_session(st, seq)?;
            Ok(sealed.kept(seq))
        })
        .await?;
    st.hub.publish(
        user.id(),
        session_id,
        crate::conversation::hub::HubEvent::Frame((*kept.frame).clone()),
    );
    st.history.append(kept);
    Ok(())
}

/// Refuses a frame at `seq` past the session's bound ([`crate::limits::Limits`]); called in
/// the transaction that inserts, so the refusal rolls the insert back.
pub(crate) fn full_session(st: &crate::AppState, seq: i64) -> Result<()> {
    let most = st.settings.limits.frames_per_session;
    if seq > most {
        return Err(Error::Limit(format!(
            "this session holds {most} frames, the most one may; start a new session"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{signed_in, state};
    use hero_shared::api::CreateSessionRequest;
    use serde_json::json;

    async fn session(
        st: &crate::AppState,
        user: &crate::accounts::auth::AuthUser,
        name: &str,
    ) -> hero_shared::api::SessionDto {
        crate::conversation::sessions::create(
            st,
            user,
            CreateSessionRequest {
                name: name.into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
    }

    /// A signed-in user with one session, and the key of its frames.
    async fn alice_with_a_session() -> (
        tempfile::TempDir,
        crate::AppState,
        crate::accounts::auth::AuthUser,
        hero_shared::api::SessionDto,
        SecretKey,
    ) {
        let (dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let s = session(&st, &alice, "s").await;
        let dk = crate::accounts::users::data_key(&st.db, &st.keys, alice.id())
            .await
            .unwrap();
        (dir, st, alice, s, dk)
    }

    #[tokio::test]
    async fn seq_is_strictly_increasing_under_concurrent_appends() {
        let (_dir, st, _, s, dk) = alice_with_a_session().await;
        let mut tasks = Vec::new();
        for i in 0..40 {
            let (st, dk) = (st.clone(), dk.clone());
            tasks.push(tokio::spawn(async move {
                let f = NewFrame::message(
                    s.id,
                    AuthorType::User,
                    Some(1),
                    json!({"role": "user", "content": format!("m{i}")}),
                );
                append(&st, &dk, f).await.unwrap().seq
            }));
        }
        let mut seqs = Vec::new();
        for t in tasks {
            seqs.push(t.await.unwrap());
        }
        seqs.sort();
        assert_eq!(seqs, (1..=40).collect::<Vec<_>>());
        let listed = list(
            &st.db,
            &dk,
            s.id,
            &Filter {
                after_seq: Some(35),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        assert_eq!(
            listed.iter().map(|f| f.seq).collect::<Vec<_>>(),
            vec![36, 37, 38, 39, 40]
        );
        // Payloads are sealed at rest.
        let raw = crate::store::testing::bytes(&st.db, "SELECT payload FROM frames LIMIT 1", &[])
            .await
            .unwrap();
        assert!(!raw.windows(7).any(|w| w == b"content"));
    }

    #[tokio::test]
    async fn a_long_conversation_is_not_read_on_the_hot_connection() {
        let (_dir, st, alice, s, dk) = alice_with_a_session().await;
        let msg = |c: String| {
            NewFrame::message(
                s.id,
                AuthorType::User,
                None,
                json!({"role": "user", "content": c}),
            )
        };
        let hot = || {
            st.db.read_with(async |c| {
                Ok(since_last_compact(c, s.id, i64::MAX)
                    .await?
                    .map(|r| r.0.len()))
            })
        };
        for i in 0..HOT_HISTORY_FRAMES {
            append(&st, &dk, msg(format!("m{i}"))).await.unwrap();
        }
        assert_eq!(hot().await.unwrap(), Some(HOT_HISTORY_FRAMES));
        append(&st, &dk, msg("one too many".into())).await.unwrap();
        assert_eq!(hot().await.unwrap(), None);
        assert_eq!(
            before(&st.db, &dk, s.id, i64::MAX).await.unwrap().len(),
            HOT_HISTORY_FRAMES + 1
        );
        // Bytes count too: one frame bigger than the bound is read through the pool.
        let t = session(&st, &alice, "t").await;
        let big = NewFrame::message(
            t.id,
            AuthorType::User,
            None,
            json!({"content": "x".repeat(HOT_HISTORY_BYTES)}),
        );
        append(&st, &dk, big).await.unwrap();
        assert!(
            st.db
                .read_with(async |c| since_last_compact(c, t.id, i64::MAX).await)
                .await
                .unwrap()
                .is_none()
        );
    }

    /// A part of the conversation with versions is paged along the versions in view: the
    /// page's messages, where the page before ends, a page from a seq on, and a switch.
    #[tokio::test]
    async fn a_conversation_with_versions_pages_along_the_versions_shown() {
        let (_dir, st, alice, s, dk) = alice_with_a_session().await;
        let mut ids = Vec::new();
        let mut seqs = Vec::new();
        for i in 1..=60 {
            let f = NewFrame::message(
                s.id,
                AuthorType::User,
                None,
                json!({"role": "user", "content": format!("m{i}")}),
            );
            let f = append(&st, &dk, f).await.unwrap();
            ids.push(f.id);
            seqs.push(f.seq);
        }
        let mut edit = NewFrame::message(
            s.id,
            AuthorType::User,
            None,
            json!({"role": "user", "content": "v55"}),
        );
        edit.parent_id = Some(ids[54].clone());
        append(&st, &dk, edit).await.unwrap();
        let texts = |v: &[hero_shared::frame::CompiledMessage]| {
            v.iter().map(|m| m.content.clone()).collect::<Vec<_>>()
        };
        let names =
            |r: std::ops::RangeInclusive<usize>| r.map(|i| format!("m{i}")).collect::<Vec<_>>();
        // m1..m54, then the edit: the last 50 of them.
        let v = view(&st, &alice, s.id, None).await.unwrap();
        let mut want = names(6..=54);
        want.push("v55".into());
        assert_eq!(texts(&v.messages), want);
        let last = v.messages.last().unwrap().versions.clone().unwrap();
        assert_eq!((last.count, last.current), (2, 2));
        assert_eq!(v.earlier_before, Some(seqs[5]));
        let e = earlier(&st, &alice, s.id, seqs[5]).await.unwrap();
        assert_eq!(texts(&e.messages), names(1..=5));
        assert_eq!(e.earlier_before, None);
        // Back to the first version: m55..m60 are in view again.
        let switch = NewFrame {
            id: new_id(),
            session_id: s.id,
            parent_id: Some(ids[54].clone()),
            target_ids: vec![TargetId::Frame(ids[54].clone())],
            frame_type: FrameType::Update,
            author_type: AuthorType::User,
            author_id: Some(alice.id()),
            payload: json!({"current": 1}),
        };
        append(&st, &dk, switch).await.unwrap();
        let v = view(&st, &alice, s.id, None).await.unwrap();
        assert_eq!(texts(&v.messages), names(11..=60));
        // A page from a seq on holds at least a page's worth: after a switch the versions
        // shown may all come before where the page started.
        let v = view(&st, &alice, s.id, Some(seqs[29])).await.unwrap();
        assert_eq!(texts(&v.messages), names(11..=60));
        assert_eq!(v.earlier_before, Some(seqs[10]));
        let v = view(&st, &alice, s.id, Some(seqs[5])).await.unwrap();
        assert_eq!(texts(&v.messages), names(6..=60));
    }

    #[tokio::test]
    async fn views_start_at_the_last_compact() {
        let (_dir, st, _, s, dk) = alice_with_a_session().await;
        let msg = |c: &str| {
            NewFrame::message(
                s.id,
                AuthorType::User,
                None,
                json!({"role": "user", "content": c}),
            )
        };
        append(&st, &dk, msg("old")).await.unwrap();
        let mut compact = msg("");
        compact.frame_type = FrameType::Compact;
        compact.payload = json!({"content": "summary"});
        append(&st, &dk, compact).await.unwrap();
        let newest = append(&st, &dk, msg("new")).await.unwrap();
        let seqs = |v: Vec<crate::conversation::history::Kept>| {
            v.iter().map(|k| k.frame.seq).collect::<Vec<_>>()
        };
        let view = st
            .db
            .read_with(async |c| since_last_compact(c, s.id, i64::MAX).await)
            .await
            .unwrap()
            .unwrap()
            .open(&dk)
            .unwrap();
        assert_eq!(seqs(view), vec![2, 3]);
        // The pool reads the same frames, as they were before a given one was appended.
        assert_eq!(
            seqs(before(&st.db, &dk, s.id, 4).await.unwrap()),
            vec![2, 3]
        );
        assert_eq!(seqs(before(&st.db, &dk, s.id, 3).await.unwrap()), vec![2]);
        assert_eq!(seqs(before(&st.db, &dk, s.id, 2).await.unwrap()), vec![1]);
        // And so does the hot connection.
        let hot = |seq| {
            st.db.read_with(async move |c| {
                Ok(since_last_compact(c, s.id, seq)
                    .await?
                    .unwrap()
                    .0
                    .iter()
                    .map(|r| r.seq)
                    .collect::<Vec<_>>())
            })
        };
        assert_eq!(hot(3).await.unwrap(), vec![2]);
        assert_eq!(hot(2).await.unwrap(), vec![1]);
        assert_eq!(get(&st.db, &dk, s.id, &newest.id).await.unwrap(), newest);
        assert!(matches!(
            get(&st.db, &dk, s.id + 1, &newest.id).await,
            Err(Error::NotFound(_))
        ));
    }

    #[tokio::test]
    async fn a_frame_whose_stored_fields_change_no_longer_opens() {
        let (_dir, st, alice, s, dk) = alice_with_a_session().await;
        let other = session(&st, &alice, "other").await;
        let mut f = NewFrame::message(
            s.id,
            AuthorType::Agent,
            Some(7),
            json!({"role": "assistant", "content": "the real answer"}),
        );
        f.parent_id = Some(new_id());
        f.target_ids = vec!["user:1".parse::<TargetId>().unwrap()];
        let stored = append(&st, &dk, f).await.unwrap();
        assert_eq!(get(&st.db, &dk, s.id, &stored.id).await.unwrap(), stored);
        // Each change an attacker with the database file could make, one at a time.
        let tampered = [
            ("session_id", json!(other.id)),
            ("type", json!("result")),
            ("author_type", json!("user")),
            ("author_id", json!(1)),
            ("parent_id", json!(new_id())),
            ("target_ids", json!("[]")),
            ("timestamp", json!("2020-01-01T00:00:00Z")),
            // Claiming the old sealing, which names the id alone.
            ("seal", json!(1)),
        ];
        for (column, value) in tampered {
            let session_of = if column == "session_id" {
                other.id
            } else {
                s.id
            };
            use crate::store::testing::{Arg, execute, text};
            let id = Arg::Text(stored.id.clone());
            let before = text(
                &st.db,
                &format!("SELECT CAST({column} AS TEXT) FROM frames WHERE id = $1"),
                std::slice::from_ref(&id),
            )
            .await
            .unwrap();
            // Each column takes its own type (PostgreSQL converts nothing).
            let arg = |v: &str| match &value {
                serde_json::Value::Number(_) => Arg::Int(v.parse().unwrap()),
                _ => Arg::Text(v.to_owned()),
            };
            let bind_value = match &value {
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::String(t) => t.clone(),
                _ => unreachable!(),
            };
            let set = format!("UPDATE frames SET {column} = $1 WHERE id = $2");
            execute(&st.db, &set, &[arg(&bind_value), id.clone()])
                .await
                .unwrap();
            assert!(
                get(&st.db, &dk, session_of, &stored.id).await.is_err(),
                "a frame whose {column} changed still opens"
            );
            execute(&st.db, &set, &[arg(&before), id]).await.unwrap();
            assert_eq!(get(&st.db, &dk, s.id, &stored.id).await.unwrap(), stored);
        }
    }

    #[tokio::test]
    async fn frames_sealed_before_the_metadata_was_bound_still_open() {
        let (_dir, st, _, s, dk) = alice_with_a_session().await;
        let id = new_id();
        let payload = json!({"role": "user", "content": "from an older Hero"});
        let sealed = crypto::seal(
            &dk,
            format!("frames.payload:{id}").as_bytes(),
            &serde_json::to_vec(&payload).unwrap(),
        );
        use crate::store::testing::{Arg, execute, int};
        execute(
            &st.db,
            "INSERT INTO frames (id, session_id, seq, target_ids, timestamp, type, author_type, payload) \
             VALUES ($1, $2, 1, '[]', '2026-11-01T00:00:00Z', 'message', 'user', $3)",
            &[Arg::Text(id.clone()), Arg::Int(s.id), Arg::Bytes(sealed)],
        )
        .await
        .unwrap();
        let old = get(&st.db, &dk, s.id, &id).await.unwrap();
        assert_eq!(old.payload, payload);
        // What is appended after it is sealed the new way.
        let new = append(
            &st,
            &dk,
            NewFrame::message(s.id, AuthorType::User, None, json!({"content": "new"})),
        )
        .await
        .unwrap();
        let seal = int(
            &st.db,
            "SELECT seal FROM frames WHERE id = $1",
            &[Arg::Text(new.id.clone())],
        )
        .await
        .unwrap();
        assert_eq!((new.seq, seal), (2, SEAL));
    }

    #[tokio::test]
    async fn statistics_and_the_view_never_open_what_lies_before_the_compact() {
        let (_dir, st, alice, s, dk) = alice_with_a_session().await;
        let msg = |c: &str, t: FrameType| {
            let mut f = NewFrame::message(
                s.id,
                AuthorType::User,
                None,
                json!({"role": "user", "content": c}),
            );
            f.frame_type = t;
            f
        };
        let old = append(&st, &dk, msg("old", FrameType::Message))
            .await
            .unwrap();
        append(&st, &dk, msg("asks", FrameType::Request))
            .await
            .unwrap();
        append(&st, &dk, msg("answers", FrameType::Result))
            .await
            .unwrap();
        append(&st, &dk, msg("summary", FrameType::Compact))
            .await
            .unwrap();
        append(&st, &dk, msg("new", FrameType::Message))
            .await
            .unwrap();
        append(&st, &dk, msg("newer", FrameType::Message))
            .await
            .unwrap();
        let opened = hero_shared::frame::frame_stats(&all(&st.db, &dk, s.id).await.unwrap());
        assert_eq!(stats(&st.db, s.id).await.unwrap(), opened);
        assert_eq!(
            (
                opened.total,
                opened.messages_since_compact,
                opened.last_compact_seq
            ),
            (6, 2, Some(4))
        );
        // A frame before the compact that could not be opened is never opened.
        {
            use crate::store::testing::{Arg, execute};
            let damage = "UPDATE frames SET payload = $1 WHERE id = $2";
            execute(
                &st.db,
                damage,
                &[Arg::Bytes(vec![0]), Arg::Text(old.id.clone())],
            )
            .await
            .unwrap();
        }
        assert!(all(&st.db, &dk, s.id).await.is_err(), "it is unreadable");
        let v = view(&st, &alice, s.id, None).await.unwrap();
        assert_eq!(v.stats, opened);
        assert_eq!(v.messages.len(), 3, "{:?}", v.messages);
        assert_eq!(stats(&st.db, s.id + 99).await.unwrap(), Default::default());
    }
}
