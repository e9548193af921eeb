//! The `meta` table: small facts about the database itself, by key (the master key's check
//! value, when the write-ahead log last started again).

use crate::crypto::{self, Keyring};
use crate::{Error, Result};

/// The value stored under `key`, if any.
pub async fn get(db: &super::Db, key: &str) -> Result<Option<Vec<u8>>> {
    let sql = "SELECT value FROM meta WHERE key = $1";
    Ok(on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(key)
        .fetch_optional(p)
        .await?))
}

const SET: &str = "INSERT INTO meta (key, value) VALUES ($1, $2) \
     ON CONFLICT (key) DO UPDATE SET value = excluded.value";

/// Stores `value` under `key`, replacing what was there.
pub async fn set(db: &super::Db, key: &str, value: &[u8]) -> Result<()> {
    on_pool!(db, |p| {
        sqlx::query(SET).bind(key).bind(value).execute(p).await?;
    });
    Ok(())
}

/// [`set`] through a pool of SQLite connections (the checkpoints' record).
pub(super) async fn set_on(pool: &sqlx::SqlitePool, key: &str, value: &[u8]) -> Result<()> {
    sqlx::query(SET).bind(key).bind(value).execute(pool).await?;
    Ok(())
}

/// Checks the master key against the one this database was first used with (recording it
/// on first use), so a wrong key stops start-up with a clear message.
pub async fn check_master_key(db: &super::Db, keys: &Keyring) -> Result<()> {
    const KEY: &str = "master_key_check";
    const AAD: &[u8] = b"meta.master_key_check";
    match get(db, KEY).await? {
        Some(sealed) => crypto::open(keys.master(), AAD, &sealed)
            .map(|_| ())
            .map_err(|_| {
                Error::Internal(
                    "the master key does not match the one this data directory was created with \
                 (check HERO_MASTER_KEY or <data dir>/master.key)"
                        .into(),
                )
            }),
        // A plain insert: a second process starting on the same empty database with
        // another key fails here instead of replacing the first one's check value.
        None => {
            let check = crypto::seal(keys.master(), AAD, b"hero");
            let sql = "INSERT INTO meta (key, value) VALUES ($1, $2)";
            on_pool!(db, |p| {
                sqlx::query(sql).bind(KEY).bind(&check).execute(p).await?;
            });
            Ok(())
        }
    }
}
