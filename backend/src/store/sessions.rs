//! The `sessions` table. Every statement names the user: another user's session is a
//! missing row, exactly like one that does not exist.

use super::{Columns, Conn, Write};
use crate::Result;

/// A session as stored.
pub struct SessionRow {
    pub id: i64,
    pub name: String,
    pub status: String,
    pub parent_session_id: Option<i64>,
    pub agent_id: Option<i64>,
    pub streaming: bool,
    pub created_at: String,
    pub updated_at: String,
}

const COLUMNS: &str =
    "id, name, status, parent_session_id, agent_id, streaming, created_at, updated_at";

impl SessionRow {
    /// The one decoder of a session row ([`COLUMNS`] in order).
    fn read(r: &impl Columns) -> Result<Self> {
        Ok(SessionRow {
            id: r.get(0)?,
            name: r.get(1)?,
            status: r.get(2)?,
            parent_session_id: r.get(3)?,
            agent_id: r.get(4)?,
            streaming: r.get(5)?,
            created_at: r.get(6)?,
            updated_at: r.get(7)?,
        })
    }
}

/// All the user's sessions, oldest first.
pub async fn list(db: &super::Db, user_id: i64) -> Result<Vec<SessionRow>> {
    let sql = format!("SELECT {COLUMNS} FROM sessions WHERE user_id = $1 ORDER BY id");
    pool_rows!(db, SessionRow::read, &sql, user_id)
}

/// How many sessions the user has.
pub async fn count(c: &mut Conn<'_>, user_id: i64) -> Result<i64> {
    let sql = "SELECT COUNT(*) FROM sessions WHERE user_id = $1";
    Ok(scalar!(c, i64, sql, user_id)?.unwrap_or(0))
}

/// The user's session `id`, if it is theirs.
pub async fn get(c: &mut Conn<'_>, user_id: i64, id: i64) -> Result<Option<SessionRow>> {
    let sql = format!("SELECT {COLUMNS} FROM sessions WHERE id = $1 AND user_id = $2");
    row!(c, SessionRow::read, &sql, id, user_id)
}

/// What a session is made or changed with (validated by [`crate::conversation::sessions`]).
pub struct SessionFields<'a> {
    pub name: &'a str,
    pub status: &'a str,
    pub parent_session_id: Option<i64>,
    pub agent_id: Option<i64>,
}

pub async fn insert(
    c: &mut Write<'_>,
    user_id: i64,
    f: &SessionFields<'_>,
    now: &str,
) -> Result<SessionRow> {
    let sql = format!(
        "INSERT INTO sessions (user_id, name, status, parent_session_id, agent_id, created_at, updated_at, started) \
         VALUES ($1, $2, $3, $4, $5, $6, $6, $7) RETURNING {COLUMNS}"
    );
    let (name, status, parent, agent) = (f.name, f.status, f.parent_session_id, f.agent_id);
    row!(
        c,
        SessionRow::read,
        &sql,
        user_id,
        name,
        status,
        parent,
        agent,
        now,
        false
    )?
    .ok_or(crate::Error::Internal(
        "an inserted session came back empty".into(),
    ))
}

/// Sets every field of the user's session `id`; `None` when it is not theirs.
pub async fn update(
    c: &mut Write<'_>,
    user_id: i64,
    id: i64,
    f: &SessionFields<'_>,
    now: &str,
) -> Result<Option<SessionRow>> {
    let sql = format!(
        "UPDATE sessions SET name = $1, status = $2, parent_session_id = $3, agent_id = $4, \
         updated_at = $5 WHERE id = $6 AND user_id = $7 RETURNING {COLUMNS}"
    );
    let (name, status, parent, agent) = (f.name, f.status, f.parent_session_id, f.agent_id);
    row!(
        c,
        SessionRow::read,
        &sql,
        name,
        status,
        parent,
        agent,
        now,
        id,
        user_id
    )
}

/// Switches batch/stream mode; whether the session is the user's.
pub async fn set_streaming(
    c: &mut Conn<'_>,
    user_id: i64,
    id: i64,
    on: bool,
    now: &str,
) -> Result<bool> {
    let sql = "UPDATE sessions SET streaming = $1, updated_at = $2 WHERE id = $3 AND user_id = $4";
    Ok(execute!(c, sql, on, now, id, user_id)? > 0)
}

/// Marks the user's session `id` begun; whether this call did (it was not yet): the transaction that
/// stores its first message precedes it with the startup processes.
pub async fn begin(c: &mut Write<'_>, user_id: i64, id: i64) -> Result<bool> {
    let sql = "UPDATE sessions SET started = $1 WHERE id = $2 AND user_id = $3 AND started = $4";
    Ok(execute!(c, sql, true, id, user_id, false)? > 0)
}

/// The session's agent (`None`: no agent, or not the user's session).
pub async fn agent_of(c: &mut Conn<'_>, user_id: i64, session_id: i64) -> Result<Option<i64>> {
    let sql = "SELECT agent_id FROM sessions WHERE id = $1 AND user_id = $2";
    Ok(scalar!(c, Option<i64>, sql, session_id, user_id)?.flatten())
}

/// Makes the writes to session `id` in this transaction wait for any other's: on
/// PostgreSQL the session's row is locked (a check, then the frame it allows, cannot be
/// passed by two at once); SQLite has one writer at a time already.
pub async fn lock(c: &mut Write<'_>, id: i64) -> Result<()> {
    if let super::On::Postgres(pg) = c.on() {
        sqlx::query("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE")
            .bind(id)
            .execute(pg)
            .await?;
    }
    Ok(())
}

/// Each of the user's sessions with its name, when it last changed and the seq of its last
/// frame (0 when it has none): what a search across sessions compares its index with. One
/// index lookup a session.
pub async fn stamps(db: &super::Db, user_id: i64) -> Result<Vec<(i64, String, String, i64)>> {
    let sql = "SELECT s.id, s.name, s.updated_at, \
         COALESCE((SELECT MAX(f.seq) FROM frames f WHERE f.session_id = s.id), 0) \
         FROM sessions s WHERE s.user_id = $1 ORDER BY s.id";
    pool_rows!(db, read_stamp, sql, user_id)
}

fn read_stamp(r: &impl Columns) -> Result<(i64, String, String, i64)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}
