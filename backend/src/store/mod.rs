//! The store: the only module that touches the database. One SQLite file in the data
//! directory (WAL mode, migrations embedded in the binary and applied at start-up), reached
//! through the pool (sqlx, each connection on a thread of its own) and the hot connection
//! ([`HotDb`], on the calling thread: sign-in checks and turns).
//!
//! One submodule per table holds that table's SQL and its row type, decoded in one place
//! ([`Columns`]) whichever connection read it. Domain modules above keep the rules and the
//! cryptography: they hand the store sealed bytes and validated values, and get rows back.
//!
//! - [`meta`]: the master key's check value and the last checkpoint.
//! - [`users`], [`tokens`]: accounts and sign-in tokens.
//! - [`agents`], [`sessions`]: a user's agents and sessions, every query naming the user.
//! - [`frames`]: the append-only log (insert on the hot connection, reads on either).
//! - [`usage`]: what each call cost.
//! - [`permissions`]: each user's own level for a function.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::{Error, Result};

/// Runs the same sqlx statement on the database's pool, whichever backend it is: the body
/// is written once and checked for each (its SQL in `$1` placeholders, which both read).
macro_rules! on_pool {
    ($db:expr, |$p:ident| $body:expr) => {
        match $db.pool() {
            $crate::store::Pool::Sqlite($p) => $body,
            $crate::store::Pool::Postgres($p) => $body,
        }
    };
}

/// One statement on a held connection ([`Conn`]), whichever backend: its SQL written once
/// in `$1` placeholders (in the order they first appear, as rusqlite numbers them); answers
/// the rows it changed.
macro_rules! execute {
    ($c:expr, $sql:expr $(, $arg:expr)* $(,)?) => {
        match $c.on() {
            $crate::store::On::Sqlite(h) => {
                debug_assert!($crate::store::numbered_in_order($sql), "{}", $sql);
                h.run(|c| Ok(c.prepare_cached($sql)?.execute(rusqlite::params![$($arg),*])? as u64))
                    .await
            }
            $crate::store::On::Postgres(pg) => {
                Ok(sqlx::query($sql)$(.bind($arg))*.execute(pg).await?.rows_affected())
            }
        }
    };
}

/// The first column of the first row a statement answers, if any, on a held connection.
macro_rules! scalar {
    ($c:expr, $ty:ty, $sql:expr $(, $arg:expr)* $(,)?) => {
        match $c.on() {
            $crate::store::On::Sqlite(h) => {
                debug_assert!($crate::store::numbered_in_order($sql), "{}", $sql);
                h.run(|c| {
                    use rusqlite::OptionalExtension;
                    Ok(c.prepare_cached($sql)?
                        .query_row(rusqlite::params![$($arg),*], |r| r.get::<_, $ty>(0))
                        .optional()?)
                })
                .await
            }
            $crate::store::On::Postgres(pg) => {
                Ok(sqlx::query_scalar::<_, $ty>($sql)$(.bind($arg))*.fetch_optional(pg).await?)
            }
        }
    };
}

/// The rows a statement answers on the database's pool, each decoded by `$read`.
macro_rules! pool_rows {
    ($db:expr, $read:expr, $sql:expr $(, $arg:expr)* $(,)?) => {
        on_pool!($db, |p| sqlx::query($sql)
            $(.bind($arg))*
            .fetch_all(p)
            .await?
            .iter()
            .map(|r| $read(r))
            .collect::<$crate::Result<Vec<_>>>())
    };
}

/// The first row a statement answers on a held connection, if any, decoded by `$read`.
macro_rules! row {
    ($c:expr, $read:expr, $sql:expr $(, $arg:expr)* $(,)?) => {
        match $c.on() {
            $crate::store::On::Sqlite(h) => {
                debug_assert!($crate::store::numbered_in_order($sql), "{}", $sql);
                h.run(|c| {
                    let mut st = c.prepare_cached($sql)?;
                    let mut rows = st.query(rusqlite::params![$($arg),*])?;
                    rows.next()?.map(|r| $read(r)).transpose()
                })
                .await
            }
            $crate::store::On::Postgres(pg) => {
                let row = sqlx::query($sql)$(.bind($arg))*.fetch_optional(pg).await?;
                row.as_ref().map(|r| $read(r)).transpose()
            }
        }
    };
}

