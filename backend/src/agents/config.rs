//! Reference 004's configuration, per user: the keys an agent's behaviour is read from,
//! every version kept, and the changes an agent proposes for the user to approve.
//!
//! | key                 | holds                                          | of        |
//! |---------------------|------------------------------------------------|-----------|
//! | `soul`, `agents`    | the session agent's SOUL.md and AGENTS.md      | an agent  |
//! | `processes`         | the agent's default processes, one id a line   | an agent  |
//! | `system_prompt`     | the user's standing instructions (Extra context) | the user |
//! | `capability:<name>` | a capability's instructions (`## Available Capabilities`) | the user |
//!
//! Versions are appended, never changed; the highest is current. A capability's first
//! version is its shipped default, stored the first time it is read (two first reads store
//! one: the version number is unique); a file key's first is the file as first read, and the
//! file stays the truth: a file changed elsewhere (the Files page, summoning) is recorded as
//! a version when next read, and a version written here writes the file in the same
//! transaction. Content and reason are sealed with the user's data key, bound to the
//! version's user, key, agent and number (a change's to its id).
//!
//! A change an agent proposes (`propose_config_change`) is stored with its call's request,
//! by the request's id, against the version current then ([`propose_in`]); the user's
//! decision on the call decides it in the decision's transaction ([`decide_in`]): an
//! approval writes the next version only while the base is still current (else the change
//! is `stale`). At most [`MAX_PENDING`] wait per user.

use hero_shared::api::{AgentKind, DiffOp};
use hero_shared::calls::ProposedChange;
use serde::{Deserialize, Serialize};

use crate::crypto::{self, SecretKey};
use crate::execution::functions::Registry;
use crate::store::{Conn, Write};
use crate::{Error, Result, agents::context_files, now_text, store};

/// The most a key's content may hold (file keys: [`context_files::MAX_FILE_BYTES`]).
pub const MAX_CONTENT_BYTES: usize = 64 << 10;

/// The most characters a reason may have.
pub const MAX_REASON_CHARS: usize = 1_000;

/// The most changes that may wait for a user's decision at once.
pub const MAX_PENDING: i64 = 20;

/// The longest a diff may take; past it, it is coarser ([`diff`]).
pub const DIFF_DEADLINE: std::time::Duration = std::time::Duration::from_millis(50);

/// The most versions one key keeps for a user: past it, writing it is refused.
pub const MAX_VERSIONS: i64 = 1_000;

/// The function that proposes a change ([`propose_in`] keeps its proposal).
pub const PROPOSE: &str = "propose_config_change";

/// A configuration key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    Soul,
    Agents,
    /// The agent's default processes (reference 000's abilities), one id a line.
    Processes,
    SystemPrompt,
    Capability(String),
}

impl Key {
    pub fn name(&self) -> String {
        match self {
            Key::Soul => "soul".into(),
            Key::Agents => "agents".into(),
            Key::Processes => "processes".into(),
            Key::SystemPrompt => "system_prompt".into(),
            Key::Capability(c) => format!("capability:{c}"),
        }
    }

    /// The context file it is, for an agent's keys.
    pub fn file(&self) -> Option<&'static str> {
        match self {
            Key::Soul => Some("SOUL.md"),
            Key::Agents => Some("AGENTS.md"),
            _ => None,
        }
    }

    /// Whether it is an agent's (its versions are the agent's, for the user).
    pub fn of_agent(&self) -> bool {
        matches!(self, Key::Soul | Key::Agents | Key::Processes)
    }

    pub fn max_bytes(&self) -> usize {
        match self.file() {
            Some(_) => context_files::MAX_FILE_BYTES,
            None => MAX_CONTENT_BYTES,
        }
    }

    pub fn description(&self) -> String {
        match self {
            Key::Soul => "The agent's SOUL.md: who it is, its voice and values.".into(),
            Key::Agents => "The agent's AGENTS.md: how it works and the rules it keeps.".into(),
            Key::Processes => "The agent's default processes, given in full in its prompt: one id a line (system:NAME or user:N).".into(),
            Key::SystemPrompt => {
                "The user's standing instructions, given to every agent in the system prompt's extra context.".into()
            }
            Key::Capability(c) => format!("Instructions for the {c} capability: when and how to use its tools."),
        }
    }
}

/// The keys there are: the fixed ones, then one per capability with instructions.
pub fn keys(registry: &Registry) -> Vec<Key> {
    let mut keys = vec![Key::Soul, Key::Agents, Key::Processes, Key::SystemPrompt];
    keys.extend(
        registry
            .prompts()
            .map(|(n, _)| Key::Capability(n.to_owned())),
    );
    keys
}

/// Reads a key's name; an unknown one is missing, and the message lists those there are.
pub fn parse(registry: &Registry, key: &str) -> Result<Key> {
    keys(registry)
        .into_iter()
        .find(|k| k.name() == key)
        .ok_or_else(|| Error::Missing(unknown(registry, key)))
}

/// Why a key is not one, naming those that are.
pub fn unknown(registry: &Registry, key: &str) -> String {
    let names: Vec<String> = keys(registry).iter().map(Key::name).collect();
    format!(
        "there is no config key `{key}`; the keys are {}",
        names.join(", ")
    )
}

/// A capability's shipped instructions.
fn default_of<'r>(registry: &'r Registry, key: &Key) -> Option<&'r str> {
    let Key::Capability(name) = key else {
        return None;
    };
    registry.prompts().find(|(n, _)| n == name).map(|(_, p)| p)
}

