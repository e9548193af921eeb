//! A connection held by one task, on either backend: [`Conn`] (statements that commit one
//! by one) and [`Write`] (a write transaction, committed by [`Write::commit`], rolled back
//! if dropped before). On SQLite both are the hot connection ([`super::HotDb`]); on
//! PostgreSQL, a connection of the pool and a transaction on one. Store functions take
//! `&mut Conn` (a `&mut Write` is one too) and run their statements through [`Conn::on`].

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, Postgres};

use super::hot::HotConn;
use crate::{Error, Result};

/// A connection held by one task until it is dropped.
pub struct Conn<'a>(Held<'a>);

enum Held<'a> {
    Sqlite(HotConn<'a>),
    Postgres(PgHeld),
}

enum PgHeld {
    Pooled(PoolConnection<Postgres>),
    Tx(sqlx::Transaction<'static, Postgres>),
}

/// What a store function's statements run on.
pub(crate) enum On<'c, 'a> {
    Sqlite(&'c mut HotConn<'a>),
    Postgres(&'c mut PgConnection),
}

impl<'a> Conn<'a> {
    pub(crate) fn sqlite(c: HotConn<'a>) -> Self {
        Conn(Held::Sqlite(c))
    }

    pub(crate) fn postgres(c: PoolConnection<Postgres>) -> Self {
        Conn(Held::Postgres(PgHeld::Pooled(c)))
    }

    /// The connection, for a store function's statements.
    pub(crate) fn on(&mut self) -> On<'_, 'a> {
        match &mut self.0 {
            Held::Sqlite(h) => On::Sqlite(h),
            Held::Postgres(PgHeld::Pooled(c)) => On::Postgres(c),
            Held::Postgres(PgHeld::Tx(t)) => On::Postgres(t),
        }
    }
}

/// A write transaction held by one task: what must happen in one transaction (a frame's
/// `seq` read, then its insert; a check, then the write it allows) runs on it, then
/// [`Write::commit`]. Dropped before, it is rolled back (an error, a panic of its holder's).
pub struct Write<'a>(Conn<'a>);

impl<'a> Write<'a> {
    pub(crate) fn sqlite(c: HotConn<'a>) -> Self {
        Write(Conn::sqlite(c))
    }

    pub(crate) fn postgres(t: sqlx::Transaction<'static, Postgres>) -> Self {
        Write(Conn(Held::Postgres(PgHeld::Tx(t))))
    }

    /// Commits what was written.
    pub async fn commit(self) -> Result<()> {
        match self.0.0 {
            Held::Sqlite(h) => h.commit().await,
            Held::Postgres(PgHeld::Tx(t)) => Ok(t.commit().await?),
            Held::Postgres(PgHeld::Pooled(_)) => Err(Error::Internal(
                "a write was made outside a transaction".into(),
            )),
        }
    }
}

impl<'a> std::ops::Deref for Write<'a> {
    type Target = Conn<'a>;

    fn deref(&self) -> &Conn<'a> {
        &self.0
    }
}

impl<'a> std::ops::DerefMut for Write<'a> {
    fn deref_mut(&mut self) -> &mut Conn<'a> {
        &mut self.0
    }
}
