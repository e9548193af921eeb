//! Accounts: creation (with a fresh wrapped data key), listing, password changes and
//! disabling. Passwords are argon2id hashes; changing a password or disabling an account
//! revokes every sign-in token the account has.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use sqlx::SqlitePool;

use crate::crypto::{Keyring, SecretKey};
use crate::{Error, Result, now_text};

pub const MAX_USERNAME_CHARS: usize = 64;
pub const MIN_PASSWORD_CHARS: usize = 8;
/// argon2 cost grows with input; a cap keeps one request from buying seconds of CPU.
pub const MAX_PASSWORD_BYTES: usize = 1024;

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

pub fn validate_password(pw: &str) -> Result<()> {
    if pw.chars().count() < MIN_PASSWORD_CHARS {
        return Err(Error::Invalid(format!(
            "password is too short (at least {MIN_PASSWORD_CHARS} characters)"
        )));
    }
    if pw.len() > MAX_PASSWORD_BYTES {
        return Err(Error::Invalid(format!(
            "password is too long (at most {MAX_PASSWORD_BYTES} bytes)"
        )));
    }
    Ok(())
}

/// Hashes on the blocking pool: argon2 is deliberately slow and must not stall the runtime.
pub async fn hash_password(pw: &str) -> Result<String> {
    let pw = pw.to_owned();
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
        Argon2::default()
            .hash_password(pw.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| Error::Internal(format!("password hashing failed: {e}")))
    })
    .await
    .map_err(|e| Error::Internal(format!("password hashing task failed: {e}")))?
}

/// True when `pw` matches `hash`. A malformed stored hash counts as no match.
pub async fn verify_password(pw: &str, hash: &str) -> bool {
    let (pw, hash) = (pw.to_owned(), hash.to_owned());
    tokio::task::spawn_blocking(move || {
        PasswordHash::new(&hash)
            .map(|parsed| {
                Argon2::default()
                    .verify_password(pw.as_bytes(), &parsed)
                    .is_ok()
            })
            .unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

pub async fn count(db: &SqlitePool) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users")
        .fetch_one(db)
        .await?;
    Ok(n)
}

/// Creates an account with its own data key. One transaction: no half-made account stays
/// behind if any step fails.
pub async fn create(
    db: &SqlitePool,
    keys: &Keyring,
    username: &str,
    password: &str,
    is_admin: bool,
) -> Result<UserRow> {
    let username = validate_username(username)?;
    validate_password(password)?;
    let hash = hash_password(password).await?;
    let now = now_text();
    let mut tx = crate::db::begin_write(db).await?;
    let taken: Option<(i64,)> = sqlx::query_as("SELECT id FROM users WHERE username = ?")
        .bind(username)
        .fetch_optional(&mut *tx)
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
    .bind(&hash)
    .bind(is_admin)
    .bind(&now)
    .bind(&now)
    .fetch_one(&mut *tx)
    .await?;
    let data_key = SecretKey::random();
    sqlx::query("UPDATE users SET data_key = ? WHERE id = ?")
        .bind(keys.wrap_data_key(id, &data_key))
        .bind(id)
        .execute(&mut *tx)
        .await?;
    crate::agents::insert_demo(&mut tx, id, &data_key).await?;
    tx.commit().await?;
    Ok(UserRow {
        id,
        username: username.to_owned(),
        is_admin,
        disabled: false,
        created_at: now,
    })
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
    validate_password(password)?;
    let hash = hash_password(password).await?;
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
    crate::auth::revoke_all(&mut tx, user_id).await?;
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
        crate::auth::revoke_all(&mut tx, user_id).await?;
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
    async fn create_validates_and_refuses_duplicates() {
        let (_dir, st) = state().await;
        let u = create(&st.db, &st.keys, "alice", "correct horse", true)
            .await
            .unwrap();
        assert!(u.is_admin);
        let dup = create(&st.db, &st.keys, "ALICE", "another password", false)
            .await
            .unwrap_err();
        assert!(matches!(dup, Error::Conflict(_)), "{dup}");
        for (name, pw, want) in [
            ("", "longenough", "must not be empty"),
            ("a b", "longenough", "may hold only"),
            ("bob", "short", "too short"),
        ] {
            let err = create(&st.db, &st.keys, name, pw, false)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{name:?}: {err}");
        }
        assert_eq!(count(&st.db).await.unwrap(), 1);
        let dk = data_key(&st.db, &st.keys, u.id).await.unwrap();
        let again = data_key(&st.db, &st.keys, u.id).await.unwrap();
        assert_eq!(dk.bytes(), again.bytes());
    }

    #[tokio::test]
    async fn passwords_verify_only_when_right() {
        let h = hash_password("correct horse").await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &h).await);
        assert!(!verify_password("wrong horse", &h).await);
        assert!(!verify_password("correct horse", "not a hash").await);
    }
}
