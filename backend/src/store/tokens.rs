//! The `auth_tokens` table: one row per sign-in token issued (its `jti`), revoked by
//! setting `revoked_at`; a token stands only while its row does, unrevoked.

use super::Columns;
use crate::Result;

pub async fn insert(
    db: &super::Db,
    jti: &str,
    user_id: i64,
    now: &str,
    expires_at: i64,
) -> Result<()> {
    let sql =
        "INSERT INTO auth_tokens (jti, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)";
    on_pool!(db, |p| {
        sqlx::query(sql)
            .bind(jti)
            .bind(user_id)
            .bind(now)
            .bind(expires_at)
            .execute(p)
            .await?;
    });
    Ok(())
}

pub async fn revoke(db: &super::Db, jti: &str, now: &str) -> Result<()> {
    let sql = "UPDATE auth_tokens SET revoked_at = $1 WHERE jti = $2 AND revoked_at IS NULL";
    on_pool!(db, |p| {
        sqlx::query(sql).bind(now).bind(jti).execute(p).await?;
    });
    Ok(())
}

/// Revokes every token of a user (inside the transaction that changes the account).
pub async fn revoke_all(c: &mut super::Write<'_>, user_id: i64, now: &str) -> Result<()> {
    let sql = "UPDATE auth_tokens SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL";
    execute!(c, sql, now, user_id)?;
    Ok(())
}

/// A token's row with its account.
pub struct TokenRow {
    pub user_id: i64,
    pub username: String,
    pub is_admin: bool,
    pub disabled: bool,
    pub revoked: bool,
}

const BY_JTI: &str = "SELECT u.id, u.username, u.is_admin, u.disabled, t.revoked_at IS NOT NULL \
     FROM auth_tokens t JOIN users u ON u.id = t.user_id WHERE t.jti = $1";

impl TokenRow {
    /// The one decoder of a token row ([`BY_JTI`]'s columns in order).
    fn read(r: &impl Columns) -> Result<Self> {
        Ok(TokenRow {
            user_id: r.get(0)?,
            username: r.get(1)?,
            is_admin: r.get(2)?,
            disabled: r.get(3)?,
            revoked: r.get(4)?,
        })
    }
}

/// The token `jti` and its account, on the hot connection (every request's sign-in check).
pub async fn by_jti_hot(c: &mut super::Conn<'_>, jti: &str) -> Result<Option<TokenRow>> {
    row!(c, TokenRow::read, BY_JTI, jti)
}

/// The token `jti` and its account, through the pool (the periodic re-check of live
/// streams, which may wait).
pub async fn by_jti(db: &super::Db, jti: &str) -> Result<Option<TokenRow>> {
    on_pool!(db, |p| sqlx::query(BY_JTI)
        .bind(jti)
        .fetch_optional(p)
        .await?
        .as_ref()
        .map(TokenRow::read)
        .transpose())
}
