//! Accounts: who may sign in and as whom.
//!
//! - [`users`]: the user rows (list, password, disable), each with a wrapped data key.
//! - [`password`]: password rules and argon2id hashing (a leaf).
//! - [`tokens`]: signed, revocable sign-in tokens.
//! - [`admin`]: what an administrator does to accounts (list with use, make, change),
//!   never leaving the site without an enabled administrator.
//! - [`auth`]: sign-in, the failed-login brake and the [`auth::AuthUser`] every operation
//!   takes.
//! - here: making an account.
//!
//! May use the leaves and [`crate::store`]; making an account also seeds the demo agent
//! through [`crate::agents`]. Invariant: only [`auth`] makes an [`auth::AuthUser`].
//!
//! Making an account: a user (with a fresh data key) and the offline demo agent every new
//! account starts with, in one transaction. Above [`crate::accounts::users`] and [`crate::agents`],
//! which know nothing of each other's creation.

pub mod admin;
pub mod auth;
pub mod password;
pub mod tokens;
pub mod users;

use crate::store::Db;

use crate::crypto::Keyring;
use crate::{Result, agents};
use users::UserRow;

/// Creates an account: nothing of it stays behind if any step fails.
pub async fn create(
    db: &Db,
    keys: &Keyring,
    username: &str,
    pw: &str,
    is_admin: bool,
) -> Result<UserRow> {
    let username = users::validate_username(username)?;
    password::validate(pw)?;
    let hash = password::hash(pw).await?;
    let mut tx = db.begin().await?;
    let (row, data_key) = users::insert(&mut tx, keys, username, &hash, is_admin).await?;
    agents::insert_demo(&mut tx, row.id, &data_key).await?;
    tx.commit().await?;
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
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
        assert_eq!(users::count(&st.db).await.unwrap(), 1);
    }
}
