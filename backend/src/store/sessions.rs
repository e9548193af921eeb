//! The `sessions` table. Every statement names the user: another user's session is a
//! missing row, exactly like one that does not exist.

use sqlx::{Sqlite, SqliteConnection};

use super::Columns;
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
    .fetch_all(db.pool())
    .await?;
    rows.iter().map(SessionRow::read).collect()
}

/// How many sessions the user has.
pub async fn count<'e, E: sqlx::Executor<'e, Database = Sqlite>>(
    ex: E,
    user_id: i64,
) -> Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT COUNT(*) FROM sessions WHERE user_id = ?")
            .bind(user_id)
            .fetch_one(ex)
            .await?,
    )
}

/// The user's session `id`, if it is theirs.
pub async fn get<'e, E: sqlx::Executor<'e, Database = Sqlite>>(
    ex: E,
    user_id: i64,
    id: i64,
) -> Result<Option<SessionRow>> {
    let row = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM sessions WHERE id = ? AND user_id = ?"
    ))
    .bind(id)
    .bind(user_id)
    .fetch_optional(ex)
    .await?;
    row.as_ref().map(SessionRow::read).transpose()
}

/// What a session is made or changed with (validated by [`crate::conversation::sessions`]).
pub struct SessionFields<'a> {
    pub name: &'a str,
    pub status: &'a str,
    pub parent_session_id: Option<i64>,
    pub agent_id: Option<i64>,
}

pub async fn insert(
    c: &mut SqliteConnection,
    user_id: i64,
    f: &SessionFields<'_>,
    now: &str,
) -> Result<SessionRow> {
    let row = sqlx::query(&format!(
        "INSERT INTO sessions (user_id, name, status, parent_session_id, agent_id, created_at, updated_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING {COLUMNS}"
    ))
    .bind(user_id)
    .bind(f.name)
    .bind(f.status)
    .bind(f.parent_session_id)
    .bind(f.agent_id)
    .bind(now)
    .bind(now)
    .fetch_one(c)
    .await?;
    SessionRow::read(&row)
}

/// Sets every field of the user's session `id`; `None` when it is not theirs.
pub async fn update(
    c: &mut SqliteConnection,
    user_id: i64,
    id: i64,
    f: &SessionFields<'_>,
    now: &str,
) -> Result<Option<SessionRow>> {
    let row = sqlx::query(&format!(
        "UPDATE sessions SET name = ?, status = ?, parent_session_id = ?, agent_id = ?, updated_at = ? \
         WHERE id = ? AND user_id = ? RETURNING {COLUMNS}"
    ))
    .bind(f.name)
    .bind(f.status)
    .bind(f.parent_session_id)
    .bind(f.agent_id)
    .bind(now)
    .bind(id)
    .bind(user_id)
    .fetch_optional(c)
    .await?;
    row.as_ref().map(SessionRow::read).transpose()
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
