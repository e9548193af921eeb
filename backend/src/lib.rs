//! Hero's domain layer: everything the JSON API and the Leptos server functions share.
//! The crate root is the composition root: [`AppState`] holds the services every folder's
//! code takes, and [`Settings`] what the server was started with.
//!
//! Folders by layer, each `mod.rs` saying what lives there and what it may use; a lower one
//! never names a higher one (the tidy test `backend_modules_form_no_cycle` checks the
//! modules' own `use crate::` paths):
//! - leaves: [`error`], [`crypto`] (sealing, keys), [`limits`] (per-user bounds and
//!   permits), [`contain`] (Hero's tags in what a model reads), [`drive`] (the hand-made
//!   async machinery: the poster-driven executor, wake signals, the stop signal),
//!   [`metrics`] (what the operator's `/metrics` counts), [`highlight`] (code blocks cut into
//!   classed tokens on the server).
//! - [`store`]: the only code that touches the database.
//! - [`execution`]: what reaches outside the process: [`execution::egress`],
//!   [`execution::sandbox`], the function registry and handlers, the permission levels.
//! - [`providers`]: Anthropic, OpenAI(-compatible) and the scripted demo, as streams of deltas.
//! - [`accounts`]: users, sign-in, passwords, tokens, making an account.
//! - [`agents`]: an agent and what it is told: persona, prompt, context files, summoning,
//!   conditional abilities.
//! - [`conversation`]: a session's log and what moves it: sessions, frames, the turn, acting
//!   on calls, answers, compaction, the feed, history, replies in flight, the hub.
//! - [`tasks`]: reference 004's tasks, per user: teams, tasks and their history.
//! - [`fuzz`]: the bodies of the backend's fuzz targets; `test_support` (feature
//!   `test-support`): the harness of tests and benchmarks.
//!
//! Nothing here knows about HTTP routing or Leptos; callers pass an authenticated
//! [`accounts::auth::AuthUser`], which only [`accounts::auth`] can make.

pub mod accounts;
pub mod agents;
pub mod contain;
pub mod conversation;
pub mod crypto;
pub mod drive;
pub mod error;
pub mod execution;
pub mod fuzz;
pub mod highlight;
pub mod limits;
pub mod memory;
pub mod metrics;
pub mod providers;
pub mod search;
pub mod skills;
pub mod store;
pub mod tasks;

use std::sync::Arc;

pub use error::{Error, Result};

