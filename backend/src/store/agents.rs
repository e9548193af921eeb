//! The `agents` table. The API key and the config arrive sealed and leave sealed
//! ([`crate::agents`] seals and opens them); a deleted agent keeps its row (`deleted_at`)
//! for the sessions and usage that name it, and no read here returns it.

use rusqlite::{OptionalExtension, params};

use super::{Columns, Conn, Write};
use crate::Result;

/// An agent as stored, its key and config still sealed.
pub struct AgentRow {
    pub id: i64,
    pub name: String,
    pub provider: String,
    pub model: String,
    pub base_url: Option<String>,
    pub api_key: Option<Vec<u8>>,
    pub config: Vec<u8>,
    pub created_at: String,
    pub updated_at: String,
    /// `open` or `predefined` (reference 002, table 4).
    pub kind: String,
    /// `active`, or `summoning` while its files are written from a description.
    pub status: String,
    /// When its sessions are summarised (NULL: the defaults).
    pub compact_messages: Option<i64>,
    pub compact_tokens: Option<i64>,
}

const COLUMNS: &str = "id, name, provider, model, base_url, api_key, config, created_at, updated_at, kind, status, \
     compact_messages, compact_tokens";

impl AgentRow {
    /// The one decoder of an agent row: [`COLUMNS`] in order, from column `at` on.
    fn read(r: &impl Columns, at: usize) -> Result<Self> {
        Ok(AgentRow {
            id: r.get(at)?,
            name: r.get(at + 1)?,
            provider: r.get(at + 2)?,
            model: r.get(at + 3)?,
            base_url: r.get(at + 4)?,
            api_key: r.get(at + 5)?,
            config: r.get(at + 6)?,
            created_at: r.get(at + 7)?,
            updated_at: r.get(at + 8)?,
            kind: r.get(at + 9)?,
            status: r.get(at + 10)?,
            compact_messages: r.get(at + 11)?,
            compact_tokens: r.get(at + 12)?,
        })
    }
}

/// The fields of an agent other than its secrets (validated by [`crate::agents`]).
pub struct AgentFields<'a> {
    pub name: &'a str,
    pub provider: &'a str,
    pub model: &'a str,
    pub base_url: Option<&'a str>,
    /// Set at creation only.
    pub kind: &'a str,
}

/// Inserts an agent with empty secrets (their associated data names the row id, which
/// exists only after the insert: [`set_secrets`] follows in the same transaction).
pub async fn insert(
    c: &mut Write<'_>,
    user_id: i64,
    f: &AgentFields<'_>,
    now: &str,
) -> Result<i64> {
    c.run(|c| {
        Ok(c.prepare_cached(
            "INSERT INTO agents (user_id, name, provider, model, base_url, config, created_at, updated_at, kind) \
             VALUES (?1, ?2, ?3, ?4, ?5, x'', ?6, ?6, ?7) RETURNING id",
        )?
        .query_row(
            params![user_id, f.name, f.provider, f.model, f.base_url, now, f.kind],
            |r| r.get(0),
        )?)
    })
    .await
}

/// Stores the agent's sealed key (none: removed) and sealed config.
pub async fn set_secrets(
    c: &mut Write<'_>,
    id: i64,
    api_key: Option<&[u8]>,
    config: &[u8],
) -> Result<()> {
    c.run(|c| {
        c.prepare_cached("UPDATE agents SET api_key = ?1, config = ?2 WHERE id = ?3")?
            .execute(params![api_key, config, id])?;
        Ok(())
    })
    .await
}

/// Sets the fields other than the secrets of agent `id` (already known to be the user's).
pub async fn update(c: &mut Write<'_>, id: i64, f: &AgentFields<'_>, now: &str) -> Result<()> {
    c.run(|c| {
        c.prepare_cached(
            "UPDATE agents SET name = ?1, provider = ?2, model = ?3, base_url = ?4, updated_at = ?5 \
             WHERE id = ?6",
        )?
        .execute(params![f.name, f.provider, f.model, f.base_url, now, id])?;
        Ok(())
    })
    .await
}

/// The user's live agent `id`, if it is theirs.
pub async fn get(c: &mut Conn<'_>, user_id: i64, id: i64) -> Result<Option<AgentRow>> {
    c.run(|c| {
        let mut st = c.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM agents WHERE id = ?1 AND user_id = ?2 AND deleted_at IS NULL"
        ))?;
        let mut rows = st.query(params![id, user_id])?;
        rows.next()?.map(|r| AgentRow::read(r, 0)).transpose()
    })
    .await
}

/// The user's live agents, oldest first.
pub async fn list(db: &super::Db, user_id: i64) -> Result<Vec<AgentRow>> {
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM agents WHERE user_id = ? AND deleted_at IS NULL ORDER BY id"
    ))
    .bind(user_id)
    .fetch_all(db.sqlite()?)
    .await?;
    rows.iter().map(|r| AgentRow::read(r, 0)).collect()
}