/// The rows a statement answers on a held connection, each decoded by `$read` (a row
/// type's decoder over [`Columns`]).
macro_rules! rows {
    ($c:expr, $read:expr, $sql:expr $(, $arg:expr)* $(,)?) => {
        match $c.on() {
            $crate::store::On::Sqlite(h) => {
                debug_assert!($crate::store::numbered_in_order($sql), "{}", $sql);
                h.run(|c| {
                    let mut st = c.prepare_cached($sql)?;
                    let mut rows = st.query(rusqlite::params![$($arg),*])?;
                    let mut out = Vec::new();
                    while let Some(r) = rows.next()? {
                        out.push($read(r)?);
                    }
                    Ok(out)
                })
                .await
            }
            $crate::store::On::Postgres(pg) => {
                let rows = sqlx::query($sql)$(.bind($arg))*.fetch_all(pg).await?;
                rows.iter().map(|r| $read(r)).collect::<$crate::Result<Vec<_>>>()
            }
        }
    };
}

/// How many rows `table` holds (tests of what is stored, on either backend).
#[cfg(any(test, feature = "test-support"))]
pub async fn rows_in(db: &Db, table: &str) -> crate::Result<i64> {
    let sql = format!("SELECT COUNT(*) FROM {table}");
    Ok(on_pool!(db, |p| sqlx::query_scalar(&sql)
        .fetch_one(p)
        .await?))
}

pub mod agents;
pub mod attachments;
pub mod cluster;
pub mod configs;
mod conn;
pub mod context_files;
pub mod copy;
pub mod frames;
mod hot;
pub mod mcp;
pub mod memory;
pub mod meta;
pub mod permissions;
pub mod processes;
pub mod sessions;
pub mod skills;
pub mod tasks;
pub mod tokens;
pub mod usage;
pub mod users;

pub(crate) use conn::On;
pub use conn::{Conn, Write};
pub use hot::{CHECKPOINT_EVERY, HotDb};
pub use meta::check_master_key;

/// How long a statement refused for a busy database is retried (the pool's busy timeout,
/// set in [`open`]).
pub(crate) const BUSY_FOR: Duration = Duration::from_secs(5);

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// The same schema for PostgreSQL (`migrations/postgres`).
pub static MIGRATOR_POSTGRES: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

impl Db {
    /// The migrations of this database's backend.
    pub fn migrator(&self) -> &'static sqlx::migrate::Migrator {
        match self.pool() {
            Pool::Sqlite(_) => &MIGRATOR,
            Pool::Postgres(_) => &MIGRATOR_POSTGRES,
        }
    }
}

/// The connection options of a `postgres://user:password@host:port/database` URL, or an
/// error saying what a valid one looks like.
pub fn postgres_options(url: &str) -> Result<sqlx::postgres::PgConnectOptions> {
    use std::str::FromStr;
    let bad = |why: &str| {
        Error::Invalid(format!(
            "database_url {why}; write it as postgres://user:password@host:5432/database"
        ))
    };
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(bad("must start with postgres://"));
    }
    sqlx::postgres::PgConnectOptions::from_str(url)
        .map_err(|e| bad(&format!("cannot be read ({})", first_line(&e.to_string()))))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// Whether `sql`'s `$N` placeholders first appear in the order of their numbers: rusqlite
/// numbers `$N` by first appearance, so a statement it runs must name them in order (sqlx
/// and PostgreSQL read the number itself).
pub(crate) fn numbered_in_order(sql: &str) -> bool {
    let mut next = 1;
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse::<u32>() {
            if n > next {
                return false;
            }
            if n == next {
                next += 1;
            }
        }
    }
    true
}

/// The database, as every part of Hero holds it. On SQLite (the default: one file in the
/// data directory), the pool (sqlx, for reads that may be long) and the hot connection
/// ([`HotDb`]: sign-in checks, turns, every write); on PostgreSQL, the pool, and a pool of
/// its own for the short locks taken across instances ([`cluster::hold`], while a user's
/// holds are counted): a lock held while its work waits for a connection of the main pool
/// never takes one of them. Cheap to clone.
#[derive(Clone)]
pub struct Db(std::sync::Arc<DbParts>);

enum DbParts {
    Sqlite {
        pool: SqlitePool,
        hot: HotDb,
    },
    Postgres {
        pool: sqlx::PgPool,
        locks: sqlx::PgPool,
    },
}

