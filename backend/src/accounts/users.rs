//! The `users` table: a user row with its wrapped data key, listing, password changes and
//! disabling. Changing a password or disabling an account revokes every sign-in token the
//! account has ([`crate::accounts::tokens`]). A whole account (user and demo agent) is made by
//! [`crate::accounts::create`].

use crate::store::Db;

use crate::crypto::{Keyring, SecretKey};
use crate::{Error, Result, accounts::password, accounts::tokens, now_text, store};

pub const MAX_USERNAME_CHARS: usize = 64;

pub use store::users::UserRow;

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

pub use store::users::count;

/// Inserts the user row with a fresh data key (wrapped, bound to the row's id) inside `tx`;
/// answers the row and the data key, for what the account's creation adds next.
pub(crate) async fn insert(
    tx: &mut crate::store::Write<'_>,
    keys: &Keyring,
    username: &str,
    password_hash: &str,
    is_admin: bool,
) -> Result<(UserRow, SecretKey)> {
    let now = now_text();
    if store::users::name_taken(tx, username).await? {
        return Err(Error::Conflict(format!("username '{username}' is taken")));
    }
    let id = store::users::insert(tx, username, password_hash, is_admin, &now).await?;
    // The wrapped key's associated data names the row id, which exists only after insert.
    let data_key = SecretKey::random();
    store::users::set_data_key(tx, id, &keys.wrap_data_key(id, &data_key)).await?;
    let row = UserRow {
        id,
        username: username.to_owned(),
        is_admin,
        disabled: false,
        created_at: now,
    };
    Ok((row, data_key))
}

pub async fn list(db: &Db) -> Result<Vec<UserRow>> {
    store::users::list(db).await
}

pub async fn find_by_name(db: &Db, username: &str) -> Result<UserRow> {
    store::users::find_by_name(db, username.trim())
        .await?
        .ok_or(Error::NotFound("user"))
}

/// Sets a new password and revokes every token of the account.
pub async fn set_password(db: &Db, user_id: i64, password: &str) -> Result<()> {
    password::validate(password)?;
    let hash = password::hash(password).await?;
    let mut tx = db.begin().await?;
    if !store::users::set_password_hash(&mut tx, user_id, &hash, &now_text()).await? {
        return Err(Error::NotFound("user"));
    }
    tokens::revoke_all(&mut tx, user_id).await?;
    tx.commit().await?;
    Ok(())
}

/// Disables (or re-enables) an account; disabling revokes every token it has.
pub async fn set_disabled(db: &Db, user_id: i64, disabled: bool) -> Result<()> {
    let mut tx = db.begin().await?;
    if !store::users::set_disabled(&mut tx, user_id, disabled, &now_text()).await? {
        return Err(Error::NotFound("user"));
    }
    if disabled {
        tokens::revoke_all(&mut tx, user_id).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The user's data key, unwrapped; for encrypting their frames, agent keys and abilities.
pub async fn data_key(db: &Db, keys: &Keyring, user_id: i64) -> Result<SecretKey> {
    let wrapped = store::users::wrapped_data_key(db, user_id)
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
