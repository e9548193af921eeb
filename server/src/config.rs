//! Settings, each declared once: one field of [`ConfigArgs`] gives its flag, its `HERO_*`
//! environment variable, its TOML key (the field's name), its default and its help. The
//! first that gives a value wins: a flag, then the variable, then the TOML file, then the
//! default. Flags and variables are read by clap; the file is read by [`layered`], which
//! hands clap each key the flag and the variable left unset, as the flag it stands for,
//! so the file's values pass the same parsing. [`ConfigArgs::resolve`] checks what clap
//! cannot and makes the settings in force ([`Config`]). A secret ([`Secret`]) never prints.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::parser::ValueSource;
use hero_backend::execution::egress::EgressPolicy;

/// A secret setting (the master key, the search API key): it never prints, and nothing
/// serialises it.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<hidden>")
    }
}

/// How log lines are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// For people: one line per event, its fields after it.
    Text,
    /// For log collectors: one JSON object per line.
    Json,
}

/// Every setting. Keep README's settings table in step (a test compares them).
#[derive(clap::Args, Clone, Debug)]
pub struct ConfigArgs {
    /// Address and port to serve on
    #[arg(
        long,
        env = "HERO_ADDR",
        global = true,
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:3000"
    )]
    pub addr: SocketAddr,

    /// Directory for the database and the master key file; created if missing
    #[arg(
        long,
        env = "HERO_DATA_DIR",
        global = true,
        value_name = "DIR",
        default_value = "./data"
    )]
    pub data_dir: PathBuf,

    /// Master key (64 hex digits or base64 of 32 bytes) that wraps every user's data key.
    /// Prefer the environment variable to the flag (flags show in `ps`). When unset, the key
    /// is read from DATA_DIR/master.key, which is created (mode 0600) on first run.
    #[arg(
        long,
        env = "HERO_MASTER_KEY",
        hide_env_values = true,
        global = true,
        value_name = "KEY"
    )]
    pub master_key: Option<Secret>,

    /// PostgreSQL 15 or later to keep everything in (postgres://user:password@host:5432/db),
    /// instead of DATA_DIR/hero.db; it holds what SQLite would, sealed the same way. Prefer
    /// the environment variable to the flag (flags show in `ps`) [default: DATA_DIR/hero.db]
    #[arg(
        long,
        env = "HERO_DATABASE_URL",
        hide_env_values = true,
        global = true,
        value_name = "URL"
    )]
    pub database_url: Option<Secret>,

    /// TOML file with any of these settings (keys as the flags, with '_' for '-')
    /// [default: ./hero.toml when it exists]
    #[arg(long, env = "HERO_CONFIG", global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// How long a sign-in lasts, in hours
    #[arg(long, env = "HERO_TOKEN_TTL_HOURS", global = true, value_name = "HOURS", default_value_t = 24 * 7)]
    pub token_ttl_hours: u32,

    /// Mark the sign-in cookie Secure; set this when Hero is served over HTTPS [default: true when public_url is https, else false]
    #[arg(long, env = "HERO_SECURE_COOKIE", global = true, value_name = "BOOL")]
    pub secure_cookie: Option<bool>,

    /// Directory of the built site (wasm, JS, CSS), for development [default: the site inside
    /// the binary (`hero embed-site`), else ../site beside the binary when it exists, else
    /// target/site]
    #[arg(long, env = "HERO_SITE_ROOT", global = true, value_name = "DIR")]
    pub site_root: Option<PathBuf>,

    /// Log filter, in tracing's env-filter syntax
    #[arg(
        long,
        env = "HERO_LOG",
        global = true,
        value_name = "FILTER",
        default_value = "info"
    )]
    pub log: String,

    /// How log lines are written: text (for people) or json (one object a line, for a log
    /// collector)
    #[arg(
        long,
        env = "HERO_LOG_FORMAT",
        global = true,
        value_name = "FORMAT",
        value_enum,
        default_value_t = LogFormat::Text
    )]
    pub log_format: LogFormat,

    /// Where the operator's tools reach `/metrics` (Prometheus text) and the health checks,
    /// as HOST:PORT; an address of its own, never the public one [default: not served]
    #[arg(
        long,
        env = "HERO_METRICS_ADDR",
        global = true,
        value_name = "HOST:PORT"
    )]
    pub metrics_addr: Option<SocketAddr>,

    /// On SIGTERM or Ctrl-C, how long replies in flight get to store what they have before
    /// the process exits anyway, in seconds
    #[arg(
        long,
        env = "HERO_DRAIN_SECS",
        global = true,
        value_name = "SECONDS",
        default_value_t = 10
    )]
    pub drain_secs: u64,

    /// The URL people reach Hero by (https://hero.example.com); requests naming another host
    /// are refused. Unset: any host, or only localhost when serving on a loopback address
    #[arg(long, env = "HERO_PUBLIC_URL", global = true, value_name = "URL")]
    pub public_url: Option<String>,

    /// The path Hero is served under behind a reverse proxy (/hero): its pages, files, API,
    /// sockets and sign-in cookie live there, whether the proxy strips the prefix or passes
    /// it on [default: the host's root]
    #[arg(long, env = "HERO_BASE_PATH", global = true, value_name = "PATH")]
    pub base_path: Option<String>,

    /// Non-public addresses agents may reach, as comma-separated HOST:PORT (for example
    /// 127.0.0.1:11434 for Ollama on this machine); every other loopback, private,
    /// link-local or metadata address is refused [default: none]
    #[arg(
        long,
        env = "HERO_EGRESS_ALLOW",
        global = true,
        value_name = "HOST:PORT,..."
    )]
    pub egress_allow: Option<String>,

    /// Model prices over Hero's table, USD per million tokens, as
    /// PROVIDER/MODEL-PREFIX=INPUT:OUTPUT[:CACHE_READ[:CACHE_WRITE]] separated by ';' (in
    /// TOML, a [prices] table of {input, output, cache_read, cache_write}) [default: none]
    #[arg(long, env = "HERO_PRICES", global = true, value_name = "RULES")]
    pub prices: Option<String>,

    /// Reverse proxies in front of Hero, as comma-separated IP addresses: for requests from
    /// them, the client is the address they name in X-Forwarded-For [default: none]
    #[arg(
        long,
        env = "HERO_TRUSTED_PROXIES",
        global = true,
        value_name = "IP,..."
    )]
    pub trusted_proxies: Option<String>,

    /// How many password checks run at once; more sign-ins wait up to 5 seconds, then get
    /// 503 [default: the number of cores]
    #[arg(long, env = "HERO_HASH_AT_ONCE", global = true, value_name = "N")]
    pub hash_at_once: Option<usize>,

    /// Sessions one user may have
    #[arg(long, env = "HERO_MAX_SESSIONS", global = true, value_name = "N", default_value_t = hero_backend::limits::Limits::default().sessions_per_user)]
    pub max_sessions: usize,

    /// Frames one session may hold (a message is one)
    #[arg(long, env = "HERO_MAX_FRAMES_PER_SESSION", global = true, value_name = "N", default_value_t = hero_backend::limits::Limits::default().frames_per_session)]
    pub max_frames_per_session: i64,

    /// Replies one user may have in flight at once
    #[arg(long, env = "HERO_MAX_TURNS", global = true, value_name = "N", default_value_t = hero_backend::limits::Limits::default().turns_per_user)]
    pub max_turns: usize,

    /// Event streams and WebSockets one user may hold open at once
    #[arg(long, env = "HERO_MAX_LIVE_STREAMS", global = true, value_name = "N", default_value_t = hero_backend::limits::Limits::default().live_streams_per_user)]
    pub max_live_streams: usize,

    /// Rounds of calls and follow-up replies one user message may set going
    #[arg(long, env = "HERO_MAX_ROUNDS", global = true, value_name = "N", default_value_t = hero_backend::limits::Limits::default().rounds_per_message)]
    pub max_rounds: usize,

    /// The search service of `websearch`: a SearXNG instance's URL, or Brave's API URL
    #[arg(long, env = "HERO_SEARCH_URL", global = true, value_name = "URL")]
    pub search_url: Option<String>,

    /// Which search service `search_url` is: searxng or brave
    #[arg(
        long,
        env = "HERO_SEARCH_BACKEND",
        global = true,
        value_name = "NAME",
        default_value = "searxng"
    )]
    pub search_backend: String,

    /// The search service's API key (Brave's subscription token)
    #[arg(
        long,
        env = "HERO_SEARCH_API_KEY",
        global = true,
        value_name = "KEY",
        hide_env_values = true
    )]
    pub search_api_key: Option<Secret>,

    /// Let `websearch` read pages on the hosts `egress_allow` names (an intranet)
    #[arg(long, env = "HERO_SEARCH_PAGES_ALLOWED", global = true, value_name = "BOOL", default_value_t = false, action = clap::ArgAction::Set)]
    pub search_pages_allowed: bool,

    /// The longest a `bash` command may run, in seconds (its own timeout is capped to it)
    #[arg(long, env = "HERO_BASH_MAX_TIMEOUT", global = true, value_name = "SECS", default_value_t = hero_backend::execution::sandbox::SandboxLimits::default().max_timeout.as_secs())]
    pub bash_max_timeout: u64,

    /// The most each user's `bash` workspace may hold on disk, in MiB: a command that
    /// reaches it is ended, and none runs until the workspace is back under it
    #[arg(long, env = "HERO_WORKSPACE_QUOTA_MIB", global = true, value_name = "MIB", default_value_t = hero_backend::execution::sandbox::SandboxLimits::default().quota_bytes >> 20)]
    pub workspace_quota_mib: u64,

    /// The host uid (and gid) `bash`'s sandbox runs as when Hero runs as root; never 0
    #[arg(long, env = "HERO_SANDBOX_UID", global = true, value_name = "UID", default_value_t = hero_backend::execution::sandbox::NOBODY)]
    pub sandbox_uid: u32,

    /// The administrator's skills, a folder per skill, for every user [default:
    /// DATA_DIR/skills]
    #[arg(long, env = "HERO_SKILLS_DIR", global = true, value_name = "DIR")]
    pub skills_dir: Option<PathBuf>,

    /// The most skills read from one folder of skills (a user's, the administrator's);
    /// past them, the first by name
    #[arg(long, env = "HERO_MAX_SKILLS_PER_ROOT", global = true, value_name = "N", default_value_t = hero_backend::skills::MAX_SKILLS_PER_ROOT)]
    pub max_skills_per_root: usize,

    /// The memory the vectors of skills and memory, and the memories' indexes, kept open may
    /// take
    #[arg(long, env = "HERO_INDEX_CACHE_MIB", global = true, value_name = "MIB", default_value_t = hero_backend::search::cache::DEFAULT_BYTES >> 20)]
    pub index_cache_mib: usize,

    /// The longest an agent's memory flush before a summary may take, in seconds, over its
    /// (at most five) calls; past it, the summary goes on
    #[arg(long, env = "HERO_FLUSH_TIMEOUT_SECS", global = true, value_name = "SECS", default_value_t = hero_backend::conversation::flush::DEFAULT_TIMEOUT.as_secs())]
    pub flush_timeout_secs: u64,

    /// The most memory (agents' MEMORY.md and memory/*.md) one user may have, over their
    /// agents
    #[arg(long, env = "HERO_MAX_MEMORY_MIB", global = true, value_name = "MIB", default_value_t = hero_backend::memory::DEFAULT_MAX_BYTES_PER_USER >> 20)]
    pub max_memory_mib: usize,

    /// The embeddings model that makes skill search hybrid (BM25 and vectors); unset, BM25
    /// alone
    #[arg(
        long,
        env = "HERO_EMBEDDINGS_MODEL",
        global = true,
        value_name = "MODEL"
    )]
    pub embeddings_model: Option<String>,

    /// One OpenAI-compatible endpoint (`…/v1`) every embedding is asked of; unset, an
    /// agent speaking OpenAI's API embeds through its own base URL and key
    #[arg(long, env = "HERO_EMBEDDINGS_URL", global = true, value_name = "URL")]
    pub embeddings_url: Option<String>,

    /// The key of `--embeddings-url`
    #[arg(
        long,
        env = "HERO_EMBEDDINGS_API_KEY",
        global = true,
        value_name = "KEY",
        hide_env_values = true
    )]
    pub embeddings_api_key: Option<String>,
}