/// The most locks ([`cluster::hold`]) one instance holds at once; more wait their turn.
pub const LOCKS_AT_ONCE: u32 = 32;

/// What a store function's pooled statements run on.
pub(crate) enum Pool<'d> {
    Sqlite(&'d SqlitePool),
    Postgres(&'d sqlx::PgPool),
}

impl Db {
    /// The SQLite database behind `pool` (the hot connection opens on the same file when
    /// first used).
    pub fn new(pool: SqlitePool) -> Db {
        Db(std::sync::Arc::new(DbParts::Sqlite {
            pool,
            hot: HotDb::default(),
        }))
    }

    /// Opens (creating if missing) `<data_dir>/hero.db` ([`open`]).
    pub async fn open(data_dir: &Path) -> Result<Db> {
        Ok(Db::new(open(data_dir).await?))
    }

    /// The PostgreSQL database behind `pool`.
    pub fn postgres(pool: sqlx::PgPool) -> Db {
        let locks = sqlx::postgres::PgPoolOptions::new()
            .max_connections(LOCKS_AT_ONCE)
            .min_connections(0)
            .acquire_timeout(std::time::Duration::from_secs(30))
            .connect_lazy_with((*pool.connect_options()).clone());
        Db(std::sync::Arc::new(DbParts::Postgres { pool, locks }))
    }

    /// Connects to the PostgreSQL `url` names (checked by [`postgres_options`]). A server
    /// that does not answer within 10 seconds is an error naming its host.
    pub async fn connect_postgres(url: &str) -> Result<Db> {
        let opts = postgres_options(url)?;
        let host = format!("{}:{}", opts.get_host(), opts.get_port());
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect_with(opts)
            .await
            .map_err(|e| {
                Error::Internal(format!(
                    "cannot reach the PostgreSQL at {host} (database_url): {}",
                    first_line(&e.to_string())
                ))
            })?;
        Ok(Db::postgres(pool))
    }

    /// The same database with nothing held in memory: what a restart of the process finds.
    pub fn restarted(&self) -> Db {
        match &*self.0 {
            DbParts::Sqlite { pool, .. } => Db::new(pool.clone()),
            DbParts::Postgres { pool, locks } => Db(std::sync::Arc::new(DbParts::Postgres {
                pool: pool.clone(),
                locks: locks.clone(),
            })),
        }
    }

    /// The pool, for a store function's pooled statements.
    pub(crate) fn pool(&self) -> Pool<'_> {
        match &*self.0 {
            DbParts::Sqlite { pool, .. } => Pool::Sqlite(pool),
            DbParts::Postgres { pool, .. } => Pool::Postgres(pool),
        }
    }

    /// PostgreSQL's pool of lock connections ([`cluster::hold`]); `None` on SQLite.
    pub(crate) fn locks(&self) -> Option<&sqlx::PgPool> {
        match &*self.0 {
            DbParts::Sqlite { .. } => None,
            DbParts::Postgres { locks, .. } => Some(locks),
        }
    }

    /// The SQLite pool, when the database is SQLite (tests and benchmarks look inside it).
    pub fn sqlite_pool(&self) -> Option<&SqlitePool> {
        match &*self.0 {
            DbParts::Sqlite { pool, .. } => Some(pool),
            DbParts::Postgres { .. } => None,
        }
    }

    /// A connection held by this task until it is dropped: SQLite's hot connection once no
    /// other task holds it ([`HotDb::conn`]), or one of PostgreSQL's pool.
    pub async fn conn(&self) -> Result<Conn<'_>> {
        match &*self.0 {
            DbParts::Sqlite { pool, hot } => Ok(Conn::sqlite(hot.conn(pool).await)),
            DbParts::Postgres { pool, .. } => Ok(Conn::postgres(pool.acquire().await?)),
        }
    }

    /// A write transaction: on SQLite the hot connection's, taking the write lock at once
    /// ([`HotDb::begin`]); on PostgreSQL one on a connection of the pool.
    pub async fn begin(&self) -> Result<Write<'_>> {
        match &*self.0 {
            DbParts::Sqlite { pool, hot } => Ok(Write::sqlite(hot.begin(pool).await?)),
            DbParts::Postgres { pool, .. } => Ok(Write::postgres(pool.begin().await?)),
        }
    }

    /// Runs `f` with a connection held ([`Db::conn`]).
    pub async fn read_with<T>(&self, f: impl AsyncFnOnce(&mut Conn<'_>) -> Result<T>) -> Result<T> {
        let mut c = self.conn().await?;
        f(&mut c).await
    }

    /// Runs `f` in a write transaction ([`Db::begin`]), committed when `f` succeeds and
    /// rolled back when it fails. Between its statements `f` does nothing that waits on
    /// anything but the database: on SQLite the transaction holds the connection every turn
    /// needs.
    pub async fn write_with<T>(
        &self,
        f: impl AsyncFnOnce(&mut Write<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut tx = self.begin().await?;
        let v = f(&mut tx).await?;
        tx.commit().await?;
        Ok(v)
    }

    /// The most connections the pool opens.
    pub fn pool_max(&self) -> u32 {
        match self.pool() {
            Pool::Sqlite(p) => p.options().get_max_connections(),
            Pool::Postgres(p) => p.options().get_max_connections(),
        }
    }

    /// The pool's connections: (open, idle).
    pub fn pool_use(&self) -> (u32, usize) {
        match self.pool() {
            Pool::Sqlite(p) => (p.size(), p.num_idle()),
            Pool::Postgres(p) => (p.size(), p.num_idle()),
        }
    }

    /// Closes the pool (tests of a database gone).
    pub async fn close(&self) {
        match self.pool() {
            Pool::Sqlite(p) => p.close().await,
            Pool::Postgres(p) => p.close().await,
        }
        if let Some(locks) = self.locks() {
            locks.close().await;
        }
    }
}

/// Whether the database answers, within `within`, on the pool and on the hot connection,
/// and holds every migration this build knows: what `/readyz` says. `Err` says which is
/// wrong in words for anyone who asks (the public address answers it); the database's own
/// error goes to the log.
pub async fn ready(db: &Db, within: std::time::Duration) -> std::result::Result<(), String> {
    let answers = async {
        const APPLIED: &str = "SELECT version FROM _sqlx_migrations WHERE success";
        let applied: Vec<i64> = match db.pool() {
            Pool::Sqlite(p) => sqlx::query_scalar(APPLIED).fetch_all(p).await?,
            Pool::Postgres(p) => sqlx::query_scalar(APPLIED).fetch_all(p).await?,
        };
        // The connection turns use (on SQLite, not the pool's).
        let mut c = db.conn().await?;
        match c.on() {
            On::Sqlite(h) => {
                h.run(|c| Ok(c.query_row("SELECT 1", [], |_| Ok(()))?))
                    .await?
            }
            On::Postgres(pg) => {
                sqlx::query("SELECT 1").execute(pg).await?;
            }
        }
        Ok::<_, crate::Error>(applied)
    };
    let applied = match tokio::time::timeout(within, answers).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "not ready: the database does not answer");
            return Err("the database does not answer".into());
        }
        Err(_) => return Err(format!("the database did not answer within {within:?}")),
    };
    let missing = db
        .migrator()
        .iter()
        .filter(|m| !applied.contains(&m.version))
        .count();
    if missing > 0 {
        return Err(format!(
            "{missing} of the database's migrations are not applied; `hero migrate` applies them"
        ));
    }
    Ok(())
}

