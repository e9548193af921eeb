//! Settings: command-line flags, then `HERO_*` environment variables, then a TOML file, then
//! defaults — the first that gives a value wins. Flags and variables are read by clap (one
//! `Option` per setting, so "not given" is visible); the file fills what both left empty.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use hero_backend::egress::EgressPolicy;
use serde::Deserialize;

pub const DEFAULT_ADDR: &str = "127.0.0.1:3000";
pub const DEFAULT_DATA_DIR: &str = "./data";
pub const DEFAULT_TOKEN_TTL_HOURS: u32 = 24 * 7;
pub const DEFAULT_DRAIN_SECS: u64 = 10;

#[derive(clap::Args, Default, Clone)]
pub struct ConfigArgs {
    /// Address and port to serve on [default: 127.0.0.1:3000]
    #[arg(long, env = "HERO_ADDR", global = true, value_name = "HOST:PORT")]
    pub addr: Option<SocketAddr>,

    /// Directory for the database and the master key file; created if missing [default: ./data]
    #[arg(long, env = "HERO_DATA_DIR", global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

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
    pub master_key: Option<String>,

    /// TOML file with any of these settings (keys as the flags, with '_' for '-')
    /// [default: ./hero.toml when it exists]
    #[arg(long, env = "HERO_CONFIG", global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// How long a sign-in lasts, in hours [default: 168]
    #[arg(
        long,
        env = "HERO_TOKEN_TTL_HOURS",
        global = true,
        value_name = "HOURS"
    )]
    pub token_ttl_hours: Option<u32>,

    /// Mark the sign-in cookie Secure; set this when Hero is served over HTTPS [default: true when public_url is https, else false]
    #[arg(long, env = "HERO_SECURE_COOKIE", global = true, value_name = "BOOL")]
    pub secure_cookie: Option<bool>,

    /// Directory of the built site (wasm, JS, CSS) [default: ../site beside the binary when it
    /// exists, else target/site]
    #[arg(long, env = "HERO_SITE_ROOT", global = true, value_name = "DIR")]
    pub site_root: Option<PathBuf>,

    /// Log filter, in tracing's env-filter syntax [default: info]
    #[arg(long, env = "HERO_LOG", global = true, value_name = "FILTER")]
    pub log: Option<String>,

    /// On SIGTERM or Ctrl-C, how long replies in flight get to store what they have before
    /// the process exits anyway, in seconds [default: 10]
    #[arg(long, env = "HERO_DRAIN_SECS", global = true, value_name = "SECONDS")]
    pub drain_secs: Option<u64>,

    /// The URL people reach Hero by (https://hero.example.com); requests naming another host
    /// are refused. Unset: any host, or only localhost when serving on a loopback address
    #[arg(long, env = "HERO_PUBLIC_URL", global = true, value_name = "URL")]
    pub public_url: Option<String>,
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
    /// Sessions one user may have [default: 10000]
    #[arg(long, env = "HERO_MAX_SESSIONS", global = true, value_name = "N")]
    pub max_sessions: Option<usize>,

    /// Frames one session may hold (a message is one) [default: 200000]
    #[arg(
        long,
        env = "HERO_MAX_FRAMES_PER_SESSION",
        global = true,
        value_name = "N"
    )]
    pub max_frames_per_session: Option<i64>,

    /// Replies one user may have in flight at once [default: 8]
    #[arg(long, env = "HERO_MAX_TURNS", global = true, value_name = "N")]
    pub max_turns: Option<usize>,

    /// Event streams and WebSockets one user may hold open at once [default: 32]
    #[arg(long, env = "HERO_MAX_LIVE_STREAMS", global = true, value_name = "N")]
    pub max_live_streams: Option<usize>,

    /// Rounds of calls and follow-up replies one user message may set going [default: 8]
    #[arg(long, env = "HERO_MAX_ROUNDS", global = true, value_name = "N")]
    pub max_rounds: Option<usize>,

    /// The search service of `websearch`: a SearXNG instance's URL, or Brave's API URL
    #[arg(long, env = "HERO_SEARCH_URL", global = true, value_name = "URL")]
    pub search_url: Option<String>,

    /// Which search service `search_url` is: searxng or brave [default: searxng]
    #[arg(long, env = "HERO_SEARCH_BACKEND", global = true, value_name = "NAME")]
    pub search_backend: Option<String>,

    /// Let `websearch` read pages on the hosts `egress_allow` names (an intranet) [default: false]
    #[arg(
        long,
        env = "HERO_SEARCH_PAGES_ALLOWED",
        global = true,
        value_name = "BOOL"
    )]
    pub search_pages_allowed: Option<bool>,

    /// The longest a `bash` command may run, in seconds (its own timeout is capped to it) [default: 300]
    #[arg(
        long,
        env = "HERO_BASH_MAX_TIMEOUT",
        global = true,
        value_name = "SECS"
    )]
    pub bash_max_timeout: Option<u64>,

    /// The most each user's `bash` workspace may hold on disk, in MiB: a command that
    /// reaches it is ended, and none runs until the workspace is back under it [default: 1024]
    #[arg(
        long,
        env = "HERO_WORKSPACE_QUOTA_MIB",
        global = true,
        value_name = "MIB"
    )]
    pub workspace_quota_mib: Option<u64>,

    /// The host uid (and gid) `bash`'s sandbox runs as when Hero runs as root; never 0 [default: 65534]
    #[arg(long, env = "HERO_SANDBOX_UID", global = true, value_name = "UID")]
    pub sandbox_uid: Option<u32>,

    /// The search service's API key (Brave's subscription token)
    #[arg(
        long,
        env = "HERO_SEARCH_API_KEY",
        global = true,
        value_name = "KEY",
        hide_env_values = true
    )]
    pub search_api_key: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    addr: Option<SocketAddr>,
    data_dir: Option<PathBuf>,
    master_key: Option<String>,
    token_ttl_hours: Option<u32>,
    secure_cookie: Option<bool>,
    site_root: Option<PathBuf>,
    log: Option<String>,
    drain_secs: Option<u64>,
    public_url: Option<String>,
    egress_allow: Option<Vec<String>>,
    trusted_proxies: Option<Vec<std::net::IpAddr>>,
    hash_at_once: Option<usize>,
    max_sessions: Option<usize>,
    max_frames_per_session: Option<i64>,
    max_turns: Option<usize>,
    max_live_streams: Option<usize>,
    max_rounds: Option<usize>,
    search_url: Option<String>,
    search_backend: Option<String>,
    search_api_key: Option<String>,
    search_pages_allowed: Option<bool>,
    bash_max_timeout: Option<u64>,
    workspace_quota_mib: Option<u64>,
    sandbox_uid: Option<u32>,
}