/// The command line `argv` with the TOML file's settings added as the flags they stand for,
/// for each setting neither a flag nor its variable gave (what clap then parses whole).
/// The file is `--config` (or `HERO_CONFIG`), else `./hero.toml` if it exists. A key that
/// is no setting, or a value that is no string, number, boolean or list of them, is an error
/// naming the file. A command line clap refuses is returned as it is, for clap to say why.
pub fn layered(cmd: &clap::Command, argv: Vec<OsString>) -> anyhow::Result<Vec<OsString>> {
    let Ok(m) = cmd.clone().try_get_matches_from(&argv) else {
        return Ok(argv);
    };
    // Global settings may be given after a subcommand: their source is looked for at every
    // level.
    let mut levels = vec![&m];
    while let Some((_, sub)) = levels.last().and_then(|l| l.subcommand()) {
        levels.push(sub);
    }
    let given = |id: &str| {
        levels.iter().any(|l| {
            matches!(
                l.try_get_raw(id).ok().flatten().and(l.value_source(id)),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        })
    };
    let path = levels
        .iter()
        .find_map(|l| l.try_get_one::<PathBuf>("config").ok().flatten().cloned())
        .or_else(|| Some(PathBuf::from("hero.toml")).filter(|p| p.exists()));
    let Some(path) = path else {
        return Ok(argv);
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read settings file {}", path.display()))?;
    let table: toml::Table = toml::from_str(&text)
        .with_context(|| format!("settings file {} is not valid", path.display()))?;
    let mut flags = Vec::new();
    for (key, value) in table {
        let bad =
            |why: String| anyhow::anyhow!("settings file {} is not valid: {why}", path.display());
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id().as_str() == key && key != "config")
            .ok_or_else(|| bad(format!("unknown setting `{key}`")))?;
        if given(&key) {
            continue;
        }
        let scalar = |v: &toml::Value| match v {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                Ok(v.to_string())
            }
            _ => Err(bad(format!(
                "`{key}` must be a string, a number or a boolean"
            ))),
        };
        let text = match &value {
            // `[prices]`: each model's price as the flag writes it.
            toml::Value::Table(t) if key == "prices" => {
                let mut rules = Vec::new();
                for (model, price) in t {
                    let n = |k: &str| {
                        price
                            .get(k)
                            .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
                            .unwrap_or(0.0)
                    };
                    if !price.is_table() {
                        return Err(bad(format!(
                            "`prices.{model}` must be a table of input, output, cache_read, cache_write"
                        )));
                    }
                    rules.push(format!(
                        "{model}={}:{}:{}:{}",
                        n("input"),
                        n("output"),
                        n("cache_read"),
                        n("cache_write")
                    ));
                }
                rules.join(";")
            }
            toml::Value::Array(items) => items
                .iter()
                .map(scalar)
                .collect::<anyhow::Result<Vec<_>>>()?
                .join(","),
            v => scalar(v)?,
        };
        let long = arg.get_long().unwrap_or(key.as_str());
        flags.push(OsString::from(format!("--{long}={text}")));
    }
    let mut out = argv;
    let at = out.len().min(1);
    out.splice(at..at, flags);
    Ok(out)
}