/// Whose a key's versions are: the user's, and the agent for an agent's keys (0 else).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    pub user_id: i64,
    pub agent_id: i64,
    /// The agent's type, for an agent's keys (where its files go).
    pub kind: Option<AgentKind>,
}

/// The scope of `key` for the user: an agent's key needs an agent of theirs.
pub async fn scope(
    c: &mut Conn<'_>,
    user_id: i64,
    key: &Key,
    agent_id: Option<i64>,
) -> Result<Scope> {
    if !key.of_agent() {
        return Ok(Scope {
            user_id,
            agent_id: 0,
            kind: None,
        });
    }
    let Some(agent_id) = agent_id else {
        return Err(Error::Invalid(format!(
            "`{}` is an agent's key: say which agent with agent_id",
            key.name()
        )));
    };
    let row = store::agents::get(c, user_id, agent_id)
        .await?
        .ok_or(Error::NotFound("agent"))?;
    let kind =
        AgentKind::parse(&row.kind).ok_or_else(|| Error::Internal("unknown agent type".into()))?;
    Ok(Scope {
        user_id,
        agent_id,
        kind: Some(kind),
    })
}

/// What a version holds, sealed together.
#[derive(Serialize, Deserialize)]
struct Sealed {
    content: String,
    #[serde(default)]
    reason: String,
}

fn version_aad(s: Scope, key: &str, version: i64) -> Vec<u8> {
    format!(
        "config_version:{}:{key}:{}:{version}",
        s.user_id, s.agent_id
    )
    .into_bytes()
}

fn change_aad(user_id: i64, id: &str) -> Vec<u8> {
    format!("config_change:{user_id}:{id}").into_bytes()
}

fn seal(dk: &SecretKey, aad: &[u8], content: &str, reason: &str) -> Result<Vec<u8>> {
    let body = serde_json::to_vec(&Sealed {
        content: content.to_owned(),
        reason: reason.to_owned(),
    })
    .map_err(|e| Error::Internal(e.to_string()))?;
    Ok(crypto::seal(dk, aad, &body))
}

fn open(dk: &SecretKey, aad: &[u8], sealed: &[u8]) -> Result<(String, String)> {
    let bytes = crypto::open(dk, aad, sealed)?;
    let s: Sealed = serde_json::from_slice(&bytes)
        .map_err(|_| Error::Internal("a config version is unreadable".into()))?;
    Ok((s.content, s.reason))
}

/// A key's content at a version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Current {
    pub version: i64,
    pub content: String,
}

/// The file an agent's key is, as the user's calls read it.
async fn file_of(c: &mut Conn<'_>, dk: &SecretKey, s: Scope, name: &str) -> Result<String> {
    let files = context_files::merged(c, dk, s.agent_id, s.user_id).await?;
    Ok(files
        .into_iter()
        .find(|f| f.name == name)
        .map(|f| f.content)
        .unwrap_or_default())
}

/// The key's current version, as stored (without a version: 0 and nothing).
async fn stored(c: &mut Conn<'_>, dk: &SecretKey, s: Scope, key: &Key) -> Result<Current> {
    let name = key.name();
    match store::configs::current(c, s.user_id, &name, s.agent_id).await? {
        Some(row) => Ok(Current {
            version: row.version,
            content: open(dk, &version_aad(s, &name, row.version), &row.sealed)?.0,
        }),
        None => Ok(Current {
            version: 0,
            content: String::new(),
        }),
    }
}

/// Appends version `version` (unless another took that number first: answers whether
/// this one was stored).
#[allow(clippy::too_many_arguments)]
async fn append(
    tx: &mut Conn<'_>,
    dk: &SecretKey,
    s: Scope,
    key: &Key,
    version: i64,
    content: &str,
    author: &str,
    reason: &str,
    change_id: Option<&str>,
) -> Result<bool> {
    let name = key.name();
    let sealed = seal(dk, &version_aad(s, &name, version), content, reason)?;
    store::configs::insert(
        tx,
        s.user_id,
        &name,
        s.agent_id,
        version,
        &sealed,
        author,
        change_id,
        &now_text(),
    )
    .await
}

/// The key's current content, recording first what it holds without a version: a
/// capability's default as v1, a file as it is read (as v1, or as the next version when it
/// was changed elsewhere). The user's `system_prompt` with no version is empty, version 0.
pub async fn current(
    tx: &mut Conn<'_>,
    registry: &Registry,
    dk: &SecretKey,
    s: Scope,
    key: &Key,
) -> Result<Current> {
    let now = stored(tx, dk, s, key).await?;
    let seed = match (key.file(), default_of(registry, key)) {
        // The agent's row is the truth: a change made elsewhere (the agents page) is
        // recorded as a version when next read.
        _ if *key == Key::Processes => {
            let ids = processes_of(tx, s).await?;
            (now.version == 0 || ids != now.content).then(|| {
                let (author, why) = match now.version {
                    0 => ("hero", "the default processes as first read"),
                    _ => (
                        "user",
                        "the default processes as changed outside this history",
                    ),
                };
                (ids, author, why)
            })
        }
        (Some(file), _) => {
            context_files::ensure_seeded(
                tx,
                dk,
                s.agent_id,
                s.user_id,
                s.kind.unwrap_or(AgentKind::Open),
            )
            .await?;
            let text = file_of(tx, dk, s, file).await?;
            (now.version == 0 || text != now.content).then(|| {
                let why = if now.version == 0 {
                    "the file as first read"
                } else {
                    "the file as changed outside this history"
                };
                (text, if now.version == 0 { "hero" } else { "user" }, why)
            })
        }
        (None, Some(default)) if now.version == 0 => {
            Some((default.to_owned(), "hero", "the shipped default"))
        }
        _ => None,
    };
    let Some((content, author, reason)) = seed else {
        return Ok(now);
    };
    // Two first reads race: one stores the version, the other reads it.
    append(
        tx,
        dk,
        s,
        key,
        now.version + 1,
        &content,
        author,
        reason,
        None,
    )
    .await?;
    stored(tx, dk, s, key).await
}

