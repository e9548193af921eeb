//! The `permissions` table: each user's own level for a function, overriding its default.

use crate::Result;

/// A row as (function, level), from either backend.
fn pair(r: &impl super::Columns) -> Result<(String, String)> {
    Ok((r.get(0)?, r.get(1)?))
}

/// The user's overrides, as (function, level).
pub async fn list(db: &super::Db, user_id: i64) -> Result<Vec<(String, String)>> {
    let sql = "SELECT function, level FROM permissions WHERE user_id = $1 ORDER BY function";
    Ok(on_pool!(db, |p| sqlx::query_as(sql)
        .bind(user_id)
        .fetch_all(p)
        .await?))
}

/// The user's overrides, as (function, level), on a held connection (a turn reads them).
pub async fn list_hot(c: &mut super::Conn<'_>, user_id: i64) -> Result<Vec<(String, String)>> {
    let sql = "SELECT function, level FROM permissions WHERE user_id = $1";
    rows!(c, pair, sql, user_id)
}

/// Sets the user's level for a function.
pub async fn set(
    db: &super::Db,
    user_id: i64,
    function: &str,
    level: &str,
    now: &str,
) -> Result<()> {
    let sql = "INSERT INTO permissions (user_id, function, level, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (user_id, function) DO UPDATE SET level = excluded.level, updated_at = excluded.updated_at";
    on_pool!(db, |p| {
        sqlx::query(sql)
            .bind(user_id)
            .bind(function)
            .bind(level)
            .bind(now)
            .execute(p)
            .await?;
    });
    Ok(())
}

/// The user's override for one function, on a held connection (a turn's gate reads it).
pub async fn get_hot(
    c: &mut super::Conn<'_>,
    user_id: i64,
    function: &str,
) -> Result<Option<String>> {
    let sql = "SELECT level FROM permissions WHERE user_id = $1 AND function = $2";
    scalar!(c, String, sql, user_id, function)
}

/// Forgets the user's levels for every function whose name begins with `prefix` (an MCP
/// server's tools, when it is removed or renamed: a later server of that name starts at its
/// tools' defaults).
pub async fn forget_prefix(c: &mut super::Write<'_>, user_id: i64, prefix: &str) -> Result<u64> {
    let sql = "DELETE FROM permissions WHERE user_id = $1 AND substr(function, 1, length($2)) = $2";
    execute!(c, sql, user_id, prefix)
}