/// The settings in force. Its `Debug` hides the secrets.
#[derive(Clone, Debug)]
pub struct Config {
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    pub master_key: Option<Secret>,
    /// PostgreSQL's URL, checked; unset, SQLite in the data directory.
    pub database_url: Option<Secret>,
    pub token_ttl_hours: u32,
    pub secure_cookie: bool,
    /// The site's directory when one is set; unset, the site inside the binary, else
    /// [`default_site_root`].
    pub site_root: Option<PathBuf>,
    pub log: String,
    pub log_format: LogFormat,
    /// Where `/metrics` is served, if anywhere (never the public address).
    pub metrics_addr: Option<SocketAddr>,
    pub drain: std::time::Duration,
    /// Where people reach Hero, checked: an http(s) URL with a host and nothing after it.
    pub public_url: Option<axum::http::Uri>,
    /// The path Hero is served under (`/hero`), checked; empty at the host's root.
    pub base_path: String,
    pub egress: hero_backend::execution::egress::EgressPolicy,
    pub trusted_proxies: Vec<std::net::IpAddr>,
    pub hash_at_once: usize,
    pub limits: hero_backend::limits::Limits,
    pub search: hero_backend::execution::functions::websearch::SearchSettings,
    pub bash_max_timeout: std::time::Duration,
    pub workspace_quota_mib: u64,
    pub sandbox_uid: u32,
    /// Where the administrator's skills are; unset, `DATA_DIR/skills`.
    pub skills_dir: Option<PathBuf>,
    pub embeddings: hero_backend::search::embed::Settings,
    pub max_skills_per_root: usize,
    pub index_cache_mib: usize,
    pub max_memory_mib: usize,
    pub flush_timeout: std::time::Duration,
    pub prices: Vec<hero_backend::agents::spend::PriceRule>,
}

