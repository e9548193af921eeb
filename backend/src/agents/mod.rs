//! Agents, and what each is told.
//!
//! - here: a user's configured AI backends (the rows, their sealed keys, the runtime a call
//!   is made with).
//! - [`context_files`]: an agent's context files (SOUL.md, USER.md, …): routing by agent
//!   type, seeding from templates, merging, sealed storage.
//! - [`prompt`]: the system prompt builder (sections, modes, the truncation pipeline).
//! - [`persona`]: an agent's prompt for a call, from its files and the session.
//! - [`abilities`]: every function and process a user has (reference 000's abilities), and
//!   the user's own processes, sealed.
//! - [`conditional`]: instructions given only when they apply (conditional abilities,
//!   `prompt_response_handler`).
//! - [`summon`]: an agent's persona files written from a one-line description.
//! - [`config`]: reference 004's configuration keys, their versions and the changes an
//!   agent proposes (SOUL.md and AGENTS.md, the user's standing instructions, each
//!   capability's instructions).
//!
//! May use the leaves, [`crate::store`], [`crate::accounts`], [`crate::providers`] and
//! [`crate::execution`]'s function specs; summoning streams through the conversation's hub.
//! Invariant: no function here returns an agent's key to a caller outside the server.
//!
//! Agents: a user's configured AI backends. The API key and the JSON config are sealed with
//! the user's data key; no function here returns the key to a caller outside the server —
//! [`AgentDto`] only says whether one is set, and [`AgentRuntime`] (which holds it) is
//! neither `Serialize` nor printable.

pub mod abilities;
pub mod conditional;
pub mod config;
pub mod context_files;
pub mod persona;
pub mod prompt;
pub mod spend;
pub mod summon;

use crate::store::Db;
use hero_shared::api::{AgentDto, AgentKind, CreateAgentRequest, ProviderKind, UpdateAgentRequest};
use serde_json::{Map, Value};

use crate::accounts::auth::AuthUser;
use crate::crypto::{self, Keyring, SecretKey};
use crate::execution::egress::EgressPolicy;
use crate::store::{self, agents::AgentRow};
use crate::{Error, Result, accounts::users, now_text};

pub const MAX_NAME_CHARS: usize = 100;
pub const MAX_MODEL_CHARS: usize = 200;
pub const MAX_API_KEY_BYTES: usize = 4096;
pub const MAX_CONFIG_BYTES: usize = 16 * 1024;
/// Config keys Hero sets itself on every call; letting a config override them would break
/// the call (a non-streaming reply to a streaming reader) or the conversation.
pub const RESERVED_CONFIG_KEYS: &[&str] = &[
    "stream",
    "stream_options",
    "messages",
    "model",
    "system",
    "prompt",
    "tools",
];

pub const DEMO_NAME: &str = "Hero demo (offline)";
pub const DEMO_MODEL: &str = "showcase";

fn key_aad(id: i64) -> Vec<u8> {
    format!("agents.api_key:{id}").into_bytes()
}
fn config_aad(id: i64) -> Vec<u8> {
    format!("agents.config:{id}").into_bytes()
}

/// An agent ready for a turn: where its model is (its key in clear, server-side only), what
/// it is told, and when its sessions are summarised.
#[derive(Debug)]
pub struct AgentRuntime {
    pub id: i64,
    pub name: String,
    pub endpoint: crate::providers::Endpoint,
    pub kind: AgentKind,
    /// The system prompt of its calls in this turn ([`crate::agents::persona`]).
    pub system: crate::providers::SystemPrompt,
    /// When its sessions are summarised.
    pub compact: Thresholds,
    /// The session is in batch mode (`/stream off`): each reply is asked for whole
    /// (`"stream": false`), and the session's messages are answered one at a time.
    pub batch: bool,
    /// Its own price, if it has one ([`spend`]).
    pub price: Option<hero_shared::api::Price>,
    /// Its default processes' ids, in order ([`abilities`]).
    pub default_processes: Vec<String>,
    /// The skills it may use: `None` all, else those named ([`crate::skills::View::allowed`]).
    pub skill_allow_list: Option<Vec<String>>,
}