/// Settings the domain needs; the server fills them from flags, environment and file.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Lifetime of a sign-in token.
    pub token_ttl: time::Duration,
    /// Mark the auth cookie `Secure` (set when Hero is served over HTTPS).
    pub secure_cookie: bool,
    /// The path Hero is served under behind a proxy (`/hero`), empty at the host's root:
    /// the sign-in cookie is sent only there.
    pub base_path: String,
    /// Timeouts and retries of provider calls.
    pub call_options: providers::CallOptions,
    /// How often a live stream (events, WebSocket) re-checks its sign-in.
    pub recheck_every: std::time::Duration,
    /// Where outbound requests may go besides the public internet (`HERO_EGRESS_ALLOW`).
    pub egress: execution::egress::EgressPolicy,
    /// Password hashes run at once on the sign-in paths, at most ([`accounts::password::HashGate`]).
    pub hash_at_once: usize,
    /// How long a sign-in waits for its turn to hash before it is told the server is busy.
    pub hash_wait: std::time::Duration,
    /// Reverse proxies whose `X-Forwarded-For` names the client ([`accounts::auth::client_address`]).
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Per-user bounds: sessions, frames per session, turns and live streams at once.
    pub limits: limits::Limits,
    /// The search service behind `websearch`.
    pub search: execution::functions::websearch::SearchSettings,
    /// Where each user's `bash` workspace lives (`DATA_DIR/workspaces`).
    pub workspaces: std::path::PathBuf,
    pub sandbox: execution::sandbox::SandboxLimits,
    /// The longest a summoning call may take; past it, nothing is written.
    pub summon_timeout: std::time::Duration,
    /// The longest a memory flush may take in all ([`conversation::flush`]).
    pub flush_timeout: std::time::Duration,
    /// Where administrators put skills for every user (`DATA_DIR/skills`); none: Hero's
    /// own and the users' alone.
    pub skills_dir: Option<std::path::PathBuf>,
    /// The bytes the vectors kept in memory may take (`--index-cache-mib`).
    pub index_cache_bytes: usize,
    /// The most skills read from one folder of skills (`--max-skills-per-root`).
    pub max_skills_per_root: usize,
    /// The most memory one user has, over their agents (`--max-memory-mib`).
    pub max_memory_bytes: usize,
    /// The embeddings endpoint that makes skill search hybrid ([`search::embed`]).
    pub embeddings: search::embed::Settings,
    /// Where administrators install plugins and their processes keep state, and how long
    /// those processes take ([`execution::plugins::host`]).
    pub plugins: execution::plugins::PluginSettings,
    /// The server's `[prices]`, over Hero's table ([`agents::spend`]).
    pub prices: Vec<agents::spend::PriceRule>,
    /// How long a user's MCP server waits for a call before it is stopped
    /// ([`execution::mcp::IDLE`]; tests make it short).
    pub mcp_idle: std::time::Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            token_ttl: time::Duration::days(7),
            secure_cookie: false,
            base_path: String::new(),
            call_options: providers::CallOptions::default(),
            recheck_every: accounts::auth::RECHECK_EVERY,
            egress: execution::egress::EgressPolicy::default(),
            hash_at_once: accounts::password::cores(),
            hash_wait: std::time::Duration::from_secs(5),
            trusted_proxies: Vec::new(),
            limits: limits::Limits::default(),
            search: Default::default(),
            workspaces: std::env::temp_dir().join("hero-workspaces"),
            sandbox: Default::default(),
            summon_timeout: std::time::Duration::from_secs(90),
            flush_timeout: conversation::flush::DEFAULT_TIMEOUT,
            skills_dir: None,
            embeddings: Default::default(),
            max_skills_per_root: skills::MAX_SKILLS_PER_ROOT,
            max_memory_bytes: memory::DEFAULT_MAX_BYTES_PER_USER,
            index_cache_bytes: search::cache::DEFAULT_BYTES,
            plugins: Default::default(),
            prices: Vec::new(),
            mcp_idle: execution::mcp::IDLE,
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
    /// The database ([`store::Db`]: the pool and the connection of sign-in checks and turns).
    pub db: store::Db,
    pub keys: Arc<crypto::Keyring>,
    pub throttle: Arc<accounts::auth::LoginThrottle>,
    /// At most so many password hashes at once on the sign-in paths.
    pub hash_gate: accounts::password::HashGate,
    pub settings: Arc<Settings>,
    pub hub: Arc<conversation::hub::Hub>,
    /// The turns in flight.
    pub turns: Arc<conversation::turn::Registry>,
    /// How many turns each user has in flight ([`limits::Limits::turns_per_user`]).
    pub turn_slots: limits::PerUser,
    /// How many messages each user's agents queued wait to be sent
    /// ([`limits::Limits::queued_per_user`], [`conversation::queue`]).
    pub queued: limits::PerUser,
    /// Each session's conversation as its last turn left it ([`history`]).
    pub history: conversation::history::HistoryCache,
    /// The one client of every outbound request, under the egress policy: connection pools
    /// are shared, and nothing reaches the network another way.
    pub http: execution::egress::Outbound,
    pub call_options: Arc<providers::CallOptions>,
    /// What agents may call ([`execution::functions::builtin::registry`], and the plugins'
    /// tools).
    pub functions: Arc<execution::functions::Registry>,
    /// One lock per message whose calls are being worked on ([`act`]).
    pub message_locks: conversation::act::MessageLocks,
    /// Where `bash` runs.
    pub sandbox: execution::sandbox::Sandbox,
    /// The plugins start-up found ([`execution::plugins`]).
    pub plugins: Arc<execution::plugins::Plugins>,
    /// Users' MCP servers running, and each user's chain as last built ([`execution::mcp`]).
    pub mcp: Arc<execution::mcp::Mcp>,
    /// Hero's and the administrator's skills, and where the users' are ([`skills`]).
    pub skills: Arc<skills::Library>,
    /// The vectors of texts and the memories' indexes, kept open ([`search::IndexCache`]).
    pub index_cache: search::IndexCache,
    /// Who may see the administrator's skills, as last read ([`skills::grants`]).
    pub skill_access: skills::grants::Access,
    /// Each user's reads of a log for its readers (the feeds' catch-up) take turns, so that
    /// one user's replays take [`conversation::feed::REPLAYS_PER_USER`] of the pool's connections at most.
    pub replays: limits::Turnstile,
    /// System prompts as last built ([`agents::persona::PromptCache`]).
    pub prompts: agents::persona::PromptCache,
    /// The memory flushes in progress, one per session at a time ([`conversation::flush`]).
    pub flushing: conversation::flush::Flushing,
    /// What the operator's `/metrics` reads ([`metrics`]).
    pub metrics: metrics::Metrics,
    /// This instance among the others on a PostgreSQL database, once it has joined them
    /// ([`conversation::cluster::join`]); unset on SQLite.
    pub instance: std::sync::OnceLock<conversation::cluster::Member>,
}

