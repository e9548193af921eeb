//! The `frames` table: the append-only log. Rows are only ever inserted (on the hot
//! connection, `seq` assigned inside the insert) and read; nothing here updates or deletes.
//! Payloads arrive sealed and leave sealed: [`crate::conversation::frames`] seals and opens them.

use super::{Columns, On, Pool};
use crate::Result;

/// A frame as stored, its payload still sealed.
pub struct FrameRow {
    pub id: String,
    pub session_id: i64,
    pub seq: i64,
    pub parent_id: Option<String>,
    /// JSON list of target ids.
    pub target_ids: String,
    pub timestamp: String,
    pub frame_type: String,
    pub author_type: String,
    pub author_id: Option<i64>,
    pub payload: Vec<u8>,
    /// How the payload was sealed (the migration that added it says what each value binds).
    pub seal: i64,
}

const COLUMNS: &str = "id, session_id, seq, parent_id, target_ids, timestamp, type, author_type, author_id, payload, seal";

impl FrameRow {
    /// The one decoder of a frame row, from either connection ([`COLUMNS`] in order).
    fn read(r: &impl Columns) -> Result<Self> {
        Ok(FrameRow {
            id: r.get(0)?,
            session_id: r.get(1)?,
            seq: r.get(2)?,
            parent_id: r.get(3)?,
            target_ids: r.get(4)?,
            timestamp: r.get(5)?,
            frame_type: r.get(6)?,
            author_type: r.get(7)?,
            author_id: r.get(8)?,
            payload: r.get(9)?,
            seal: r.get(10)?,
        })
    }
}

/// A frame to insert, serialised and sealed; the store assigns `seq`.
pub struct NewFrameRow<'a> {
    pub id: &'a str,
    pub session_id: i64,
    pub parent_id: Option<&'a str>,
    pub target_ids: &'a str,
    pub timestamp: &'a str,
    pub frame_type: &'a str,
    pub author_type: &'a str,
    pub author_id: Option<i64>,
    pub payload: &'a [u8],
    pub seal: i64,
}

/// Inserts the frame and returns its `seq`: the session's last `seq` plus one, read in the
/// same write transaction (so no other write comes between: SQLite has one writer at a time,
/// and on PostgreSQL the session's row is locked first); UNIQUE(session_id, seq) guards the
/// invariant regardless. Two statements, not one `INSERT … RETURNING`: SQLite gathers a
/// `RETURNING` row in a temporary table of its own, a page cache set up and torn down per
/// insert (docs/perf.md).
pub async fn insert(tx: &mut super::Write<'_>, f: &NewFrameRow<'_>) -> Result<i64> {
    const INSERT: &str = "INSERT INTO frames (id, session_id, seq, parent_id, target_ids, timestamp, type, author_type, author_id, payload, seal) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";
    if let On::Postgres(pg) = tx.on() {
        // Appends to one session take turns; appends to others do not wait.
        sqlx::query("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE")
            .bind(f.session_id)
            .execute(&mut *pg)
            .await?;
    }
    let seq = current_seq(tx, f.session_id).await? + 1;
    execute!(
        tx,
        INSERT,
        f.id,
        f.session_id,
        seq,
        f.parent_id,
        f.target_ids,
        f.timestamp,
        f.frame_type,
        f.author_type,
        f.author_id,
        f.payload,
        f.seal
    )?;
    Ok(seq)
}

/// The session's frames after `after_seq`, of `frame_type` if given, `limit` at most.
pub async fn list(
    db: &super::Db,
    session_id: i64,
    after_seq: i64,
    frame_type: Option<&str>,
    limit: i64,
) -> Result<Vec<FrameRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM frames WHERE session_id = $1 AND seq > $2 \
         AND (CAST($3 AS TEXT) IS NULL OR type = $3) ORDER BY seq LIMIT $4"
    );
    pool_rows!(
        db,
        FrameRow::read,
        &sql,
        session_id,
        after_seq,
        frame_type,
        limit
    )
}

