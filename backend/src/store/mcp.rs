//! The `mcp_servers` table: each user's MCP servers. Name, transport, enabled, timeout and
//! status are plain; the configuration and the listing arrive and leave sealed
//! ([`crate::execution::mcp`] seals and opens them). Every write raises the user's prompt
//! generation (a trigger): the server's tools are in the user's chain and prompt.

use super::{Conn, Write};
use crate::Result;

/// A server as stored.
#[derive(Clone)]
pub struct ServerRow {
    pub id: i64,
    pub user_id: i64,
    pub name: String,
    pub transport: String,
    pub enabled: bool,
    pub timeout_secs: i64,
    pub status: String,
    pub config: Vec<u8>,
    pub listing: Vec<u8>,
    pub updated_at: String,
}

const COLUMNS: &str =
    "id, user_id, name, transport, enabled, timeout_secs, status, config, listing, updated_at";

fn read(r: &impl super::Columns) -> Result<ServerRow> {
    Ok(ServerRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        name: r.get(2)?,
        transport: r.get(3)?,
        enabled: r.get(4)?,
        timeout_secs: r.get(5)?,
        status: r.get(6)?,
        config: r.get(7)?,
        listing: r.get(8)?,
        updated_at: r.get(9)?,
    })
}

/// The user's servers, by name.
pub async fn list(c: &mut Conn<'_>, user_id: i64) -> Result<Vec<ServerRow>> {
    let sql = format!("SELECT {COLUMNS} FROM mcp_servers WHERE user_id = $1 ORDER BY name");
    rows!(c, read, &sql, user_id)
}

/// One of the user's servers.
pub async fn get(c: &mut Conn<'_>, user_id: i64, id: i64) -> Result<Option<ServerRow>> {
    let sql = format!("SELECT {COLUMNS} FROM mcp_servers WHERE user_id = $1 AND id = $2");
    row!(c, read, &sql, user_id, id)
}

/// How many servers the user has.
pub async fn count(c: &mut Conn<'_>, user_id: i64) -> Result<i64> {
    let sql = "SELECT COUNT(*) FROM mcp_servers WHERE user_id = $1";
    Ok(scalar!(c, i64, sql, user_id)?.unwrap_or(0))
}

/// A new server, its configuration and listing still to be sealed ([`set_sealed`]: the
/// seals are bound to its id); `None` when the user has one of that name.
pub async fn insert(
    c: &mut Write<'_>,
    user_id: i64,
    name: &str,
    transport: &str,
    enabled: bool,
    timeout_secs: i64,
    now: &str,
) -> Result<Option<i64>> {
    let sql = "INSERT INTO mcp_servers \
         (user_id, name, transport, enabled, timeout_secs, status, config, listing, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, 'untested', $6, $7, $8, $9) ON CONFLICT DO NOTHING RETURNING id";
    let empty: &[u8] = &[];
    scalar!(
        c,
        i64,
        sql,
        user_id,
        name,
        transport,
        enabled,
        timeout_secs,
        empty,
        empty,
        now,
        now
    )
}

/// Writes a server's plain fields and both seals; false when another server of the user's
/// has the name.
pub async fn update(c: &mut Write<'_>, row: &ServerRow, now: &str) -> Result<bool> {
    let taken = "SELECT COUNT(*) FROM mcp_servers WHERE user_id = $1 AND name = $2 AND id <> $3";
    if scalar!(c, i64, taken, row.user_id, &row.name, row.id)?.unwrap_or(0) > 0 {
        return Ok(false);
    }
    let sql = "UPDATE mcp_servers SET name = $1, transport = $2, enabled = $3, timeout_secs = $4, \
         status = $5, config = $6, listing = $7, updated_at = $8 WHERE id = $9 AND user_id = $10";
    execute!(
        c,
        sql,
        &row.name,
        &row.transport,
        row.enabled,
        row.timeout_secs,
        &row.status,
        &row.config,
        &row.listing,
        now,
        row.id,
        row.user_id
    )?;
    Ok(true)
}

/// A server's status and listing, as a start or a test found them.
pub async fn set_listing(
    c: &mut Write<'_>,
    user_id: i64,
    id: i64,
    status: &str,
    listing: &[u8],
    now: &str,
) -> Result<bool> {
    let sql = "UPDATE mcp_servers SET status = $1, listing = $2, updated_at = $3 \
         WHERE id = $4 AND user_id = $5";
    Ok(execute!(c, sql, status, listing, now, id, user_id)? == 1)
}

/// Removes one of the user's servers; false when there was none.
pub async fn delete(c: &mut Write<'_>, user_id: i64, id: i64) -> Result<bool> {
    let sql = "DELETE FROM mcp_servers WHERE id = $1 AND user_id = $2";
    Ok(execute!(c, sql, id, user_id)? == 1)
}

/// The user's prompt generation (which every change to a server raises) and wrapped data
/// key.
pub async fn generation(c: &mut Conn<'_>, user_id: i64) -> Result<Option<(i64, Vec<u8>)>> {
    let sql = "SELECT prompt_gen, data_key FROM users WHERE id = $1";
    row!(c, read_generation, sql, user_id)
}

fn read_generation(r: &impl super::Columns) -> Result<(i64, Vec<u8>)> {
    Ok((r.get(0)?, r.get(1)?))
}

/// The user's enabled servers, by name.
pub async fn enabled(c: &mut Conn<'_>, user_id: i64) -> Result<Vec<ServerRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM mcp_servers WHERE user_id = $1 AND enabled = $2 ORDER BY name"
    );
    rows!(c, read, &sql, user_id, true)
}