/// The settings in force. Its `Debug` hides the master key.
#[derive(Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    pub master_key: Option<String>,
    pub token_ttl_hours: u32,
    pub secure_cookie: bool,
    pub site_root: PathBuf,
    pub log: String,
    pub drain: std::time::Duration,
    /// Where people reach Hero, checked: an http(s) URL with a host and nothing after it.
    pub public_url: Option<axum::http::Uri>,
    pub egress: hero_backend::egress::EgressPolicy,
    pub trusted_proxies: Vec<std::net::IpAddr>,
    pub hash_at_once: usize,
    pub limits: hero_backend::limits::Limits,
    pub search: hero_backend::functions::websearch::SearchSettings,
    pub bash_max_timeout: std::time::Duration,
    pub workspace_quota_mib: u64,
    pub sandbox_uid: u32,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("addr", &self.addr)
            .field("data_dir", &self.data_dir)
            .field("master_key", &self.master_key.as_ref().map(|_| "<set>"))
            .field("token_ttl_hours", &self.token_ttl_hours)
            .field("secure_cookie", &self.secure_cookie)
            .field("site_root", &self.site_root)
            .field("log", &self.log)
            .field("drain", &self.drain)
            .field("public_url", &self.public_url)
            .field("egress_allow", &self.egress.allowed())
            .field("trusted_proxies", &self.trusted_proxies)
            .field("hash_at_once", &self.hash_at_once)
            .field("limits", &self.limits)
            .field("search", &self.search)
            .field("bash_max_timeout", &self.bash_max_timeout)
            .field("workspace_quota_mib", &self.workspace_quota_mib)
            .field("sandbox_uid", &self.sandbox_uid)
            .finish()
    }
}