/// Opens (creating if missing) `<data_dir>/hero.db`. The data directory is created too.
pub async fn open(data_dir: &Path) -> Result<SqlitePool> {
    data_directory(data_dir)?;
    let path = data_dir.join("hero.db");
    private_database(&path)?;
    let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        // A log restarted after a checkpoint is cut back to this size (else it keeps the
        // size of its longest stretch between checkpoints).
        .pragma("journal_size_limit", "16777216")
        // No mmap: measured, it costs more than it saves here (the map is redone as the file
        // grows, with TLB shootdowns across cores).
        .busy_timeout(BUSY_FOR);
    // A connection to a local file does not go stale: no ping before each use (the ping is
    // a round trip to the connection's thread, as dear as the query it precedes).
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .test_before_acquire(false)
        .connect_with(opts)
        .await?;
    Ok(pool)
}

/// Creates the data directory if it is missing, private: it holds the database on SQLite,
/// and on either backend, unless the key comes from the environment, the master key, and
/// the workspaces. (An existing directory keeps the mode its owner gave it.)
pub fn data_directory(data_dir: &Path) -> Result<()> {
    let mut dir = std::fs::DirBuilder::new();
    dir.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut dir, 0o700);
    dir.create(data_dir).map_err(|e| {
        Error::Internal(format!(
            "cannot create data directory {}: {e}",
            data_dir.display()
        ))
    })
}