/// A capability's shipped instructions when they are newer than the ones the user's key
/// started from (its newest version by `hero`): the change they would make to the current
/// version. They are only offered; [`adopt_default`] writes them.
pub async fn offered(
    c: &mut Conn<'_>,
    registry: &Registry,
    dk: &SecretKey,
    s: Scope,
    key: &Key,
) -> Result<Option<Vec<DiffOp>>> {
    let Some(shipped) = default_of(registry, key) else {
        return Ok(None);
    };
    let all = versions(c, dk, s, key).await?;
    let Some(from) = all.iter().find(|v| v.author == "hero") else {
        return Ok(None);
    };
    let current = all.first().map_or("", |v| v.content.as_str());
    Ok((from.content != shipped && current != shipped).then(|| diff(current, shipped)))
}

/// Writes the shipped instructions of a capability as its next version (by `hero`).
pub async fn adopt_default(
    tx: &mut Write<'_>,
    registry: &Registry,
    dk: &SecretKey,
    s: Scope,
    key: &Key,
) -> Result<i64> {
    let shipped = default_of(registry, key)
        .ok_or_else(|| Error::Invalid(format!("{} has no shipped default", key.name())))?
        .to_owned();
    write(
        tx,
        registry,
        dk,
        s,
        key,
        &shipped,
        "hero",
        "Hero's newer default",
        None,
    )
    .await
}

/// Writes the next version of a key (a file key's file too, in the same transaction):
/// answers its number. `base`, when given, must be the current version (else `stale`).
#[allow(clippy::too_many_arguments)]
pub async fn write(
    tx: &mut Write<'_>,
    registry: &Registry,
    dk: &SecretKey,
    s: Scope,
    key: &Key,
    content: &str,
    author: &str,
    reason: &str,
    change_id: Option<&str>,
) -> Result<i64> {
    check_content(key, content)?;
    let now = current(tx, registry, dk, s, key).await?;
    if now.version >= MAX_VERSIONS {
        return Err(Error::Limit(format!(
            "{} has {MAX_VERSIONS} versions, the most a key keeps",
            key.name()
        )));
    }
    let next = now.version + 1;
    // The version holds what the key then reads as (the ids as the agent's row keeps them;
    // a file emptied is deleted), so that reading it next records no version of its own.
    let mut content = std::borrow::Cow::Borrowed(content);
    if *key == Key::Processes {
        let ids = check_processes(tx, s.user_id, &content).await?;
        let json = serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into());
        store::agents::set_default_processes(tx, s.agent_id, &json).await?;
        content = ids
            .iter()
            .map(|id| format!("{id}\n"))
            .collect::<String>()
            .into();
    }
    if key.file().is_some() && content.trim().is_empty() {
        content = "".into();
    }
    let content = content.as_ref();
    if let (Some(file), Some(kind)) = (key.file(), s.kind) {
        let of = context_files::Of {
            agent_id: s.agent_id,
            user_id: s.user_id,
            kind,
        };
        context_files::write(tx, dk, of, file, content, context_files::Writer::Owner).await?;
    }
    if !append(tx, dk, s, key, next, content, author, reason, change_id).await? {
        return Err(Error::Conflict(format!(
            "{} changed meanwhile; read it again",
            key.name()
        )));
    }
    Ok(next)
}

/// The agent's default processes as the key holds them: one id a line.
async fn processes_of(c: &mut Conn<'_>, s: Scope) -> Result<String> {
    let row = store::agents::get(c, s.user_id, s.agent_id)
        .await?
        .ok_or(Error::NotFound("agent"))?;
    let ids: Vec<String> = serde_json::from_str(&row.default_processes).unwrap_or_default();
    Ok(ids.iter().map(|id| format!("{id}\n")).collect())
}

/// The ids a `processes` content names, each a process of the user's (an unknown one is
/// refused, named).
async fn check_processes(c: &mut Conn<'_>, user_id: i64, content: &str) -> Result<Vec<String>> {
    let ids: Vec<String> = content
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    crate::agents::abilities::check_defaults(c, user_id, &ids).await
}

fn check_content(key: &Key, content: &str) -> Result<()> {
    if content.len() > key.max_bytes() {
        return Err(Error::Invalid(format!(
            "{} may hold at most {} KiB",
            key.name(),
            key.max_bytes() >> 10
        )));
    }
    Ok(())
}

/// One version of a key, opened.
pub struct Version {
    pub version: i64,
    pub content: String,
    pub author: String,
    pub reason: String,
    pub change_id: Option<String>,
    pub created_at: String,
}