impl ConfigArgs {
    pub fn resolve(self) -> anyhow::Result<Config> {
        let file = match &self.config {
            Some(path) => read_file(path)?,
            None if Path::new("hero.toml").exists() => read_file(Path::new("hero.toml"))?,
            None => FileConfig::default(),
        };
        let token_ttl_hours = self
            .token_ttl_hours
            .or(file.token_ttl_hours)
            .unwrap_or(DEFAULT_TOKEN_TTL_HOURS);
        if token_ttl_hours == 0 {
            bail!("token_ttl_hours must be at least 1");
        }
        let egress = match (&self.egress_allow, &file.egress_allow) {
            (Some(list), _) => EgressPolicy::parse_list(list),
            (None, Some(entries)) => EgressPolicy::new(entries),
            (None, None) => Ok(EgressPolicy::default()),
        }
        .context("egress_allow (HERO_EGRESS_ALLOW) is not valid")?;
        let public_url = self
            .public_url
            .or(file.public_url)
            .map(|u| parse_public_url(&u))
            .transpose()?;
        Ok(Config {
            addr: self
                .addr
                .or(file.addr)
                .unwrap_or_else(|| DEFAULT_ADDR.parse().expect("default address")),
            data_dir: self
                .data_dir
                .or(file.data_dir)
                .unwrap_or_else(|| DEFAULT_DATA_DIR.into()),
            master_key: self.master_key.or(file.master_key),
            token_ttl_hours,
            // Unset: Secure when people reach Hero over HTTPS.
            secure_cookie: self
                .secure_cookie
                .or(file.secure_cookie)
                .unwrap_or_else(|| {
                    public_url.as_ref().and_then(|u| u.scheme_str()) == Some("https")
                }),
            site_root: self
                .site_root
                .or(file.site_root)
                .unwrap_or_else(default_site_root),
            log: self.log.or(file.log).unwrap_or_else(|| "info".into()),
            drain: std::time::Duration::from_secs(
                self.drain_secs
                    .or(file.drain_secs)
                    .unwrap_or(DEFAULT_DRAIN_SECS),
            ),
            public_url,
            egress,
            trusted_proxies: match self.trusted_proxies {
                Some(list) => list
                    .split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(|a| {
                        a.parse().with_context(|| {
                            format!(
                                "trusted_proxies (HERO_TRUSTED_PROXIES): {a:?} is not an IP address"
                            )
                        })
                    })
                    .collect::<anyhow::Result<_>>()?,
                None => file.trusted_proxies.unwrap_or_default(),
            },
            limits: {
                let d = hero_backend::limits::Limits::default();
                let at_least_one = |v: usize, name: &str| {
                    if v == 0 {
                        bail!("{name} must be at least 1")
                    }
                    Ok(v)
                };
                hero_backend::limits::Limits {
                    sessions_per_user: at_least_one(
                        self.max_sessions
                            .or(file.max_sessions)
                            .unwrap_or(d.sessions_per_user),
                        "max_sessions",
                    )?,
                    frames_per_session: at_least_one(
                        self.max_frames_per_session
                            .or(file.max_frames_per_session)
                            .unwrap_or(d.frames_per_session)
                            .max(0) as usize,
                        "max_frames_per_session",
                    )? as i64,
                    turns_per_user: at_least_one(
                        self.max_turns
                            .or(file.max_turns)
                            .unwrap_or(d.turns_per_user),
                        "max_turns",
                    )?,
                    live_streams_per_user: at_least_one(
                        self.max_live_streams
                            .or(file.max_live_streams)
                            .unwrap_or(d.live_streams_per_user),
                        "max_live_streams",
                    )?,
                    rounds_per_message: at_least_one(
                        self.max_rounds
                            .or(file.max_rounds)
                            .unwrap_or(d.rounds_per_message),
                        "max_rounds",
                    )?,
                }
            },
            search: {
                use hero_backend::functions::websearch::{Backend, SearchSettings};
                let backend = match self.search_backend.or(file.search_backend) {
                    None => Backend::default(),
                    Some(b) => Backend::parse(b.trim()).with_context(|| {
                        format!(
                            "search_backend (HERO_SEARCH_BACKEND) {b:?} is not searxng or brave"
                        )
                    })?,
                };
                let url = self
                    .search_url
                    .or(file.search_url)
                    .filter(|u| !u.trim().is_empty());
                if let Some(u) = &url {
                    hero_backend::egress::BaseUrl::parse(u)
                        .map_err(|e| anyhow::anyhow!("search_url (HERO_SEARCH_URL) {u:?}: {e}"))?;
                }
                SearchSettings {
                    backend,
                    url,
                    api_key: self.search_api_key.or(file.search_api_key),
                    pages_allowed: self
                        .search_pages_allowed
                        .or(file.search_pages_allowed)
                        .unwrap_or(false),
                }
            },
            bash_max_timeout: match self.bash_max_timeout.or(file.bash_max_timeout) {
                Some(0) => bail!("bash_max_timeout must be at least 1 second"),
                Some(n) => std::time::Duration::from_secs(n),
                None => hero_backend::sandbox::SandboxLimits::default().max_timeout,
            },
            workspace_quota_mib: match self.workspace_quota_mib.or(file.workspace_quota_mib) {
                Some(0) => bail!("workspace_quota_mib must be at least 1"),
                Some(n) if n > 1 << 30 => bail!("workspace_quota_mib is past any disk: {n}"),
                Some(n) => n,
                None => hero_backend::sandbox::SandboxLimits::default().quota_bytes >> 20,
            },
            sandbox_uid: match self.sandbox_uid.or(file.sandbox_uid) {
                Some(0) => bail!(
                    "sandbox_uid must not be 0: the sandbox never runs as root (the default is 65534, nobody)"
                ),
                Some(n) => n,
                None => hero_backend::sandbox::NOBODY,
            },
            hash_at_once: match self.hash_at_once.or(file.hash_at_once) {
                Some(0) => bail!("hash_at_once must be at least 1"),
                Some(n) => n,
                None => hero_backend::password::cores(),
            },
        })
    }
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

fn read_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read settings file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("settings file {} is not valid", path.display()))
}

