//! Users' MCP servers (reference 004: a capability source): each user adds servers of their
//! own (a program in their sandbox over stdio, or a URL over streamable HTTP behind the
//! egress policy), and each enabled server is a capability at the end of that user's chain
//! ([`registry`]): `mcp-<server>`, its tools `mcp__<server>__<tool>`, its `instructions` the
//! default of `capability:mcp-<server>`.
//!
//! A server's configuration (its environment or headers hold secrets) and its listing (the
//! tools it listed when last started) are sealed in `mcp_servers`; the user's chain is built
//! from the listings, without starting anything, and kept per user until their prompt
//! generation moves (every change to a server moves it). The servers run in [`host`].

pub mod host;
pub mod http;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use hero_shared::api::{
    CreateMcpServerRequest, McpServerDto, McpTestResult, McpToolDto, McpTransport,
    UpdateMcpServerRequest,
};
use hero_shared::calls::{AutoApprove, DangerLevel, FunctionPermissions, Permission};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::crypto::{self, SecretKey};
use crate::execution::functions::{Capability, Ctx, Registry, Spec, ToolResult};
use crate::store::{self, Conn};
use crate::{AppState, Error, Result, now_text};

/// The most servers one user may have.
pub const MAX_SERVERS: i64 = 20;
/// The most tools of one server offered; the rest are skipped, named.
pub const MAX_TOOLS: usize = 64;
/// The longest a function's name may be (the providers' bound on a tool's name).
pub const MAX_NAME_CHARS: usize = 64;
/// The longest description of a tool offered.
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;
/// The largest input schema of a tool offered, as JSON.
pub const MAX_SCHEMA_BYTES: usize = 16 << 10;
/// A call's timeout when the user gives none, and the longest they may give (seconds).
pub const DEFAULT_TIMEOUT_SECS: u32 = 60;
pub const MAX_TIMEOUT_SECS: u32 = 600;
/// How long a server's connection waits for a call before it is stopped.
pub const IDLE: Duration = Duration::from_secs(10 * 60);
/// The most environment variables or headers of one server, and the longest value.
pub const MAX_SECRETS: usize = 32;
pub const MAX_SECRET_BYTES: usize = 8 << 10;
/// The most arguments of a stdio server, and the longest command line in all.
pub const MAX_ARGS: usize = 64;
pub const MAX_COMMAND_BYTES: usize = 16 << 10;
/// The most users whose chains are kept at once (past it the kept ones are dropped).
pub const MAX_KEPT: usize = 1_000;
/// The longest instructions of a server's kept (they are in every prompt of its user's).
pub const MAX_INSTRUCTIONS_BYTES: usize = 64 << 10;
/// The most tools a listing names as skipped, and the most characters of each name shown.
pub const MAX_SKIPPED: usize = 64;
/// The most relistings of servers' tools at once, every user's together.
pub const RELISTS_AT_ONCE: usize = 4;
/// Headers Hero sets itself, which a server's configuration may not.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "keep-alive",
    "last-event-id",
    "mcp-protocol-version",
    "mcp-session-id",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// A tool of a server's listing, as Hero offers it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ToolEntry {
    name: String,
    description: String,
    schema: Value,
    danger: DangerLevel,
}

/// What a server listed when it was last started or tested, and why it failed if it did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Listing {
    tools: Vec<ToolEntry>,
    #[serde(default)]
    skipped: Vec<String>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

/// The servers' connections, and each user's chain as last built.
pub struct Mcp {
    pub hosts: Arc<host::Hosts>,
    kept: Mutex<HashMap<i64, (i64, Arc<Registry>)>>,
}

impl Mcp {
    pub fn new(idle: Duration, changed: Option<host::Changed>) -> Mcp {
        Mcp {
            hosts: Arc::new(host::Hosts::new(idle, changed)),
            kept: Mutex::default(),
        }
    }
}

fn config_aad(user_id: i64, id: i64) -> String {
    format!("mcp-config:{user_id}:{id}")
}