impl ConfigArgs {
    /// Checks what clap cannot (bounds, URLs, lists) and makes the settings in force.
    pub fn resolve(self) -> anyhow::Result<Config> {
        let at_least_one = |v: u64, name: &str| {
            if v == 0 {
                bail!("{name} must be at least 1")
            }
            Ok(v)
        };
        at_least_one(self.token_ttl_hours.into(), "token_ttl_hours")?;
        let egress = match &self.egress_allow {
            Some(list) => EgressPolicy::parse_list(list),
            None => Ok(EgressPolicy::default()),
        }
        .context("egress_allow (HERO_EGRESS_ALLOW) is not valid")?;
        let public_url = self
            .public_url
            .as_deref()
            .map(parse_public_url)
            .transpose()?;
        let base_path = parse_base_path(self.base_path.as_deref().unwrap_or_default())?;
        let database_url = self
            .database_url
            .filter(|u| !u.expose().trim().is_empty())
            .map(|u| {
                hero_backend::store::postgres_options(u.expose().trim())
                    .map(|_| Secret(u.expose().trim().to_owned()))
            })
            .transpose()?;
        let trusted_proxies = self
            .trusted_proxies
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| {
                a.parse().with_context(|| {
                    format!("trusted_proxies (HERO_TRUSTED_PROXIES): {a:?} is not an IP address")
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let limits = hero_backend::limits::Limits {
            sessions_per_user: at_least_one(self.max_sessions as u64, "max_sessions")? as usize,
            frames_per_session: at_least_one(
                self.max_frames_per_session.max(0) as u64,
                "max_frames_per_session",
            )? as i64,
            turns_per_user: at_least_one(self.max_turns as u64, "max_turns")? as usize,
            live_streams_per_user: at_least_one(self.max_live_streams as u64, "max_live_streams")?
                as usize,
            rounds_per_message: at_least_one(self.max_rounds as u64, "max_rounds")? as usize,
            ..hero_backend::limits::Limits::default()
        };
        let search = {
            use hero_backend::execution::functions::websearch::{Backend, SearchSettings};
            let b = self.search_backend.trim();
            let backend = Backend::parse(b).with_context(|| {
                format!("search_backend (HERO_SEARCH_BACKEND) {b:?} is not searxng or brave")
            })?;
            let url = self.search_url.filter(|u| !u.trim().is_empty());
            if let Some(u) = &url {
                hero_backend::execution::egress::BaseUrl::parse(u)
                    .map_err(|e| anyhow::anyhow!("search_url (HERO_SEARCH_URL) {u:?}: {e}"))?;
            }
            SearchSettings {
                backend,
                url,
                api_key: self.search_api_key.map(|k| k.expose().to_owned()),
                pages_allowed: self.search_pages_allowed,
            }
        };
        at_least_one(self.bash_max_timeout, "bash_max_timeout")?;
        at_least_one(self.workspace_quota_mib, "workspace_quota_mib")?;
        if self.workspace_quota_mib > 1 << 30 {
            bail!(
                "workspace_quota_mib is past any disk: {}",
                self.workspace_quota_mib
            );
        }
        if self.sandbox_uid == 0 {
            bail!(
                "sandbox_uid must not be 0: the sandbox never runs as root (the default is 65534, nobody)"
            );
        }
        // The same port on overlapping addresses (0.0.0.0 holds every one): the metrics
        // would share the public address. Port 0 is a free port each, never the same.
        let overlap = |m: SocketAddr, a: SocketAddr| {
            m.port() != 0
                && m.port() == a.port()
                && (m.ip() == a.ip() || m.ip().is_unspecified() || a.ip().is_unspecified())
        };
        if self.metrics_addr.is_some_and(|m| overlap(m, self.addr)) {
            bail!(
                "metrics_addr must not be addr's port on the same address: the metrics are never served on the public address"
            );
        }
        let hash_at_once = match self.hash_at_once {
            Some(0) => bail!("hash_at_once must be at least 1"),
            Some(n) => n,
            None => hero_backend::accounts::password::cores(),
        };
        Ok(Config {
            addr: self.addr,
            data_dir: self.data_dir,
            master_key: self.master_key,
            database_url,
            token_ttl_hours: self.token_ttl_hours,
            // Unset: Secure when people reach Hero over HTTPS.
            secure_cookie: self.secure_cookie.unwrap_or_else(|| {
                public_url.as_ref().and_then(|u| u.scheme_str()) == Some("https")
            }),
            site_root: self.site_root,
            log: self.log,
            log_format: self.log_format,
            metrics_addr: self.metrics_addr,
            drain: std::time::Duration::from_secs(self.drain_secs),
            public_url,
            base_path,
            egress,
            trusted_proxies,
            hash_at_once,
            limits,
            search,
            bash_max_timeout: std::time::Duration::from_secs(self.bash_max_timeout),
            workspace_quota_mib: self.workspace_quota_mib,
            sandbox_uid: self.sandbox_uid,
            skills_dir: self.skills_dir,
            max_skills_per_root: self.max_skills_per_root,
            index_cache_mib: self.index_cache_mib,
            max_memory_mib: at_least_one(self.max_memory_mib as u64, "max_memory_mib")? as usize,
            flush_timeout: std::time::Duration::from_secs(at_least_one(
                self.flush_timeout_secs,
                "flush_timeout_secs",
            )?),
            embeddings: hero_backend::search::embed::Settings {
                model: self.embeddings_model,
                url: self.embeddings_url,
                api_key: self.embeddings_api_key,
            },
            prices: self
                .prices
                .as_deref()
                .map(parse_prices)
                .transpose()?
                .unwrap_or_default(),
        })
    }
}

/// The `prices` setting: `PROVIDER/MODEL-PREFIX=INPUT:OUTPUT[:CACHE_READ[:CACHE_WRITE]]`,
/// separated by `;`.
fn parse_prices(text: &str) -> anyhow::Result<Vec<hero_backend::agents::spend::PriceRule>> {
    use hero_shared::api::{Price, ProviderKind};
    let mut rules = Vec::new();
    for rule in text.split(';').map(str::trim).filter(|r| !r.is_empty()) {
        let bad = |why: &str| {
            anyhow::anyhow!(
                "prices: {rule:?} {why}; write it as anthropic/claude-sonnet-4=3:15:0.3:3.75"
            )
        };
        let (model, price) = rule.split_once('=').ok_or_else(|| bad("has no '='"))?;
        let (provider, prefix) = model
            .trim()
            .split_once('/')
            .ok_or_else(|| bad("names no provider/"))?;
        let provider = ProviderKind::parse(provider.trim())
            .ok_or_else(|| bad("names no provider Hero knows"))?;
        let numbers: Vec<f64> = price
            .split(':')
            .map(|n| n.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad("has a price that is no number"))?;
        let at = |i: usize| numbers.get(i).copied().unwrap_or(0.0);
        if !(2..=4).contains(&numbers.len()) {
            return Err(bad("must give 2 to 4 prices"));
        }
        let price = Price {
            input: at(0),
            output: at(1),
            cache_read: at(2),
            cache_write: at(3),
        };
        hero_backend::agents::spend::check_price(&price).map_err(|e| bad(&e.public_message()))?;
        rules.push(hero_backend::agents::spend::PriceRule {
            provider,
            prefix: prefix.trim().to_owned(),
            price,
        });
    }
    Ok(rules)
}

/// A public URL is the scheme and host (and port) people type: http or https, a host, and
/// no user, path, query or fragment (Hero is served at the root of its host).
fn parse_public_url(text: &str) -> anyhow::Result<axum::http::Uri> {
    let bad = |why: &str| {
        anyhow::anyhow!("public_url {text:?} {why}; write it as https://hero.example.com")
    };
    let uri: axum::http::Uri = text.trim().parse().map_err(|_| bad("is not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(bad("must start with http:// or https://"));
    }
    let authority = uri.authority().ok_or_else(|| bad("has no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("must not hold a user name or password"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(bad("must not have a path or query"));
    }
    Ok(uri)
}

/// A base path is where a proxy serves Hero: `/` and segments of letters, digits and
/// `-._~` (no `.` or `..` alone), without a trailing `/`; empty (or `/`) is the host's root.
/// Anything else would make a URL of every link Hero writes, so it stops the start.
fn parse_base_path(text: &str) -> anyhow::Result<String> {
    let text = text.trim();
    let path = text.strip_suffix('/').unwrap_or(text);
    if path.is_empty() {
        return Ok(String::new());
    }
    let bad = |why: &str| anyhow::anyhow!("base_path {text:?} {why}; write it as /hero");
    let Some(rest) = path.strip_prefix('/') else {
        return Err(bad("must start with /"));
    };
    if path.len() > 200 {
        return Err(bad("is longer than 200 characters"));
    }
    for segment in rest.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(bad("has an empty, . or .. segment"));
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        {
            return Err(bad("may hold only letters, digits, -, ., _, ~ and /"));
        }
    }
    Ok(path.to_owned())
}

/// A binary that carries no site: `target/release/hero` finds `target/site`; a copied
/// binary falls back to `./target/site`.
pub fn default_site_root() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("../site")))
        .filter(|p| p.join("pkg").is_dir())
        .unwrap_or_else(|| PathBuf::from("target/site"))
}

impl Config {
    pub fn backend_settings(&self) -> hero_backend::Settings {
        hero_backend::Settings {
            token_ttl: time::Duration::hours(self.token_ttl_hours.into()),
            secure_cookie: self.secure_cookie,
            base_path: self.base_path.clone(),
            call_options: Default::default(),
            recheck_every: hero_backend::accounts::auth::RECHECK_EVERY,
            hash_at_once: self.hash_at_once,
            trusted_proxies: self.trusted_proxies.clone(),
            limits: self.limits.clone(),
            egress: self.egress.clone(),
            search: self.search.clone(),
            workspaces: self.data_dir.join("workspaces"),
            skills_dir: Some(
                self.skills_dir
                    .clone()
                    .unwrap_or_else(|| self.data_dir.join("skills")),
            ),
            embeddings: self.embeddings.clone(),
            max_skills_per_root: self.max_skills_per_root,
            index_cache_bytes: self.index_cache_mib << 20,
            max_memory_bytes: self.max_memory_mib << 20,
            flush_timeout: self.flush_timeout,
            plugins: hero_backend::execution::plugins::PluginSettings {
                dir: Some(self.data_dir.join("plugins")),
                state: self.data_dir.join("plugin-state"),
                ..Default::default()
            },
            sandbox: hero_backend::execution::sandbox::SandboxLimits {
                max_timeout: self.bash_max_timeout,
                quota_bytes: self.workspace_quota_mib << 20,
                sandbox_uid: self.sandbox_uid,
                // This executable is the sandbox's Landlock helper (`main` answers it first).
                landlock_helper: std::env::current_exe().ok(),
                ..Default::default()
            },
            prices: self.prices.clone(),
            ..hero_backend::Settings::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings `hero ARGS…` is given (the file included, the environment as it is).
    fn parse(args: &[&str]) -> anyhow::Result<Config> {
        use clap::{Args, FromArgMatches};
        let cmd = ConfigArgs::augment_args(clap::Command::new("hero"));
        let argv: Vec<OsString> = std::iter::once("hero")
            .chain(args.iter().copied())
            .map(Into::into)
            .collect();
        let argv = layered(&cmd, argv)?;
        let m = cmd.try_get_matches_from(argv)?;
        ConfigArgs::from_arg_matches(&m)?.resolve()
    }

    fn file(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hero.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path.display().to_string())
    }

    /// Precedence, setting by setting: a flag beats the file, the file beats the default.
    /// (The variables sit between the two: `tests/cli.rs` gives them to a `hero` process.)
    #[test]
    fn flags_beat_the_file_and_the_file_beats_defaults() {
        let (_d, path) = file(
            "addr = \"0.0.0.0:9000\"\ndata_dir = \"/srv/hero\"\ntoken_ttl_hours = 5\nmax_turns = 3\nsearch_pages_allowed = true\ntrusted_proxies = [\"10.0.0.1\", \"10.0.0.2\"]\n",
        );
        let from_file = parse(&["--config", &path]).unwrap();
        assert_eq!(from_file.addr.to_string(), "0.0.0.0:9000");
        assert_eq!(from_file.data_dir, PathBuf::from("/srv/hero"));
        assert_eq!(from_file.token_ttl_hours, 5);
        assert_eq!(from_file.limits.turns_per_user, 3);
        assert!(from_file.search.pages_allowed);
        assert_eq!(from_file.trusted_proxies.len(), 2);
        // Untouched by the file: the defaults.
        assert!(!from_file.secure_cookie);
        assert_eq!(from_file.limits.live_streams_per_user, 32);
        assert_eq!(from_file.drain, std::time::Duration::from_secs(10));
        let flags = parse(&[
            "--config",
            &path,
            "--addr",
            "127.0.0.1:4000",
            "--max-turns=9",
            "--search-pages-allowed",
            "false",
        ])
        .unwrap();
        assert_eq!(flags.addr.to_string(), "127.0.0.1:4000");
        assert_eq!(flags.limits.turns_per_user, 9);
        assert!(!flags.search.pages_allowed);
        assert_eq!(flags.data_dir, PathBuf::from("/srv/hero"));
    }

    /// `[prices]` in the file, `--prices` on the command line; a bad one stops start-up.
    #[test]
    fn prices_come_from_the_file_or_the_flag() {
        let (_d, path) = file(
            "[prices]\n\"openai-compatible/llama\" = { input = 0.2, output = 0.6 }\n\"anthropic/claude-sonnet-4\" = { input = 2, output = 10, cache_read = 0.2, cache_write = 2.5 }\n",
        );
        let c = parse(&["--config", &path]).unwrap();
        let got: Vec<String> = c
            .prices
            .iter()
            .map(|r| format!("{}/{} {:?}", r.provider.as_str(), r.prefix, r.price))
            .collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got.iter()
                .any(|g| g.starts_with("anthropic/claude-sonnet-4")
                    && g.contains("cache_write: 2.5")),
            "{got:?}"
        );
        let c = parse(&["--prices", "openai/gpt-x=1:2;anthropic/claude=3:4:0.5"]).unwrap();
        assert_eq!(c.prices.len(), 2);
        assert_eq!(c.prices[1].price.cache_read, 0.5);
        for bad in [
            "openai/gpt=1",
            "nobody/x=1:2",
            "openai/gpt=a:b",
            "openai/gpt=-1:2",
            "gpt=1:2",
        ] {
            let e = parse(&["--prices", bad]).unwrap_err().to_string();
            assert!(e.starts_with("prices: "), "{bad}: {e}");
        }
    }

