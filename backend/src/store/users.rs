//! The `users` table: accounts, their password hashes and wrapped data keys.

use rusqlite::{OptionalExtension, params};

use super::{Columns, Conn};
use crate::Result;

/// An account as listed (no hash, no key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRow {
    pub id: i64,
    pub username: String,
    pub is_admin: bool,
    pub disabled: bool,
    pub created_at: String,
}

const COLUMNS: &str = "id, username, is_admin, disabled, created_at";

impl UserRow {
    /// The one decoder of a listed user ([`COLUMNS`] in order).
    fn read(r: &impl Columns) -> Result<Self> {
        Ok(UserRow {
            id: r.get(0)?,
            username: r.get(1)?,
            is_admin: r.get(2)?,
            disabled: r.get(3)?,
            created_at: r.get(4)?,
        })
    }
}

pub async fn count(db: &super::Db) -> Result<i64> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM users")
        .fetch_one(db.sqlite()?)
        .await?)
}

pub async fn name_taken(c: &mut Conn<'_>, username: &str) -> Result<bool> {
    c.run(|c| {
        let id: Option<i64> = c
            .prepare_cached("SELECT id FROM users WHERE username = ?1")?
            .query_row([username], |r| r.get(0))
            .optional()?;
        Ok(id.is_some())
    })
    .await
}

/// Inserts a user with an empty data key (its wrapping names the row id, which exists only
/// after the insert: [`set_data_key`] follows in the same transaction); answers the id.
pub async fn insert(
    c: &mut super::Write<'_>,
    username: &str,
    password_hash: &str,
    is_admin: bool,
    now: &str,
) -> Result<i64> {
    c.run(|c| {
        Ok(c.prepare_cached(
            "INSERT INTO users (username, password_hash, is_admin, data_key, created_at, updated_at) \
             VALUES (?1, ?2, ?3, x'', ?4, ?4) RETURNING id",
        )?
        .query_row(params![username, password_hash, is_admin, now], |r| r.get(0))?)
    })
    .await
}

pub async fn set_data_key(c: &mut super::Write<'_>, id: i64, wrapped: &[u8]) -> Result<()> {
    c.run(|c| {
        c.prepare_cached("UPDATE users SET data_key = ?1 WHERE id = ?2")?
            .execute(params![wrapped, id])?;
        Ok(())
    })
    .await
}

pub async fn list(db: &super::Db) -> Result<Vec<UserRow>> {
    let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM users ORDER BY id"))
        .fetch_all(db.sqlite()?)
        .await?;
    rows.iter().map(UserRow::read).collect()
}

pub async fn find_by_name(db: &super::Db, username: &str) -> Result<Option<UserRow>> {
    let row = sqlx::query(&format!("SELECT {COLUMNS} FROM users WHERE username = ?"))
        .bind(username)
        .fetch_optional(db.sqlite()?)
        .await?;
    row.as_ref().map(UserRow::read).transpose()
}

/// What a sign-in checks: the account and its password hash.
pub struct Credentials {
    pub user: UserRow,
    pub password_hash: String,
}

pub async fn credentials(db: &super::Db, username: &str) -> Result<Option<Credentials>> {
    let row = sqlx::query(&format!(
        "SELECT {COLUMNS}, password_hash FROM users WHERE username = ?"
    ))
    .bind(username)
    .fetch_optional(db.sqlite()?)
    .await?;
    row.as_ref()
        .map(|r| {
            Ok(Credentials {
                user: UserRow::read(r)?,
                password_hash: r.get(5)?,
            })
        })
        .transpose()
}

pub async fn password_hash(db: &super::Db, id: i64) -> Result<Option<String>> {
    Ok(
        sqlx::query_scalar("SELECT password_hash FROM users WHERE id = ?")
            .bind(id)
            .fetch_optional(db.sqlite()?)
            .await?,
    )
}

/// Sets the password hash; whether the user exists.
pub async fn set_password_hash(
    c: &mut super::Write<'_>,
    id: i64,
    hash: &str,
    now: &str,
) -> Result<bool> {
    c.run(|c| {
        let n = c
            .prepare_cached("UPDATE users SET password_hash = ?1, updated_at = ?2 WHERE id = ?3")?
            .execute(params![hash, now, id])?;
        Ok(n > 0)
    })
    .await
}

/// Disables or re-enables the account; whether the user exists.
pub async fn set_disabled(
    c: &mut super::Write<'_>,
    id: i64,
    disabled: bool,
    now: &str,
) -> Result<bool> {
    c.run(|c| {
        let n = c
            .prepare_cached("UPDATE users SET disabled = ?1, updated_at = ?2 WHERE id = ?3")?
            .execute(params![disabled, now, id])?;
        Ok(n > 0)
    })
    .await
}

/// The user's data key as stored, wrapped by the master key.
pub async fn wrapped_data_key(db: &super::Db, id: i64) -> Result<Option<Vec<u8>>> {
    Ok(
        sqlx::query_scalar("SELECT data_key FROM users WHERE id = ?")
            .bind(id)
            .fetch_optional(db.sqlite()?)
            .await?,
    )
}
