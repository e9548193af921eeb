//! The `personal_skills` table: a user's personal skills (reference 002's tier 3). The name
//! is plain, unique per user; the skill (SKILL.md and its files) arrives and leaves sealed
//! ([`crate::skills::personal`] seals and opens it, bound to the row's user and name).

use super::{Conn, Write};
use crate::Result;

/// A personal skill as stored.
pub struct PersonalSkillRow {
    pub name: String,
    pub sealed: Vec<u8>,
}

fn read(r: &impl super::Columns) -> Result<PersonalSkillRow> {
    Ok(PersonalSkillRow {
        name: r.get(0)?,
        sealed: r.get(1)?,
    })
}

/// The user's personal skills (the caller sorts them by name: the backends' collations
/// differ).
pub async fn list(c: &mut Conn<'_>, user_id: i64) -> Result<Vec<PersonalSkillRow>> {
    let sql = "SELECT name, sealed FROM personal_skills WHERE user_id = $1 ORDER BY id";
    rows!(c, read, sql, user_id)
}

/// How many personal skills the user has, and the bytes they take sealed, `name` left out.
pub async fn usage_but(c: &mut Conn<'_>, user_id: i64, name: &str) -> Result<(i64, i64)> {
    let count = "SELECT COUNT(*) FROM personal_skills WHERE user_id = $1 AND name <> $2";
    let bytes = "SELECT COALESCE(SUM(LENGTH(sealed)), 0) FROM personal_skills \
         WHERE user_id = $1 AND name <> $2";
    Ok((
        scalar!(c, i64, count, user_id, name)?.unwrap_or(0),
        scalar!(c, i64, bytes, user_id, name)?.unwrap_or(0),
    ))
}

/// Whether the user has a personal skill named `name`.
pub async fn exists(c: &mut Conn<'_>, user_id: i64, name: &str) -> Result<bool> {
    let sql = "SELECT COUNT(*) FROM personal_skills WHERE user_id = $1 AND name = $2";
    Ok(scalar!(c, i64, sql, user_id, name)?.unwrap_or(0) > 0)
}

/// Stores the user's personal skill `name`, new or replaced.
pub async fn put(
    c: &mut Write<'_>,
    user_id: i64,
    name: &str,
    sealed: &[u8],
    now: &str,
) -> Result<()> {
    let sql = "INSERT INTO personal_skills (user_id, name, sealed, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $4) \
         ON CONFLICT (user_id, name) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at";
    execute!(c, sql, user_id, name, sealed, now)?;
    Ok(())
}

/// Removes the user's personal skill `name`; answers whether there was one.
pub async fn delete(c: &mut Write<'_>, user_id: i64, name: &str) -> Result<bool> {
    let sql = "DELETE FROM personal_skills WHERE user_id = $1 AND name = $2";
    Ok(execute!(c, sql, user_id, name)? > 0)
}