fn listing_aad(user_id: i64, id: i64) -> String {
    format!("mcp-listing:{user_id}:{id}")
}

fn seal_json<T: Serialize>(dk: &SecretKey, aad: &str, v: &T) -> Result<Vec<u8>> {
    let bytes = serde_json::to_vec(v).map_err(|e| Error::Internal(e.to_string()))?;
    Ok(crypto::seal(dk, aad.as_bytes(), &bytes))
}

/// [`open_json_plain`], an empty seal (a listing not yet made) being the default.
fn open_json<T: for<'de> Deserialize<'de> + Default>(
    dk: &SecretKey,
    aad: &str,
    sealed: &[u8],
) -> Result<T> {
    if sealed.is_empty() {
        return Ok(T::default());
    }
    open_json_plain(dk, aad, sealed)
}

/// The danger a tool's annotations give it: `readOnlyHint` safe, `destructiveHint`
/// dangerous, else moderate. (A hint never makes a tool allowed always: every tool asks
/// until its user says otherwise.)
fn danger_of(t: &rmcp::model::Tool) -> DangerLevel {
    match &t.annotations {
        Some(a) if a.destructive_hint == Some(true) => DangerLevel::Dangerous,
        Some(a) if a.read_only_hint == Some(true) => DangerLevel::Safe,
        _ => DangerLevel::Moderate,
    }
}

/// The function name of `server`'s `tool`.
pub fn function_name(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
}

/// What of `listed` can be offered, and each tool that cannot, with why.
fn listing_of(server: &str, listed: &host::Listed) -> Listing {
    let instructions = listed.instructions.as_deref().map(|i| {
        let mut end = i.len().min(MAX_INSTRUCTIONS_BYTES);
        while !i.is_char_boundary(end) {
            end -= 1;
        }
        i[..end].to_owned()
    });
    let mut out = Listing {
        instructions,
        ..Listing::default()
    };
    let mut more_skipped = 0usize;
    for t in &listed.tools {
        let shown: String = t.name.chars().take(80).collect();
        let name = function_name(server, &shown);
        let schema = Value::Object((*t.input_schema).clone());
        let size = serde_json::to_vec(&schema).map_or(usize::MAX, |v| v.len());
        let description = t.description.as_deref().unwrap_or("").trim();
        let why = if name.len() > MAX_NAME_CHARS {
            Some(format!("{name}: longer than {MAX_NAME_CHARS} characters"))
        } else if !t
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            Some(format!(
                "{:?}: characters other than letters, digits, _ and -",
                t.name
            ))
        } else if description.chars().count() > MAX_DESCRIPTION_CHARS {
            Some(format!(
                "{name}: a description longer than {MAX_DESCRIPTION_CHARS} characters"
            ))
        } else if size > MAX_SCHEMA_BYTES {
            Some(format!(
                "{name}: an input schema of {size} bytes, more than {MAX_SCHEMA_BYTES}"
            ))
        } else if out.tools.iter().any(|o| o.name == t.name) {
            Some(format!("{name}: listed twice"))
        } else if out.tools.len() >= MAX_TOOLS {
            Some(format!(
                "{name}: past the {MAX_TOOLS} tools a server may offer"
            ))
        } else {
            None
        };
        match why {
            Some(_) if out.skipped.len() >= MAX_SKIPPED => more_skipped += 1,
            Some(why) => out.skipped.push(why),
            None => out.tools.push(ToolEntry {
                name: t.name.to_string(),
                description: match description {
                    "" => format!("A tool of the MCP server {server}."),
                    d => d.to_owned(),
                },
                schema,
                danger: danger_of(t),
            }),
        }
    }
    if more_skipped > 0 {
        out.skipped.push(format!("and {more_skipped} more"));
    }
    out
}

/// One enabled server of a user's, as a capability of their chain.
struct Server {
    spec: host::Spec,
    /// Its configuration as sealed when the chain was built: a call made after the server
    /// was changed, disabled or removed is refused, not run as it was.
    sealed: Vec<u8>,
    tools: Vec<ToolEntry>,
    instructions: String,
    capability: String,
    hosts: Arc<host::Hosts>,
}

