//! The `attachments` table: files attached to messages, each sealed with its user's key
//! ([`crate::conversation::attachments`] seals and opens them); a row is its user's alone.

use super::{Conn, Write};
use crate::Result;

/// An attachment as stored: its name, bytes and text sealed.
#[derive(Debug, Clone)]
pub struct AttachmentRow {
    pub id: String,
    pub user_id: i64,
    pub session_id: i64,
    pub kind: String,
    pub media_type: String,
    pub size: i64,
    pub name: Vec<u8>,
    pub content: Vec<u8>,
    pub text: Option<Vec<u8>>,
    pub created_at: String,
}

const COLUMNS: &str =
    "id, user_id, session_id, kind, media_type, size, name, content, text, created_at";

fn read(r: &impl super::Columns) -> Result<AttachmentRow> {
    Ok(AttachmentRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        session_id: r.get(2)?,
        kind: r.get(3)?,
        media_type: r.get(4)?,
        size: r.get(5)?,
        name: r.get(6)?,
        content: r.get(7)?,
        text: r.get(8)?,
        created_at: r.get(9)?,
    })
}

pub async fn insert(c: &mut Write<'_>, a: &AttachmentRow) -> Result<()> {
    let sql = format!(
        "INSERT INTO attachments ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
    );
    execute!(
        c,
        &sql,
        &a.id,
        a.user_id,
        a.session_id,
        &a.kind,
        &a.media_type,
        a.size,
        &a.name,
        &a.content,
        &a.text,
        &a.created_at
    )?;
    Ok(())
}

/// The user's attachment `id`; `None` for one that is not theirs.
pub async fn get(c: &mut Conn<'_>, user_id: i64, id: &str) -> Result<Option<AttachmentRow>> {
    let sql = format!("SELECT {COLUMNS} FROM attachments WHERE id = $1 AND user_id = $2");
    row!(c, read, &sql, id, user_id)
}

/// How many attachments a session has.
pub async fn count(c: &mut Conn<'_>, session_id: i64) -> Result<i64> {
    let sql = "SELECT COUNT(*) FROM attachments WHERE session_id = $1";
    Ok(scalar!(c, i64, sql, session_id)?.unwrap_or(0))
}

/// How many bytes of attachments a user keeps.
pub async fn bytes_of(c: &mut Conn<'_>, user_id: i64) -> Result<i64> {
    let sql = "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM attachments WHERE user_id = $1";
    Ok(scalar!(c, i64, sql, user_id)?.unwrap_or(0))
}

/// The user's attachments, by id and session, oldest first (their contents not read).
pub async fn ids_of(c: &mut Conn<'_>, user_id: i64) -> Result<Vec<(String, i64)>> {
    let sql = "SELECT id, session_id FROM attachments WHERE user_id = $1 ORDER BY created_at, id";
    rows!(c, read_id, sql, user_id)
}

fn read_id(r: &impl super::Columns) -> Result<(String, i64)> {
    Ok((r.get(0)?, r.get(1)?))
}
