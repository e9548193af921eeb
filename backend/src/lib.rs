//! Hero's domain layer: everything the JSON API and the Leptos server functions share.
//!
//! Layout, one module per concept:
//! - [`crypto`]: AES-256-GCM sealing, the master key and per-user data keys.
//! - [`store`]: the only module that touches the database: the pool, the hot connection,
//!   and one submodule per table with its SQL and its row type, decoded in one place.
//! - [`password`]: password rules and argon2id hashing (a leaf).
//! - [`tokens`]: signed, revocable sign-in tokens (a leaf).
//! - [`users`]: the user rows (list, password, disable), each with a wrapped data key.
//! - [`accounts`]: making an account: a user and the offline demo agent, in one transaction.
//! - [`auth`]: sign-in, the failed-login brake and the `AuthUser` every operation takes.
//! - [`sessions`]: the user's sessions, every query scoped by the user.
//! - [`agents`]: the user's AI backends; keys sealed, never returned.
//! - [`frames`]: the conversation log's storage (sealed payloads, per-session seq).
//! - [`egress`]: where outbound requests may go, and the one client that sends them.
//! - [`fuzz`]: the bodies of the backend's fuzz targets (egress URLs, API request bodies).
//! - [`providers`]: Anthropic, OpenAI(-compatible) and the scripted demo, as streams of deltas.
//! - [`history`]: the conversations turns were last given, kept decrypted between turns.
//! - [`permissions`]: each user's level for each function, over its default.
//! - [`sandbox`]: commands in a sandbox that fails closed (bubblewrap, rlimits, cgroups).
//! - [`functions`]: the function registry (`help`, `websearch`): specs, schemas, handlers.
//! - [`answers`]: answers to the questions in a reply (`ask`, `hml-prompt`), as frames.
//! - [`conditional`]: instructions given to the agent only when they apply (conditional
//!   abilities, `prompt_response_handler`).
//! - [`contain`]: text inside a tag of Hero's in what a model reads, made unable to close
//!   or open such a tag in any spelling (a leaf).
//! - [`context_files`]: an agent's context files (SOUL.md, USER.md, …): routing by agent
//!   type, seeding from templates, merging, sealed storage.
//! - [`prompt`]: the system prompt builder (sections, modes, the truncation pipeline).
//! - [`persona`]: what an agent is told: its prompt for a call, from its files and the session.
//! - [`summon`]: an agent's persona files written from a one-line description.
//! - [`act`]: acting on what a message asks for: detection, the permission gate, request
//!   and result frames, decisions, the follow-up reply.
//! - [`turn`]: one turn, from the user's message to the agent's frame; `turn::Registry`, the
//!   turns in flight (abort, shutdown, the watch over posters that stop reading).
//! - [`feed`]: one reader of a session's events: the resume algorithm behind `/events`
//!   and the WebSocket's `subscribe`.
//! - [`hub`]: live fan-out to subscribers, and the shutdown signal of live streams.
//! - [`in_flight`]: a reply in flight as far as it has come (what a late reader is sent).
//! - [`limits`]: per-user bounds and the permits that count what a user holds at once.
//! - [`drive`]: the hand-made async machinery: the poster-driven turn executor and the
//!   wake signals, with tests that drive their interleavings.
//! - `test_support` (feature `test-support`): the harness of tests and benchmarks.
//!
//! Nothing here knows about HTTP routing or Leptos; callers pass an authenticated
//! [`auth::AuthUser`], which only [`auth`] can make.

pub mod accounts;
pub mod act;
pub mod agents;
pub mod answers;
pub mod auth;
pub mod compact;
pub mod conditional;
pub mod contain;
pub mod context_files;
pub mod crypto;
pub mod drive;
pub mod egress;
pub mod error;
pub mod feed;
pub mod frames;
pub mod functions;
pub mod fuzz;
pub mod history;
pub mod hub;
pub mod in_flight;
pub mod limits;
pub mod password;
pub mod permissions;
pub mod persona;
pub mod prompt;
pub mod providers;
pub mod sandbox;
pub mod sessions;
pub mod store;
pub mod summon;
pub mod tokens;
pub mod turn;
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
    /// Timeouts and retries of provider calls.
    pub call_options: providers::CallOptions,
    /// How often a live stream (events, WebSocket) re-checks its sign-in.
    pub recheck_every: std::time::Duration,
    /// Where outbound requests may go besides the public internet (`HERO_EGRESS_ALLOW`).
    pub egress: egress::EgressPolicy,
    /// Password hashes run at once on the sign-in paths, at most ([`password::HashGate`]).
    pub hash_at_once: usize,
    /// How long a sign-in waits for its turn to hash before it is told the server is busy.
    pub hash_wait: std::time::Duration,
    /// Reverse proxies whose `X-Forwarded-For` names the client ([`auth::client_address`]).
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Per-user bounds: sessions, frames per session, turns and live streams at once.
    pub limits: limits::Limits,
    /// The search service behind `websearch`.
    pub search: functions::websearch::SearchSettings,
    /// Where each user's `bash` workspace lives (`DATA_DIR/workspaces`).
    pub workspaces: std::path::PathBuf,
    pub sandbox: sandbox::SandboxLimits,
    /// The longest a summoning call may take; past it, nothing is written.
    pub summon_timeout: std::time::Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            token_ttl: time::Duration::days(7),
            secure_cookie: false,
            call_options: providers::CallOptions::default(),
            recheck_every: auth::RECHECK_EVERY,
            egress: egress::EgressPolicy::default(),
            hash_at_once: password::cores(),
            hash_wait: std::time::Duration::from_secs(5),
            trusted_proxies: Vec::new(),
            limits: limits::Limits::default(),
            search: Default::default(),
            workspaces: std::env::temp_dir().join("hero-workspaces"),
            sandbox: Default::default(),
            summon_timeout: std::time::Duration::from_secs(90),
        }
    }
}

