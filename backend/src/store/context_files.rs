//! The `context_files` table: an agent's context files (reference 002), at the agent's own
//! level (`user_id` NULL) or a user's own copy. The content arrives and leaves sealed
//! ([`crate::agents::context_files`] seals and opens it). On the hot connection: a turn reads them
//! in the transaction that appends the user's message.

use crate::Result;

/// A file as stored, its content sealed.
pub struct FileRow {
    pub name: String,
    pub user_id: Option<i64>,
    pub content: Vec<u8>,
    pub updated_at: String,
}

fn read(r: &impl super::Columns) -> Result<FileRow> {
    Ok(FileRow {
        name: r.get(0)?,
        user_id: r.get(1)?,
        content: r.get(2)?,
        updated_at: r.get(3)?,
    })
}

/// The agent's own files and the user's copies.
pub async fn list(c: &mut super::Conn<'_>, agent_id: i64, user_id: i64) -> Result<Vec<FileRow>> {
    let sql = "SELECT name, user_id, content, updated_at FROM context_files \
         WHERE agent_id = $1 AND (user_id IS NULL OR user_id = $2) ORDER BY name";
    rows!(c, read, sql, agent_id, user_id)
}

/// One file at one level (`user_id` None: the agent's own).
pub async fn get(
    c: &mut super::Conn<'_>,
    agent_id: i64,
    user_id: Option<i64>,
    name: &str,
) -> Result<Option<FileRow>> {
    let sql = "SELECT name, user_id, content, updated_at FROM context_files \
         WHERE agent_id = $1 AND user_id IS NOT DISTINCT FROM $2 AND name = $3";
    row!(c, read, sql, agent_id, user_id, name)
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
    delete(c, agent_id, user_id, name).await?;
    let sql = "INSERT INTO context_files (agent_id, user_id, name, content, updated_at) \
         VALUES ($1, $2, $3, $4, $5)";
    execute!(c, sql, agent_id, user_id, name, sealed, now)?;
    Ok(())
}

/// Removes a file at one level; answers whether there was one.
pub async fn delete(
    c: &mut super::Conn<'_>,
    agent_id: i64,
    user_id: Option<i64>,
    name: &str,
) -> Result<bool> {
    let sql = "DELETE FROM context_files \
         WHERE agent_id = $1 AND user_id IS NOT DISTINCT FROM $2 AND name = $3";
    Ok(execute!(c, sql, agent_id, user_id, name)? > 0)
}

/// Whether the agent's files were seeded (once, on first use). Not yet: on PostgreSQL the
/// agent's row is then locked and read again, so that of two first turns at once one seeds
/// and the other finds it done (SQLite has one writer at a time already).
pub async fn seeded(c: &mut super::Conn<'_>, agent_id: i64) -> Result<bool> {
    let sql = "SELECT files_seeded FROM agents WHERE id = $1";
    let seeded = scalar!(c, bool, sql, agent_id)?.unwrap_or(true);
    if seeded {
        return Ok(true);
    }
    match c.on() {
        super::On::Sqlite(_) => Ok(false),
        super::On::Postgres(pg) => Ok(sqlx::query_scalar::<_, bool>(
            "SELECT files_seeded FROM agents WHERE id = $1 FOR UPDATE",
        )
        .bind(agent_id)
        .fetch_optional(pg)
        .await?
        .unwrap_or(true)),
    }
}

pub async fn mark_seeded(c: &mut super::Conn<'_>, agent_id: i64) -> Result<()> {
    execute!(
        c,
        "UPDATE agents SET files_seeded = TRUE WHERE id = $1",
        agent_id
    )?;
    Ok(())
}