/// The most names an agent's skill allow list may hold.
pub const MAX_SKILL_ALLOW_LIST: usize = 1_000;

/// A list of skills' names checked (each a skill's name, at most
/// [`MAX_SKILL_ALLOW_LIST`]), without repeats: an allow list, a message's `skill_filter`.
pub fn checked_skill_names(names: &[String]) -> Result<Vec<String>> {
    if names.len() > MAX_SKILL_ALLOW_LIST {
        return Err(Error::Invalid(format!(
            "a list of skills names at most {MAX_SKILL_ALLOW_LIST}"
        )));
    }
    let mut kept: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        crate::skills::format::check_name(n)
            .map_err(|why| Error::Invalid(format!("a list of skills: {why}")))?;
        if !kept.contains(n) {
            kept.push(n.clone());
        }
    }
    Ok(kept)
}

/// A skill allow list checked, as stored: a JSON array.
fn check_skill_allow_list(names: &[String]) -> Result<String> {
    let kept = checked_skill_names(names)?;
    Ok(serde_json::to_string(&kept).unwrap_or_else(|_| "[]".into()))
}

/// A session is summarised once its messages since the last summary pass either bound
/// (an agent may set its own: [`Thresholds`]).
pub const COMPACT_AFTER_MESSAGES: u64 = 200;
/// …or their estimated tokens pass this.
pub const COMPACT_AFTER_TOKENS: u64 = 60_000;
/// An agent's context window unless it says otherwise (tokens).
pub const CONTEXT_WINDOW: u64 = 128_000;
/// Reference 002 §16's `reserveTokensFloor`: what the window keeps free for the reply.
pub const RESERVE_TOKENS_FLOOR: u64 = 20_000;
/// Reference 002 §16's `softThresholdTokens`: how far before the summary the flush comes.
pub const SOFT_THRESHOLD_TOKENS: u64 = 4_000;

/// When an agent's sessions are summarised ([`crate::conversation::compact`]), and its
/// memory flushed first ([`crate::conversation::flush`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub messages: u64,
    pub tokens: u64,
    /// Its model's context window, in tokens.
    pub context_window: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            messages: COMPACT_AFTER_MESSAGES,
            tokens: COMPACT_AFTER_TOKENS,
            context_window: CONTEXT_WINDOW,
        }
    }
}

impl Thresholds {
    /// Where a conversation's memory is flushed (reference 002 §16): the window less its
    /// reserve, or the summary's threshold if lower, less the soft threshold (56,000 with
    /// the defaults), in [`crate::conversation::compact::tokens`]'s measure.
    /// 0 when the window or the threshold is too small to leave room for one: then only a
    /// summary flushes (first).
    pub fn flush_at(&self) -> u64 {
        let window = self.context_window.saturating_sub(RESERVE_TOKENS_FLOOR);
        window
            .min(self.tokens)
            .saturating_sub(SOFT_THRESHOLD_TOKENS)
    }
}

/// Reading a stored agent: its provider parsed, its config and key opened.
impl AgentRow {
    fn provider(&self) -> Result<ProviderKind> {
        ProviderKind::parse(&self.provider)
            .ok_or_else(|| Error::Internal(format!("agent {} has unknown provider", self.id)))
    }

