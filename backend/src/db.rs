//! The SQLite store: one file in the data directory, WAL mode, migrations embedded in the
//! binary and applied at start-up.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::crypto::{self, Keyring};
use crate::{Error, Result};

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Opens (creating if missing) `<data_dir>/hero.db`. The data directory is created too.
pub async fn open(data_dir: &Path) -> Result<SqlitePool> {
    std::fs::create_dir_all(data_dir).map_err(|e| {
        Error::Internal(format!("cannot create data directory {}: {e}", data_dir.display()))
    })?;
    let path = data_dir.join("hero.db");
    let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        // No mmap: measured, it costs more than it saves here (the map is redone as the file
        // grows, with TLB shootdowns across cores).
        .busy_timeout(Duration::from_secs(5));
    // A connection to a local file does not go stale: no ping before each use (the ping is
    // a round trip to the connection's thread, as dear as the query it precedes).
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .test_before_acquire(false)
        .connect_with(opts)
        .await?;
    Ok(pool)
}

/// The connection of the hot path, kept out of the pool: every request's sign-in check and
/// every turn's reads and writes.
///
/// A pooled connection costs more than its queries: each one given back is pinged (a round
/// trip to its thread) by a task spawned for it. And in WAL mode a connection throws its
/// page cache away whenever another connection has written, so with turns spread over the
/// pool every statement began by reading its pages again. SQLite lets one writer in at a
/// time anyway; one connection for the turns keeps their pages warm, because the writes are
/// its own. Its statements are short (a key lookup, a session's frames, an insert); the
/// pool serves everything else. Opened on first use, with the pool's options.
#[derive(Default)]
pub struct HotDb(tokio::sync::Mutex<Option<sqlx::SqliteConnection>>);

impl HotDb {
    /// The connection, for a few statements: hold it no longer (every request waits on it).
    pub async fn lock(&self, pool: &SqlitePool) -> Result<Hot<'_>> {
        use sqlx::ConnectOptions;
        let mut slot = self.0.lock().await;
        if slot.is_none() {
            *slot = Some(pool.connect_options().connect().await?);
        }
        Ok(Hot(slot))
    }
}

/// The hot connection, held.
pub struct Hot<'a>(tokio::sync::MutexGuard<'a, Option<sqlx::SqliteConnection>>);

impl Hot<'_> {
    /// Passes `r` on. If it says the connection itself is gone (its thread ended, the file
    /// failed), the connection is forgotten and the next [`HotDb::lock`] opens another: the
    /// pool drops a broken connection when it is given back, and this one would otherwise
    /// fail every request until a restart. Use the connection no more after such an error.
    pub fn check<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(Error::Db(sqlx::Error::WorkerCrashed | sqlx::Error::Io(_))) = &r {
            tracing::error!("the database connection of sign-ins and turns broke; opening another");
            *self.0 = None;
        }
        r
    }
}

impl std::ops::Deref for Hot<'_> {
    type Target = sqlx::SqliteConnection;

    fn deref(&self) -> &sqlx::SqliteConnection {
        self.0.as_ref().expect("held open until a failed check")
    }
}

impl std::ops::DerefMut for Hot<'_> {
    fn deref_mut(&mut self) -> &mut sqlx::SqliteConnection {
        self.0.as_mut().expect("held open until a failed check")
    }
}

/// Applies every pending migration.
pub async fn migrate(pool: &SqlitePool) -> Result<()> {
    MIGRATOR.run(pool).await?;
    Ok(())
}

/// Checks the master key against the one this database was first used with (recording it
/// on first use), so a wrong key stops start-up with a clear message.
pub async fn check_master_key(pool: &SqlitePool, keys: &Keyring) -> Result<()> {
    const AAD: &[u8] = b"meta.master_key_check";
    let row: Option<(Vec<u8>,)> =
        sqlx::query_as("SELECT value FROM meta WHERE key = 'master_key_check'")
            .fetch_optional(pool)
            .await?;
    match row {
        Some((sealed,)) => crypto::open(keys.master(), AAD, &sealed).map(|_| ()).map_err(|_| {
            Error::Internal(
                "the master key does not match the one this data directory was created with \
                 (check HERO_MASTER_KEY or <data dir>/master.key)"
                    .into(),
            )
        }),
        None => {
            let sealed = crypto::seal(keys.master(), AAD, b"hero");
            sqlx::query("INSERT INTO meta (key, value) VALUES ('master_key_check', ?)")
                .bind(sealed)
                .execute(pool)
                .await?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::SecretKey;

    #[tokio::test]
    async fn a_broken_hot_connection_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let pool = open(dir.path()).await.unwrap();
        let hot = HotDb::default();
        {
            let mut h = hot.lock(&pool).await.unwrap();
            let broke: Result<()> = Err(Error::Db(sqlx::Error::WorkerCrashed));
            assert!(h.check(broke).is_err());
            // Any other failure leaves it be.
            let refused: Result<()> = Err(Error::Invalid("no".into()));
            assert!(h.check(refused).is_err());
        }
        let mut h = hot.lock(&pool).await.unwrap();
        let (one,): (i64,) = sqlx::query_as("SELECT 1").fetch_one(&mut *h).await.unwrap();
        assert_eq!(one, 1);
    }

    #[tokio::test]
    async fn opens_in_wal_mode_and_checks_the_master_key() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("nested/data");
        let pool = open(&data).await.unwrap();
        migrate(&pool).await.unwrap();
        let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode").fetch_one(&pool).await.unwrap();
        assert_eq!(mode, "wal");
        let key = SecretKey::random();
        check_master_key(&pool, &Keyring::new(key.clone())).await.unwrap();
        check_master_key(&pool, &Keyring::new(key)).await.unwrap();
        let err = check_master_key(&pool, &Keyring::new(SecretKey::random())).await.unwrap_err();
        assert!(err.to_string().contains("master key does not match"), "{err}");
        // Migrating again is a no-op.
        migrate(&pool).await.unwrap();
    }
}