    #[test]
    fn egress_allowances_come_from_flag_or_file_and_bad_ones_stop_start_up() {
        let (_d, path) = file("egress_allow = [\"127.0.0.1:11434\", \"ollama.lan:80\"]\n");
        let from_file = parse(&["--config", &path]).unwrap();
        assert_eq!(
            from_file.egress.allowed(),
            ["127.0.0.1:11434", "ollama.lan:80"]
        );
        let flag = parse(&[
            "--config",
            &path,
            "--egress-allow",
            "[::1]:8080, 10.0.0.2:443",
        ])
        .unwrap();
        assert_eq!(flag.egress.allowed(), ["[::1]:8080", "10.0.0.2:443"]);
        assert_eq!(
            flag.backend_settings().egress.allowed(),
            ["[::1]:8080", "10.0.0.2:443"]
        );
        let err = format!(
            "{:#}",
            parse(&["--config", "/dev/null", "--egress-allow", "127.0.0.1"]).unwrap_err()
        );
        assert!(
            err.contains("HERO_EGRESS_ALLOW")
                && err.contains("\"127.0.0.1\"")
                && err.contains("HOST:PORT"),
            "{err}"
        );
    }

    #[test]
    fn the_sandbox_settings_reach_the_sandbox_and_root_is_refused() {
        let (_d, path) = file("workspace_quota_mib = 64\nsandbox_uid = 4242\n");
        let sandbox = parse(&["--config", &path])
            .unwrap()
            .backend_settings()
            .sandbox;
        assert_eq!((sandbox.quota_bytes, sandbox.sandbox_uid), (64 << 20, 4242));
        let flags = parse(&["--config", &path, "--workspace-quota-mib", "2"]).unwrap();
        assert_eq!(flags.workspace_quota_mib, 2);
        let defaults = parse(&["--config", "/dev/null"]).unwrap();
        assert_eq!(
            (defaults.workspace_quota_mib, defaults.sandbox_uid),
            (1024, 65534)
        );
        for bad in ["--sandbox-uid=0", "--workspace-quota-mib=0"] {
            let err = parse(&["--config", &path, bad]).unwrap_err().to_string();
            assert!(err.contains("must"), "{err}");
        }
    }

