//! Hero's domain layer: everything the JSON API and the Leptos server functions share.
//!
//! Layout, one module per concept:
//! - [`crypto`]: AES-256-GCM sealing, the master key and per-user data keys.
//! - [`db`]: opening the SQLite store (WAL) and applying migrations.
//! - [`users`]: accounts (create, list, password, disable).
//! - [`auth`]: password checks, JWTs, revocation and the failed-login brake.
//! - [`sessions`]: the user's sessions, every query scoped by the user.
//!
//! Nothing here knows about HTTP routing or Leptos; callers pass an authenticated
//! [`auth::AuthUser`], which only [`auth`] can make.

pub mod auth;
pub mod crypto;
pub mod db;
pub mod error;
pub mod sessions;
pub mod users;

use std::sync::Arc;

pub use error::{Error, Result};

/// Settings the domain needs; the server fills them from flags, environment and file.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Lifetime of a sign-in token.
    pub token_ttl: time::Duration,
    /// Mark the auth cookie `Secure` (set when Hero is served over HTTPS).
    pub secure_cookie: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { token_ttl: time::Duration::days(7), secure_cookie: false }
    }
}

/// Shared by every request: cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub db: sqlx::SqlitePool,
    pub keys: Arc<crypto::Keyring>,
    pub throttle: Arc<auth::LoginThrottle>,
    pub settings: Arc<Settings>,
}

impl AppState {
    pub fn new(db: sqlx::SqlitePool, keys: crypto::Keyring, settings: Settings) -> Self {
        AppState {
            db,
            keys: Arc::new(keys),
            throttle: Arc::new(auth::LoginThrottle::default()),
            settings: Arc::new(settings),
        }
    }
}

/// Now, as the RFC 3339 text stored in `created_at` / `updated_at` columns.
pub(crate) fn now_text() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    /// A fresh data directory with a migrated database and a random master key.
    pub async fn state() -> (tempfile::TempDir, AppState) {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = db::open(dir.path()).await.expect("open db");
        db::migrate(&db).await.expect("migrate");
        let keys = crypto::Keyring::new(crypto::SecretKey::random());
        (dir, AppState::new(db, keys, Settings::default()))
    }

    /// Creates `name` (password "password-of-<name>") and signs them in.
    pub async fn signed_in(st: &AppState, name: &str) -> auth::AuthUser {
        let pw = format!("password-of-{name}");
        users::create(&st.db, &st.keys, name, &pw, false).await.expect("create user");
        auth::login(st, name, &pw).await.expect("login").user
    }
}