/// Every version of a key, newest first.
pub async fn versions(
    c: &mut Conn<'_>,
    dk: &SecretKey,
    s: Scope,
    key: &Key,
) -> Result<Vec<Version>> {
    let name = key.name();
    store::configs::versions(c, s.user_id, &name, s.agent_id)
        .await?
        .into_iter()
        .map(|r| {
            let (content, reason) = open(dk, &version_aad(s, &name, r.version), &r.sealed)?;
            Ok(Version {
                version: r.version,
                content,
                author: r.author,
                reason,
                change_id: r.change_id,
                created_at: r.created_at,
            })
        })
        .collect()
}

/// The lines that changed from `old` to `new`, each run of one kind as one op. Joining
/// the texts of the `equal` and `insert` ops gives `new`; of `equal` and `delete`, `old`.
pub fn diff(old: &str, new: &str) -> Vec<DiffOp> {
    use similar::{ChangeTag, TextDiff};
    let mut ops: Vec<DiffOp> = Vec::new();
    // Bounded: past its deadline the diff is coarser, never slower (a key of many short
    // lines would otherwise cost seconds, inside the gate's transaction).
    let diff = TextDiff::configure()
        .timeout(DIFF_DEADLINE)
        .diff_lines(old, new);
    for change in diff.iter_all_changes() {
        let op = match change.tag() {
            ChangeTag::Equal => "equal",
            ChangeTag::Insert => "insert",
            ChangeTag::Delete => "delete",
        };
        match ops.last_mut() {
            Some(last) if last.op == op => last.text.push_str(change.value()),
            _ => ops.push(DiffOp {
                op: op.to_owned(),
                text: change.value().to_owned(),
            }),
        }
    }
    ops
}

/// What `propose_config_change` asks for.
#[derive(Deserialize)]
struct Proposal {
    key: String,
    content: String,
    #[serde(default)]
    reason: String,
}

/// Keeps the change a `propose_config_change` call proposes, in the transaction that stores
/// its request (`request_id`), against the version current now, and answers it as its card
/// shows it; `Ok(Err(why))` when the call cannot be (an unknown key, content too large, too
/// many waiting), which the agent is told.
#[allow(clippy::too_many_arguments)]
pub async fn propose_in(
    tx: &mut Write<'_>,
    registry: &Registry,
    dk: &SecretKey,
    user_id: i64,
    session_id: i64,
    agent_id: Option<i64>,
    request_id: &str,
    args: &serde_json::Value,
) -> Result<std::result::Result<ProposedChange, String>> {
    let Ok(p) = serde_json::from_value::<Proposal>(args.clone()) else {
        return Ok(Err(
            "propose_config_change needs key, content and reason".into()
        ));
    };
    let Ok(key) = parse(registry, &p.key) else {
        return Ok(Err(unknown(registry, &p.key)));
    };
    if let Err(e) = check_content(&key, &p.content) {
        return Ok(Err(e.public_message()));
    }
    if key == Key::Processes
        && let Err(e) = check_processes(tx, user_id, &p.content).await
    {
        return Ok(Err(e.public_message()));
    }
    if p.reason.chars().count() > MAX_REASON_CHARS {
        return Ok(Err(format!(
            "a reason may have at most {MAX_REASON_CHARS} characters"
        )));
    }
    if store::configs::pending(tx, user_id).await? >= MAX_PENDING {
        return Ok(Err(format!(
            "{MAX_PENDING} changes already wait for the user's decision; wait for those first"
        )));
    }
    let s = match scope(tx, user_id, &key, agent_id).await {
        Ok(s) => s,
        Err(e @ (Error::Invalid(_) | Error::NotFound(_))) => return Ok(Err(e.public_message())),
        Err(e) => return Err(e),
    };
    let base = current(tx, registry, dk, s, &key).await?;
    let sealed = seal(dk, &change_aad(user_id, request_id), &p.content, &p.reason)?;
    store::configs::propose(
        tx,
        request_id,
        user_id,
        session_id,
        &key.name(),
        s.agent_id,
        base.version,
        &sealed,
        &now_text(),
    )
    .await?;
    Ok(Ok(ProposedChange {
        pending_change_id: request_id.to_owned(),
        key: key.name(),
        base_version: base.version,
        reason: p.reason,
        diff: diff(&base.content, &p.content),
    }))
}

/// A proposed change, opened.
pub struct Change {
    pub row: store::configs::ChangeRow,
    pub content: String,
    pub reason: String,
}

/// The user's change `id` (another user's is missing).
pub async fn change(
    c: &mut Conn<'_>,
    dk: &SecretKey,
    user_id: i64,
    id: &str,
) -> Result<Option<Change>> {
    let Some(row) = store::configs::change(c, user_id, id).await? else {
        return Ok(None);
    };
    let (content, reason) = open(dk, &change_aad(user_id, id), &row.sealed)?;
    Ok(Some(Change {
        row,
        content,
        reason,
    }))
}

/// How a change was decided: its key, status and the version an approval wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    pub key: String,
    pub status: &'static str,
    pub version: Option<i64>,
}