/// Marks the user's agent `id` deleted; whether there was such a live agent.
pub async fn soft_delete(db: &super::Db, user_id: i64, id: i64, now: &str) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE agents SET deleted_at = ? WHERE id = ? AND user_id = ? AND deleted_at IS NULL",
    )
    .bind(now)
    .bind(id)
    .bind(user_id)
    .execute(db.sqlite()?)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// The id of the user's first live agent.
pub async fn first_live(c: &mut Conn<'_>, user_id: i64) -> Result<Option<i64>> {
    c.run(|c| {
        Ok(c.prepare_cached(
            "SELECT id FROM agents WHERE user_id = ?1 AND deleted_at IS NULL ORDER BY id LIMIT 1",
        )?
        .query_row([user_id], |r| r.get(0))
        .optional()?)
    })
    .await
}

/// What a turn reads before it starts, in one statement on the hot connection.
pub struct TurnSetupRow {
    /// The user's wrapped data key.
    pub data_key: Vec<u8>,
    /// The session's agent, as the session names it.
    pub agent_id: Option<i64>,
    /// That agent's row while it stands (not deleted, the user's).
    pub agent: Option<AgentRow>,
    pub username: String,
    /// `active`, `archived`, or `agent` (a sub-session: its prompt is minimal).
    pub session_status: String,
    /// The user's prompt generation (migration `prompt_generation`).
    pub prompt_gen: i64,
}

/// The user's wrapped data key and the agent of their session `session_id`; `None` when
/// the session is not theirs.
pub async fn turn_setup(
    c: &mut super::Conn<'_>,
    user_id: i64,
    session_id: i64,
) -> Result<Option<TurnSetupRow>> {
    c.run(|c| turn_setup_on(c, user_id, session_id)).await
}

fn turn_setup_on(
    c: &rusqlite::Connection,
    user_id: i64,
    session_id: i64,
) -> Result<Option<TurnSetupRow>> {
    let mut q = c.prepare_cached(
        "SELECT u.data_key, s.agent_id, a.id, a.name, a.provider, a.model, a.base_url, a.api_key, a.config, \
         a.created_at, a.updated_at, a.kind, a.status, a.compact_messages, a.compact_tokens, \
         u.username, s.status, u.prompt_gen \
         FROM sessions s JOIN users u ON u.id = s.user_id \
         LEFT JOIN agents a ON a.id = s.agent_id AND a.user_id = s.user_id AND a.deleted_at IS NULL \
         WHERE s.id = ?1 AND s.user_id = ?2",
    )?;
    let mut rows = q.query(rusqlite::params![session_id, user_id])?;
    let Some(r) = rows.next()? else {
        return Ok(None);
    };
    let agent = match r.get::<_, Option<i64>>(2)? {
        None => None,
        Some(_) => Some(AgentRow::read(r, 2)?),
    };
    Ok(Some(TurnSetupRow {
        data_key: Columns::get(r, 0)?,
        agent_id: Columns::get(r, 1)?,
        agent,
        username: Columns::get(r, 15)?,
        session_status: Columns::get(r, 16)?,
        prompt_gen: Columns::get(r, 17)?,
    }))
}

/// Marks the agent summoning, unless it already is; answers whether it was marked.
pub async fn start_summoning(c: &mut super::Conn<'_>, user_id: i64, id: i64) -> Result<bool> {
    c.run(|c| start_summoning_on(c, user_id, id)).await
}

fn start_summoning_on(c: &rusqlite::Connection, user_id: i64, id: i64) -> Result<bool> {
    let n = c
        .prepare_cached(
            "UPDATE agents SET status = 'summoning' WHERE id = ?1 AND user_id = ?2 \
             AND deleted_at IS NULL AND status = 'active'",
        )?
        .execute(rusqlite::params![id, user_id])?;
    Ok(n == 1)
}

/// Marks the agent active again.
pub async fn end_summoning(c: &mut super::Conn<'_>, id: i64) -> Result<()> {
    c.run(|c| end_summoning_on(c, id)).await
}

fn end_summoning_on(c: &rusqlite::Connection, id: i64) -> Result<()> {
    c.prepare_cached("UPDATE agents SET status = 'active' WHERE id = ?1")?
        .execute(rusqlite::params![id])?;
    Ok(())
}

/// At start-up: a summoning cut short by a restart leaves its agent active, with whatever
/// files it has.
pub async fn end_all_summoning(db: &super::Db) -> Result<u64> {
    Ok(
        sqlx::query("UPDATE agents SET status = 'active' WHERE status = 'summoning'")
            .execute(db.sqlite()?)
            .await?
            .rows_affected(),
    )
}

/// Sets when the agent's sessions are summarised (None: the defaults).
pub async fn set_compaction(
    c: &mut Write<'_>,
    id: i64,
    messages: Option<i64>,
    tokens: Option<i64>,
) -> Result<()> {
    c.run(|c| {
        c.prepare_cached(
            "UPDATE agents SET compact_messages = ?1, compact_tokens = ?2 WHERE id = ?3",
        )?
        .execute(params![messages, tokens, id])?;
        Ok(())
    })
    .await
}
