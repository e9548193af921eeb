//! The `permissions` table: each user's own level for a function, overriding its default.

use crate::Result;

/// The user's overrides, as (function, level).
pub async fn list(db: &super::Db, user_id: i64) -> Result<Vec<(String, String)>> {
    Ok(sqlx::query_as(
        "SELECT function, level FROM permissions WHERE user_id = ? ORDER BY function",
    )
    .bind(user_id)
    .fetch_all(db.sqlite()?)
    .await?)
}

/// The user's overrides, as (function, level), on the hot connection (a turn reads them).
pub async fn list_hot(c: &mut super::Conn<'_>, user_id: i64) -> Result<Vec<(String, String)>> {
    c.run(|c| list_hot_on(c, user_id)).await
}

fn list_hot_on(c: &rusqlite::Connection, user_id: i64) -> Result<Vec<(String, String)>> {
    let mut st = c.prepare_cached("SELECT function, level FROM permissions WHERE user_id = ?1")?;
    let rows = st.query_map([user_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Sets the user's level for a function.
pub async fn set(
    db: &super::Db,
    user_id: i64,
    function: &str,
    level: &str,
    now: &str,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO permissions (user_id, function, level, updated_at) VALUES (?, ?, ?, ?) \
         ON CONFLICT (user_id, function) DO UPDATE SET level = excluded.level, updated_at = excluded.updated_at",
    )
    .bind(user_id)
    .bind(function)
    .bind(level)
    .bind(now)
    .execute(db.sqlite()?)
    .await?;
    Ok(())
}

/// The user's override for one function, on the hot connection (a turn's gate reads it).
pub async fn get_hot(
    c: &mut super::Conn<'_>,
    user_id: i64,
    function: &str,
) -> Result<Option<String>> {
    c.run(|c| get_hot_on(c, user_id, function)).await
}

fn get_hot_on(c: &rusqlite::Connection, user_id: i64, function: &str) -> Result<Option<String>> {
    let mut st =
        c.prepare_cached("SELECT level FROM permissions WHERE user_id = ?1 AND function = ?2")?;
    let mut rows = st.query(rusqlite::params![user_id, function])?;
    Ok(match rows.next()? {
        Some(r) => Some(r.get(0)?),
        None => None,
    })
}