/// `target/release/hero` finds `target/site`; a copied binary falls back to `./target/site`.
fn default_site_root() -> PathBuf {
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
            call_options: Default::default(),
            recheck_every: hero_backend::auth::RECHECK_EVERY,
            hash_at_once: self.hash_at_once,
            trusted_proxies: self.trusted_proxies.clone(),
            limits: self.limits.clone(),
            egress: self.egress.clone(),
            search: self.search.clone(),
            workspaces: self.data_dir.join("workspaces"),
            sandbox: hero_backend::sandbox::SandboxLimits {
                max_timeout: self.bash_max_timeout,
                quota_bytes: self.workspace_quota_mib << 20,
                sandbox_uid: self.sandbox_uid,
                // This executable is the sandbox's Landlock helper (`main` answers it first).
                landlock_helper: std::env::current_exe().ok(),
                ..Default::default()
            },
            ..hero_backend::Settings::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_beat_file_and_file_beats_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hero.toml");
        std::fs::write(
            &path,
            "addr = \"0.0.0.0:9000\"\ndata_dir = \"/srv/hero\"\ntoken_ttl_hours = 5\n",
        )
        .unwrap();
        let from_file = ConfigArgs {
            config: Some(path.clone()),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(from_file.addr.to_string(), "0.0.0.0:9000");
        assert_eq!(from_file.data_dir, PathBuf::from("/srv/hero"));
        assert_eq!(from_file.token_ttl_hours, 5);
        assert!(!from_file.secure_cookie);
        let flag = ConfigArgs {
            config: Some(path),
            addr: Some("127.0.0.1:4000".parse().unwrap()),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(flag.addr.to_string(), "127.0.0.1:4000");
        assert_eq!(flag.data_dir, PathBuf::from("/srv/hero"));
    }

    #[test]
    fn egress_allowances_come_from_flag_or_file_and_bad_ones_stop_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hero.toml");
        std::fs::write(
            &path,
            "egress_allow = [\"127.0.0.1:11434\", \"ollama.lan:80\"]\n",
        )
        .unwrap();
        let from_file = ConfigArgs {
            config: Some(path.clone()),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(
            from_file.egress.allowed(),
            ["127.0.0.1:11434", "ollama.lan:80"]
        );
        let flag = ConfigArgs {
            config: Some(path),
            egress_allow: Some("[::1]:8080, 10.0.0.2:443".into()),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(flag.egress.allowed(), ["[::1]:8080", "10.0.0.2:443"]);
        let empty = dir.path().join("empty.toml");
        std::fs::write(&empty, "").unwrap();
        assert_eq!(
            flag.backend_settings().egress.allowed(),
            ["[::1]:8080", "10.0.0.2:443"]
        );
        let err = format!(
            "{:#}",
            ConfigArgs {
                config: Some(empty),
                egress_allow: Some("127.0.0.1".into()),
                ..Default::default()
            }
            .resolve()
            .unwrap_err()
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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hero.toml");
        std::fs::write(&path, "workspace_quota_mib = 64\nsandbox_uid = 4242\n").unwrap();
        let args = || ConfigArgs {
            config: Some(path.clone()),
            ..Default::default()
        };
        let sandbox = args().resolve().unwrap().backend_settings().sandbox;
        assert_eq!((sandbox.quota_bytes, sandbox.sandbox_uid), (64 << 20, 4242));
        let flags = ConfigArgs {
            workspace_quota_mib: Some(2),
            ..args()
        };
        assert_eq!(flags.resolve().unwrap().workspace_quota_mib, 2);
        let defaults = ConfigArgs {
            config: Some("/dev/null".into()),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(
            (defaults.workspace_quota_mib, defaults.sandbox_uid),
            (1024, 65534)
        );
        for bad in [
            ConfigArgs {
                sandbox_uid: Some(0),
                ..args()
            },
            ConfigArgs {
                workspace_quota_mib: Some(0),
                ..args()
            },
        ] {
            let err = bad.resolve().unwrap_err().to_string();
            assert!(err.contains("must"), "{err}");
        }
    }

    /// The README's settings table lists exactly the settings there are: each row's flag
    /// and variable are a flag's and its variable, every flag has its row, and every TOML
    /// key it names is one the file takes.
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
        let mut code: Vec<(String, String)> = cmd
            .get_arguments()
            .filter_map(|a| {
                Some((
                    format!("--{}", a.get_long()?),
                    a.get_env()?.to_string_lossy().into_owned(),
                ))
            })
            .collect();
        let mut listed: Vec<(String, String)> = rows
            .iter()
            .map(|(f, e, _)| (f.clone(), e.clone()))
            .collect();
        code.sort();
        listed.sort();
        assert_eq!(
            listed, code,
            "README's settings table against the code's flags"
        );
        // Every key the table names, each alone in a file: the file refuses a key it does
        // not take as unknown (a value of the wrong type is refused otherwise).
        for (_, _, key) in rows.iter().filter(|(f, _, k)| k != "—" && f != "--config") {
            let err = toml::from_str::<FileConfig>(&format!("{key} = []"))
                .err()
                .map(|e| e.to_string());
            assert!(
                err.as_deref().is_none_or(|e| !e.contains("unknown field")),
                "{key}: {err:?}"
            );
        }
        assert!(
            toml::from_str::<FileConfig>("no_such_setting = 1")
                .is_err_and(|e| e.to_string().contains("unknown field")),
            "the file refuses unknown keys"
        );
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hero.toml");
        std::fs::write(&path, "adr = \"x\"\n").unwrap();
        let err = format!(
            "{:#}",
            ConfigArgs {
                config: Some(path),
                ..Default::default()
            }
            .resolve()
            .unwrap_err()
        );
        assert!(err.contains("not valid") && err.contains("adr"), "{err}");
        let missing = ConfigArgs {
            config: Some(dir.path().join("nope.toml")),
            ..Default::default()
        };
        assert!(format!("{:#}", missing.resolve().unwrap_err()).contains("cannot read"));
    }

    #[test]
    fn a_public_url_is_a_scheme_and_a_host() {
        let url = |u: &str| {
            ConfigArgs {
                config: Some("/dev/null".into()),
                public_url: Some(u.into()),
                ..Default::default()
            }
            .resolve()
            .map(|c| c.public_url.map(|u| u.to_string()))
            .map_err(|e| e.to_string())
        };
        assert!(url("https://hero.example.com").is_ok());
        // Reached over HTTPS, the cookie is Secure unless told otherwise.
        let secure = |u: &str, flag: Option<bool>| {
            ConfigArgs {
                config: Some("/dev/null".into()),
                public_url: Some(u.into()),
                secure_cookie: flag,
                ..Default::default()
            }
            .resolve()
            .unwrap()
            .secure_cookie
        };
        assert!(secure("https://hero.example.com", None));
        assert!(!secure("http://hero.lan:8080", None));
        assert!(!secure("https://hero.example.com", Some(false)));
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