impl Capability for Server {
    fn name(&self) -> &str {
        &self.capability
    }

    fn source(&self) -> &'static str {
        "mcp"
    }

    fn tools(&self) -> Vec<Spec> {
        self.tools
            .iter()
            .map(|t| Spec {
                name: function_name(&self.spec.name, &t.name).into(),
                description: t.description.clone().into(),
                plugin: None,
                default: Permission::Ask,
                permissions: FunctionPermissions {
                    auto_approve: AutoApprove::Always,
                    danger_level: t.danger,
                },
                answered_by_user: false,
                schema: t.schema.clone(),
                examples: Vec::new(),
            })
            .collect()
    }

    fn prompt(&self) -> &str {
        &self.instructions
    }

    fn handle<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        tool: &'a str,
        input: &'a Value,
    ) -> BoxFuture<'a, Option<Result<ToolResult, String>>> {
        Box::pin(async move {
            let prefix = format!("mcp__{}__", self.spec.name);
            let own = tool.strip_prefix(&prefix)?;
            self.tools.iter().find(|t| t.name == own)?;
            let (user_id, id) = (self.spec.user_id, self.spec.id);
            let now = cx
                .st
                .db
                .read_with(async |c| store::mcp::get(c, user_id, id).await)
                .await;
            match now {
                Ok(Some(row)) if row.enabled && row.config == self.sealed => {}
                Ok(_) => {
                    return Some(Err(format!(
                        "the MCP server {} was changed, disabled or removed since this call was made",
                        self.spec.name
                    )));
                }
                Err(e) => return Some(Err(e.public_message())),
            }
            let answer = self
                .hosts
                .call(&cx.st.sandbox, &cx.st.http, &self.spec, own, input)
                .await;
            Some(answer.map(|result| ToolResult {
                result,
                pending_change_id: None,
            }))
        })
    }
}

