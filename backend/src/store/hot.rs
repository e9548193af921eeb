//! The hot connection: the one the sign-in checks and the turns use, on the calling thread,
//! kept out of the pool; and the checkpoints of the write-ahead log its writes start.

use std::time::Duration;

use sqlx::SqlitePool;

use super::BUSY_FOR;
use crate::{Error, Result};

/// The connection of the hot path, kept out of the pool: every request's sign-in check and
/// every turn's reads and writes, run on the calling thread.
///
/// sqlx gives each SQLite connection a thread of its own, and every statement is a round
/// trip to it: two thread wake-ups, measured at 40-50 µs of CPU on the 2-core development
/// machine, where the statement itself takes 0.2 µs (a key lookup) to 25 µs (an insert and
/// its commit). A turn makes six. This connection is a plain SQLite handle (rusqlite, on the
/// same libsqlite3 as sqlx) held by one task at a time ([`HotConn`]); its statements
/// run on the holder's thread and are short and bounded: a key lookup, a session's recent
/// frames (at most [`super::frames::HOT_HISTORY_FRAMES`], else the pool reads them), an
/// insert. Whoever holds it runs statements and nothing else: no request to the network, no
/// wait on anything but the database, between taking it and letting it go.
///
/// It never blocks on another connection: its busy timeout is zero, and a statement refused
/// because a pooled connection holds the write lock is retried after an asynchronous sleep
/// ([`HotConn::run`]). It does not checkpoint either (that writes and syncs the database file,
/// milliseconds on a worker thread): every [`CHECKPOINT_EVERY`] writes a pooled connection,
/// on its own thread, checkpoints the write-ahead log and restarts it, so the log holds at
/// most that many writes. One connection for the turns also keeps their pages warm: in WAL
/// mode a connection drops its page cache whenever another one has written.
#[derive(Default)]
pub struct HotDb {
    conn: tokio::sync::Mutex<Option<rusqlite::Connection>>,
    writes: std::sync::atomic::AtomicU32,
    checkpointing: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Writes between two checkpoints of the write-ahead log (a turn makes three, of a few
/// pages each; SQLite's own default is every 1,000 pages).
pub const CHECKPOINT_EVERY: u32 = 256;

impl HotDb {
    /// The connection, once no one else holds it: its statements commit one by one.
    pub(crate) async fn conn<'a>(&'a self, pool: &'a SqlitePool) -> HotConn<'a> {
        HotConn {
            slot: self.conn.lock().await,
            pool,
            hot: self,
            in_tx: false,
        }
    }

    /// The connection inside a write transaction of its own, taking the write lock at once
    /// (`BEGIN IMMEDIATE`, waiting its turn while the database is busy): committed by
    /// [`HotConn::commit`], rolled back if dropped before.
    pub(crate) async fn begin<'a>(&'a self, pool: &'a SqlitePool) -> Result<HotConn<'a>> {
        let mut conn = self.conn(pool).await;
        // Kept statements: rusqlite's `Transaction` parses "BEGIN IMMEDIATE" and "COMMIT"
        // again on every write (docs/perf.md).
        conn.run(|c| Ok(c.prepare_cached("BEGIN IMMEDIATE")?.execute([])?))
            .await?;
        conn.in_tx = true;
        Ok(conn)
    }

    /// Runs `f` on the connection (tests).
    #[cfg(test)]
    async fn read<T>(
        &self,
        pool: &SqlitePool,
        f: impl FnMut(&rusqlite::Connection) -> Result<T>,
    ) -> Result<T> {
        self.conn(pool).await.run(f).await
    }

    /// Runs `f` in a transaction of its own, committed when it succeeds (tests).
    #[cfg(test)]
    async fn write<T>(
        &self,
        pool: &SqlitePool,
        f: impl FnMut(&rusqlite::Connection) -> Result<T>,
    ) -> Result<T> {
        let mut w = self.begin(pool).await?;
        let v = w.run(f).await?;
        w.commit().await?;
        Ok(v)
    }
}

/// The hot connection, held by one task until it is dropped: statements run on it one
/// after another ([`HotConn::run`]), in autocommit, or inside a write transaction
/// ([`HotDb::begin`]) until [`HotConn::commit`]; dropped before, the transaction is rolled
/// back (an error, a panic of its holder's).
pub(crate) struct HotConn<'a> {
    slot: tokio::sync::MutexGuard<'a, Option<rusqlite::Connection>>,
    pool: &'a SqlitePool,
    hot: &'a HotDb,
    in_tx: bool,
}

impl HotConn<'_> {
    /// Runs `f` on the connection (opening it first if it is not open). A database busy
    /// with a pooled writer or a checkpoint is waited for, asleep, and `f` run again; a
    /// failed file drops the connection, and the next use opens another, instead of failing
    /// every request until a restart (inside a transaction, the rest of it then fails).
    pub(crate) async fn run<T>(
        &mut self,
        mut f: impl FnMut(&rusqlite::Connection) -> Result<T>,
    ) -> Result<T> {
        // The clock is read only once the database was busy: most statements never are.
        let mut deadline = None;
        let mut pause = Duration::from_millis(1);
        loop {
            let conn = match &mut *self.slot {
                Some(c) => c,
                None if self.in_tx => {
                    return Err(Error::Internal(
                        "the database connection broke during this write".into(),
                    ));
                }
                empty => empty.insert(open_hot(self.pool)?),
            };
            let r = f(conn);
            if broken(&r) {
                tracing::error!(
                    "the database connection of sign-ins and turns broke; opening another"
                );
                *self.slot = None;
            }
            match r {
                Err(Error::Sqlite(e))
                    if busy(&e)
                        && std::time::Instant::now()
                            < *deadline
                                .get_or_insert_with(|| std::time::Instant::now() + BUSY_FOR) =>
                {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                r => return r,
            }
        }
    }
}

/// A transaction left open (one not committed, or a rollback that failed) would hold the
/// write lock and show every later read an old snapshot: it is rolled back when its holder
/// lets the connection go, and if that fails too the connection is closed (which rolls it
/// back) and the next use opens another.
impl Drop for HotConn<'_> {
    fn drop(&mut self) {
        let Some(c) = &*self.slot else { return };
        if c.is_autocommit() {
            return;
        }
        if !self.in_tx {
            tracing::error!(
                "the database connection of sign-ins and turns was left in a transaction; rolling it back"
            );
        }
        let _ = c.prepare_cached("ROLLBACK").and_then(|mut s| s.execute([]));
        if !c.is_autocommit() {
            tracing::error!(
                "the database connection of sign-ins and turns could not roll back; opening another"
            );
            *self.slot = None;
        }
    }
}