/// The seq of the session's last `compact` frame, if any (an index lookup: nothing before
/// it is read).
pub async fn last_compact_seq(db: &super::Db, session_id: i64) -> Result<Option<i64>> {
    let sql = "SELECT MAX(seq) FROM frames WHERE session_id = $1 AND type = 'compact'";
    Ok(on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(session_id)
        .fetch_one(p)
        .await?))
}

/// How much of a conversation is read on the hot connection, which blocks a runtime thread
/// while it reads: beyond either bound, [`before`] reads it through the pool.
pub const HOT_HISTORY_FRAMES: usize = 256;
pub const HOT_HISTORY_BYTES: usize = 1 << 20;

/// The frames before `$2` from the last compact before it on, `$3` at most.
const SINCE_LAST_COMPACT: &str = "SELECT id, session_id, seq, parent_id, target_ids, timestamp, type, author_type, author_id, payload, seal \
     FROM frames WHERE session_id = $1 AND seq < $2 AND seq >= COALESCE( \
       (SELECT MAX(seq) FROM frames WHERE session_id = $1 AND type = 'compact' AND seq < $2), 0) ORDER BY seq LIMIT $3";

/// Every frame before `seq` from the last `compact` on (all of them when there is none): the
/// context the agent is sent, read on a held connection. `None` when there is more than
/// [`HOT_HISTORY_FRAMES`] or [`HOT_HISTORY_BYTES`] of it: reading stops there.
pub async fn since_last_compact(
    c: &mut super::Conn<'_>,
    session_id: i64,
    seq: i64,
) -> Result<Option<Vec<FrameRow>>> {
    let within = |rows: &[FrameRow]| {
        rows.len() <= HOT_HISTORY_FRAMES
            && rows.iter().map(|r| r.payload.len()).sum::<usize>() <= HOT_HISTORY_BYTES
    };
    let limit = HOT_HISTORY_FRAMES as i64 + 1;
    match c.on() {
        On::Sqlite(h) => h.run(|c| since_last_compact_on(c, session_id, seq)).await,
        On::Postgres(pg) => {
            let rows = sqlx::query(SINCE_LAST_COMPACT)
                .bind(session_id)
                .bind(seq)
                .bind(limit)
                .fetch_all(pg)
                .await?
                .iter()
                .map(FrameRow::read)
                .collect::<Result<Vec<_>>>()?;
            Ok(within(&rows).then_some(rows))
        }
    }
}

fn since_last_compact_on(
    c: &rusqlite::Connection,
    session_id: i64,
    seq: i64,
) -> Result<Option<Vec<FrameRow>>> {
    let mut st = c.prepare_cached(SINCE_LAST_COMPACT)?;
    let mut rows = st.query(rusqlite::params![
        session_id,
        seq,
        HOT_HISTORY_FRAMES as i64 + 1
    ])?;
    let (mut out, mut bytes) = (Vec::new(), 0);
    while let Some(r) = rows.next()? {
        let row = FrameRow::read(r)?;
        bytes += row.payload.len();
        out.push(row);
        if out.len() > HOT_HISTORY_FRAMES || bytes > HOT_HISTORY_BYTES {
            return Ok(None);
        }
    }
    Ok(Some(out))
}

/// The frames from the last `compact` before `seq` up to `seq` (excluded), through the pool:
/// what [`since_last_compact`] saw just before the frame `seq` was appended (frames are only
/// ever appended), when it was too much to read on the hot connection.
pub async fn before(db: &super::Db, session_id: i64, seq: i64) -> Result<Vec<FrameRow>> {
    // The same query with no limit: -1 on SQLite, NULL on PostgreSQL (each refuses the other).
    match db.pool() {
        Pool::Sqlite(p) => sqlx::query(SINCE_LAST_COMPACT)
            .bind(session_id)
            .bind(seq)
            .bind(-1i64)
            .fetch_all(p)
            .await?
            .iter()
            .map(FrameRow::read)
            .collect::<Result<Vec<_>>>(),
        Pool::Postgres(p) => sqlx::query(SINCE_LAST_COMPACT)
            .bind(session_id)
            .bind(seq)
            .bind(None::<i64>)
            .fetch_all(p)
            .await?
            .iter()
            .map(FrameRow::read)
            .collect::<Result<Vec<_>>>(),
    }
}