/// A server's configuration as stored (sealed).
fn target_of(config: &McpTransport) -> host::Target {
    match config {
        McpTransport::Stdio { command, args, env } => host::Target::Stdio {
            argv: std::iter::once(command.clone())
                .chain(args.iter().cloned())
                .collect(),
            env: env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        },
        McpTransport::Http { url, headers } => host::Target::Http {
            url: url.clone(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        },
    }
}

/// A stored server opened.
struct Opened {
    row: store::mcp::ServerRow,
    config: McpTransport,
    listing: Listing,
}

impl Opened {
    fn open(dk: &SecretKey, row: store::mcp::ServerRow) -> Result<Opened> {
        let config = open_json_plain(dk, &config_aad(row.user_id, row.id), &row.config)?;
        let listing = open_json(dk, &listing_aad(row.user_id, row.id), &row.listing)?;
        Ok(Opened {
            row,
            config,
            listing,
        })
    }

    fn spec(&self) -> host::Spec {
        host::Spec {
            id: self.row.id,
            user_id: self.row.user_id,
            name: self.row.name.clone(),
            target: target_of(&self.config),
            timeout: Duration::from_secs(self.row.timeout_secs.max(1) as u64),
        }
    }

    fn tool_dtos(&self) -> Vec<McpToolDto> {
        tool_dtos(&self.row.name, &self.listing)
    }

    fn dto(&self, hosts: &host::Hosts) -> McpServerDto {
        let (command, args, url, secret_names) = match &self.config {
            McpTransport::Stdio { command, args, env } => (
                Some(command.clone()),
                args.clone(),
                None,
                env.keys().cloned().collect(),
            ),
            McpTransport::Http { url, headers } => (
                None,
                Vec::new(),
                Some(url.clone()),
                headers.keys().cloned().collect(),
            ),
        };
        let failed = hosts.failed(self.row.id);
        let status = if !self.row.enabled {
            "disabled"
        } else if failed.is_some() || self.row.status == "failed" {
            "failed"
        } else if hosts.running(self.row.id) {
            "running"
        } else {
            self.row.status.as_str()
        };
        McpServerDto {
            id: self.row.id,
            name: self.row.name.clone(),
            transport: self.row.transport.clone(),
            command,
            args,
            url,
            secret_names,
            enabled: self.row.enabled,
            timeout_secs: self.row.timeout_secs as u32,
            status: status.to_owned(),
            error: failed.or_else(|| self.listing.error.clone()),
            tools: self.tool_dtos(),
            skipped: self.listing.skipped.clone(),
            instructions: self.listing.instructions.clone(),
            updated_at: self.row.updated_at.clone(),
        }
    }
}

fn open_json_plain<T: for<'de> Deserialize<'de>>(
    dk: &SecretKey,
    aad: &str,
    sealed: &[u8],
) -> Result<T> {
    let bytes = crypto::open(dk, aad.as_bytes(), sealed)?;
    serde_json::from_slice(&bytes)
        .map_err(|_| Error::Internal("an MCP server's row is unreadable".into()))
}

fn tool_dtos(server: &str, listing: &Listing) -> Vec<McpToolDto> {
    listing
        .tools
        .iter()
        .map(|t| McpToolDto {
            name: t.name.clone(),
            function: function_name(server, &t.name),
            description: t.description.clone(),
            danger_level: t.danger,
        })
        .collect()
}

/// The user's chain: Hero's, and then each enabled server of theirs; kept until their
/// prompt generation moves.
pub async fn registry(st: &AppState, c: &mut Conn<'_>, user_id: i64) -> Result<Arc<Registry>> {
    let Some((generation, wrapped)) = store::mcp::generation(c, user_id).await? else {
        return Err(Error::NotFound("user"));
    };
    if let Some(kept) = kept(st, user_id, generation) {
        return Ok(kept);
    }
    let dk = st.keys.unwrap_data_key(user_id, &wrapped)?;
    build(st, c, &dk, user_id, generation).await
}

/// [`registry`] when the generation and data key are in hand (a turn has read them).
pub async fn registry_at(
    st: &AppState,
    c: &mut Conn<'_>,
    dk: &SecretKey,
    user_id: i64,
    generation: i64,
) -> Result<Arc<Registry>> {
    if let Some(kept) = kept(st, user_id, generation) {
        return Ok(kept);
    }
    build(st, c, dk, user_id, generation).await
}

fn kept(st: &AppState, user_id: i64, generation: i64) -> Option<Arc<Registry>> {
    let kept = st.mcp.kept.lock().unwrap_or_else(|p| p.into_inner());
    kept.get(&user_id)
        .filter(|(g, _)| *g == generation)
        .map(|(_, r)| r.clone())
}

async fn build(
    st: &AppState,
    c: &mut Conn<'_>,
    dk: &SecretKey,
    user_id: i64,
    generation: i64,
) -> Result<Arc<Registry>> {
    let rows = store::mcp::enabled(c, user_id).await?;
    let registry = if rows.is_empty() {
        st.functions.clone()
    } else {
        let mut caps: Vec<Arc<dyn Capability>> = Vec::new();
        for row in rows {
            let o = Opened::open(dk, row)?;
            caps.push(Arc::new(Server {
                spec: o.spec(),
                sealed: o.row.config.clone(),
                capability: format!("mcp-{}", o.row.name),
                instructions: o.listing.instructions.clone().unwrap_or_default(),
                tools: o.listing.tools,
                hosts: st.mcp.hosts.clone(),
            }));
        }
        Arc::new(st.functions.with(caps))
    };
    let mut kept = st.mcp.kept.lock().unwrap_or_else(|p| p.into_inner());
    if kept.len() >= MAX_KEPT {
        kept.clear();
    }
    kept.insert(user_id, (generation, registry.clone()));
    Ok(registry)
}

/// Whether `name` may name a server: `[a-z0-9-]{1,24}`.
fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 24
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(Error::Invalid(format!(
            "a server's name is 1 to 24 of a-z, 0-9 and -, not {name:?}"
        )));
    }
    Ok(())
}