impl HotConn<'_> {
    /// Commits the write transaction; every [`CHECKPOINT_EVERY`] commits, a checkpoint of
    /// the write-ahead log starts on the pool.
    pub(crate) async fn commit(mut self) -> Result<()> {
        self.run(|c| Ok(c.prepare_cached("COMMIT")?.execute([])?))
            .await?;
        use std::sync::atomic::Ordering;
        let hot = self.hot;
        if hot.writes.fetch_add(1, Ordering::Relaxed) % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1 {
            checkpoint(self.pool, &hot.checkpointing);
        }
        Ok(())
    }
}

fn busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Whether `r` says the connection itself failed (the file, not the statement): it is then
/// dropped and the next use opens another, instead of failing every request until a restart.
fn broken<T>(r: &Result<T>) -> bool {
    use rusqlite::ErrorCode as C;
    let Err(Error::Sqlite(e)) = r else {
        return false;
    };
    matches!(
        e.sqlite_error_code(),
        Some(C::SystemIoFailure | C::DatabaseCorrupt | C::NotADatabase | C::CannotOpen)
    )
}

/// Opens the hot connection on the pool's file (which must exist: the pool made it), with
/// the pool's settings but for the busy timeout and the checkpoints (see [`HotDb`]).
fn open_hot(pool: &SqlitePool) -> Result<rusqlite::Connection> {
    use rusqlite::OpenFlags as F;
    let options = pool.connect_options();
    let path = options.get_filename();
    if path.as_os_str().is_empty() || path.to_string_lossy().contains(":memory:") {
        return Err(Error::Internal(
            "the hot connection needs a database file".into(),
        ));
    }
    let c = rusqlite::Connection::open_with_flags(
        path,
        F::SQLITE_OPEN_READ_WRITE | F::SQLITE_OPEN_NO_MUTEX,
    )?;
    c.execute_batch(
        "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 0; \
         PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = 16777216;",
    )?;
    c.set_prepared_statement_cache_capacity(32);
    Ok(c)
}