    #[test]
    fn a_base_path_is_checked_and_kept_without_its_last_slash() {
        let base = |v: &str| parse(&["--config", "/dev/null", "--base-path", v]);
        assert_eq!(base("/hero").unwrap().base_path, "/hero");
        assert_eq!(base("/hero/").unwrap().base_path, "/hero");
        assert_eq!(base("/apps/hero-1").unwrap().base_path, "/apps/hero-1");
        assert_eq!(base("/").unwrap().base_path, "");
        assert_eq!(parse(&["--config", "/dev/null"]).unwrap().base_path, "");
        for (bad, why) in [
            ("hero", "must start with /"),
            ("/hero//x", "empty"),
            ("/../etc", ".."),
            ("/he ro", "only letters"),
            ("/hero?x=1", "only letters"),
            ("/h%2fx", "only letters"),
        ] {
            let err = format!("{:#}", base(bad).unwrap_err());
            assert!(
                err.contains("base_path") && err.contains(why) && err.contains("/hero"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_metrics_address_never_shares_the_public_one() {
        let with = |addr: &str, metrics: &str| {
            parse(&[
                "--config",
                "/dev/null",
                "--addr",
                addr,
                "--metrics-addr",
                metrics,
            ])
        };
        for (addr, metrics) in [
            ("127.0.0.1:3000", "127.0.0.1:3000"),
            ("0.0.0.0:3000", "127.0.0.1:3000"),
            ("127.0.0.1:3000", "0.0.0.0:3000"),
        ] {
            let err = with(addr, metrics).unwrap_err().to_string();
            assert!(
                err.contains("metrics_addr must not be addr's port"),
                "{addr} {metrics}: {err}"
            );
        }
        for (addr, metrics) in [
            ("127.0.0.1:0", "127.0.0.1:0"),
            ("0.0.0.0:3000", "127.0.0.1:9100"),
            ("10.0.0.1:3000", "127.0.0.1:3000"),
        ] {
            let cfg = with(addr, metrics).unwrap();
            assert_eq!(cfg.metrics_addr, Some(metrics.parse().unwrap()));
        }
        assert_eq!(
            parse(&["--config", "/dev/null"]).unwrap().metrics_addr,
            None
        );
        let json = parse(&["--config", "/dev/null", "--log-format", "json"]).unwrap();
        assert_eq!(json.log_format, LogFormat::Json);
        assert!(parse(&["--config", "/dev/null", "--log-format", "xml"]).is_err());
    }

    /// The README's settings table lists exactly the settings there are: each row's flag
    /// and variable are a flag's and its variable, every flag has its row, and each TOML
    /// key it names is the setting's own.
    #[test]
    fn the_readme_lists_exactly_the_settings() {
        use clap::Args;
        let readme = include_str!("../../README.md");
        let cell = |c: &str| c.trim().trim_matches('`').to_owned();
        let rows: Vec<(String, String, String)> = readme
            .lines()
            .filter(|l| l.starts_with("| `--"))
            .map(|l| {
                let c: Vec<&str> = l.split('|').collect();
                (cell(c[1]), cell(c[2]), cell(c[3]))
            })
            .collect();
        let cmd = ConfigArgs::augment_args(clap::Command::new("hero"));
        let mut code: Vec<(String, String, String)> = cmd
            .get_arguments()
            .filter_map(|a| {
                let id = a.get_id().as_str();
                Some((
                    format!("--{}", a.get_long()?),
                    a.get_env()?.to_string_lossy().into_owned(),
                    if id == "config" {
                        "—".into()
                    } else {
                        id.to_owned()
                    },
                ))
            })
            .collect();
        let mut listed = rows;
        code.sort();
        listed.sort();
        assert_eq!(
            listed, code,
            "README's settings table (flag, variable, TOML key) against the code's"
        );
    }

    #[test]
    fn bad_files_are_clear_errors() {
        for (text, said) in [
            ("adr = \"x\"\n", "unknown setting `adr`"),
            ("config = \"other.toml\"\n", "unknown setting `config`"),
            ("addr = {a = 1}\n", "must be a string"),
            ("addr = [\n", "not valid"),
            ("max_turns = \"many\"\n", "many"),
        ] {
            let (_d, path) = file(text);
            let err = format!("{:#}", parse(&["--config", &path]).unwrap_err());
            assert!(err.contains(said), "{text}: {err}");
        }
        let err = format!(
            "{:#}",
            parse(&["--config", "/nonexistent/nope.toml"]).unwrap_err()
        );
        assert!(err.contains("cannot read"), "{err}");
    }

    /// No secret prints: the settings' `Debug` (what a log line or a panic would show) holds
    /// neither the master key nor the search API key.
    #[test]
    fn secrets_never_print() {
        let (_d, path) = file("search_api_key = \"BRAVE-SECRET-TOKEN\"\n");
        let c = parse(&["--config", &path, "--master-key", "MASTER-SECRET-KEY"]).unwrap();
        assert_eq!(
            c.master_key.as_ref().map(Secret::expose),
            Some("MASTER-SECRET-KEY")
        );
        let shown = format!("{c:?} {:?}", c.backend_settings());
        assert!(
            !shown.contains("MASTER-SECRET-KEY") && !shown.contains("BRAVE-SECRET-TOKEN"),
            "{shown}"
        );
    }

    #[test]
    fn a_public_url_is_a_scheme_and_a_host() {
        let url = |u: &str| {
            parse(&["--config", "/dev/null", "--public-url", u])
                .map(|c| c.public_url.map(|u| u.to_string()))
                .map_err(|e| e.to_string())
        };
        assert!(url("https://hero.example.com").is_ok());
        // Reached over HTTPS, the cookie is Secure unless told otherwise.
        let secure = |u: &str, flag: Option<&str>| {
            let mut args = vec!["--config", "/dev/null", "--public-url", u];
            if let Some(f) = flag {
                args.extend(["--secure-cookie", f]);
            }
            parse(&args).unwrap().secure_cookie
        };
        assert!(secure("https://hero.example.com", None));
        assert!(!secure("http://hero.lan:8080", None));
        assert!(!secure("https://hero.example.com", Some("false")));
        assert!(url("http://hero.lan:8080/").is_ok());
        for (bad, why) in [
            ("hero.example.com", "http"),
            ("ftp://hero.example.com", "http"),
            ("https://user:pw@hero.example.com", "user"),
            ("https://hero.example.com/hero", "path"),
            ("https://hero.example.com/?a=1", "query"),
            ("not a url", "not a URL"),
        ] {
            let err = url(bad).unwrap_err();
            assert!(
                err.contains(why) && err.contains("https://hero.example.com"),
                "{bad}: {err}"
            );
        }
    }
}
