//! The `agents` table. The API key and the config arrive sealed and leave sealed
//! ([`crate::agents`] seals and opens them); a deleted agent keeps its row (`deleted_at`)
//! for the sessions and usage that name it, and no read here returns it.

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
    /// Its own price, JSON (`api::Price`).
    pub price: Option<String>,
    /// Its default processes: ability ids in order, a JSON array.
    pub default_processes: String,
    /// The skills it may use: NULL all, else a JSON array of names.
    pub skill_allow_list: Option<String>,
    /// Its context window in tokens (NULL: the default).
    pub context_window: Option<i64>,
}

const COLUMNS: &str = "id, name, provider, model, base_url, api_key, config, created_at, updated_at, kind, status, \
     compact_messages, compact_tokens, price, default_processes, skill_allow_list, context_window";

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
            price: r.get(at + 13)?,
            default_processes: r.get(at + 14)?,
            skill_allow_list: r.get(at + 15)?,
            context_window: r.get(at + 16)?,
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
    let sql = "INSERT INTO agents (user_id, name, provider, model, base_url, config, created_at, updated_at, kind) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8) RETURNING id";
    let empty: &[u8] = &[];
    let (name, provider, model, base_url, kind) = (f.name, f.provider, f.model, f.base_url, f.kind);
    scalar!(
        c, i64, sql, user_id, name, provider, model, base_url, empty, now, kind
    )?
    .ok_or(crate::Error::Internal(
        "an inserted agent came back empty".into(),
    ))
}

/// Stores the agent's sealed key (none: removed) and sealed config.
pub async fn set_secrets(
    c: &mut Write<'_>,
    id: i64,
    api_key: Option<&[u8]>,
    config: &[u8],
) -> Result<()> {
    let sql = "UPDATE agents SET api_key = $1, config = $2 WHERE id = $3";
    execute!(c, sql, api_key, config, id)?;
    Ok(())
}

/// Sets the fields other than the secrets of agent `id` (already known to be the user's).
pub async fn update(c: &mut Write<'_>, id: i64, f: &AgentFields<'_>, now: &str) -> Result<()> {
    let sql = "UPDATE agents SET name = $1, provider = $2, model = $3, base_url = $4, updated_at = $5 \
         WHERE id = $6";
    let (name, provider, model, base_url) = (f.name, f.provider, f.model, f.base_url);
    execute!(c, sql, name, provider, model, base_url, now, id)?;
    Ok(())
}

/// Sets agent `id`'s own price (JSON; none: Hero's).
pub async fn set_price(c: &mut Write<'_>, id: i64, price: Option<&str>) -> Result<()> {
    execute!(c, "UPDATE agents SET price = $1 WHERE id = $2", price, id)?;
    Ok(())
}

/// The user's live agent `id`, if it is theirs.
pub async fn get(c: &mut Conn<'_>, user_id: i64, id: i64) -> Result<Option<AgentRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM agents WHERE id = $1 AND user_id = $2 AND deleted_at IS NULL"
    );
    row!(c, |r| AgentRow::read(r, 0), &sql, id, user_id)
}

/// The user's live agents, oldest first.
/// Whether an agent of any user has the id `id` (deleted or not).
pub async fn exists(db: &super::Db, id: i64) -> Result<bool> {
    let sql = "SELECT COUNT(*) FROM agents WHERE id = $1";
    let mut c = db.conn().await?;
    Ok(scalar!(c, i64, sql, id)?.unwrap_or(0) > 0)
}

pub async fn list(db: &super::Db, user_id: i64) -> Result<Vec<AgentRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM agents WHERE user_id = $1 AND deleted_at IS NULL ORDER BY id"
    );
    pool_rows!(db, |r| AgentRow::read(r, 0), &sql, user_id)
}

/// Marks the user's agent `id` deleted; whether there was such a live agent.
pub async fn soft_delete(db: &super::Db, user_id: i64, id: i64, now: &str) -> Result<bool> {
    let sql =
        "UPDATE agents SET deleted_at = $1 WHERE id = $2 AND user_id = $3 AND deleted_at IS NULL";
    let n = on_pool!(db, |p| sqlx::query(sql)
        .bind(now)
        .bind(id)
        .bind(user_id)
        .execute(p)
        .await?
        .rows_affected());
    Ok(n > 0)
}

/// The id of the user's first live agent.
pub async fn first_live(c: &mut Conn<'_>, user_id: i64) -> Result<Option<i64>> {
    let sql = "SELECT id FROM agents WHERE user_id = $1 AND deleted_at IS NULL ORDER BY id LIMIT 1";
    scalar!(c, i64, sql, user_id)
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
    /// The session's replies stream (false: batch mode, `/stream off`).
    pub streaming: bool,
}