fn check_timeout(t: Option<u32>) -> Result<i64> {
    match t.unwrap_or(DEFAULT_TIMEOUT_SECS) {
        t @ 1..=MAX_TIMEOUT_SECS => Ok(t as i64),
        t => Err(Error::Invalid(format!(
            "timeout_secs is 1 to {MAX_TIMEOUT_SECS}, not {t}"
        ))),
    }
}

/// Whether `path` is an absolute path under `/usr` or `/workspace`, without `..`.
fn inside_sandbox(path: &str) -> bool {
    let p = std::path::Path::new(path);
    p.is_absolute()
        && (p.starts_with("/usr") || p.starts_with("/workspace"))
        && !p
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
}

/// Checks a transport: a stdio command in the sandbox's reach, an HTTP URL the egress policy
/// lets through, names and values of a size and form that can be passed on.
async fn check_transport(st: &AppState, t: &McpTransport) -> Result<()> {
    let too_long = |what: &str| Error::Invalid(format!("{what} is too long"));
    match t {
        McpTransport::Stdio { command, args, env } => {
            if !inside_sandbox(command) {
                return Err(Error::Invalid(format!(
                    "the command {command:?} must be an absolute path under /usr or /workspace (your workspace, where bash runs): a stdio server runs in your sandbox, which sees nothing else"
                )));
            }
            if args.len() > MAX_ARGS {
                return Err(Error::Invalid(format!("more than {MAX_ARGS} arguments")));
            }
            let total: usize = command.len() + args.iter().map(String::len).sum::<usize>();
            if total > MAX_COMMAND_BYTES {
                return Err(too_long("the command line"));
            }
            if command.contains('\0') || args.iter().any(|a| a.contains('\0')) {
                return Err(Error::Invalid("the command holds a NUL character".into()));
            }
            if env.len() > MAX_SECRETS {
                return Err(Error::Invalid(format!(
                    "more than {MAX_SECRETS} environment variables"
                )));
            }
            for (k, v) in env {
                if !crate::execution::sandbox::valid_env_name(k) {
                    return Err(Error::Invalid(format!(
                        "{k:?} cannot name an environment variable: letters, digits and _, not starting with a digit"
                    )));
                }
                if v.contains(['\n', '\r', '\0']) {
                    return Err(Error::Invalid(format!(
                        "the value of {k} holds a line's end or a NUL character"
                    )));
                }
                if v.len() > MAX_SECRET_BYTES {
                    return Err(too_long(&format!("the value of {k}")));
                }
            }
        }
        McpTransport::Http { url, headers } => {
            if headers.len() > MAX_SECRETS {
                return Err(Error::Invalid(format!("more than {MAX_SECRETS} headers")));
            }
            for (k, v) in headers {
                if RESERVED_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
                    return Err(Error::Invalid(format!(
                        "the header {k} is Hero's to set, not a server's configuration"
                    )));
                }
                let ok = ::http::HeaderName::try_from(k.as_str()).is_ok()
                    && ::http::HeaderValue::try_from(v.as_str()).is_ok();
                if !ok {
                    return Err(Error::Invalid(format!("the header {k:?} cannot be sent")));
                }
                if v.len() > MAX_SECRET_BYTES {
                    return Err(too_long(&format!("the header {k}")));
                }
            }
            st.http.check_now(url).await.map_err(|why| {
                Error::Invalid(format!(
                    "{}: {why} (egress_allow in hero.toml)",
                    url.chars().take(200).collect::<String>()
                ))
            })?;
        }
    }
    Ok(())
}

fn transport_name(t: &McpTransport) -> &'static str {
    match t {
        McpTransport::Stdio { .. } => "stdio",
        McpTransport::Http { .. } => "http",
    }
}

async fn data_key(st: &AppState, user_id: i64) -> Result<SecretKey> {
    crate::accounts::users::data_key(&st.db, &st.keys, user_id).await
}