/// Decides the change proposed by the call `request_id`, in the transaction that records
/// the user's decision on the call: a rejection is recorded; an approval writes the next
/// version if the change's base is still current, and is `stale` otherwise. A call that
/// proposed nothing (it was not valid) has nothing to decide: `None`.
pub async fn decide_in(
    tx: &mut Write<'_>,
    registry: &Registry,
    dk: &SecretKey,
    user_id: i64,
    request_id: &str,
    approved: bool,
) -> Result<Option<Decided>> {
    let Some(ch) = change(tx, dk, user_id, request_id).await? else {
        return Ok(None);
    };
    if ch.row.status != "pending" {
        return Ok(None);
    }
    let now = now_text();
    let decided = |status, version| Decided {
        key: ch.row.key.clone(),
        status,
        version,
    };
    // The change is decided here only while it still waits (the decision's transaction
    // holds the session's lock, as a Stop's does): otherwise nothing is written.
    let settled = |done: bool| match done {
        true => Ok(()),
        false => Err(Error::Conflict("this change was already decided".into())),
    };
    if !approved {
        settled(store::configs::decide(tx, user_id, request_id, "rejected", None, &now).await?)?;
        return Ok(Some(decided("rejected", None)));
    }
    let key = parse(registry, &ch.row.key)?;
    let agent = (ch.row.agent_id != 0).then_some(ch.row.agent_id);
    let s = scope(tx, user_id, &key, agent).await?;
    let current = current(tx, registry, dk, s, &key).await?;
    if current.version != ch.row.base_version {
        settled(store::configs::decide(tx, user_id, request_id, "stale", None, &now).await?)?;
        return Ok(Some(decided("stale", None)));
    }
    let v = write(
        tx,
        registry,
        dk,
        s,
        &key,
        &ch.content,
        "agent",
        &ch.reason,
        Some(request_id),
    )
    .await?;
    settled(store::configs::decide(tx, user_id, request_id, "approved", Some(v), &now).await?)?;
    Ok(Some(decided("approved", Some(v))))
}

/// What the agent is told once its change is decided (its call's output, or its error).
pub async fn outcome(
    c: &mut Conn<'_>,
    user_id: i64,
    request_id: &str,
) -> Result<std::result::Result<String, String>> {
    let Some(row) = store::configs::change(c, user_id, request_id).await? else {
        return Ok(Err("no change was proposed by this call".into()));
    };
    Ok(match (row.status.as_str(), row.version) {
        ("approved", Some(v)) => Ok(format!("approved: {} is now v{v}", row.key)),
        ("stale", _) => Err(format!(
            "stale: {} changed since you read it (your change was made against v{}); read it again and propose anew",
            row.key, row.base_version
        )),
        ("rejected", _) => Err("rejected: the user did not approve the change".into()),
        _ => Err("the change is still waiting for the user's decision".into()),
    })
}

/// The change the call `request_id` proposed is rejected if it still waits (its call
/// ended without an approval: stopped, or refused); answers whether it did.
pub async fn reject_pending(tx: &mut Write<'_>, user_id: i64, request_id: &str) -> Result<bool> {
    store::configs::decide(tx, user_id, request_id, "rejected", None, &now_text()).await
}

/// The capabilities' instructions for the user, in the chain's order, as the prompt gives
/// them: the current version of each, else its default (stored as v1 by the first write
/// path that reads it, [`current`]).
/// The user's chain, whose capabilities' keys are theirs ([`crate::execution::mcp::registry`]).
pub(crate) async fn tools_of(
    st: &crate::AppState,
    user_id: i64,
) -> Result<std::sync::Arc<Registry>> {
    st.db
        .read_with(async |c| crate::execution::mcp::registry(st, c, user_id).await)
        .await
}

pub async fn capability_prompts(
    c: &mut Conn<'_>,
    registry: &Registry,
    dk: &SecretKey,
    user_id: i64,
) -> Result<Vec<(String, String)>> {
    let s = Scope {
        user_id,
        agent_id: 0,
        kind: None,
    };
    let mut out = Vec::new();
    for (name, default) in registry.prompts() {
        let key = Key::Capability(name.to_owned());
        let now = stored(c, dk, s, &key).await?;
        let text = if now.version == 0 {
            default.to_owned()
        } else {
            now.content
        };
        out.push((name.to_owned(), text));
    }
    Ok(out)
}

/// The user's standing instructions (`system_prompt`), if they wrote any.
pub async fn standing_instructions(
    c: &mut Conn<'_>,
    dk: &SecretKey,
    user_id: i64,
) -> Result<Option<String>> {
    let s = Scope {
        user_id,
        agent_id: 0,
        kind: None,
    };
    let now = stored(c, dk, s, &Key::SystemPrompt).await?;
    Ok((!now.content.trim().is_empty()).then_some(now.content))
}

/// Stores each capability's default as its v1 for the user where it has no version yet
/// (a turn's first prompt, in the transaction that seeds the agent's files).
pub async fn ensure_seeded(
    tx: &mut Conn<'_>,
    registry: &Registry,
    dk: &SecretKey,
    user_id: i64,
) -> Result<()> {
    let s = Scope {
        user_id,
        agent_id: 0,
        kind: None,
    };
    for (name, _) in registry.prompts() {
        current(tx, registry, dk, s, &Key::Capability(name.to_owned())).await?;
    }
    Ok(())
}

/// The routes' side: what `/api/capabilities` and `/api/configs` answer.
pub mod api {
    use hero_shared::api::{
        CapabilityDto, ConfigChangeDto, ConfigDto, ConfigKeyDto, ConfigVersionDto, PutConfigRequest,
    };

