//! The `users` table: a user row with its wrapped data key, listing, password changes and
//! disabling. Changing a password or disabling an account revokes every sign-in token the
//! account has ([`crate::tokens`]). A whole account (user and demo agent) is made by
//! [`crate::accounts::create`].

use sqlx::{Sqlite, SqlitePool, Transaction};

use crate::crypto::{Keyring, SecretKey};
use crate::{Error, Result, now_text, password, tokens};

pub const MAX_USERNAME_CHARS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct UserRow {
    pub id: i64,
    pub username: String,
    pub is_admin: bool,
    pub disabled: bool,
    pub created_at: String,
}

pub fn validate_username(name: &str) -> Result<&str> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::Invalid("username must not be empty".into()));
    }
    if name.chars().count() > MAX_USERNAME_CHARS {
        return Err(Error::Invalid(format!(
            "username is too long (at most {MAX_USERNAME_CHARS} characters)"
        )));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(Error::Invalid(
            "username may hold only letters, digits, '_', '-' and '.'".into(),
        ));
    }
    Ok(name)
}

pub async fn count(db: &SqlitePool) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users")
        .fetch_one(db)
        .await?;
    Ok(n)
}

/// Inserts the user row with a fresh data key (wrapped, bound to the row's id) inside `tx`;
/// answers the row and the data key, for what the account's creation adds next.
pub(crate) async fn insert(
    tx: &mut Transaction<'_, Sqlite>,
    keys: &Keyring,
    username: &str,
    password_hash: &str,
    is_admin: bool,
) -> Result<(UserRow, SecretKey)> {
    let now = now_text();
    let taken: Option<(i64,)> = sqlx::query_as("SELECT id FROM users WHERE username = ?")
        .bind(username)
        .fetch_optional(&mut **tx)
        .await?;
    if taken.is_some() {
        return Err(Error::Conflict(format!("username '{username}' is taken")));
    }
    // The wrapped key's associated data names the row id, which exists only after insert.
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO users (username, password_hash, is_admin, data_key, created_at, updated_at) \
         VALUES (?, ?, ?, x'', ?, ?) RETURNING id",
    )
    .bind(username)
    .bind(password_hash)
    .bind(is_admin)
    .bind(&now)
    .bind(&now)
    .fetch_one(&mut **tx)
    .await?;
    let data_key = SecretKey::random();
    sqlx::query("UPDATE users SET data_key = ? WHERE id = ?")
        .bind(keys.wrap_data_key(id, &data_key))
        .bind(id)
        .execute(&mut **tx)
        .await?;
    let row = UserRow {
        id,
        username: username.to_owned(),
        is_admin,
        disabled: false,
        created_at: now,
    };
    Ok((row, data_key))
}

pub async fn list(db: &SqlitePool) -> Result<Vec<UserRow>> {
    Ok(
        sqlx::query_as(
            "SELECT id, username, is_admin, disabled, created_at FROM users ORDER BY id",
        )
        .fetch_all(db)
        .await?,
    )
}

pub async fn find_by_name(db: &SqlitePool, username: &str) -> Result<UserRow> {
    sqlx::query_as(
        "SELECT id, username, is_admin, disabled, created_at FROM users WHERE username = ?",
    )
    .bind(username.trim())
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound("user"))
}

/// Sets a new password and revokes every token of the account.
pub async fn set_password(db: &SqlitePool, user_id: i64, password: &str) -> Result<()> {
    password::validate(password)?;
    let hash = password::hash(password).await?;
    let mut tx = crate::db::begin_write(db).await?;
    let done = sqlx::query("UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ?")
        .bind(hash)
        .bind(now_text())
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    if done.rows_affected() == 0 {
        return Err(Error::NotFound("user"));
    }
    tokens::revoke_all(&mut tx, user_id).await?;
    tx.commit().await?;
    Ok(())
}

/// Disables (or re-enables) an account; disabling revokes every token it has.
pub async fn set_disabled(db: &SqlitePool, user_id: i64, disabled: bool) -> Result<()> {
    let mut tx = crate::db::begin_write(db).await?;
    let done = sqlx::query("UPDATE users SET disabled = ?, updated_at = ? WHERE id = ?")
        .bind(disabled)
        .bind(now_text())
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    if done.rows_affected() == 0 {
        return Err(Error::NotFound("user"));
    }
    if disabled {
        tokens::revoke_all(&mut tx, user_id).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The user's data key, unwrapped; for encrypting their frames, agent keys and abilities.
pub async fn data_key(db: &SqlitePool, keys: &Keyring, user_id: i64) -> Result<SecretKey> {
    let (wrapped,): (Vec<u8>,) = sqlx::query_as("SELECT data_key FROM users WHERE id = ?")
        .bind(user_id)
        .fetch_optional(db)
        .await?
        .ok_or(Error::NotFound("user"))?;
    Ok(keys.unwrap_data_key(user_id, &wrapped)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::state;

    #[tokio::test]
    async fn data_keys_unwrap_the_same_every_time() {
        let (_dir, st) = state().await;
        let u = crate::accounts::create(&st.db, &st.keys, "alice", "correct horse", false)
            .await
            .unwrap();
        let dk = data_key(&st.db, &st.keys, u.id).await.unwrap();
        let again = data_key(&st.db, &st.keys, u.id).await.unwrap();
        assert_eq!(dk.bytes(), again.bytes());
        assert!(matches!(
            data_key(&st.db, &st.keys, u.id + 1).await,
            Err(Error::NotFound(_))
        ));
    }
}