/// The database file, and its log and index beside it, readable by their owner alone,
/// whatever the umask and whoever may search the data directory (the sandbox's uid, under a
/// server run as root): made so before SQLite opens it, whose log and index files take the
/// database's mode when it makes them.
fn private_database(path: &Path) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let private =
        |e: std::io::Error| Error::Internal(format!("cannot make {} private: {e}", path.display()));
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(private)?;
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let p = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
        if p.exists() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                .map_err(private)?;
        }
    }
    Ok(())
}

/// A transaction on the pool that writes: it takes the write lock at once (`BEGIN
/// IMMEDIATE`, waiting its turn). A deferred one reads first and asks for the lock at its
/// first write; if another connection (the hot one, turn after turn) has committed since
/// its read, SQLite refuses it at once ("database is locked"), without waiting. (Every
/// write now runs on the hot connection; the store's tests still show why.)
#[cfg(test)]
pub(crate) async fn begin_write(
    pool: &SqlitePool,
) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
    Ok(pool.begin_with("BEGIN IMMEDIATE").await?)
}

/// Applies every pending migration.
pub async fn migrate(db: &Db) -> Result<()> {
    match db.pool() {
        Pool::Sqlite(p) => MIGRATOR.run(p).await?,
        Pool::Postgres(p) => MIGRATOR_POSTGRES.run(p).await?,
    }
    Ok(())
}

/// A column type every driver reads: what a row decoder may ask [`Columns`] for.
pub trait Column:
    rusqlite::types::FromSql
    + for<'r> sqlx::Decode<'r, sqlx::Sqlite>
    + sqlx::Type<sqlx::Sqlite>
    + for<'r> sqlx::Decode<'r, sqlx::Postgres>
    + sqlx::Type<sqlx::Postgres>
{
}

impl<T> Column for T where
    T: rusqlite::types::FromSql
        + for<'r> sqlx::Decode<'r, sqlx::Sqlite>
        + sqlx::Type<sqlx::Sqlite>
        + for<'r> sqlx::Decode<'r, sqlx::Postgres>
        + sqlx::Type<sqlx::Postgres>
{
}

/// A row as either connection hands it, read by column index: each row type's decoder is
/// written once, over this, for the pool and the hot connection alike.
pub trait Columns {
    fn get<T: Column>(&self, index: usize) -> Result<T>;
}

impl Columns for sqlx::sqlite::SqliteRow {
    fn get<T: Column>(&self, index: usize) -> Result<T> {
        Ok(sqlx::Row::try_get(self, index)?)
    }
}

impl Columns for sqlx::postgres::PgRow {
    fn get<T: Column>(&self, index: usize) -> Result<T> {
        Ok(sqlx::Row::try_get(self, index)?)
    }
}

impl Columns for rusqlite::Row<'_> {
    fn get<T: Column>(&self, index: usize) -> Result<T> {
        Ok(rusqlite::Row::get(self, index)?)
    }
}

/// Statements of the tests' own, on either backend (a row damaged on purpose, a column
/// read back): SQL in `$1` placeholders, each argument bound as what it is.
#[cfg(any(test, feature = "test-support"))]
pub mod testing {
    use super::{Db, Pool};
    use crate::Result;

    /// An argument of a test's statement.
    #[derive(Clone, Debug)]
    pub enum Arg {
        Int(i64),
        Text(String),
        Bytes(Vec<u8>),
    }

    macro_rules! bound {
        ($q:expr, $args:expr) => {{
            let mut q = $q;
            for a in $args {
                q = match a {
                    Arg::Int(i) => q.bind(*i),
                    Arg::Text(t) => q.bind(t.clone()),
                    Arg::Bytes(b) => q.bind(b.clone()),
                };
            }
            q
        }};
    }

    /// Runs a statement; answers the rows it changed.
    pub async fn execute(db: &Db, sql: &str, args: &[Arg]) -> Result<u64> {
        Ok(match db.pool() {
            Pool::Sqlite(p) => bound!(sqlx::query(sql), args)
                .execute(p)
                .await?
                .rows_affected(),
            Pool::Postgres(p) => bound!(sqlx::query(sql), args)
                .execute(p)
                .await?
                .rows_affected(),
        })
    }