/// The user's servers.
pub async fn list(st: &AppState, user_id: i64) -> Result<Vec<McpServerDto>> {
    let dk = data_key(st, user_id).await?;
    let rows = st
        .db
        .read_with(async |c| store::mcp::list(c, user_id).await)
        .await?;
    rows.into_iter()
        .map(|r| Ok(Opened::open(&dk, r)?.dto(&st.mcp.hosts)))
        .collect()
}

async fn opened(st: &AppState, dk: &SecretKey, user_id: i64, id: i64) -> Result<Opened> {
    let row = st
        .db
        .read_with(async |c| store::mcp::get(c, user_id, id).await)
        .await?
        .ok_or(Error::NotFound("MCP server"))?;
    Opened::open(dk, row)
}

/// One of the user's servers.
pub async fn get(st: &AppState, user_id: i64, id: i64) -> Result<McpServerDto> {
    let dk = data_key(st, user_id).await?;
    Ok(opened(st, &dk, user_id, id).await?.dto(&st.mcp.hosts))
}

/// Adds a server, and when it is enabled starts it to list its tools (a server that does
/// not start is kept, failed, saying why).
pub async fn create(
    st: &AppState,
    user_id: i64,
    req: CreateMcpServerRequest,
) -> Result<McpServerDto> {
    check_name(&req.name)?;
    let timeout = check_timeout(req.timeout_secs)?;
    check_transport(st, &req.transport).await?;
    let dk = data_key(st, user_id).await?;
    let now = now_text();
    let id = st
        .db
        .write_with(async |tx| {
            // Two creates at once take turns (PostgreSQL): the count holds.
            store::users::lock(tx, user_id).await?;
            if store::mcp::count(tx, user_id).await? >= MAX_SERVERS {
                return Err(Error::Invalid(format!(
                    "you have {MAX_SERVERS} MCP servers, the most one may: remove one first"
                )));
            }
            let transport = transport_name(&req.transport);
            let Some(id) = store::mcp::insert(
                tx,
                user_id,
                &req.name,
                transport,
                req.enabled,
                timeout,
                &now,
            )
            .await?
            else {
                return Err(Error::Conflict(format!(
                    "you have an MCP server named {} already",
                    req.name
                )));
            };
            let row = store::mcp::ServerRow {
                id,
                user_id,
                name: req.name.clone(),
                transport: transport.to_owned(),
                enabled: req.enabled,
                timeout_secs: timeout,
                status: "untested".into(),
                config: seal_json(&dk, &config_aad(user_id, id), &req.transport)?,
                listing: seal_json(&dk, &listing_aad(user_id, id), &Listing::default())?,
                updated_at: now.clone(),
            };
            store::mcp::update(tx, &row, &now).await?;
            Ok(id)
        })
        .await?;
    if req.enabled {
        test(st, user_id, id).await?;
    }
    get(st, user_id, id).await
}

/// Changes a server: its connection is stopped (the next call starts it as it is now).
pub async fn update(
    st: &AppState,
    user_id: i64,
    id: i64,
    req: UpdateMcpServerRequest,
) -> Result<McpServerDto> {
    if let Some(n) = &req.name {
        check_name(n)?;
    }
    let timeout = req
        .timeout_secs
        .map(|t| check_timeout(Some(t)))
        .transpose()?;
    if let Some(t) = &req.transport {
        check_transport(st, t).await?;
    }
    let dk = data_key(st, user_id).await?;
    let now = now_text();
    let retest = st
        .db
        .write_with(async |tx| {
            let row = store::mcp::get(tx, user_id, id)
                .await?
                .ok_or(Error::NotFound("MCP server"))?;
            let mut row = row;
            let renamed = req.name.as_ref().is_some_and(|n| *n != row.name);
            if renamed {
                let old = format!("mcp__{}__", row.name);
                store::permissions::forget_prefix(tx, user_id, &old).await?;
            }
            let enabled_now = req.enabled == Some(true) && !row.enabled;
            if let Some(n) = &req.name {
                row.name = n.clone();
            }
            if let Some(e) = req.enabled {
                row.enabled = e;
            }
            if let Some(t) = timeout {
                row.timeout_secs = t;
            }
            if let Some(t) = &req.transport {
                row.transport = transport_name(t).to_owned();
                row.config = seal_json(&dk, &config_aad(user_id, id), t)?;
                row.status = "untested".into();
                row.listing = seal_json(&dk, &listing_aad(user_id, id), &Listing::default())?;
            }
            if !store::mcp::update(tx, &row, &now).await? {
                return Err(Error::Conflict(format!(
                    "you have an MCP server named {} already",
                    row.name
                )));
            }
            Ok(row.enabled && (req.transport.is_some() || enabled_now || renamed))
        })
        .await?;
    st.mcp.hosts.stop(id);
    if retest {
        test(st, user_id, id).await?;
    }
    get(st, user_id, id).await
}