/// Where a page of the conversation before `before_seq` starts: the seq of its `n`th
/// message counting back (or its segment's start, when it has fewer), and where the
/// segment starts (its `compact` frame's seq, 0 for none; the page's start when nothing of
/// it lies below the page). Metadata only: nothing is read or decrypted.
pub async fn page_start(
    db: &super::Db,
    session_id: i64,
    before_seq: i64,
    n: i64,
) -> Result<(i64, i64)> {
    let lower: i64 = on_pool!(db, |p| {
        sqlx::query_scalar(
        "SELECT COALESCE(MAX(seq), 0) FROM frames WHERE session_id = $1 AND type = 'compact' AND seq < $2",
    )
    .bind(session_id)
    .bind(before_seq)
    .fetch_one(p)
    .await?
    });
    let nth: Option<i64> = on_pool!(db, |p| {
        sqlx::query_scalar(
        "SELECT seq FROM frames WHERE session_id = $1 AND type = 'message' AND seq < $2 AND seq > $3 \
         ORDER BY seq DESC LIMIT 1 OFFSET $4",
    )
    .bind(session_id)
    .bind(before_seq)
    .bind(lower)
    .bind(n - 1)
    .fetch_optional(p)
    .await?
    });
    let start = nth.unwrap_or(lower).max(lower);
    // A reply's calls begun while it streamed are stored before it: its page starts with them.
    let start: i64 = on_pool!(db, |p| sqlx::query_scalar(
        "SELECT COALESCE(MIN(c.seq), $1) FROM frames m JOIN frames c ON c.parent_id = m.id \
         WHERE m.session_id = $2 AND m.seq = $1 AND c.seq < $1",
    )
    .bind(start)
    .bind(session_id)
    .fetch_one(p)
    .await?);
    let start = start.max(lower);
    // Anything of the same part below the page (its summary, if nothing else)?
    let more: bool = on_pool!(db, |p| sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM frames WHERE session_id = $1 AND seq >= $2 AND seq < $3)",
    )
    .bind(session_id)
    .bind(lower)
    .bind(start)
    .fetch_one(p)
    .await?);
    Ok((start, if more { lower } else { start }))
}

/// The frames after `to` that change the frames with `from <= seq < to`: their updates,
/// answers, calls and results (children, and children of those), in order. A page of the
/// past compiles with them, as the whole log would.
pub async fn late_children(
    db: &super::Db,
    session_id: i64,
    from: i64,
    to: i64,
) -> Result<Vec<FrameRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM frames WHERE session_id = $1 AND seq >= $3 AND parent_id IS NOT NULL AND ( \
           parent_id IN (SELECT id FROM frames WHERE session_id = $1 AND seq >= $2 AND seq < $3) \
           OR parent_id IN (SELECT id FROM frames WHERE session_id = $1 AND seq >= $3 AND parent_id IN \
             (SELECT id FROM frames WHERE session_id = $1 AND seq >= $2 AND seq < $3))) ORDER BY seq"
    );
    pool_rows!(db, FrameRow::read, &sql, session_id, from, to)
}

/// The frames with `from <= seq < to`, in order.
pub async fn range(db: &super::Db, session_id: i64, from: i64, to: i64) -> Result<Vec<FrameRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM frames WHERE session_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq"
    );
    pool_rows!(db, FrameRow::read, &sql, session_id, from, to)
}

/// The part of the conversation that the page before `before_seq` is in (from the summary
/// before it up to the next), `(from, to)` as [`range`] reads it, if a message in it is a
/// version of another (`hero_shared::frame`'s "Versions"): such a part is compiled whole
/// before it is paged.
pub async fn versioned_part(
    db: &super::Db,
    session_id: i64,
    before_seq: i64,
) -> Result<Option<(i64, i64)>> {
    let sql = "SELECT l.lo, u.hi FROM \
         (SELECT COALESCE(MAX(seq), 0) AS lo FROM frames \
          WHERE session_id = $1 AND type = 'compact' AND seq < $2) l, \
         (SELECT COALESCE(MIN(seq), $3) AS hi FROM frames \
          WHERE session_id = $1 AND type = 'compact' AND seq >= $2) u \
         WHERE EXISTS (SELECT 1 FROM frames WHERE session_id = $1 AND type = 'message' \
          AND parent_id IS NOT NULL AND seq > l.lo AND seq < u.hi)";
    Ok(on_pool!(db, |p| sqlx::query_as(sql)
        .bind(session_id)
        .bind(before_seq)
        .bind(i64::MAX)
        .fetch_optional(p)
        .await?))
}