/// The user's wrapped data key and the agent of their session `session_id`; `None` when
/// the session is not theirs.
pub async fn turn_setup(
    c: &mut Conn<'_>,
    user_id: i64,
    session_id: i64,
) -> Result<Option<TurnSetupRow>> {
    const SQL: &str = "SELECT u.data_key, s.agent_id, a.id, a.name, a.provider, a.model, a.base_url, a.api_key, a.config, \
         a.created_at, a.updated_at, a.kind, a.status, a.compact_messages, a.compact_tokens, a.price, \
         a.default_processes, a.skill_allow_list, a.context_window, u.username, s.status, u.prompt_gen, s.streaming \
         FROM sessions s JOIN users u ON u.id = s.user_id \
         LEFT JOIN agents a ON a.id = s.agent_id AND a.user_id = s.user_id AND a.deleted_at IS NULL \
         WHERE s.id = $1 AND s.user_id = $2";
    row!(c, read_turn_setup, SQL, session_id, user_id)
}

/// The decoder of [`turn_setup`]'s row.
fn read_turn_setup(r: &impl Columns) -> Result<TurnSetupRow> {
    let agent = match r.get::<Option<i64>>(2)? {
        None => None,
        Some(_) => Some(AgentRow::read(r, 2)?),
    };
    Ok(TurnSetupRow {
        data_key: r.get(0)?,
        agent_id: r.get(1)?,
        agent,
        username: r.get(19)?,
        session_status: r.get(20)?,
        prompt_gen: r.get(21)?,
        streaming: r.get(22)?,
    })
}

/// Sets the agent's default processes (a JSON array of ability ids).
pub async fn set_default_processes(c: &mut Write<'_>, id: i64, ids: &str) -> Result<()> {
    execute!(
        c,
        "UPDATE agents SET default_processes = $1 WHERE id = $2",
        ids,
        id
    )?;
    Ok(())
}

/// Sets the skills the agent may use (`None`: all; else a JSON array of names).
pub async fn set_skill_allow_list(c: &mut Write<'_>, id: i64, names: Option<&str>) -> Result<()> {
    execute!(
        c,
        "UPDATE agents SET skill_allow_list = $1 WHERE id = $2",
        names,
        id
    )?;
    Ok(())
}

/// The user's agents whose default processes name `ability` (its id, as stored in the
/// JSON array): (agent id, the array).
pub async fn naming_process(
    c: &mut Conn<'_>,
    user_id: i64,
    ability: &str,
) -> Result<Vec<(i64, String)>> {
    let pattern = format!("%{}%", serde_json::Value::from(ability));
    let sql = "SELECT id, default_processes FROM agents \
         WHERE user_id = $1 AND default_processes LIKE $2";
    rows!(c, id_and_list, sql, user_id, pattern)
}

fn id_and_list(r: &impl Columns) -> Result<(i64, String)> {
    Ok((r.get(0)?, r.get(1)?))
}

/// Marks the agent summoning, unless it already is; answers whether it was marked.
pub async fn start_summoning(c: &mut Conn<'_>, user_id: i64, id: i64) -> Result<bool> {
    let sql = "UPDATE agents SET status = 'summoning' WHERE id = $1 AND user_id = $2 \
         AND deleted_at IS NULL AND status = 'active'";
    Ok(execute!(c, sql, id, user_id)? == 1)
}

/// Marks the agent active again.
pub async fn end_summoning(c: &mut Conn<'_>, id: i64) -> Result<()> {
    execute!(c, "UPDATE agents SET status = 'active' WHERE id = $1", id)?;
    Ok(())
}

/// The agents being summoned, everyone's.
pub async fn summoning(db: &super::Db) -> Result<Vec<i64>> {
    let sql = "SELECT id FROM agents WHERE status = 'summoning' ORDER BY id";
    Ok(on_pool!(db, |p| sqlx::query_scalar(sql)
        .fetch_all(p)
        .await?))
}

/// At start-up: a summoning cut short by a restart leaves its agent active, with whatever
/// files it has (every agent being summoned: one process on SQLite).
pub async fn end_all_summoning(db: &super::Db) -> Result<u64> {
    let sql = "UPDATE agents SET status = 'active' WHERE status = 'summoning'";
    Ok(on_pool!(db, |p| sqlx::query(sql)
        .execute(p)
        .await?
        .rows_affected()))
}

/// When the agent's sessions are summarised, and its context window (None: the defaults).
#[derive(Debug, Clone, Copy, Default)]
pub struct Compaction {
    pub messages: Option<i64>,
    pub tokens: Option<i64>,
    pub context_window: Option<i64>,
}

/// Sets when the agent's sessions are summarised and its context window.
pub async fn set_compaction(c: &mut Write<'_>, id: i64, to: Compaction) -> Result<()> {
    let sql = "UPDATE agents SET compact_messages = $1, compact_tokens = $2, context_window = $3 \
         WHERE id = $4";
    execute!(c, sql, to.messages, to.tokens, to.context_window, id)?;
    Ok(())
}