    use super::*;
    use crate::AppState;
    use crate::accounts::auth::AuthUser;

    async fn key_of(st: &AppState, user: &AuthUser) -> Result<SecretKey> {
        crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await
    }

    /// `GET /api/capabilities`: the chain, each with its prompt key's current version.
    pub async fn capabilities(st: &AppState, user: &AuthUser) -> Result<Vec<CapabilityDto>> {
        let tools = super::tools_of(st, user.id()).await?;
        let heads = st
            .db
            .read_with(async |c| store::configs::heads(c, user.id(), 0).await)
            .await?;
        Ok(tools
            .chain()
            .iter()
            .map(|l| {
                let prompt_key = l.prompt_key();
                let version = prompt_key
                    .as_ref()
                    .map(|k| heads.iter().find(|h| h.key == *k).map_or(0, |h| h.version));
                CapabilityDto {
                    name: l.name.clone(),
                    source: l.source.to_owned(),
                    tools: l.tools.clone(),
                    prompt_key,
                    version,
                }
            })
            .collect())
    }

    /// `GET /api/configs`: every key, its description and current version (an agent's
    /// keys for `agent_id`, which must be the user's).
    pub async fn list(
        st: &AppState,
        user: &AuthUser,
        agent_id: Option<i64>,
    ) -> Result<Vec<ConfigKeyDto>> {
        let tools = super::tools_of(st, user.id()).await?;
        let heads = st
            .db
            .read_with(async |c| {
                if let Some(a) = agent_id {
                    store::agents::get(c, user.id(), a)
                        .await?
                        .ok_or(Error::NotFound("agent"))?;
                }
                store::configs::heads(c, user.id(), agent_id.unwrap_or(0)).await
            })
            .await?;
        Ok(keys(&tools)
            .into_iter()
            .map(|k| {
                let name = k.name();
                let agent = k.of_agent();
                let head = heads
                    .iter()
                    .find(|h| h.key == name && (h.agent_id != 0) == agent);
                ConfigKeyDto {
                    description: k.description(),
                    agent,
                    version: head.map_or(0, |h| h.version),
                    updated_at: head.map(|h| h.updated_at.clone()),
                    key: name,
                }
            })
            .collect())
    }

    /// `GET /api/configs/{key}`: its current content.
    pub async fn get(
        st: &AppState,
        user: &AuthUser,
        key: &str,
        agent_id: Option<i64>,
    ) -> Result<ConfigDto> {
        let tools = super::tools_of(st, user.id()).await?;
        let k = parse(&tools, key)?;
        let dk = key_of(st, user).await?;
        let (now, offered) = st
            .db
            .write_with(async |tx| {
                let s = scope(tx, user.id(), &k, agent_id).await?;
                let now = current(tx, &tools, &dk, s, &k).await?;
                Ok((now, super::offered(tx, &tools, &dk, s, &k).await?))
            })
            .await?;
        Ok(ConfigDto {
            key: k.name(),
            version: now.version,
            content: now.content,
            offered,
        })
    }

    /// Writes a capability's newer shipped instructions as its next version.
    pub async fn adopt(st: &AppState, user: &AuthUser, key: &str) -> Result<ConfigDto> {
        let tools = super::tools_of(st, user.id()).await?;
        let k = parse(&tools, key)?;
        let dk = key_of(st, user).await?;
        st.db
            .write_with(async |tx| {
                let s = scope(tx, user.id(), &k, None).await?;
                adopt_default(tx, &tools, &dk, s, &k).await
            })
            .await?;
        get(st, user, key, None).await
    }

    /// `PUT /api/configs/{key}`: the user writes the next version, made against
    /// `base_version` (a key changed since is a 409).
    pub async fn put(
        st: &AppState,
        user: &AuthUser,
        key: &str,
        req: PutConfigRequest,
    ) -> Result<ConfigDto> {
        let tools = super::tools_of(st, user.id()).await?;
        let k = parse(&tools, key)?;
        check_content(&k, &req.content)?;
        let reason = req.reason.unwrap_or_default();
        if reason.chars().count() > MAX_REASON_CHARS {
            return Err(Error::Invalid(format!(
                "a reason may have at most {MAX_REASON_CHARS} characters"
            )));
        }
        let dk = key_of(st, user).await?;
        let version = st
            .db
            .write_with(async |tx| {
                let s = scope(tx, user.id(), &k, req.agent_id).await?;
                let now = current(tx, &tools, &dk, s, &k).await?;
                if now.version != req.base_version {
                    return Err(Error::Conflict(format!(
                        "{} changed since version {} (it is now v{}); read it again",
                        k.name(),
                        req.base_version,
                        now.version
                    )));
                }
                write(tx, &tools, &dk, s, &k, &req.content, "user", &reason, None).await
            })
            .await?;
        Ok(ConfigDto {
            key: k.name(),
            version,
            content: req.content,
            offered: None,
        })
    }

    /// "Restore this version": version `n`'s content written again as the next version.
    pub async fn restore(
        st: &AppState,
        user: &AuthUser,
        key: &str,
        agent_id: Option<i64>,
        n: i64,
    ) -> Result<ConfigDto> {
        let old = version(st, user, key, n, agent_id).await?;
        let now = get(st, user, key, agent_id).await?;
        let req = PutConfigRequest {
            content: old.content,
            base_version: now.version,
            agent_id,
            reason: Some(format!("restored v{n}")),
        };
        put(st, user, key, req).await
    }