/// Every part of the conversation (from a summary up to the next, `(from, to)` as
/// [`range`] reads it) in which a message is a version of another, in order.
pub async fn versioned_parts(db: &super::Db, session_id: i64) -> Result<Vec<(i64, i64)>> {
    let sql = "SELECT DISTINCT \
         COALESCE((SELECT MAX(c.seq) FROM frames c \
          WHERE c.session_id = $1 AND c.type = 'compact' AND c.seq < m.seq), 0) AS lo, \
         COALESCE((SELECT MIN(c.seq) FROM frames c \
          WHERE c.session_id = $1 AND c.type = 'compact' AND c.seq > m.seq), $2) AS hi \
         FROM frames m WHERE m.session_id = $1 AND m.type = 'message' AND m.parent_id IS NOT NULL \
         ORDER BY lo";
    Ok(on_pool!(db, |p| sqlx::query_as(sql)
        .bind(session_id)
        .bind(i64::MAX)
        .fetch_all(p)
        .await?))
}

/// Every frame of the session, in order.
pub async fn all(db: &super::Db, session_id: i64) -> Result<Vec<FrameRow>> {
    range(db, session_id, i64::MIN, i64::MAX).await
}

/// The session's frames counted by type, with each type's highest seq, from the rows'
/// metadata alone (nothing is decrypted): `(type, count, max seq)`.
pub async fn counts(db: &super::Db, session_id: i64) -> Result<Vec<(String, i64, i64)>> {
    let sql = "SELECT type, COUNT(*), MAX(seq) FROM frames WHERE session_id = $1 GROUP BY type";
    Ok(on_pool!(db, |p| sqlx::query_as(sql)
        .bind(session_id)
        .fetch_all(p)
        .await?))
}

/// How many `message` frames follow the session's last `compact` (all of them without one).
pub async fn messages_since_last_compact(db: &super::Db, session_id: i64) -> Result<i64> {
    let sql = "SELECT COUNT(*) FROM frames WHERE session_id = $1 AND type = 'message' AND seq > \
         COALESCE((SELECT MAX(seq) FROM frames WHERE session_id = $1 AND type = 'compact'), 0)";
    Ok(on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(session_id)
        .fetch_one(p)
        .await?))
}

/// The session's highest seq, 0 when it has no frame.
pub async fn last_seq(db: &super::Db, session_id: i64) -> Result<i64> {
    let sql = "SELECT COALESCE(MAX(seq), 0) FROM frames WHERE session_id = $1";
    Ok(on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(session_id)
        .fetch_one(p)
        .await?))
}

/// The same on a held connection (on SQLite the hot one: no other thread woken).
pub async fn current_seq(c: &mut super::Conn<'_>, session_id: i64) -> Result<i64> {
    let sql = "SELECT COALESCE(MAX(seq), 0) FROM frames WHERE session_id = $1";
    Ok(scalar!(c, i64, sql, session_id)?.unwrap_or(0))
}

/// The seq of the session's latest reply of the agent's, 0 when it has none, on a held
/// connection. Read backwards along the session's seq index: it stops at the first.
pub async fn last_agent_message(c: &mut super::Conn<'_>, session_id: i64) -> Result<i64> {
    let sql = "SELECT seq FROM frames WHERE session_id = $1 AND type = 'message' \
         AND author_type = 'agent' ORDER BY seq DESC LIMIT 1";
    Ok(scalar!(c, i64, sql, session_id)?.unwrap_or(0))
}

