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
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM sessions WHERE user_id = ? ORDER BY id"
    ))
    .bind(user_id)
    .fetch_all(db.sqlite()?)
    .await?;
    rows.iter().map(SessionRow::read).collect()
}

/// How many sessions the user has.
pub async fn count(c: &mut Conn<'_>, user_id: i64) -> Result<i64> {
    c.run(|c| {
        Ok(
            c.prepare_cached("SELECT COUNT(*) FROM sessions WHERE user_id = ?1")?
                .query_row([user_id], |r| r.get(0))?,
        )
    })
    .await
}

/// The user's session `id`, if it is theirs.
pub async fn get(c: &mut Conn<'_>, user_id: i64, id: i64) -> Result<Option<SessionRow>> {
    c.run(|c| {
        let mut st = c.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM sessions WHERE id = ?1 AND user_id = ?2"
        ))?;
        let mut rows = st.query(rusqlite::params![id, user_id])?;
        rows.next()?.map(SessionRow::read).transpose()
    })
    .await
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
    c.run(|c| {
        let mut st = c.prepare_cached(&format!(
            "INSERT INTO sessions (user_id, name, status, parent_session_id, agent_id, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) RETURNING {COLUMNS}"
        ))?;
        let mut rows = st.query(rusqlite::params![
            user_id,
            f.name,
            f.status,
            f.parent_session_id,
            f.agent_id,
            now
        ])?;
        let row = rows.next()?.ok_or(crate::Error::Internal(
            "an inserted session came back empty".into(),
        ))?;
        SessionRow::read(row)
    })
    .await
}

/// Sets every field of the user's session `id`; `None` when it is not theirs.
pub async fn update(
    c: &mut Write<'_>,
    user_id: i64,
    id: i64,
    f: &SessionFields<'_>,
    now: &str,
) -> Result<Option<SessionRow>> {
    c.run(|c| {
        let mut st = c.prepare_cached(&format!(
            "UPDATE sessions SET name = ?1, status = ?2, parent_session_id = ?3, agent_id = ?4, \
             updated_at = ?5 WHERE id = ?6 AND user_id = ?7 RETURNING {COLUMNS}"
        ))?;
        let mut rows = st.query(rusqlite::params![
            f.name,
            f.status,
            f.parent_session_id,
            f.agent_id,
            now,
            id,
            user_id
        ])?;
        rows.next()?.map(SessionRow::read).transpose()
    })
    .await
}

/// Switches batch/stream mode on the hot connection; whether the session is the user's.
pub async fn set_streaming(
    c: &mut super::Conn<'_>,
    user_id: i64,
    id: i64,
    on: bool,
    now: &str,
) -> Result<bool> {
    c.run(|c| set_streaming_on(c, user_id, id, on, now)).await
}

fn set_streaming_on(
    c: &rusqlite::Connection,
    user_id: i64,
    id: i64,
    on: bool,
    now: &str,
) -> Result<bool> {
    let changed = c
        .prepare_cached(
            "UPDATE sessions SET streaming = ?1, updated_at = ?2 WHERE id = ?3 AND user_id = ?4",
        )?
        .execute(rusqlite::params![on, now, id, user_id])?;
    Ok(changed > 0)
}

/// The session's agent, on the hot connection (`None`: no agent, or not the user's session).
pub async fn agent_of(
    c: &mut super::Conn<'_>,
    user_id: i64,
    session_id: i64,
) -> Result<Option<i64>> {
    c.run(|c| agent_of_on(c, user_id, session_id)).await
}

fn agent_of_on(c: &rusqlite::Connection, user_id: i64, session_id: i64) -> Result<Option<i64>> {
    let mut st =
        c.prepare_cached("SELECT agent_id FROM sessions WHERE id = ?1 AND user_id = ?2")?;
    let mut rows = st.query(rusqlite::params![session_id, user_id])?;
    Ok(match rows.next()? {
        Some(r) => r.get(0)?,
        None => None,
    })
}