impl AppState {
    /// Fails only if the outbound HTTP client cannot be built (no TLS roots, say): Hero
    /// does not fall back to a client outside the egress policy. The plugins are read and
    /// their tools listed first ([`execution::plugins`]).
    pub async fn new(db: store::Db, keys: crypto::Keyring, settings: Settings) -> Result<Self> {
        Self::with_functions(
            db,
            keys,
            settings,
            execution::functions::builtin::registry(),
        )
        .await
    }

    /// [`AppState::new`] with a registry of one's own (tests add functions to it), to which
    /// the plugins' tools are added.
    pub async fn with_functions(
        db: store::Db,
        keys: crypto::Keyring,
        settings: Settings,
        mut functions: execution::functions::Registry,
    ) -> Result<Self> {
        let http = settings.egress.client()?;
        let sandbox =
            execution::sandbox::Sandbox::new(settings.workspaces.clone(), settings.sandbox.clone());
        let mut plugins = execution::plugins::Plugins::load(&settings.plugins, || {
            sandbox.layers().refused.clone()
        });
        plugins.discover(&sandbox).await;
        let skills = Arc::new(skills::Library::load(
            settings.skills_dir.as_deref(),
            &settings.workspaces,
            settings.max_skills_per_root,
        ));
        if let Err(why) = skills.watch() {
            tracing::warn!("the administrator's skills are read at start-up only: {why}");
        }
        execution::functions::plugin::register(&mut functions, &plugins);
        let (changed, relist) = tokio::sync::mpsc::channel(64);
        let st = AppState(Arc::new(Services {
            db,
            keys: Arc::new(keys),
            throttle: Arc::new(accounts::auth::LoginThrottle::default()),
            hash_gate: accounts::password::HashGate::new(settings.hash_at_once, settings.hash_wait),
            hub: Arc::new(conversation::hub::Hub::default()),
            turns: Arc::new(conversation::turn::Registry::default()),
            turn_slots: Default::default(),
            queued: Default::default(),
            history: Default::default(),
            http,
            call_options: Arc::new(settings.call_options.clone()),
            sandbox,
            plugins: Arc::new(plugins),
            mcp: Arc::new(execution::mcp::Mcp::new(settings.mcp_idle, Some(changed))),
            skills,
            skill_access: Default::default(),
            index_cache: search::IndexCache::new(settings.index_cache_bytes),
            settings: Arc::new(settings),
            functions: Arc::new(functions),
            message_locks: Default::default(),
            replays: limits::Turnstile::new(conversation::feed::REPLAYS_PER_USER),
            prompts: Default::default(),
            flushing: Default::default(),
            metrics: Default::default(),
            instance: Default::default(),
        }));
        skills::vectors::backfill(&st);
        execution::mcp::watch_changes(&st, relist);
        Ok(st)
    }
}

#[cfg(any(test, feature = "test-support"))]
impl AppState {
    /// The same database and keys with everything held in memory fresh: what a restart of
    /// the process leaves (tests of state that must survive one).
    pub fn restarted(&self) -> AppState {
        let settings = (*self.settings).clone();
        AppState(Arc::new(Services {
            db: self.db.restarted(),
            keys: self.keys.clone(),
            throttle: Arc::new(accounts::auth::LoginThrottle::default()),
            hash_gate: accounts::password::HashGate::new(settings.hash_at_once, settings.hash_wait),
            hub: Arc::new(conversation::hub::Hub::default()),
            turns: Arc::new(conversation::turn::Registry::default()),
            turn_slots: Default::default(),
            queued: Default::default(),
            history: Default::default(),
            http: settings.egress.client().expect("client"),
            call_options: Arc::new(settings.call_options.clone()),
            sandbox: execution::sandbox::Sandbox::new(
                settings.workspaces.clone(),
                settings.sandbox.clone(),
            ),
            plugins: self.plugins.clone(),
            mcp: Arc::new(execution::mcp::Mcp::new(settings.mcp_idle, None)),
            skills: self.skills.clone(),
            skill_access: Default::default(),
            index_cache: search::IndexCache::new(settings.index_cache_bytes),
            settings: Arc::new(settings),
            functions: self.functions.clone(),
            message_locks: Default::default(),
            replays: limits::Turnstile::new(conversation::feed::REPLAYS_PER_USER),
            prompts: Default::default(),
            flushing: Default::default(),
            metrics: Default::default(),
            instance: Default::default(),
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

impl AppState {
    /// A reference that does not keep the services alive (a task that should end with them).
    pub fn downgrade(&self) -> std::sync::Weak<Services> {
        Arc::downgrade(&self.0)
    }

    pub fn upgrade(weak: &std::sync::Weak<Services>) -> Option<AppState> {
        weak.upgrade().map(AppState)
    }
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// Now, in Unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Now, as the RFC 3339 text stored in `created_at` / `updated_at` columns.
pub(crate) fn now_text() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
