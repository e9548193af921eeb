//! The `context_files` table: an agent's context files (reference 002), at the agent's own
//! level (`user_id` NULL) or a user's own copy. The content arrives and leaves sealed
//! ([`crate::agents::context_files`] seals and opens it). On the hot connection: a turn reads them
//! in the transaction that appends the user's message.

use rusqlite::{OptionalExtension, params};

use crate::Result;

/// A file as stored, its content sealed.
pub struct FileRow {
    pub name: String,
    pub user_id: Option<i64>,
    pub content: Vec<u8>,
    pub updated_at: String,
}

fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<FileRow> {
    Ok(FileRow {
        name: r.get(0)?,
        user_id: r.get(1)?,
        content: r.get(2)?,
        updated_at: r.get(3)?,
    })
}

/// The agent's own files and the user's copies.
pub async fn list(c: &mut super::Conn<'_>, agent_id: i64, user_id: i64) -> Result<Vec<FileRow>> {
    c.run(|c| list_on(c, agent_id, user_id)).await
}

fn list_on(c: &rusqlite::Connection, agent_id: i64, user_id: i64) -> Result<Vec<FileRow>> {
    let mut st = c.prepare_cached(
        "SELECT name, user_id, content, updated_at FROM context_files \
         WHERE agent_id = ?1 AND (user_id IS NULL OR user_id = ?2) ORDER BY name",
    )?;
    let rows = st.query_map(params![agent_id, user_id], read)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// One file at one level (`user_id` None: the agent's own).
pub async fn get(
    c: &mut super::Conn<'_>,
    agent_id: i64,
    user_id: Option<i64>,
    name: &str,
) -> Result<Option<FileRow>> {
    c.run(|c| get_on(c, agent_id, user_id, name)).await
}

fn get_on(
    c: &rusqlite::Connection,
    agent_id: i64,
    user_id: Option<i64>,
    name: &str,
) -> Result<Option<FileRow>> {
    let mut st = c.prepare_cached(
        "SELECT name, user_id, content, updated_at FROM context_files \
         WHERE agent_id = ?1 AND user_id IS ?2 AND name = ?3",
    )?;
    Ok(st
        .query_row(params![agent_id, user_id, name], read)
        .optional()?)
}

/// Writes a file at one level, replacing what was there.
pub async fn put(
    c: &mut super::Conn<'_>,
    agent_id: i64,
    user_id: Option<i64>,
    name: &str,
    sealed: &[u8],
    now: &str,
) -> Result<()> {
    c.run(|c| put_on(c, agent_id, user_id, name, sealed, now))
        .await
}

fn put_on(
    c: &rusqlite::Connection,
    agent_id: i64,
    user_id: Option<i64>,
    name: &str,
    sealed: &[u8],
    now: &str,
) -> Result<()> {
    delete_on(c, agent_id, user_id, name)?;
    c.prepare_cached(
        "INSERT INTO context_files (agent_id, user_id, name, content, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![agent_id, user_id, name, sealed, now])?;
    Ok(())
}

/// Removes a file at one level; answers whether there was one.
pub async fn delete(
    c: &mut super::Conn<'_>,
    agent_id: i64,
    user_id: Option<i64>,
    name: &str,
) -> Result<bool> {
    c.run(|c| delete_on(c, agent_id, user_id, name)).await
}

fn delete_on(
    c: &rusqlite::Connection,
    agent_id: i64,
    user_id: Option<i64>,
    name: &str,
) -> Result<bool> {
    let n = c
        .prepare_cached(
            "DELETE FROM context_files WHERE agent_id = ?1 AND user_id IS ?2 AND name = ?3",
        )?
        .execute(params![agent_id, user_id, name])?;
    Ok(n > 0)
}

/// Whether the agent's files were seeded (once, on first use).
pub async fn seeded(c: &mut super::Conn<'_>, agent_id: i64) -> Result<bool> {
    c.run(|c| seeded_on(c, agent_id)).await
}

fn seeded_on(c: &rusqlite::Connection, agent_id: i64) -> Result<bool> {
    let v: Option<i64> = c
        .prepare_cached("SELECT files_seeded FROM agents WHERE id = ?1")?
        .query_row(params![agent_id], |r| r.get(0))
        .optional()?;
    Ok(v.unwrap_or(1) != 0)
}

pub async fn mark_seeded(c: &mut super::Conn<'_>, agent_id: i64) -> Result<()> {
    c.run(|c| mark_seeded_on(c, agent_id)).await
}

fn mark_seeded_on(c: &rusqlite::Connection, agent_id: i64) -> Result<()> {
    c.prepare_cached("UPDATE agents SET files_seeded = 1 WHERE id = ?1")?
        .execute(params![agent_id])?;
    Ok(())
}