/// One frame of the session, by id.
pub async fn get(db: &super::Db, session_id: i64, frame_id: &str) -> Result<Option<FrameRow>> {
    let sql = format!("SELECT {COLUMNS} FROM frames WHERE session_id = $1 AND id = $2");
    on_pool!(db, |p| sqlx::query(&sql)
        .bind(session_id)
        .bind(frame_id)
        .fetch_optional(p)
        .await?
        .as_ref()
        .map(FrameRow::read)
        .transpose())
}

/// One frame of the session, by id, on a held connection (inside a write: a decision reads
/// the request it decides in the transaction that records it).
pub async fn get_hot(
    c: &mut super::Conn<'_>,
    session_id: i64,
    frame_id: &str,
) -> Result<Option<FrameRow>> {
    let sql = format!("SELECT {COLUMNS} FROM frames WHERE session_id = $1 AND id = $2");
    row!(c, FrameRow::read, &sql, session_id, frame_id)
}

/// The frames whose parent is `parent_id`, in seq order, on a held connection: a message's
/// requests, a request's decision and result.
pub async fn children_hot(
    c: &mut super::Conn<'_>,
    session_id: i64,
    parent_id: &str,
) -> Result<Vec<FrameRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM frames WHERE session_id = $1 AND parent_id = $2 ORDER BY seq"
    );
    rows!(c, FrameRow::read, &sql, session_id, parent_id)
}

/// The session's request frames that have no result yet (the calls still open), oldest
/// first, through the pool.
pub async fn open_requests(db: &super::Db, session_id: i64) -> Result<Vec<FrameRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM frames f WHERE session_id = $1 AND type = 'request' \
         AND NOT EXISTS (SELECT 1 FROM frames r WHERE r.parent_id = f.id AND r.type = 'result') \
         ORDER BY seq"
    );
    pool_rows!(db, FrameRow::read, &sql, session_id)
}

/// The session of a frame, if it is one of the user's.
pub async fn session_of(db: &super::Db, user_id: i64, frame_id: &str) -> Result<Option<i64>> {
    let sql = "SELECT f.session_id FROM frames f JOIN sessions s ON s.id = f.session_id \
         WHERE f.id = $1 AND s.user_id = $2";
    Ok(on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(frame_id)
        .bind(user_id)
        .fetch_optional(p)
        .await?))
}

/// Replies a crash left unwritten: a call begun while its reply streamed names the reply as
/// its parent, and no frame has that id. (session, reply id, the session's owner), oldest
/// first.
pub async fn missing_replies(db: &super::Db) -> Result<Vec<(i64, String, i64)>> {
    let sql = "SELECT f.session_id, f.parent_id, s.user_id FROM frames f \
         JOIN sessions s ON s.id = f.session_id \
         WHERE f.type = 'request' AND f.parent_id IS NOT NULL \
         AND NOT EXISTS (SELECT 1 FROM frames m WHERE m.id = f.parent_id) \
         GROUP BY f.session_id, f.parent_id, s.user_id ORDER BY MIN(f.seq)";
    Ok(on_pool!(db, |p| sqlx::query_as(sql).fetch_all(p).await?))
}

/// Every request frame without a result, in every session, with its session's owner: what
/// start-up looks through for calls a restart interrupted.
pub async fn open_requests_everywhere(db: &super::Db) -> Result<Vec<(FrameRow, i64)>> {
    let sql = format!(
        "SELECT {}, s.user_id FROM frames f JOIN sessions s ON s.id = f.session_id \
         WHERE f.type = 'request' \
         AND NOT EXISTS (SELECT 1 FROM frames r WHERE r.parent_id = f.id AND r.type = 'result') \
         ORDER BY f.session_id, f.seq",
        COLUMNS
            .split(", ")
            .map(|c| format!("f.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // A row that cannot be read is passed over (and said): the others are still recovered.
    let read = |r: &dyn Fn() -> Result<(FrameRow, i64)>| {
        r().inspect_err(|e| tracing::warn!(error = %e, "an open request's row cannot be read"))
            .ok()
    };
    Ok(on_pool!(db, |p| sqlx::query(&sql)
        .fetch_all(p)
        .await?
        .iter()
        .filter_map(|r| read(&|| Ok((FrameRow::read(r)?, Columns::get(r, 11)?))))
        .collect()))
}
