//! The `memory_files` table: an agent's memory files (reference 002 §1, §14), at the agent's
//! own scope (`user_id` NULL) or a user's. The content arrives and leaves sealed
//! ([`crate::memory`] seals and opens it); `owner_id` is the agent's owner, whose total is
//! bounded.

use super::{Conn, Write};
use crate::Result;

/// A memory file as stored, its content sealed.
#[derive(Debug, Clone)]
pub struct MemoryRow {
    pub user_id: Option<i64>,
    pub path: String,
    pub content: Vec<u8>,
    pub hash: Vec<u8>,
    pub size: i64,
    pub updated_at: String,
}

fn read(r: &impl super::Columns) -> Result<MemoryRow> {
    Ok(MemoryRow {
        user_id: r.get(0)?,
        path: r.get(1)?,
        content: r.get(2)?,
        hash: r.get(3)?,
        size: r.get(4)?,
        updated_at: r.get(5)?,
    })
}

/// A file's place and size, without its content.
#[derive(Debug, Clone)]
pub struct MemoryEntry {
    pub user_id: Option<i64>,
    pub path: String,
    pub size: i64,
    pub updated_at: String,
}

fn read_entry(r: &impl super::Columns) -> Result<MemoryEntry> {
    Ok(MemoryEntry {
        user_id: r.get(0)?,
        path: r.get(1)?,
        size: r.get(2)?,
        updated_at: r.get(3)?,
    })
}

/// The agent's files of both scopes seen by `user_id`, without their content (the caller
/// sorts them: the backends' collations differ).
pub async fn list(c: &mut Conn<'_>, agent_id: i64, user_id: i64) -> Result<Vec<MemoryEntry>> {
    let sql = "SELECT user_id, path, size, updated_at FROM memory_files \
         WHERE agent_id = $1 AND (user_id IS NULL OR user_id = $2) ORDER BY id";
    rows!(c, read_entry, sql, agent_id, user_id)
}

/// The agent's files of both scopes seen by `user_id`, sealed.
pub async fn all(c: &mut Conn<'_>, agent_id: i64, user_id: i64) -> Result<Vec<MemoryRow>> {
    let sql = "SELECT user_id, path, content, hash, size, updated_at FROM memory_files \
         WHERE agent_id = $1 AND (user_id IS NULL OR user_id = $2) ORDER BY id";
    rows!(c, read, sql, agent_id, user_id)
}

/// One file at one scope (`user_id` None: the agent's own).
pub async fn get(
    c: &mut Conn<'_>,
    agent_id: i64,
    user_id: Option<i64>,
    path: &str,
) -> Result<Option<MemoryRow>> {
    let sql = "SELECT user_id, path, content, hash, size, updated_at FROM memory_files \
         WHERE agent_id = $1 AND user_id IS NOT DISTINCT FROM $2 AND path = $3";
    row!(c, read, sql, agent_id, user_id, path)
}

/// How many files the agent has at one scope, and the bytes the owner's memory takes, the
/// file at `path` of that scope left out (it is the one being replaced).
pub async fn usage_but(
    c: &mut Conn<'_>,
    owner_id: i64,
    agent_id: i64,
    user_id: Option<i64>,
    path: &str,
) -> Result<(i64, i64)> {
    let count = "SELECT COUNT(*) FROM memory_files \
         WHERE agent_id = $1 AND user_id IS NOT DISTINCT FROM $2 AND path <> $3";
    let bytes = "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM memory_files WHERE owner_id = $1 \
         AND NOT (agent_id = $2 AND user_id IS NOT DISTINCT FROM $3 AND path = $4)";
    Ok((
        scalar!(c, i64, count, agent_id, user_id, path)?.unwrap_or(0),
        scalar!(c, i64, bytes, owner_id, agent_id, user_id, path)?.unwrap_or(0),
    ))
}

/// Where a file is: its agent and its owner, the scope's user, its path.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub agent_id: i64,
    pub owner_id: i64,
    pub user_id: Option<i64>,
    pub path: &'a str,
}

/// Stores a file, new or replaced.
pub async fn put(
    c: &mut Write<'_>,
    at: Place<'_>,
    sealed: &[u8],
    hash: &[u8],
    size: i64,
    now: &str,
) -> Result<()> {
    delete(c, at.agent_id, at.user_id, at.path).await?;
    let sql = "INSERT INTO memory_files \
         (agent_id, user_id, owner_id, path, content, hash, size, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
    execute!(
        c,
        sql,
        at.agent_id,
        at.user_id,
        at.owner_id,
        at.path,
        sealed,
        hash,
        size,
        now
    )?;
    Ok(())
}

/// Removes a file at one scope; answers whether there was one.
pub async fn delete(
    c: &mut Write<'_>,
    agent_id: i64,
    user_id: Option<i64>,
    path: &str,
) -> Result<bool> {
    let sql = "DELETE FROM memory_files \
         WHERE agent_id = $1 AND user_id IS NOT DISTINCT FROM $2 AND path = $3";
    Ok(execute!(c, sql, agent_id, user_id, path)? > 0)
}

/// Each file of the agent's both scopes seen by `user_id`: its scope's user, path and hash.
pub async fn stamps(
    c: &mut Conn<'_>,
    agent_id: i64,
    user_id: i64,
) -> Result<Vec<(Option<i64>, String, Vec<u8>)>> {
    let sql = "SELECT user_id, path, hash FROM memory_files \
         WHERE agent_id = $1 AND (user_id IS NULL OR user_id = $2)";
    rows!(c, read_stamp, sql, agent_id, user_id)
}

fn read_stamp(r: &impl super::Columns) -> Result<(Option<i64>, String, Vec<u8>)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
}

/// Removes every memory file of an agent (it was deleted): its bytes no longer count.
pub async fn delete_agent(c: &mut Write<'_>, agent_id: i64) -> Result<u64> {
    let sql = "DELETE FROM memory_files WHERE agent_id = $1";
    execute!(c, sql, agent_id)
}