/// Shared by every request: one reference count to clone. The router clones its state for
/// every request, once per layer of the route's stack, from two cores at once: a struct of
/// seven counted pointers made each clone and drop seven contended atomic operations.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

/// What every request uses; reached through [`AppState`].
pub struct Services {
    pub db: sqlx::SqlitePool,
    /// The connection of sign-in checks and turns ([`store::HotDb`]).
    pub hot_db: store::HotDb,
    pub keys: Arc<crypto::Keyring>,
    pub throttle: Arc<auth::LoginThrottle>,
    /// At most so many password hashes at once on the sign-in paths.
    pub hash_gate: password::HashGate,
    pub settings: Arc<Settings>,
    pub hub: Arc<hub::Hub>,
    /// The turns in flight.
    pub turns: Arc<turn::Registry>,
    /// How many turns each user has in flight ([`limits::Limits::turns_per_user`]).
    pub turn_slots: limits::PerUser,
    /// Each session's conversation as its last turn left it ([`history`]).
    pub history: history::HistoryCache,
    /// The one client of every outbound request, under the egress policy: connection pools
    /// are shared, and nothing reaches the network another way.
    pub http: egress::Outbound,
    pub call_options: Arc<providers::CallOptions>,
    /// What agents may call ([`functions::Registry::builtin`]).
    pub functions: functions::Registry,
    /// One lock per message whose calls are being worked on ([`act`]).
    pub message_locks: act::MessageLocks,
    /// Where `bash` runs.
    pub sandbox: sandbox::Sandbox,
    /// Each user's reads of a log for its readers (the feeds' catch-up) take turns, so that
    /// one user's replays take [`feed::REPLAYS_PER_USER`] of the pool's connections at most.
    pub replays: limits::Turnstile,
}

impl AppState {
    /// Fails only if the outbound HTTP client cannot be built (no TLS roots, say): Hero
    /// does not fall back to a client outside the egress policy.
    pub fn new(db: sqlx::SqlitePool, keys: crypto::Keyring, settings: Settings) -> Result<Self> {
        Self::with_functions(db, keys, settings, functions::Registry::builtin())
    }

    /// [`AppState::new`] with a registry of one's own (tests add functions to it).
    pub fn with_functions(
        db: sqlx::SqlitePool,
        keys: crypto::Keyring,
        settings: Settings,
        functions: functions::Registry,
    ) -> Result<Self> {
        let http = settings.egress.client()?;
        Ok(AppState(Arc::new(Services {
            db,
            hot_db: Default::default(),
            keys: Arc::new(keys),
            throttle: Arc::new(auth::LoginThrottle::default()),
            hash_gate: password::HashGate::new(settings.hash_at_once, settings.hash_wait),
            hub: Arc::new(hub::Hub::default()),
            turns: Arc::new(turn::Registry::default()),
            turn_slots: Default::default(),
            history: Default::default(),
            http,
            call_options: Arc::new(settings.call_options.clone()),
            sandbox: sandbox::Sandbox::new(settings.workspaces.clone(), settings.sandbox.clone()),
            settings: Arc::new(settings),
            functions,
            message_locks: Default::default(),
            replays: limits::Turnstile::new(feed::REPLAYS_PER_USER),
        })))
    }
}

#[cfg(any(test, feature = "test-support"))]
impl AppState {
    /// The same database and keys with everything held in memory fresh: what a restart of
    /// the process leaves (tests of state that must survive one).
    pub fn restarted(&self) -> AppState {
        let settings = (*self.settings).clone();
        AppState(Arc::new(Services {
            db: self.db.clone(),
            hot_db: Default::default(),
            keys: self.keys.clone(),
            throttle: Arc::new(auth::LoginThrottle::default()),
            hash_gate: password::HashGate::new(settings.hash_at_once, settings.hash_wait),
            hub: Arc::new(hub::Hub::default()),
            turns: Arc::new(turn::Registry::default()),
            turn_slots: Default::default(),
            history: Default::default(),
            http: settings.egress.client().expect("client"),
            call_options: Arc::new(settings.call_options.clone()),
            sandbox: sandbox::Sandbox::new(settings.workspaces.clone(), settings.sandbox.clone()),
            settings: Arc::new(settings),
            functions: functions::Registry::builtin(),
            message_locks: Default::default(),
            replays: limits::Turnstile::new(feed::REPLAYS_PER_USER),
        }))
    }
}

impl AppState {
    /// The server shuts down: every live stream ends, every turn in flight stops and keeps
    /// what it has, and no new turn starts.
    pub fn shutdown(&self) {
        self.hub.close();
        self.turns.stop_all();
    }
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// Now, as the RFC 3339 text stored in `created_at` / `updated_at` columns.
pub(crate) fn now_text() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