    /// A context file written on the Files page: when it is an agent's key (SOUL.md,
    /// AGENTS.md), its new content is recorded as that key's next version.
    pub async fn file_written(
        st: &AppState,
        user: &AuthUser,
        agent_id: i64,
        file: &str,
    ) -> Result<()> {
        let tools = super::tools_of(st, user.id()).await?;
        let Some(key) = [Key::Soul, Key::Agents]
            .into_iter()
            .find(|k| k.file() == Some(file))
        else {
            return Ok(());
        };
        let dk = key_of(st, user).await?;
        st.db
            .write_with(async |tx| {
                let s = scope(tx, user.id(), &key, Some(agent_id)).await?;
                current(tx, &tools, &dk, s, &key).await
            })
            .await
            .map(|_| ())
    }

    /// `GET /api/configs/{key}/versions`: every version, newest first, each with its diff
    /// from the one before.
    pub async fn versions(
        st: &AppState,
        user: &AuthUser,
        key: &str,
        agent_id: Option<i64>,
    ) -> Result<Vec<ConfigVersionDto>> {
        let tools = super::tools_of(st, user.id()).await?;
        let k = parse(&tools, key)?;
        let dk = key_of(st, user).await?;
        let all = st
            .db
            .write_with(async |tx| {
                let s = scope(tx, user.id(), &k, agent_id).await?;
                current(tx, &tools, &dk, s, &k).await?;
                super::versions(tx, &dk, s, &k).await
            })
            .await?;
        Ok(all
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let before = all.get(i + 1).map_or("", |b| b.content.as_str());
                ConfigVersionDto {
                    version: v.version,
                    author: v.author.clone(),
                    reason: v.reason.clone(),
                    change_id: v.change_id.clone(),
                    created_at: v.created_at.clone(),
                    diff: diff(before, &v.content),
                }
            })
            .collect())
    }

    /// `GET /api/configs/{key}/versions/{n}`.
    pub async fn version(
        st: &AppState,
        user: &AuthUser,
        key: &str,
        n: i64,
        agent_id: Option<i64>,
    ) -> Result<ConfigDto> {
        let tools = super::tools_of(st, user.id()).await?;
        let k = parse(&tools, key)?;
        let dk = key_of(st, user).await?;
        let name = k.name();
        let row = st
            .db
            .read_with(async |c| {
                let s = scope(c, user.id(), &k, agent_id).await?;
                Ok(store::configs::version(c, user.id(), &name, s.agent_id, n)
                    .await?
                    .map(|r| (s, r)))
            })
            .await?
            .ok_or(Error::NotFound("version"))?;
        let (s, row) = row;
        Ok(ConfigDto {
            key: name.clone(),
            version: row.version,
            content: open(&dk, &version_aad(s, &name, row.version), &row.sealed)?.0,
            offered: None,
        })
    }

    /// The statuses a change may have.
    pub const STATUSES: [&str; 4] = ["pending", "approved", "rejected", "stale"];

    /// `GET /api/configs/changes`: the user's changes, newest first, of one status or all.
    pub async fn changes(
        st: &AppState,
        user: &AuthUser,
        status: Option<&str>,
    ) -> Result<Vec<ConfigChangeDto>> {
        if let Some(s) = status
            && !STATUSES.contains(&s)
        {
            return Err(Error::Invalid(format!(
                "there is no change status `{s}`; the statuses are {}",
                STATUSES.join(", ")
            )));
        }
        let dk = key_of(st, user).await?;
        let rows = st
            .db
            .read_with(async |c| store::configs::changes(c, user.id(), status).await)
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let id = row.id.clone();
            let (content, reason) = open(&dk, &change_aad(user.id(), &id), &row.sealed)?;
            out.push(
                dto(
                    st,
                    &dk,
                    Change {
                        row,
                        content,
                        reason,
                    },
                )
                .await?,
            );
        }
        Ok(out)
    }

    /// `GET /api/configs/changes/{id}`: the change with its diff from the version it was
    /// made against.
    pub async fn change(st: &AppState, user: &AuthUser, id: &str) -> Result<ConfigChangeDto> {
        let dk = key_of(st, user).await?;
        let ch = st
            .db
            .read_with(async |c| super::change(c, &dk, user.id(), id).await)
            .await?
            .ok_or(Error::NotFound("change"))?;
        dto(st, &dk, ch).await
    }

    async fn dto(st: &AppState, dk: &SecretKey, ch: Change) -> Result<ConfigChangeDto> {
        let r = &ch.row;
        let s = Scope {
            user_id: r.user_id,
            agent_id: r.agent_id,
            kind: None,
        };
        let base = match r.base_version {
            0 => String::new(),
            v => st
                .db
                .read_with(async |c| {
                    store::configs::version(c, r.user_id, &r.key, r.agent_id, v).await
                })
                .await?
                .map(|row| open(dk, &version_aad(s, &r.key, v), &row.sealed).map(|o| o.0))
                .transpose()?
                .unwrap_or_default(),
        };
        Ok(ConfigChangeDto {
            id: r.id.clone(),
            session_id: r.session_id,
            key: r.key.clone(),
            agent_id: (r.agent_id != 0).then_some(r.agent_id),
            base_version: r.base_version,
            reason: ch.reason.clone(),
            status: r.status.clone(),
            version: r.version,
            created_at: r.created_at.clone(),
            diff: diff(&base, &ch.content),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rebuild(ops: &[DiffOp], keep: &str) -> String {
        ops.iter()
            .filter(|o| o.op == "equal" || o.op == keep)
            .map(|o| o.text.as_str())
            .collect()
    }

    #[test]
    fn a_diff_is_by_line_and_runs_of_one_kind_are_one_op() {
        let ops = diff("a\nb\nc\n", "a\nB\nC\nc\n");
        let kinds: Vec<&str> = ops.iter().map(|o| o.op.as_str()).collect();
        assert_eq!(kinds, ["equal", "delete", "insert", "equal"]);
        assert_eq!(ops[2].text, "B\nC\n");
    }

    /// Two first reads of a capability's key at once store one v1.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_first_reads_store_one_first_version() {
        let (_dir, st) = crate::test_support::state().await;
        let user = crate::test_support::signed_in(&st, "alice").await;
        let reads = (0..8).map(|_| api::get(&st, &user, "capability:config", None));
        for got in futures::future::join_all(reads).await {
            assert_eq!(got.unwrap().version, 1);
        }
        let versions = api::versions(&st, &user, "capability:config", None)
            .await
            .unwrap();
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0].author, "hero");
        assert_eq!(
            crate::test_support::rows_in(&st, "config_versions").await,
            1
        );
    }

    /// A newer shipped default is offered as a diff, not applied; adopted, it is not
    /// offered again.
    #[tokio::test]
    async fn a_newer_shipped_default_is_only_offered() {
        use crate::execution::functions::{Capability, Ctx, Spec, ToolResult};
        struct Shipped(&'static str);
        impl Capability for Shipped {
            fn name(&self) -> &str {
                "notes"
            }
            fn tools(&self) -> Vec<Spec> {
                Vec::new()
            }
            fn prompt(&self) -> &str {
                self.0
            }
            fn handle<'a>(
                &'a self,
                _: &'a Ctx<'a>,
                _: &'a str,
                _: &'a serde_json::Value,
            ) -> futures::future::BoxFuture<'a, Option<std::result::Result<ToolResult, String>>>
            {
                Box::pin(async { None })
            }
        }
        let registry = |text| {
            let mut r = Registry::empty();
            r.add_capability(std::sync::Arc::new(Shipped(text)));
            r
        };
        let (old, new) = (registry("old line\n"), registry("new line\n"));
        let (_dir, st) = crate::test_support::state().await;
        let user = crate::test_support::signed_in(&st, "alice").await;
        let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id())
            .await
            .unwrap();
        let s = Scope {
            user_id: user.id(),
            agent_id: 0,
            kind: None,
        };
        let key = Key::Capability("notes".into());
        st.db
            .write_with(async |tx| {
                assert_eq!(current(tx, &old, &dk, s, &key).await?.version, 1);
                assert_eq!(offered(tx, &old, &dk, s, &key).await?, None);
                let ops = offered(tx, &new, &dk, s, &key).await?.expect("offered");
                assert_eq!(
                    ops,
                    [
                        DiffOp {
                            op: "delete".into(),
                            text: "old line\n".into()
                        },
                        DiffOp {
                            op: "insert".into(),
                            text: "new line\n".into()
                        },
                    ]
                );
                // Offered only: the current version is still the user's.
                assert_eq!(current(tx, &new, &dk, s, &key).await?.content, "old line\n");
                assert_eq!(adopt_default(tx, &new, &dk, s, &key).await?, 2);
                assert_eq!(offered(tx, &new, &dk, s, &key).await?, None);
                Ok(())
            })
            .await
            .unwrap();
    }

    /// A key keeps at most MAX_VERSIONS versions: past it, a write is refused in words.
    #[tokio::test]
    async fn a_key_keeps_a_bounded_number_of_versions() {
        let (_dir, st) = crate::test_support::state().await;
        let user = crate::test_support::signed_in(&st, "alice").await;
        let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id())
            .await
            .unwrap();
        let s = Scope {
            user_id: user.id(),
            agent_id: 0,
            kind: None,
        };
        let key = Key::SystemPrompt;
        for i in 1..=MAX_VERSIONS {
            let v = st
                .db
                .write_with(async |tx| {
                    write(
                        tx,
                        &st.functions,
                        &dk,
                        s,
                        &key,
                        &format!("v{i}"),
                        "user",
                        "",
                        None,
                    )
                    .await
                })
                .await
                .unwrap();
            assert_eq!(v, i);
        }
        let past = st
            .db
            .write_with(async |tx| {
                write(
                    tx,
                    &st.functions,
                    &dk,
                    s,
                    &key,
                    "one more",
                    "user",
                    "",
                    None,
                )
                .await
            })
            .await
            .unwrap_err();
        assert!(matches!(past, Error::Limit(_)), "{past}");
        assert!(past.to_string().contains("1000 versions"), "{past}");
        assert_eq!(
            crate::test_support::rows_in(&st, "config_versions").await,
            MAX_VERSIONS
        );
    }

    proptest! {
        #[test]
        fn a_diffs_ops_rebuild_both_texts(old in "[ab\n]{0,40}", new in "[abc\n]{0,40}") {
            let ops = diff(&old, &new);
            prop_assert_eq!(rebuild(&ops, "insert"), new);
            prop_assert_eq!(rebuild(&ops, "delete"), old);
        }
    }
}