    /// The first column of the first row, as an integer.
    pub async fn int(db: &Db, sql: &str, args: &[Arg]) -> Result<i64> {
        Ok(match db.pool() {
            Pool::Sqlite(p) => bound!(sqlx::query_scalar(sql), args).fetch_one(p).await?,
            Pool::Postgres(p) => bound!(sqlx::query_scalar(sql), args).fetch_one(p).await?,
        })
    }

    /// The first column of the first row, as bytes.
    pub async fn bytes(db: &Db, sql: &str, args: &[Arg]) -> Result<Vec<u8>> {
        Ok(match db.pool() {
            Pool::Sqlite(p) => bound!(sqlx::query_scalar(sql), args).fetch_one(p).await?,
            Pool::Postgres(p) => bound!(sqlx::query_scalar(sql), args).fetch_one(p).await?,
        })
    }

    /// A URL of a database of the test's own on the PostgreSQL `HERO_TEST_POSTGRES` names:
    /// a fresh schema, which its connections search first (`options=-c search_path=…`).
    pub async fn postgres_url() -> String {
        use sqlx::Connection;
        let url = std::env::var("HERO_TEST_POSTGRES").expect(
            "HERO_TEST_POSTGRES names no PostgreSQL: run scripts/postgres.sh start and set it to the URL it prints",
        );
        let schema = format!("t_{:016x}", rand::random::<u64>());
        let mut admin = sqlx::PgConnection::connect(&url)
            .await
            .expect("HERO_TEST_POSTGRES answers");
        sqlx::query(&format!("CREATE SCHEMA {schema}"))
            .execute(&mut admin)
            .await
            .expect("a schema of the test's own");
        let _ = admin.close().await;
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}options=-c%20search_path%3D{schema}")
    }

    /// A database of the test's own on the PostgreSQL `HERO_TEST_POSTGRES` names: a fresh
    /// schema, which the pool's connections search first, not migrated.
    pub async fn postgres_db() -> Db {
        let url = postgres_url().await;
        let opts = super::postgres_options(&url).expect("a URL of the test's");
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(8)
            .connect_with(opts)
            .await
            .expect("the test's pool");
        Db::postgres(pool)
    }

    /// The first column of the first row, as text.
    pub async fn text(db: &Db, sql: &str, args: &[Arg]) -> Result<String> {
        Ok(match db.pool() {
            Pool::Sqlite(p) => bound!(sqlx::query_scalar(sql), args).fetch_one(p).await?,
            Pool::Postgres(p) => bound!(sqlx::query_scalar(sql), args).fetch_one(p).await?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::{Keyring, SecretKey};

    #[tokio::test]
    async fn opens_in_wal_mode_and_checks_the_master_key() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("nested/data");
        let db = Db::open(&data).await.unwrap();
        let pool = db.sqlite_pool().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&data).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "the data directory is private");
        }
        migrate(&db).await.unwrap();
        let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(mode, "wal");
        let (limit,): (i64,) = sqlx::query_as("PRAGMA journal_size_limit")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(limit, 16 << 20);
        let key = SecretKey::random();
        check_master_key(&db, &Keyring::new(key.clone()))
            .await
            .unwrap();
        check_master_key(&db, &Keyring::new(key)).await.unwrap();
        let err = check_master_key(&db, &Keyring::new(SecretKey::random()))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("master key does not match"),
            "{err}"
        );
        // Migrating again is a no-op.
        migrate(&db).await.unwrap();
    }

    #[test]
    fn placeholders_are_checked_for_their_order() {
        assert!(numbered_in_order("SELECT $1, $2, $1, $3"));
        assert!(numbered_in_order("SELECT 1"));
        assert!(!numbered_in_order("SELECT $1, $3, $2"));
        assert!(!numbered_in_order("SELECT $2"));
    }

    /// The two backends' migrations leave the same tables, each with the same columns, each
    /// as nullable on one as on the other (their types are each backend's own).
    #[tokio::test]
    async fn both_schemas_have_the_same_tables_and_columns() {
        use std::collections::BTreeSet;
        let dir = tempfile::tempdir().unwrap();
        let lite = Db::open(dir.path()).await.unwrap();
        migrate(&lite).await.unwrap();
        let rows: Vec<(String, String, bool)> = sqlx::query_as(
            "SELECT m.name, c.name, c.\"notnull\" OR c.pk FROM sqlite_master m \
             JOIN pragma_table_info(m.name) c WHERE m.type = 'table' \
             AND m.name NOT LIKE 'sqlite_%' AND m.name <> '_sqlx_migrations'",
        )
        .fetch_all(lite.sqlite_pool().unwrap())
        .await
        .unwrap();
        let sqlite: BTreeSet<_> = rows.into_iter().collect();

        let pg = crate::test_support::postgres_db().await;
        migrate(&pg).await.unwrap();
        let Pool::Postgres(pool) = pg.pool() else {
            unreachable!("postgres_db is PostgreSQL")
        };
        let rows: Vec<(String, String, bool)> = sqlx::query_as(
            "SELECT table_name::text, column_name::text, is_nullable = 'NO' \
             FROM information_schema.columns WHERE table_schema = current_schema() \
             AND table_name <> '_sqlx_migrations'",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        let postgres: BTreeSet<_> = rows.into_iter().collect();
        assert!(sqlite.len() > 50, "the SQLite schema was read: {sqlite:?}");
        let only_sqlite: Vec<_> = sqlite.difference(&postgres).collect();
        let only_postgres: Vec<_> = postgres.difference(&sqlite).collect();
        assert!(
            only_sqlite.is_empty() && only_postgres.is_empty(),
            "only in SQLite: {only_sqlite:?}\nonly in PostgreSQL: {only_postgres:?}"
        );
    }

    /// The rebuild that rewrote the frames table's checks keeps every row, and the checks
    /// still refuse what they refused.
    #[test]
    fn the_frames_rebuild_keeps_rows_and_checks() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch("PRAGMA foreign_keys = ON").unwrap();
        let rebuild = 20261129000001;
        let run = |pick: &dyn Fn(i64) -> bool| {
            for m in MIGRATOR.iter().filter(|m| pick(m.version)) {
                c.execute_batch(&m.sql).unwrap();
            }
        };
        run(&|v| v < rebuild);
        c.execute_batch(
            "INSERT INTO users (id, username, password_hash, data_key, created_at, updated_at) VALUES (1, 'a', 'x', x'00', 't', 't');
             INSERT INTO sessions (id, user_id, name, created_at, updated_at) VALUES (1, 1, 's', 't', 't');
             INSERT INTO frames (id, session_id, seq, timestamp, type, author_type, payload, seal) VALUES ('f1', 1, 1, 't', 'message', 'user', x'01', 2);
             INSERT INTO frames (id, session_id, seq, parent_id, timestamp, type, author_type, payload) VALUES ('f2', 1, 2, 'f1', 't', 'compact', 'system', x'02');",
        )
        .unwrap();
        run(&|v| v >= rebuild);
        let rows: Vec<(String, i64, Option<String>, String, i64)> = c
            .prepare("SELECT id, seq, parent_id, type, seal FROM frames ORDER BY seq")
            .unwrap()
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            rows,
            [
                ("f1".into(), 1, None, "message".into(), 2),
                ("f2".into(), 2, Some("f1".into()), "compact".into(), 1)
            ]
        );
        let insert = |ty: &str, author: &str, seal: i64| {
            c.execute(
                "INSERT INTO frames (id, session_id, seq, timestamp, type, author_type, payload, seal) \
                 VALUES (?1, 1, (SELECT MAX(seq) + 1 FROM frames), 't', ?2, ?3, x'00', ?4)",
                rusqlite::params![format!("{ty}-{author}-{seal}"), ty, author, seal],
            )
        };
        for (ty, author, seal) in [
            ("bogus", "user", 2),
            ("result", "admin", 2),
            ("update", "agent", 3),
        ] {
            let e = insert(ty, author, seal).unwrap_err();
            assert!(e.to_string().contains("CHECK constraint failed"), "{e}");
        }
        for ty in ["message", "request", "result", "update", "compact"] {
            insert(ty, "agent", 2).unwrap();
        }
        // The indexes came back: a session's seq is still unique, and the partial ones exist.
        assert!(c.execute("INSERT INTO frames (id, session_id, seq, timestamp, type, author_type, payload) VALUES ('dup', 1, 1, 't', 'message', 'user', x'00')", []).is_err());
        let indexes: i64 = c
            .query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name IN ('frames_parent', 'frames_compacts')", [], |r| r.get(0))
            .unwrap();
        assert_eq!(indexes, 2);
    }
}