/// How long a checkpoint waits for readers of older snapshots (hot writes wait meanwhile).
const CHECKPOINT_WAIT: Duration = Duration::from_millis(100);

/// `PRAGMA wal_checkpoint(RESTART)` on a pooled connection whose busy timeout is
/// [`CHECKPOINT_WAIT`] for the while: (busy, pages in the log, pages checkpointed).
async fn restart_log(pool: &SqlitePool) -> std::result::Result<(i64, i64, i64), sqlx::Error> {
    let mut c = pool.acquire().await?;
    sqlx::query(&format!(
        "PRAGMA busy_timeout = {}",
        CHECKPOINT_WAIT.as_millis()
    ))
    .execute(&mut *c)
    .await?;
    let done = sqlx::query_as("PRAGMA wal_checkpoint(RESTART)")
        .fetch_one(&mut *c)
        .await;
    let restored = sqlx::query(&format!("PRAGMA busy_timeout = {}", BUSY_FOR.as_millis()))
        .execute(&mut *c)
        .await;
    if restored.is_err() {
        // Not given back with a short timeout: dropped, the pool opens another.
        drop(c.detach());
    }
    done
}

/// Checkpoints the write-ahead log from a pooled connection (its own thread), unless a
/// checkpoint is under way, and restarts it: the next write starts the log from its
/// beginning. (A passive checkpoint would not: it copies what the log held when it began,
/// and with turns committing meanwhile it never catches up, so the log would only grow.)
/// Hot writes meanwhile are refused as busy and retried, so the checkpoint waits for readers
/// [`CHECKPOINT_WAIT`] at most (a long read through the pool must not hold up every turn);
/// one that could not finish is tried again next time. The restarted log's first write
/// syncs its header; a pooled write makes it, so that the sync is not on a runtime thread.
fn checkpoint(pool: &SqlitePool, running: &std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::Ordering;
    if running.swap(true, Ordering::AcqRel) {
        return;
    }
    let (pool, running) = (pool.clone(), running.clone());
    tokio::spawn(async move {
        let done = restart_log(&pool).await;
        match done {
            Ok((0, _, _)) => {
                let now = crate::now_text();
                let touch = super::meta::set_on(&pool, "last_checkpoint", now.as_bytes()).await;
                if let Err(e) = touch {
                    tracing::warn!(error = %e, "could not start the write-ahead log again");
                }
            }
            // Readers or a writer kept it from finishing: the next one tries again.
            Ok(_) => tracing::debug!("a checkpoint of the write-ahead log did not finish"),
            Err(e) => tracing::warn!(error = %e, "could not checkpoint the write-ahead log"),
        }
        running.store(false, Ordering::Release);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{begin_write, open};

    #[tokio::test]
    async fn a_broken_hot_connection_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let pool = open(dir.path()).await.unwrap();
        let hot = HotDb::default();
        let io = || {
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR),
                None,
            )
        };
        let failed = hot.read(&pool, |_| Err::<(), _>(Error::Sqlite(io()))).await;
        assert!(failed.is_err());
        assert!(
            hot.conn.try_lock().unwrap().is_none(),
            "a failed file drops the connection"
        );
        // Any other failure leaves it be.
        let refused = hot
            .read(&pool, |_| Err::<(), _>(Error::Invalid("no".into())))
            .await;
        assert!(refused.is_err());
        assert!(hot.conn.try_lock().unwrap().is_some());
        let one: i64 = hot
            .read(&pool, |c| Ok(c.query_row("SELECT 1", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(one, 1);
    }

    #[tokio::test]
    async fn a_failed_write_leaves_nothing_and_the_next_one_commits() {
        let dir = tempfile::tempdir().unwrap();
        let pool = open(dir.path()).await.unwrap();
        sqlx::query("CREATE TABLE t (n INTEGER UNIQUE)")
            .execute(&pool)
            .await
            .unwrap();
        let hot = HotDb::default();
        let insert = |n: i64| {
            move |tx: &rusqlite::Connection| Ok(tx.execute("INSERT INTO t VALUES (?1)", [n])?)
        };
        hot.write(&pool, insert(1)).await.unwrap();
        // The second statement fails: the first is rolled back with it.
        let failed = hot
            .write(&pool, |tx| {
                insert(2)(tx)?;
                insert(1)(tx)
            })
            .await;
        assert!(failed.is_err());
        // And a refusal of the caller's own, after a statement ran.
        let refused = hot
            .write(&pool, |tx| {
                insert(3)(tx)?;
                Err::<usize, _>(Error::Invalid("no".into()))
            })
            .await;
        assert!(refused.is_err());
        // And a closure that panics, after a statement ran.
        let panicked = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(hot.write(
            &pool,
            |tx| -> Result<()> {
                insert(5)(tx)?;
                panic!("a bug in the caller's closure")
            },
        )))
        .await;
        assert!(panicked.is_err());
        let closed = hot
            .conn
            .try_lock()
            .unwrap()
            .as_ref()
            .is_some_and(|c| c.is_autocommit());
        assert!(closed, "no transaction is left open");
        hot.write(&pool, insert(4)).await.unwrap();
        let rows: Vec<(i64,)> = sqlx::query_as("SELECT n FROM t ORDER BY n")
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(rows, vec![(1,), (4,)]);
    }

    #[tokio::test]
    async fn a_hot_write_waits_for_a_pooled_writer_without_blocking_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let pool = open(dir.path()).await.unwrap();
        sqlx::query("CREATE TABLE t (n INTEGER)")
            .execute(&pool)
            .await
            .unwrap();
        let hot = HotDb::default();
        // A pooled connection holds the write lock for a while.
        let mut pooled = pool.acquire().await.unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut *pooled)
            .await
            .unwrap();
        sqlx::query("INSERT INTO t VALUES (1)")
            .execute(&mut *pooled)
            .await
            .unwrap();
        let release = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            sqlx::query("COMMIT").execute(&mut *pooled).await.unwrap();
        };
        // On this one thread, the release can only happen if the hot write yields meanwhile,
        // and a ticker keeps ticking only if the write never blocks the thread for long.
        let began = std::time::Instant::now();
        let write = async {
            let wrote = hot
                .write(&pool, |tx| Ok(tx.execute("INSERT INTO t VALUES (2)", [])?))
                .await;
            (wrote, began.elapsed())
        };
        let ticks = async {
            let (mut n, mut longest, mut last) = (0, Duration::ZERO, std::time::Instant::now());
            while n < 40 {
                tokio::time::sleep(Duration::from_millis(2)).await;
                longest = longest.max(last.elapsed());
                last = std::time::Instant::now();
                n += 1;
            }
            longest
        };
        let ((), (wrote, took), longest) = tokio::join!(release, write, ticks);
        assert_eq!(wrote.unwrap(), 1);
        assert!(
            took >= Duration::from_millis(50),
            "the write waited for the lock: {took:?}"
        );
        assert!(
            longest < Duration::from_millis(40),
            "the thread was held for {longest:?}"
        );
        let n: i64 = hot
            .read(&pool, |c| {
                Ok(c.query_row("SELECT SUM(n) FROM t", [], |r| r.get(0))?)
            })
            .await
            .unwrap();
        assert_eq!(n, 3);
    }

    #[tokio::test]
    async fn hot_writes_checkpoint_the_log_from_the_pool() {
        let dir = tempfile::tempdir().unwrap();
        let pool = open(dir.path()).await.unwrap();
        sqlx::query("CREATE TABLE t (b BLOB)")
            .execute(&pool)
            .await
            .unwrap();
        let hot = HotDb::default();
        let insert = |tx: &rusqlite::Connection| {
            Ok(tx.execute("INSERT INTO t VALUES (zeroblob(4000))", [])?)
        };
        let file = || std::fs::metadata(dir.path().join("hero.db")).unwrap().len();
        for _ in 1..CHECKPOINT_EVERY {
            hot.write(&pool, insert).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            file() < 100_000,
            "no checkpoint yet: the rows are in the log ({} bytes)",
            file()
        );
        hot.write(&pool, insert).await.unwrap();
        // The checkpoint runs on the pool; wait for it to finish.
        while hot.checkpointing.load(std::sync::atomic::Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            file() > CHECKPOINT_EVERY as u64 * 4000,
            "the rows are in the database file ({} bytes)",
            file()
        );
        // And the log started again from its beginning: it holds only what came after.
        hot.write(&pool, insert).await.unwrap();
        let (_, log, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert!((1..10).contains(&log), "the log holds {log} pages");
    }

    #[tokio::test]
    async fn a_checkpoint_does_not_hold_up_hot_writes_for_a_long_reader() {
        let dir = tempfile::tempdir().unwrap();
        let pool = open(dir.path()).await.unwrap();
        sqlx::query("CREATE TABLE t (n INTEGER)")
            .execute(&pool)
            .await
            .unwrap();
        let hot = HotDb::default();
        // A pooled reader keeps an old snapshot for the whole test.
        let mut reader = pool.acquire().await.unwrap();
        sqlx::query("BEGIN").execute(&mut *reader).await.unwrap();
        let _: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM t")
            .fetch_one(&mut *reader)
            .await
            .unwrap();
        let insert = |tx: &rusqlite::Connection| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?);
        for _ in 0..CHECKPOINT_EVERY {
            hot.write(&pool, insert).await.unwrap();
        }
        let began = std::time::Instant::now();
        while hot.checkpointing.load(std::sync::atomic::Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            began.elapsed() < Duration::from_secs(2),
            "the checkpoint waited {:?} for the reader",
            began.elapsed()
        );
        let began = std::time::Instant::now();
        hot.write(&pool, insert).await.unwrap();
        assert!(
            began.elapsed() < Duration::from_secs(1),
            "a hot write waited {:?}",
            began.elapsed()
        );
        sqlx::query("COMMIT").execute(&mut *reader).await.unwrap();
    }

    #[tokio::test]
    async fn a_pooled_write_is_not_refused_for_a_hot_write_since_its_read() {
        let dir = tempfile::tempdir().unwrap();
        let pool = open(dir.path()).await.unwrap();
        sqlx::query("CREATE TABLE t (n INTEGER)")
            .execute(&pool)
            .await
            .unwrap();
        let hot = HotDb::default();
        // Read, then a hot write commits, then write: what a pooled transaction does.
        let mut tx = begin_write(&pool).await.unwrap();
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM t")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        let hot_write = hot.write(&pool, |tx| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?));
        let pooled = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            sqlx::query("INSERT INTO t VALUES (?)")
                .bind(n + 10)
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
        };
        let (hot_wrote, ()) = tokio::join!(hot_write, pooled);
        hot_wrote.unwrap();
        let (sum,): (i64,) = sqlx::query_as("SELECT SUM(n) FROM t")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(sum, 11);
        // Deferred, the same order is refused at the write: why pooled writes begin at once.
        let mut tx = pool.begin().await.unwrap();
        let _: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM t")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        hot.write(&pool, |tx| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?))
            .await
            .unwrap();
        assert!(
            sqlx::query("INSERT INTO t VALUES (2)")
                .execute(&mut *tx)
                .await
                .is_err()
        );
    }
}