/// Removes a server, stopping it.
pub async fn delete(st: &AppState, user_id: i64, id: i64) -> Result<()> {
    let gone = st
        .db
        .write_with(async |tx| {
            let Some(row) = store::mcp::get(tx, user_id, id).await? else {
                return Ok(false);
            };
            let tools = format!("mcp__{}__", row.name);
            store::permissions::forget_prefix(tx, user_id, &tools).await?;
            store::mcp::delete(tx, user_id, id).await
        })
        .await?;
    if !gone {
        return Err(Error::NotFound("MCP server"));
    }
    st.mcp.hosts.stop(id);
    Ok(())
}

/// Starts the server afresh and lists its tools, storing what it listed (or why it could
/// not); a server that fails is a result, not an error.
pub async fn test(st: &AppState, user_id: i64, id: i64) -> Result<McpTestResult> {
    let dk = data_key(st, user_id).await?;
    let o = opened(st, &dk, user_id, id).await?;
    let began = std::time::Instant::now();
    let tested = st.mcp.hosts.test(&st.sandbox, &st.http, &o.spec()).await;
    tracing::info!(server = %o.row.name, user = user_id, ok = tested.is_ok(), took_ms = began.elapsed().as_millis() as u64, "MCP server tested");
    // A disabled server is only tried: nothing calls it, so it is not kept running.
    if !o.row.enabled {
        st.mcp.hosts.stop(id);
    }
    let (status, listing) = match &tested {
        Ok(listed) => ("ready", listing_of(&o.row.name, listed)),
        Err(why) => (
            "failed",
            Listing {
                error: Some(why.clone()),
                ..o.listing.clone()
            },
        ),
    };
    store_listing(st, &dk, user_id, id, status, &listing).await?;
    Ok(McpTestResult {
        ok: tested.is_ok(),
        tools: tool_dtos(&o.row.name, &listing),
        skipped: listing.skipped.clone(),
        instructions: listing.instructions.clone(),
        error: listing.error.clone(),
    })
}

async fn store_listing(
    st: &AppState,
    dk: &SecretKey,
    user_id: i64,
    id: i64,
    status: &str,
    listing: &Listing,
) -> Result<()> {
    let sealed = seal_json(dk, &listing_aad(user_id, id), listing)?;
    let now = now_text();
    st.db
        .write_with(async |tx| {
            store::mcp::set_listing(tx, user_id, id, status, &sealed, &now).await
        })
        .await?;
    Ok(())
}

/// Lists a server's tools again after it said they changed, and stores them.
pub async fn relist(st: &AppState, user_id: i64, id: i64) -> Result<()> {
    let Some(listed) = st.mcp.hosts.relist(id).await else {
        return Ok(());
    };
    let dk = data_key(st, user_id).await?;
    let o = opened(st, &dk, user_id, id).await?;
    match listed {
        Ok(listed) => {
            let listing = listing_of(&o.row.name, &listed);
            tracing::info!(server = %o.row.name, user = user_id, tools = listing.tools.len(), "an MCP server's tools changed");
            store_listing(st, &dk, user_id, id, "ready", &listing).await
        }
        Err(why) => {
            let why = o.spec().scrub(&why);
            tracing::warn!(server = %o.row.name, user = user_id, "an MCP server's changed tools could not be listed: {why}");
            Ok(())
        }
    }
}

