//! The `users` table: accounts, their password hashes and wrapped data keys.

use rusqlite::{OptionalExtension, params};

use super::{Columns, Conn, On, Pool};
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
    Ok(on_pool!(db, |p| sqlx::query_scalar(
        "SELECT COUNT(*) FROM users"
    )
    .fetch_one(p)
    .await?))
}

/// `WHERE` a username is the one given, whatever its case: SQLite's column compares so
/// (`NOCASE`); PostgreSQL's unique index is on its lower case.
fn same_name(pool: &Pool<'_>) -> &'static str {
    match pool {
        Pool::Sqlite(_) => "username = $1",
        Pool::Postgres(_) => "lower(username) = lower($1)",
    }
}

pub async fn name_taken(c: &mut Conn<'_>, username: &str) -> Result<bool> {
    let id: Option<i64> = match c.on() {
        On::Sqlite(h) => {
            h.run(|c| {
                Ok(
                    c.prepare_cached("SELECT id FROM users WHERE username = ?1")?
                        .query_row([username], |r| r.get(0))
                        .optional()?,
                )
            })
            .await?
        }
        On::Postgres(pg) => {
            sqlx::query_scalar("SELECT id FROM users WHERE lower(username) = lower($1)")
                .bind(username)
                .fetch_optional(pg)
                .await?
        }
    };
    Ok(id.is_some())
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
    // The data key is empty until set_data_key: a blob of no bytes, bound (a literal's
    // syntax differs between the two).
    const SQL: &str = "INSERT INTO users (username, password_hash, is_admin, data_key, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $5) RETURNING id";
    let empty: &[u8] = &[];
    match c.on() {
        On::Sqlite(h) => {
            h.run(|c| {
                Ok(c.prepare_cached(SQL)?.query_row(
                    params![username, password_hash, is_admin, empty, now],
                    |r| r.get(0),
                )?)
            })
            .await
        }
        On::Postgres(pg) => Ok(sqlx::query_scalar(SQL)
            .bind(username)
            .bind(password_hash)
            .bind(is_admin)
            .bind(empty)
            .bind(now)
            .fetch_one(pg)
            .await
            .map_err(username_taken)?),
    }
}

/// PostgreSQL's refusal of a second account whose name differs only in case: the same
/// conflict SQLite's check before the insert reports (two sign-ups at once).
fn username_taken(e: sqlx::Error) -> crate::Error {
    match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => {
            crate::Error::Conflict("that username is taken".into())
        }
        _ => e.into(),
    }
}

pub async fn set_data_key(c: &mut super::Write<'_>, id: i64, wrapped: &[u8]) -> Result<()> {
    const SQL: &str = "UPDATE users SET data_key = $1 WHERE id = $2";
    match c.on() {
        On::Sqlite(h) => {
            h.run(|c| {
                c.prepare_cached(SQL)?.execute(params![wrapped, id])?;
                Ok(())
            })
            .await
        }
        On::Postgres(pg) => {
            sqlx::query(SQL).bind(wrapped).bind(id).execute(pg).await?;
            Ok(())
        }
    }
}

pub async fn list(db: &super::Db) -> Result<Vec<UserRow>> {
    let sql = format!("SELECT {COLUMNS} FROM users ORDER BY id");
    pool_rows!(db, UserRow::read, &sql)
}

pub async fn find_by_name(db: &super::Db, username: &str) -> Result<Option<UserRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM users WHERE {}",
        same_name(&db.pool())
    );
    on_pool!(db, |p| sqlx::query(&sql)
        .bind(username)
        .fetch_optional(p)
        .await?
        .as_ref()
        .map(UserRow::read)
        .transpose())
}

/// What a sign-in checks: the account and its password hash.
pub struct Credentials {
    pub user: UserRow,
    pub password_hash: String,
}

pub async fn credentials(db: &super::Db, username: &str) -> Result<Option<Credentials>> {
    let sql = format!(
        "SELECT {COLUMNS}, password_hash FROM users WHERE {}",
        same_name(&db.pool())
    );
    on_pool!(db, |p| sqlx::query(&sql)
        .bind(username)
        .fetch_optional(p)
        .await?
        .as_ref()
        .map(|r| {
            Ok(Credentials {
                user: UserRow::read(r)?,
                password_hash: r.get(5)?,
            })
        })
        .transpose())
}

pub async fn password_hash(db: &super::Db, id: i64) -> Result<Option<String>> {
    Ok(on_pool!(db, |p| sqlx::query_scalar(
        "SELECT password_hash FROM users WHERE id = $1"
    )
    .bind(id)
    .fetch_optional(p)
    .await?))
}

