//! The `processes` table: a user's own processes (reference 000's abilities of source
//! `user`). The name is plain, unique per user; the description and content arrive and leave
//! sealed ([`crate::agents::abilities`] seals and opens them, bound to the row's user, id and
//! name).

use super::{Conn, Write};
use crate::Result;

/// A process as stored.
pub struct ProcessRow {
    pub id: i64,
    pub user_id: i64,
    pub name: String,
    pub sealed: Vec<u8>,
    pub created_at: String,
    pub updated_at: String,
}

const COLUMNS: &str = "id, user_id, name, sealed, created_at, updated_at";

fn read(r: &impl super::Columns) -> Result<ProcessRow> {
    Ok(ProcessRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        name: r.get(2)?,
        sealed: r.get(3)?,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
    })
}

/// The user's processes, oldest first (the caller sorts by name: the backends' collations
/// differ).
pub async fn list(db: &super::Db, user_id: i64) -> Result<Vec<ProcessRow>> {
    let sql = format!("SELECT {COLUMNS} FROM processes WHERE user_id = $1 ORDER BY id");
    pool_rows!(db, read, &sql, user_id)
}

/// [`list`] on a held connection (a turn's, building the agent's prompt).
pub async fn list_on(c: &mut Conn<'_>, user_id: i64) -> Result<Vec<ProcessRow>> {
    let sql = format!("SELECT {COLUMNS} FROM processes WHERE user_id = $1 ORDER BY id");
    rows!(c, read, &sql, user_id)
}

/// The user's process `id`; `None` when it is not theirs.
pub async fn get(c: &mut Conn<'_>, user_id: i64, id: i64) -> Result<Option<ProcessRow>> {
    let sql = format!("SELECT {COLUMNS} FROM processes WHERE user_id = $1 AND id = $2");
    row!(c, read, &sql, user_id, id)
}

/// The user's process named `name`.
pub async fn by_name(c: &mut Conn<'_>, user_id: i64, name: &str) -> Result<Option<ProcessRow>> {
    let sql = format!("SELECT {COLUMNS} FROM processes WHERE user_id = $1 AND name = $2");
    row!(c, read, &sql, user_id, name)
}

/// How many processes the user has.
pub async fn count(c: &mut Conn<'_>, user_id: i64) -> Result<i64> {
    let sql = "SELECT COUNT(*) FROM processes WHERE user_id = $1";
    Ok(scalar!(c, i64, sql, user_id)?.unwrap_or(0))
}

/// Whether another process of the user's (not `except`) has the name.
pub async fn name_taken(c: &mut Conn<'_>, user_id: i64, name: &str, except: i64) -> Result<bool> {
    let sql = "SELECT COUNT(*) FROM processes WHERE user_id = $1 AND name = $2 AND id <> $3";
    Ok(scalar!(c, i64, sql, user_id, name, except)?.unwrap_or(0) > 0)
}

/// A new process's row, its content still to be sealed ([`set`], in the same transaction:
/// the seal is bound to the id this gives).
pub async fn insert(c: &mut Write<'_>, user_id: i64, name: &str, now: &str) -> Result<i64> {
    let sql = "INSERT INTO processes (user_id, name, sealed, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $4) RETURNING id";
    let empty: &[u8] = &[];
    scalar!(c, i64, sql, user_id, name, empty, now)?.ok_or(crate::Error::Internal(
        "an inserted process came back empty".into(),
    ))
}

/// Sets the name and sealed content of the user's process `id`; answers whether it was
/// there to set.
pub async fn set(
    c: &mut Write<'_>,
    user_id: i64,
    id: i64,
    name: &str,
    sealed: &[u8],
    now: &str,
) -> Result<bool> {
    let sql = "UPDATE processes SET name = $1, sealed = $2, updated_at = $3 \
         WHERE id = $4 AND user_id = $5";
    Ok(execute!(c, sql, name, sealed, now, id, user_id)? > 0)
}

/// Removes the user's process `id`; answers whether there was one.
pub async fn delete(c: &mut Write<'_>, user_id: i64, id: i64) -> Result<bool> {
    let sql = "DELETE FROM processes WHERE user_id = $1 AND id = $2";
    Ok(execute!(c, sql, user_id, id)? > 0)
}
