//! The `config_versions` and `config_changes` tables: each user's configuration keys
//! (reference 004), every version kept, and the changes agents proposed. The key, the
//! agent, the version numbers and the statuses are plain; content and reasons arrive and
//! leave sealed ([`crate::agents::config`] seals and opens them).

use super::{Conn, Write};
use crate::Result;

/// A version as stored.
pub struct VersionRow {
    pub key: String,
    pub agent_id: i64,
    pub version: i64,
    pub sealed: Vec<u8>,
    pub author: String,
    pub change_id: Option<String>,
    pub created_at: String,
}

const VERSION_COLUMNS: &str = "key, agent_id, version, sealed, author, change_id, created_at";

fn read_version(r: &impl super::Columns) -> Result<VersionRow> {
    Ok(VersionRow {
        key: r.get(0)?,
        agent_id: r.get(1)?,
        version: r.get(2)?,
        sealed: r.get(3)?,
        author: r.get(4)?,
        change_id: r.get(5)?,
        created_at: r.get(6)?,
    })
}

/// The key's current (highest) version for the user, if it has one.
pub async fn current(
    c: &mut Conn<'_>,
    user_id: i64,
    key: &str,
    agent_id: i64,
) -> Result<Option<VersionRow>> {
    let sql = format!(
        "SELECT {VERSION_COLUMNS} FROM config_versions \
         WHERE user_id = $1 AND key = $2 AND agent_id = $3 ORDER BY version DESC LIMIT 1"
    );
    row!(c, read_version, &sql, user_id, key, agent_id)
}

/// The key's version `version` for the user.
pub async fn version(
    c: &mut Conn<'_>,
    user_id: i64,
    key: &str,
    agent_id: i64,
    version: i64,
) -> Result<Option<VersionRow>> {
    let sql = format!(
        "SELECT {VERSION_COLUMNS} FROM config_versions \
         WHERE user_id = $1 AND key = $2 AND agent_id = $3 AND version = $4"
    );
    row!(c, read_version, &sql, user_id, key, agent_id, version)
}

/// Every version of the key for the user, newest first.
pub async fn versions(
    c: &mut Conn<'_>,
    user_id: i64,
    key: &str,
    agent_id: i64,
) -> Result<Vec<VersionRow>> {
    let sql = format!(
        "SELECT {VERSION_COLUMNS} FROM config_versions \
         WHERE user_id = $1 AND key = $2 AND agent_id = $3 ORDER BY version DESC"
    );
    rows!(c, read_version, &sql, user_id, key, agent_id)
}

/// A key's current version number, and when it was written.
pub struct Head {
    pub key: String,
    pub agent_id: i64,
    pub version: i64,
    pub updated_at: String,
}

fn read_head(r: &impl super::Columns) -> Result<Head> {
    Ok(Head {
        key: r.get(0)?,
        agent_id: r.get(1)?,
        version: r.get(2)?,
        updated_at: r.get(3)?,
    })
}

/// The current version of each of the user's keys: agent keys of `agent_id`, and the
/// user's own (agent 0).
pub async fn heads(c: &mut Conn<'_>, user_id: i64, agent_id: i64) -> Result<Vec<Head>> {
    let sql = "SELECT key, agent_id, MAX(version), MAX(created_at) FROM config_versions \
         WHERE user_id = $1 AND agent_id IN (0, $2) GROUP BY key, agent_id";
    rows!(c, read_head, sql, user_id, agent_id)
}

/// A new version, unless the number is taken (two first reads seeding one key): answers
/// whether it was stored.
#[allow(clippy::too_many_arguments)]
pub async fn insert(
    c: &mut Conn<'_>,
    user_id: i64,
    key: &str,
    agent_id: i64,
    version: i64,
    sealed: &[u8],
    author: &str,
    change_id: Option<&str>,
    now: &str,
) -> Result<bool> {
    let sql = "INSERT INTO config_versions \
         (user_id, key, agent_id, version, sealed, author, change_id, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING";
    Ok(execute!(
        c, sql, user_id, key, agent_id, version, sealed, author, change_id, now
    )? > 0)
}

/// A proposed change as stored.
pub struct ChangeRow {
    pub id: String,
    pub user_id: i64,
    pub session_id: i64,
    pub key: String,
    pub agent_id: i64,
    pub base_version: i64,
    pub sealed: Vec<u8>,
    pub status: String,
    pub version: Option<i64>,
    pub created_at: String,
    pub decided_at: Option<String>,
}

const CHANGE_COLUMNS: &str = "id, user_id, session_id, key, agent_id, base_version, sealed, \
     status, version, created_at, decided_at";

fn read_change(r: &impl super::Columns) -> Result<ChangeRow> {
    Ok(ChangeRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        session_id: r.get(2)?,
        key: r.get(3)?,
        agent_id: r.get(4)?,
        base_version: r.get(5)?,
        sealed: r.get(6)?,
        status: r.get(7)?,
        version: r.get(8)?,
        created_at: r.get(9)?,
        decided_at: r.get(10)?,
    })
}

/// A new pending change.
#[allow(clippy::too_many_arguments)]
pub async fn propose(
    c: &mut Write<'_>,
    id: &str,
    user_id: i64,
    session_id: i64,
    key: &str,
    agent_id: i64,
    base_version: i64,
    sealed: &[u8],
    now: &str,
) -> Result<()> {
    let sql = "INSERT INTO config_changes \
         (id, user_id, session_id, key, agent_id, base_version, sealed, status, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8)";
    execute!(
        c,
        sql,
        id,
        user_id,
        session_id,
        key,
        agent_id,
        base_version,
        sealed,
        now
    )?;
    Ok(())
}

/// The user's change `id`; another user's is none.
pub async fn change(c: &mut Conn<'_>, user_id: i64, id: &str) -> Result<Option<ChangeRow>> {
    let sql = format!("SELECT {CHANGE_COLUMNS} FROM config_changes WHERE id = $1 AND user_id = $2");
    row!(c, read_change, &sql, id, user_id)
}

/// The user's changes, newest first, of one status or all.
pub async fn changes(
    c: &mut Conn<'_>,
    user_id: i64,
    status: Option<&str>,
) -> Result<Vec<ChangeRow>> {
    let sql = format!(
        "SELECT {CHANGE_COLUMNS} FROM config_changes \
         WHERE user_id = $1 AND ($2 IS NULL OR status = $2) ORDER BY created_at DESC, id DESC \
         LIMIT 500"
    );
    rows!(c, read_change, &sql, user_id, status)
}

/// How many of the user's changes wait for a decision.
pub async fn pending(c: &mut Conn<'_>, user_id: i64) -> Result<i64> {
    let sql = "SELECT COUNT(*) FROM config_changes WHERE user_id = $1 AND status = 'pending'";
    Ok(scalar!(c, i64, sql, user_id)?.unwrap_or(0))
}

/// Decides a pending change: answers whether it was still pending.
pub async fn decide(
    c: &mut Write<'_>,
    user_id: i64,
    id: &str,
    status: &str,
    version: Option<i64>,
    now: &str,
) -> Result<bool> {
    let sql = "UPDATE config_changes SET status = $1, version = $2, decided_at = $3 \
         WHERE id = $4 AND user_id = $5 AND status = 'pending'";
    Ok(execute!(c, sql, status, version, now, id, user_id)? > 0)
}