/// Sets the password hash; whether the user exists.
pub async fn set_password_hash(
    c: &mut super::Write<'_>,
    id: i64,
    hash: &str,
    now: &str,
) -> Result<bool> {
    let sql = "UPDATE users SET password_hash = $1, updated_at = $2 WHERE id = $3";
    let n: u64 = execute!(c, sql, hash, now, id)?;
    Ok(n > 0)
}

/// Disables or re-enables the account; whether the user exists.
pub async fn set_disabled(
    c: &mut super::Write<'_>,
    id: i64,
    disabled: bool,
    now: &str,
) -> Result<bool> {
    let sql = "UPDATE users SET disabled = $1, updated_at = $2 WHERE id = $3";
    let n: u64 = execute!(c, sql, disabled, now, id)?;
    Ok(n > 0)
}

/// The user's name.
pub async fn name_of(c: &mut Conn<'_>, id: i64) -> Result<Option<String>> {
    scalar!(c, String, "SELECT username FROM users WHERE id = $1", id)
}

/// The user's data key as stored, wrapped by the master key.
pub async fn wrapped_data_key(db: &super::Db, id: i64) -> Result<Option<Vec<u8>>> {
    Ok(on_pool!(db, |p| sqlx::query_scalar(
        "SELECT data_key FROM users WHERE id = $1"
    )
    .bind(id)
    .fetch_optional(p)
    .await?))
}

/// Makes the writes of user `id`'s in this transaction wait for any other's (a count, then
/// the session it allows): on PostgreSQL the user's row is locked; SQLite has one writer at
/// a time already.
pub async fn lock(c: &mut super::Write<'_>, id: i64) -> Result<()> {
    if let On::Postgres(pg) = c.on() {
        sqlx::query("SELECT 1 FROM users WHERE id = $1 FOR UPDATE")
            .bind(id)
            .execute(pg)
            .await?;
    }
    Ok(())
}

/// Makes or unmakes an administrator; whether the user exists.
pub async fn set_admin(
    c: &mut super::Write<'_>,
    id: i64,
    is_admin: bool,
    now: &str,
) -> Result<bool> {
    let sql = "UPDATE users SET is_admin = $1, updated_at = $2 WHERE id = $3";
    let n: u64 = execute!(c, sql, is_admin, now, id)?;
    Ok(n > 0)
}

/// The user `id` as listed, inside a transaction.
pub async fn by_id(c: &mut Conn<'_>, id: i64) -> Result<Option<UserRow>> {
    let sql = format!("SELECT {COLUMNS} FROM users WHERE id = $1");
    row!(c, UserRow::read, &sql, id)
}

/// How many enabled administrators there are. On PostgreSQL their rows are locked for the
/// rest of the transaction, so two changes that each leave one cannot together leave none.
pub async fn enabled_admins(c: &mut super::Write<'_>) -> Result<i64> {
    if let On::Postgres(pg) = c.on() {
        sqlx::query("SELECT id FROM users WHERE is_admin AND NOT disabled FOR UPDATE")
            .execute(pg)
            .await?;
    }
    scalar!(
        c,
        i64,
        "SELECT COUNT(*) FROM users WHERE is_admin AND NOT disabled"
    )
    .map(|n| n.unwrap_or(0))
}

/// What an administrator sees of one account's use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub sessions: i64,
    pub agents: i64,
    /// The newest change of any of their sessions.
    pub last_active: Option<String>,
    pub cost_micros: i64,
    pub calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
}

/// Every account with its use, by id.
pub async fn list_with_usage(db: &super::Db) -> Result<Vec<(UserRow, Usage)>> {
    let sql = "SELECT u.id, u.username, u.is_admin, u.disabled, u.created_at, \
         (SELECT COUNT(*) FROM sessions s WHERE s.user_id = u.id), \
         (SELECT COUNT(*) FROM agents a WHERE a.user_id = u.id AND a.deleted_at IS NULL), \
         (SELECT MAX(s.updated_at) FROM sessions s WHERE s.user_id = u.id), \
         COALESCE(t.cost_micros, 0), COALESCE(t.calls, 0), \
         COALESCE(t.input_tokens, 0), COALESCE(t.output_tokens, 0) \
         FROM users u LEFT JOIN spend_totals t ON t.user_id = u.id AND t.scope = 'global' \
         ORDER BY u.id";
    pool_rows!(db, read_with_usage, sql)
}

fn read_with_usage(r: &impl Columns) -> Result<(UserRow, Usage)> {
    Ok((
        UserRow::read(r)?,
        Usage {
            sessions: r.get(5)?,
            agents: r.get(6)?,
            last_active: r.get(7)?,
            cost_micros: r.get(8)?,
            calls: r.get(9)?,
            input_tokens: r.get(10)?,
            output_tokens: r.get(11)?,
        },
    ))
}