    fn config(&self, dk: &SecretKey) -> Result<Map<String, Value>> {
        let bytes = crypto::open(dk, &config_aad(self.id), &self.config)?;
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(Error::Internal(format!(
                "agent {} config is not a JSON object",
                self.id
            ))),
        }
    }

    fn kind(&self) -> Result<AgentKind> {
        AgentKind::parse(&self.kind)
            .ok_or_else(|| Error::Internal(format!("unknown agent type {:?}", self.kind)))
    }

    fn api_key(&self, dk: &SecretKey) -> Result<Option<String>> {
        let Some(sealed) = &self.api_key else {
            return Ok(None);
        };
        String::from_utf8(crypto::open(dk, &key_aad(self.id), sealed)?)
            .map(Some)
            .map_err(|_| Error::Internal("stored api key is not text".into()))
    }

    fn dto(self, dk: &SecretKey) -> Result<AgentDto> {
        Ok(AgentDto {
            id: self.id,
            provider: self.provider()?,
            kind: self.kind()?,
            status: self.status.clone(),
            compact_after_messages: self.compact_messages.map(|n| n as u64),
            compact_after_tokens: self.compact_tokens.map(|n| n as u64),
            context_window: self.context_window.map(|n| n as u64),
            price: self.price(),
            default_processes: self.default_processes(),
            skill_allow_list: self.skill_allow_list(),
            config: Value::Object(self.config(dk)?),
            name: self.name,
            model: self.model,
            base_url: self.base_url,
            has_api_key: self.api_key.is_some(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

fn validate_text(what: &str, value: &str, max: usize) -> Result<String> {
    let v = value.trim();
    if v.is_empty() {
        return Err(Error::Invalid(format!("{what} must not be empty")));
    }
    if v.chars().count() > max {
        return Err(Error::Invalid(format!(
            "{what} is too long (at most {max} characters)"
        )));
    }
    if v.chars().any(char::is_control) {
        return Err(Error::Invalid(format!(
            "{what} must not contain control characters"
        )));
    }
    Ok(v.to_owned())
}

/// The form, and an address written as an IP literal, against the egress policy: a clear
/// 400 at once rather than a refused call later. (Names are checked on what they resolve
/// to, and every URL again at each call, against the policy in force then.)
fn validate_base_url(egress: &EgressPolicy, url: Option<&str>) -> Result<Option<String>> {
    let Some(url) = url.map(str::trim).filter(|u| !u.is_empty()) else {
        return Ok(None);
    };
    egress
        .check(url)
        .map_err(|e| Error::Invalid(format!("base_url: {e}")))?;
    Ok(Some(url.trim_end_matches('/').to_owned()))
}

fn validate_api_key(key: Option<&str>) -> Result<Option<String>> {
    let Some(key) = key.map(str::trim).filter(|k| !k.is_empty()) else {
        return Ok(None);
    };
    if key.len() > MAX_API_KEY_BYTES {
        return Err(Error::Invalid(format!(
            "api_key is too long (at most {MAX_API_KEY_BYTES} bytes)"
        )));
    }
    if key.chars().any(|c| c.is_control() || c == ' ') {
        return Err(Error::Invalid(
            "api_key must not contain spaces or control characters".into(),
        ));
    }
    Ok(Some(key.to_owned()))
}

/// A config must be a JSON object without the keys Hero sets itself.
pub fn validate_config(config: Option<&Value>) -> Result<Map<String, Value>> {
    let map = match config {
        None | Some(Value::Null) => return Ok(Map::new()),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(Error::Invalid("config must be a JSON object".into())),
    };
    if let Some(k) = map
        .keys()
        .find(|k| RESERVED_CONFIG_KEYS.contains(&k.as_str()))
    {
        return Err(Error::Invalid(format!(
            "config may not set \"{k}\": Hero sets it on every call (reserved: {})",
            RESERVED_CONFIG_KEYS.join(", ")
        )));
    }
    if serde_json::to_vec(&map)
        .map(|v| v.len())
        .unwrap_or(usize::MAX)
        > MAX_CONFIG_BYTES
    {
        return Err(Error::Invalid(format!(
            "config is too large (at most {MAX_CONFIG_BYTES} bytes)"
        )));
    }
    Ok(map)
}

/// A compaction threshold: at least 1, at most what SQLite holds.
fn threshold(what: &str, v: Option<u64>) -> Result<Option<i64>> {
    match v {
        None => Ok(None),
        Some(n) if n >= 1 && n <= i64::MAX as u64 => Ok(Some(n as i64)),
        Some(_) => Err(Error::Invalid(format!("{what} must be at least 1"))),
    }
}

/// Rules that tie fields together: each provider's needs.
fn check_combination(provider: ProviderKind, base_url: &Option<String>) -> Result<()> {
    if provider == ProviderKind::OpenAiCompatible && base_url.is_none() {
        return Err(Error::Invalid(
            "an openai-compatible agent needs a base_url (for example http://127.0.0.1:11434/v1 for Ollama)".into(),
        ));
    }
    Ok(())
}

struct Fields {
    name: String,
    provider: ProviderKind,
    model: String,
    base_url: Option<String>,
    api_key: Option<String>,
    config: Map<String, Value>,
    kind: AgentKind,
}

impl Fields {
    fn plain(&self) -> store::agents::AgentFields<'_> {
        store::agents::AgentFields {
            name: &self.name,
            provider: self.provider.as_str(),
            model: &self.model,
            base_url: self.base_url.as_deref(),
            kind: self.kind.as_str(),
        }
    }
}

async fn insert(
    c: &mut crate::store::Write<'_>,
    user_id: i64,
    dk: &SecretKey,
    f: &Fields,
) -> Result<i64> {
    let id = store::agents::insert(c, user_id, &f.plain(), &now_text()).await?;
    write_secrets(c, id, dk, f).await?;
    Ok(id)
}

/// Seals the key and the config, each bound to the agent's row, and stores them.
async fn write_secrets(
    c: &mut crate::store::Write<'_>,
    id: i64,
    dk: &SecretKey,
    f: &Fields,
) -> Result<()> {
    let config = serde_json::to_vec(&f.config).map_err(|e| Error::Internal(e.to_string()))?;
    let sealed_key = f
        .api_key
        .as_ref()
        .map(|k| crypto::seal(dk, &key_aad(id), k.as_bytes()));
    let sealed_config = crypto::seal(dk, &config_aad(id), &config);
    store::agents::set_secrets(c, id, sealed_key.as_deref(), &sealed_config).await
}

/// The offline demo every new account starts with (called inside account creation).
pub(crate) async fn insert_demo(
    c: &mut crate::store::Write<'_>,
    user_id: i64,
    dk: &SecretKey,
) -> Result<i64> {
    let f = Fields {
        name: DEMO_NAME.into(),
        provider: ProviderKind::Scripted,
        model: DEMO_MODEL.into(),
        base_url: None,
        api_key: None,
        config: Map::new(),
        kind: AgentKind::Open,
    };
    insert(c, user_id, dk, &f).await
}

pub async fn create(
    db: &Db,
    keys: &Keyring,
    egress: &EgressPolicy,
    user: &AuthUser,
    req: CreateAgentRequest,
) -> Result<AgentDto> {
    let f = Fields {
        name: validate_text("name", &req.name, MAX_NAME_CHARS)?,
        provider: req.provider,
        model: validate_text("model", &req.model, MAX_MODEL_CHARS)?,
        base_url: validate_base_url(egress, req.base_url.as_deref())?,
        api_key: validate_api_key(req.api_key.as_deref())?,
        config: validate_config(req.config.as_ref())?,
        kind: req.kind,
    };
    check_combination(f.provider, &f.base_url)?;
    let compaction = store::agents::Compaction {
        messages: threshold("compact_after_messages", req.compact_after_messages)?,
        tokens: threshold("compact_after_tokens", req.compact_after_tokens)?,
        context_window: threshold("context_window", req.context_window)?,
    };
    let dk = users::data_key(db, keys, user.id()).await?;
    let mut tx = db.begin().await?;
    let id = insert(&mut tx, user.id(), &dk, &f).await?;
    store::agents::set_compaction(&mut tx, id, compaction).await?;
    tx.commit().await?;
    get(db, keys, user, id).await
}

async fn fetch(ex: &mut crate::store::Conn<'_>, user_id: i64, id: i64) -> Result<AgentRow> {
    store::agents::get(ex, user_id, id)
        .await?
        .ok_or(Error::NotFound("agent"))
}

pub async fn get(db: &Db, keys: &Keyring, user: &AuthUser, id: i64) -> Result<AgentDto> {
    let dk = users::data_key(db, keys, user.id()).await?;
    fetch(&mut db.conn().await?, user.id(), id).await?.dto(&dk)
}

/// The skills the user's agent `id` may use (`None`: all); not found for another user's.
pub async fn skill_allow_list(db: &Db, user_id: i64, id: i64) -> Result<Option<Vec<String>>> {
    Ok(fetch(&mut db.conn().await?, user_id, id)
        .await?
        .skill_allow_list())
}

pub async fn list(db: &Db, keys: &Keyring, user: &AuthUser) -> Result<Vec<AgentDto>> {
    let dk = users::data_key(db, keys, user.id()).await?;
    let rows = store::agents::list(db, user.id()).await?;
    rows.into_iter().map(|r| r.dto(&dk)).collect()
}

pub async fn update(
    db: &Db,
    keys: &Keyring,
    egress: &EgressPolicy,
    user: &AuthUser,
    id: i64,
    req: UpdateAgentRequest,
) -> Result<AgentDto> {
    let dk = users::data_key(db, keys, user.id()).await?;
    let mut tx = db.begin().await?;
    let row = fetch(&mut tx, user.id(), id).await?;
    let current_key = row.api_key(&dk)?;
    let new_base = req
        .base_url
        .as_ref()
        .map(|u| validate_base_url(egress, u.as_deref()))
        .transpose()?;
    let moved = new_base.as_ref().is_some_and(|u| *u != row.base_url)
        || req
            .provider
            .is_some_and(|p| Some(p) != ProviderKind::parse(&row.provider));
    let f = Fields {
        name: match &req.name {
            Some(n) => validate_text("name", n, MAX_NAME_CHARS)?,
            None => row.name.clone(),
        },
        provider: req.provider.unwrap_or(row.provider()?),
        model: match &req.model {
            Some(m) => validate_text("model", m, MAX_MODEL_CHARS)?,
            None => row.model.clone(),
        },
        base_url: new_base.unwrap_or_else(|| row.base_url.clone()),
        // A stored key goes only where it was meant to go: changing the base URL or the
        // provider forgets it unless the update sends a key again.
        api_key: match &req.api_key {
            Some(k) => validate_api_key(k.as_deref())?,
            None if moved => None,
            None => current_key,
        },
        config: match &req.config {
            Some(c) => validate_config(Some(c))?,
            None => row.config(&dk)?,
        },
        kind: row.kind()?,
    };
    check_combination(f.provider, &f.base_url)?;
    store::agents::update(&mut tx, id, &f.plain(), &now_text()).await?;
    let messages = match req.compact_after_messages {
        Some(v) => threshold("compact_after_messages", v)?,
        None => row.compact_messages,
    };
    let tokens = match req.compact_after_tokens {
        Some(v) => threshold("compact_after_tokens", v)?,
        None => row.compact_tokens,
    };
    let context_window = match req.context_window {
        Some(v) => threshold("context_window", v)?,
        None => row.context_window,
    };
    let compaction = store::agents::Compaction {
        messages,
        tokens,
        context_window,
    };
    store::agents::set_compaction(&mut tx, id, compaction).await?;
    if let Some(price) = &req.price {
        if let Some(p) = price {
            spend::check_price(p)?;
        }
        let json = price.map(|p| serde_json::to_string(&p).unwrap_or_default());
        store::agents::set_price(&mut tx, id, json.as_deref()).await?;
    }
    if let Some(names) = &req.skill_allow_list {
        let json = names
            .as_ref()
            .map(|n| check_skill_allow_list(n))
            .transpose()?;
        store::agents::set_skill_allow_list(&mut tx, id, json.as_deref()).await?;
    }
    if let Some(ids) = &req.default_processes {
        let ids = abilities::check_defaults(&mut tx, user.id(), ids).await?;
        let json = serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into());
        store::agents::set_default_processes(&mut tx, id, &json).await?;
    }
    write_secrets(&mut tx, id, &dk, &f).await?;
    tx.commit().await?;
    get(db, keys, user, id).await
}

/// Soft delete: the row stays for the sessions and usage that name it; its memory goes
/// (nothing can reach it any more, and it would count against the user's total).
pub async fn delete(db: &Db, user: &AuthUser, id: i64) -> Result<()> {
    if !store::agents::soft_delete(db, user.id(), id, &now_text()).await? {
        return Err(Error::NotFound("agent"));
    }
    db.write_with(async |tx| store::memory::delete_agent(tx, id).await)
        .await?;
    Ok(())
}

/// `id` if it names a live agent of the user; a clear 400 otherwise.
pub(crate) async fn check_usable(
    ex: &mut crate::store::Conn<'_>,
    user_id: i64,
    id: i64,
) -> Result<i64> {
    fetch(ex, user_id, id)
        .await
        .map(|r| r.id)
        .map_err(|_| Error::Invalid("agent_id names no agent of yours".into()))
}

/// The user's first live agent, the default for a new session.
pub(crate) async fn first_usable(
    ex: &mut crate::store::Conn<'_>,
    user_id: i64,
) -> Result<Option<i64>> {
    store::agents::first_live(ex, user_id).await
}

/// What a turn needs before it starts, read in one statement: the user's data key, the
/// session's agent, and that agent's row while it stands.
pub(crate) struct TurnSetup {
    pub dk: SecretKey,
    agent_id: Option<i64>,
    row: Option<AgentRow>,
    /// The user's name, for the prompt.
    pub username: String,
    /// A sub-session (status `agent`): its prompt is minimal.
    pub sub_session: bool,
    /// The user's prompt generation: a prompt built under another is out of date.
    pub prompt_gen: i64,
    /// The session's replies stream (false: batch mode).
    streaming: bool,
}

/// The user's data key and the agent of their session `session_id` (not found: someone
/// else's session, or none), read on the hot connection.
pub(crate) async fn turn_setup(
    c: &mut crate::store::Conn<'_>,
    keys: &Keyring,
    user: &AuthUser,
    session_id: i64,
) -> Result<TurnSetup> {
    let read = store::agents::turn_setup(c, user.id(), session_id).await?;
    let store::agents::TurnSetupRow {
        data_key,
        agent_id,
        agent: row,
        username,
        session_status,
        prompt_gen,
        streaming,
    } = read.ok_or(Error::NotFound("session"))?;
    let dk = keys.unwrap_data_key(user.id(), &data_key)?;
    Ok(TurnSetup {
        dk,
        agent_id,
        row,
        username,
        sub_session: session_status == "agent",
        prompt_gen,
        streaming,
    })
}

impl TurnSetup {
    /// Everything needed to call the session's agent, its key unsealed. Server-side only.
    pub(crate) fn agent(self) -> Result<AgentRuntime> {
        if self.agent_id.is_none() {
            return Err(Error::Invalid(
                "this session has no agent; choose one for it first".into(),
            ));
        }
        let row = self.row.ok_or_else(|| {
            Error::Invalid("this session's agent was deleted; choose another agent for it".into())
        })?;
        let mut agent = row.runtime(&self.dk)?;
        agent.batch = !self.streaming;
        Ok(agent)
    }
}

impl AgentRow {
    /// Its default processes' ids, in order; a list stored that cannot be read is empty.
    fn default_processes(&self) -> Vec<String> {
        serde_json::from_str(&self.default_processes).unwrap_or_default()
    }

    /// The skills it may use (`None`: all); a list stored that cannot be read is none.
    fn skill_allow_list(&self) -> Option<Vec<String>> {
        self.skill_allow_list
            .as_deref()
            .map(|l| serde_json::from_str(l).unwrap_or_default())
    }

    /// Its own price; one stored that cannot be read is none.
    fn price(&self) -> Option<hero_shared::api::Price> {
        self.price
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
    }

    /// Everything needed to call the agent, its key unsealed. Server-side only.
    fn runtime(self, dk: &SecretKey) -> Result<AgentRuntime> {
        let api_key = self.api_key(dk)?;
        let kind = self.kind()?;
        let price = self.price();
        let default_processes = self.default_processes();
        let skill_allow_list = self.skill_allow_list();
        Ok(AgentRuntime {
            default_processes,
            skill_allow_list,
            id: self.id,
            endpoint: crate::providers::Endpoint {
                provider: self.provider()?,
                config: self.config(dk)?,
                model: self.model,
                base_url: self.base_url,
                api_key,
            },
            kind,
            system: crate::providers::SystemPrompt::default(),
            batch: false,
            price,
            compact: Thresholds {
                messages: self
                    .compact_messages
                    .map_or(COMPACT_AFTER_MESSAGES, |n| n.max(1) as u64),
                tokens: self
                    .compact_tokens
                    .map_or(COMPACT_AFTER_TOKENS, |n| n.max(1) as u64),
                context_window: self
                    .context_window
                    .map_or(CONTEXT_WINDOW, |n| n.max(1) as u64),
            },
            name: self.name,
        })
    }
}

/// One of the user's agents, ready to be called (summoning calls an agent outside any
/// session).
pub(crate) async fn runtime(
    db: &Db,
    keys: &Keyring,
    user_id: i64,
    id: i64,
) -> Result<AgentRuntime> {
    let dk = users::data_key(db, keys, user_id).await?;
    fetch(&mut db.conn().await?, user_id, id)
        .await?
        .runtime(&dk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{signed_in, state};
    use serde_json::json;

    fn req(v: Value) -> CreateAgentRequest {
        serde_json::from_value(v).unwrap()
    }

    #[tokio::test]
    async fn new_users_get_the_offline_demo() {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let list = list(&st.db, &st.keys, &alice).await.unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(
            (list[0].name.as_str(), list[0].provider),
            (DEMO_NAME, ProviderKind::Scripted)
        );
    }

    #[tokio::test]
    async fn keys_are_sealed_and_never_in_a_dto() {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let a = create(
            &st.db,
            &st.keys,
            &st.settings.egress,
            &alice,
            req(json!({
                "name": "Claude", "provider": "anthropic", "model": "claude-x",
                "api_key": "sk-secret-123", "config": {"max_tokens": 1000}
            })),
        )
        .await
        .unwrap();
        assert!(a.has_api_key);
        assert!(!serde_json::to_string(&a).unwrap().contains("sk-secret-123"));
        use crate::store::testing::{Arg, bytes};
        let raw = bytes(
            &st.db,
            "SELECT api_key FROM agents WHERE id = $1",
            &[Arg::Int(a.id)],
        )
        .await
        .unwrap();
        assert!(!raw.windows(13).any(|w| w == b"sk-secret-123"));
        // Only a turn unseals it, for the session's agent, and only for the session's owner.
        let session = crate::conversation::sessions::create(
            &st,
            &alice,
            serde_json::from_value(json!({"name": "s", "agent_id": a.id})).unwrap(),
        )
        .await
        .unwrap();
        let setup = st
            .db
            .read_with(async |c| turn_setup(c, &st.keys, &alice, session.id).await)
            .await
            .unwrap();
        assert_eq!(
            setup.agent().unwrap().endpoint.api_key.as_deref(),
            Some("sk-secret-123")
        );
        let bob = signed_in(&st, "bob").await;
        let theirs = st
            .db
            .read_with(async |c| turn_setup(c, &st.keys, &bob, session.id).await)
            .await;
        assert!(matches!(theirs, Err(Error::NotFound(_))));
        // Partial update keeps the key; null removes it.
        let renamed = update(
            &st.db,
            &st.keys,
            &st.settings.egress,
            &alice,
            a.id,
            serde_json::from_value(json!({"name": "C2"})).unwrap(),
        )
        .await
        .unwrap();
        assert!(renamed.has_api_key);
        let cleared = update(
            &st.db,
            &st.keys,
            &st.settings.egress,
            &alice,
            a.id,
            serde_json::from_value(json!({"api_key": null})).unwrap(),
        )
        .await
        .unwrap();
        assert!(!cleared.has_api_key);
        // A key does not follow the agent to another host.
        update(
            &st.db,
            &st.keys,
            &st.settings.egress,
            &alice,
            a.id,
            serde_json::from_value(json!({"api_key": "sk-again-123"})).unwrap(),
        )
        .await
        .unwrap();
        let same_host = update(
            &st.db,
            &st.keys,
            &st.settings.egress,
            &alice,
            a.id,
            serde_json::from_value(json!({"base_url": null})).unwrap(),
        )
        .await
        .unwrap();
        assert!(same_host.has_api_key);
        let moved = update(
            &st.db,
            &st.keys,
            &st.settings.egress,
            &alice,
            a.id,
            serde_json::from_value(json!({"base_url": "https://elsewhere.example"})).unwrap(),
        )
        .await
        .unwrap();
        assert!(!moved.has_api_key);
    }

    #[tokio::test]
    async fn bad_agents_are_refused_with_reasons() {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        for (body, want) in [
            (
                json!({"name": "x", "provider": "openai", "model": "m", "config": {"stream": false}}),
                "may not set \"stream\"",
            ),
            (
                json!({"name": "x", "provider": "openai", "model": "m", "config": {"messages": []}}),
                "may not set \"messages\"",
            ),
            (
                json!({"name": "x", "provider": "openai", "model": "m", "config": [1]}),
                "JSON object",
            ),
            (
                json!({"name": "x", "provider": "openai-compatible", "model": "m"}),
                "needs a base_url",
            ),
            (
                json!({"name": "x", "provider": "openai", "model": "m", "base_url": "ftp://h"}),
                "http:// or https://",
            ),
            (
                json!({"name": "x", "provider": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:11434/v1"}),
                "127.0.0.1:11434 is a loopback address; an administrator can allow it with HERO_EGRESS_ALLOW",
            ),
            (
                json!({"name": "x", "provider": "openai", "model": "m", "base_url": "http://169.254.169.254/"}),
                "HERO_EGRESS_ALLOW",
            ),
            (
                json!({"name": "x", "provider": "openai", "model": "m", "base_url": "https://u:p@api.example.com"}),
                "base_url",
            ),
            (
                json!({"name": " ", "provider": "openai", "model": "m"}),
                "name must not be empty",
            ),
            (
                json!({"name": "x", "provider": "openai", "model": ""}),
                "model must not be empty",
            ),
        ] {
            let e = create(&st.db, &st.keys, &st.settings.egress, &alice, req(body))
                .await
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
        }
        assert_eq!(list(&st.db, &st.keys, &alice).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn agents_are_private_and_soft_deleted() {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let bob = signed_in(&st, "bob").await;
        let a = create(
            &st.db,
            &st.keys,
            &st.settings.egress,
            &alice,
            req(json!({"name": "A", "provider": "openai", "model": "m"})),
        )
        .await
        .unwrap();
        assert!(matches!(
            get(&st.db, &st.keys, &bob, a.id).await,
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            delete(&st.db, &bob, a.id).await,
            Err(Error::NotFound(_))
        ));
        delete(&st.db, &alice, a.id).await.unwrap();
        assert!(matches!(
            get(&st.db, &st.keys, &alice, a.id).await,
            Err(Error::NotFound(_))
        ));
        use crate::store::testing::{Arg, int};
        let n = int(
            &st.db,
            "SELECT COUNT(*) FROM agents WHERE id = $1",
            &[Arg::Int(a.id)],
        )
        .await
        .unwrap();
        assert_eq!(n, 1);
    }
}
