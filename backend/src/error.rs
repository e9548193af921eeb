//! The domain's error type. Each variant says what a caller may tell the person who asked;
//! [`Error::Internal`] and the storage variants carry detail for logs only.

use std::time::Duration;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Input that breaks a rule; the message says which, in words a person understands.
    #[error("{0}")]
    Invalid(String),
    /// The thing does not exist *for this user*: another user's ids look exactly like
    /// missing ones, so their existence does not leak.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A name that names nothing (a config key): the message says which names there are.
    #[error("{0}")]
    Missing(String),
    /// Missing, expired, revoked or malformed credentials.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// The user is signed in but may not do this (an administrator's action).
    #[error("{0}")]
    Forbidden(&'static str),
    /// The request clashes with what is stored (a taken username).
    #[error("{0}")]
    Conflict(String),
    /// Too many failed sign-ins for this account; try again after the delay.
    #[error("too many failed sign-in attempts; try again in {} seconds", retry_after.as_secs().max(1))]
    TooManyAttempts { retry_after: Duration },
    /// The server cannot take this now (it is shutting down); the same request may work later.
    #[error("{0}")]
    Unavailable(&'static str),
    /// The user holds as many of something as a user may (live streams, sessions, turns at
    /// once); the message says which and how many.
    #[error("{0}")]
    Limit(String),
    /// Past a bound on size or count; the message names the bound.
    #[error("{0}")]
    TooLarge(String),
    /// A kind of file (or of content) Hero does not take here; the message says what it takes.
    #[error("{0}")]
    Unsupported(String),
    /// Input of the right kind that cannot be read (a damaged PDF); the message says why.
    #[error("{0}")]
    Unreadable(String),
    #[error(transparent)]
    Crypto(#[from] crate::crypto::CryptoError),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// From the hot connection ([`crate::store::HotDb`]).
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// The HTTP status this error answers with.
    pub fn status(&self) -> http::StatusCode {
        use http::StatusCode as S;
        match self {
            Error::Invalid(_) => S::BAD_REQUEST,
            Error::NotFound(_) | Error::Missing(_) => S::NOT_FOUND,
            Error::Unauthorized(_) => S::UNAUTHORIZED,
            Error::Forbidden(_) => S::FORBIDDEN,
            Error::Conflict(_) => S::CONFLICT,
            Error::TooManyAttempts { .. } => S::TOO_MANY_REQUESTS,
            Error::Unavailable(_) => S::SERVICE_UNAVAILABLE,
            Error::Db(e) if unreachable(e) => S::SERVICE_UNAVAILABLE,
            Error::Limit(_) => S::TOO_MANY_REQUESTS,
            Error::TooLarge(_) => S::PAYLOAD_TOO_LARGE,
            Error::Unsupported(_) => S::UNSUPPORTED_MEDIA_TYPE,
            Error::Unreadable(_) => S::UNPROCESSABLE_ENTITY,
            Error::Crypto(_)
            | Error::Db(_)
            | Error::Sqlite(_)
            | Error::Migrate(_)
            | Error::Internal(_) => S::INTERNAL_SERVER_ERROR,
        }
    }

    /// What the client may read: internal detail is replaced by a generic sentence.
    pub fn public_message(&self) -> String {
        if let Error::Db(e) = self
            && unreachable(e)
        {
            return "the database cannot be reached just now; try again shortly".into();
        }
        if self.status().is_server_error() && !matches!(self, Error::Unavailable(_)) {
            "internal error; the server log has the details".to_string()
        } else {
            self.to_string()
        }
    }
}

/// A database that cannot be reached (PostgreSQL down or restarting, no connection free in
/// time): the request may be tried again, and nothing of it was written.
fn unreachable(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed
    ) || matches!(e, sqlx::Error::Database(d) if d.code().is_some_and(|c| c.starts_with("57P") || c.starts_with("08")))
}