/// Passes each server's `tools/list_changed` on to [`relist`] while `st` lives.
pub fn watch_changes(st: &AppState, mut rx: tokio::sync::mpsc::Receiver<(i64, i64)>) {
    let weak = st.downgrade();
    let at_once = Arc::new(tokio::sync::Semaphore::new(RELISTS_AT_ONCE));
    tokio::spawn(async move {
        while let Some((user_id, id)) = rx.recv().await {
            let Some(st) = AppState::upgrade(&weak) else {
                return;
            };
            // A few at once: one server slow to list does not hold up another's.
            let Ok(turn) = at_once.clone().acquire_owned().await else {
                return;
            };
            tokio::spawn(async move {
                let _turn = turn;
                if let Err(e) = relist(&st, user_id, id).await {
                    tracing::warn!(
                        server = id,
                        "an MCP server's tools could not be stored: {e}"
                    );
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str, annotations: Option<(bool, bool)>) -> rmcp::model::Tool {
        let mut t = rmcp::model::Tool::new(
            name.to_owned(),
            description.to_owned(),
            serde_json::Map::from_iter([("type".to_owned(), Value::from("object"))]),
        );
        if let Some((read_only, destructive)) = annotations {
            let mut a = rmcp::model::ToolAnnotations::default();
            a.read_only_hint = Some(read_only);
            a.destructive_hint = Some(destructive);
            t.annotations = Some(a);
        }
        t
    }

    /// Tools become functions within their bounds, their danger from their hints; the rest
    /// are skipped, each named with why.
    #[test]
    fn a_listing_offers_what_it_can_and_names_the_rest() {
        let mut tools = vec![
            tool("read", "Reads.", Some((true, false))),
            tool("wipe", "Wipes.", Some((false, true))),
            tool("plain", "", None),
            tool("plain", "again", None),
            tool(&"t".repeat(60), "long", None),
            tool("has space", "odd", None),
            tool("wordy", &"w".repeat(MAX_DESCRIPTION_CHARS + 1), None),
        ];
        for i in 0..MAX_TOOLS {
            tools.push(tool(&format!("n{i}"), "many", None));
        }
        let l = listing_of(
            "kit",
            &host::Listed {
                tools,
                instructions: Some("Use kit.".into()),
            },
        );
        assert_eq!(l.tools.len(), MAX_TOOLS);
        let danger: Vec<(&str, DangerLevel)> = l
            .tools
            .iter()
            .take(3)
            .map(|t| (t.name.as_str(), t.danger))
            .collect();
        assert_eq!(
            danger,
            [
                ("read", DangerLevel::Safe),
                ("wipe", DangerLevel::Dangerous),
                ("plain", DangerLevel::Moderate)
            ]
        );
        assert_eq!(l.tools[2].description, "A tool of the MCP server kit.");
        let skipped = l.skipped.join("\n");
        for why in [
            "listed twice",
            "longer than 64",
            "characters other",
            "description longer",
            "past the 64 tools",
        ] {
            assert!(skipped.contains(why), "{why}: {skipped}");
        }
    }

    #[test]
    fn a_command_must_be_in_the_sandboxs_reach() {
        assert!(inside_sandbox("/usr/bin/python3"));
        assert!(inside_sandbox("/workspace/server"));
        for outside in [
            "/bin/sh",
            "server",
            "/usr/../etc/passwd",
            "/workspace/../x",
            "/home/u/x",
        ] {
            assert!(!inside_sandbox(outside), "{outside}");
        }
        assert!(check_name("a-1").is_ok());
        for bad in ["", "A", "a_b", &"a".repeat(25)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
