//! An agent's context files (reference 002, sections 1, 3, 4 and 6): who the agent is
//! (SOUL.md, IDENTITY.md), how it works (AGENTS.md, TOOLS.md), who its user is (USER.md,
//! USER_PREDEFINED.md) and its first-run ritual (BOOTSTRAP.md). Each is stored sealed with
//! the agent owner's data key, at the agent's own level or as the user's own copy, as the
//! agent's type routes it:
//!
//! | type         | agent level                                    | the user's own          |
//! |--------------|------------------------------------------------|-------------------------|
//! | `open`       | none                                           | all six template files  |
//! | `predefined` | AGENTS, SOUL, IDENTITY, TOOLS, USER_PREDEFINED | USER.md, BOOTSTRAP.md   |
//!
//! Files are seeded from Hero's templates (`backend/templates/`) once per agent, on its
//! first use; seeding never overwrites, and a predefined agent's USER.md starts from the
//! agent-level copy when there is one. A user's copy overrides the agent's file of the same
//! name; files only the agent has are kept. Writing empty content deletes a file (which is
//! how BOOTSTRAP.md ends the ritual for good). Virtual files (AVAILABILITY.md) are made for
//! each prompt and never stored.

use crate::store::Conn;
use hero_shared::api::{AgentKind, ContextFileContent, ContextFileDto};

use crate::accounts::auth::AuthUser;
use crate::crypto::{self, SecretKey};
use crate::{AppState, Error, Result, store};

/// The stored files, in the order the prompt gives them.
pub const NAMES: [&str; 7] = hero_shared::api::CONTEXT_FILES;

/// The files an agent may write from chat (its `context_file` function): what it learns
/// about its user and its tools, and the end of its first-run ritual.
pub const CHAT_WRITABLE: [&str; 3] = ["USER.md", "TOOLS.md", "BOOTSTRAP.md"];

/// Files Hero makes for each prompt: shown, never stored or written.
pub const VIRTUAL: [&str; 1] = hero_shared::api::VIRTUAL_CONTEXT_FILES;

/// AVAILABILITY.md, made for each prompt (not during the first run): what the agent has
/// here, and what it has not.
pub fn availability() -> String {
    "These are available to you: the context files above (read or change them with the context_file function), \
the functions listed under Tooling, skills (find them with skill_search, read one with skill_get; those you may \
use are under Skills, when you have any), and your memory (MEMORY.md and memory/*.md: memory_search, memory_get, \
memory_write; see Memory recall).\n\
These are NOT available here: delegation to other agents and teams (there is no DELEGATION.md or TEAM.md). \
Do not try to read or write files that are not listed."
        .to_owned()
}

/// The most a file may hold (bytes); the prompt gives at most 20,000 characters of it.
pub const MAX_FILE_BYTES: usize = 256 << 10;

/// Where a file lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Agent,
    User,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Agent => "agent",
            Level::User => "user",
        }
    }
}

/// The level 002's table 4 routes `name` to for an agent of `kind`; `None` for a name that
/// is not a context file.
pub fn level(kind: AgentKind, name: &str) -> Option<Level> {
    if !NAMES.contains(&name) {
        return None;
    }
    Some(match (kind, name) {
        (AgentKind::Open, _) | (AgentKind::Predefined, "USER.md" | "BOOTSTRAP.md") => Level::User,
        (AgentKind::Predefined, _) => Level::Agent,
    })
}

/// Hero's template for a file (ours, written for Hero).
pub fn template(kind: AgentKind, name: &str) -> Option<&'static str> {
    Some(match name {
        "AGENTS.md" => include_str!("../../templates/AGENTS.md"),
        "SOUL.md" => include_str!("../../templates/SOUL.md"),
        "TOOLS.md" => include_str!("../../templates/TOOLS.md"),
        "IDENTITY.md" => include_str!("../../templates/IDENTITY.md"),
        "USER.md" => include_str!("../../templates/USER.md"),
        "USER_PREDEFINED.md" => include_str!("../../templates/USER_PREDEFINED.md"),
        "BOOTSTRAP.md" if kind == AgentKind::Predefined => {
            include_str!("../../templates/BOOTSTRAP_PREDEFINED.md")
        }
        "BOOTSTRAP.md" => include_str!("../../templates/BOOTSTRAP.md"),
        _ => return None,
    })
}

/// The files seeded at each level (002 section 3).
fn seeded(kind: AgentKind) -> (&'static [&'static str], &'static [&'static str]) {
    match kind {
        AgentKind::Open => (
            &[],
            &[
                "AGENTS.md",
                "SOUL.md",
                "TOOLS.md",
                "IDENTITY.md",
                "USER.md",
                "BOOTSTRAP.md",
            ],
        ),
        AgentKind::Predefined => (
            &["AGENTS.md", "SOUL.md", "IDENTITY.md", "USER_PREDEFINED.md"],
            &["USER.md", "BOOTSTRAP.md"],
        ),
    }
}

fn aad(agent_id: i64, user_id: Option<i64>, name: &str) -> Vec<u8> {
    format!("context_file:{agent_id}:{}:{name}", user_id.unwrap_or(0)).into_bytes()
}

fn seal(dk: &SecretKey, agent_id: i64, user_id: Option<i64>, name: &str, text: &str) -> Vec<u8> {
    crypto::seal(dk, &aad(agent_id, user_id, name), text.as_bytes())
}

fn open(dk: &SecretKey, agent_id: i64, row: &store::context_files::FileRow) -> Result<String> {
    let bytes = crypto::open(dk, &aad(agent_id, row.user_id, &row.name), &row.content)?;
    String::from_utf8(bytes).map_err(|_| Error::Internal("a context file is not text".into()))
}

fn now() -> String {
    crate::now_text()
}

/// Seeds the agent's files from the templates, once (the agent's `files_seeded` mark):
/// nothing is overwritten, and a file deleted since is not brought back.
pub async fn ensure_seeded(
    c: &mut Conn<'_>,
    dk: &SecretKey,
    agent_id: i64,
    user_id: i64,
    kind: AgentKind,
) -> Result<()> {
    if store::context_files::seeded(c, agent_id).await? {
        return Ok(());
    }
    seed(c, dk, agent_id, user_id, kind).await?;
    store::context_files::mark_seeded(c, agent_id).await
}

/// Writes each template file that has no content yet (idempotent).
pub async fn seed(
    c: &mut Conn<'_>,
    dk: &SecretKey,
    agent_id: i64,
    user_id: i64,
    kind: AgentKind,
) -> Result<()> {
    let (agent_level, user_level) = seeded(kind);
    let now = now();
    for (names, owner) in [(agent_level, None), (user_level, Some(user_id))] {
        for &name in names {
            let has = match store::context_files::get(c, agent_id, owner, name).await? {
                Some(row) => !open(dk, agent_id, &row)?.trim().is_empty(),
                None => false,
            };
            if has {
                continue;
            }
            // A predefined agent's USER.md starts from the agent's own copy, if it has one.
            let from_agent = if kind == AgentKind::Predefined && name == "USER.md" {
                store::context_files::get(c, agent_id, None, name)
                    .await?
                    .map(|row| open(dk, agent_id, &row))
                    .transpose()?
                    .filter(|t| !t.trim().is_empty())
            } else {
                None
            };
            let text = from_agent
                .as_deref()
                .or(template(kind, name))
                .unwrap_or_default();
            store::context_files::put(
                c,
                agent_id,
                owner,
                name,
                &seal(dk, agent_id, owner, name, text),
                &now,
            )
            .await?;
        }
    }
    Ok(())
}

/// A file as a prompt or a page reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    pub name: String,
    pub level: Level,
    pub content: String,
}

/// The files a user's calls with the agent use, in prompt order: the user's copy where
/// there is one, else the agent's (002 section 6).
pub async fn merged(
    c: &mut Conn<'_>,
    dk: &SecretKey,
    agent_id: i64,
    user_id: i64,
) -> Result<Vec<File>> {
    let rows = store::context_files::list(c, agent_id, user_id).await?;
    let mut out = Vec::new();
    for name in NAMES {
        let pick = rows
            .iter()
            .filter(|r| r.name == name)
            .max_by_key(|r| r.user_id.is_some());
        if let Some(r) = pick {
            out.push(File {
                name: name.to_owned(),
                level: if r.user_id.is_some() {
                    Level::User
                } else {
                    Level::Agent
                },
                content: open(dk, agent_id, r)?,
            });
        }
    }
    Ok(out)
}

/// The list the API answers: stored files and the virtual ones, with their sizes.
pub fn listing(files: &[File], virtual_files: &[(&str, String)]) -> Vec<ContextFileDto> {
    files
        .iter()
        .map(|f| ContextFileDto {
            name: f.name.clone(),
            level: f.level.as_str().to_owned(),
            size: f.content.len() as u64,
        })
        .chain(virtual_files.iter().map(|(n, c)| ContextFileDto {
            name: (*n).to_owned(),
            level: "virtual".into(),
            size: c.len() as u64,
        }))
        .collect()
}

/// Who writes a file: the agent's owner through the API or the page, or the agent itself
/// from chat (its `context_file` function), which may not write a predefined agent's own
/// files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    Owner,
    Chat,
}

/// Checks a file name, saying which names there are.
pub fn check_name(kind: AgentKind, name: &str) -> Result<Level> {
    if VIRTUAL.contains(&name) {
        return Err(Error::Invalid(format!(
            "{name} is made by Hero for each call and is already loaded in the system prompt; it cannot be written"
        )));
    }
    level(kind, name).ok_or_else(|| Error::NotFound("context file"))
}

/// Whose files: an agent of a type, and the user whose calls use them.
#[derive(Clone, Copy, Debug)]
pub struct Of {
    pub agent_id: i64,
    pub user_id: i64,
    pub kind: AgentKind,
}

/// Writes `name` at the level it is routed to; empty content deletes it.
pub async fn write(
    c: &mut Conn<'_>,
    dk: &SecretKey,
    of: Of,
    name: &str,
    content: &str,
    writer: Writer,
) -> Result<Level> {
    let Of {
        agent_id,
        user_id,
        kind,
    } = of;
    let level = check_name(kind, name)?;
    if writer == Writer::Chat && level == Level::Agent {
        return Err(Error::Invalid(format!(
            "{name} belongs to this predefined agent itself and cannot be written from chat; its owner edits it on the agent's Files page"
        )));
    }
    // Who the agent is stays its owner's to change: text the model read elsewhere must not
    // rewrite its instructions.
    if writer == Writer::Chat && !CHAT_WRITABLE.contains(&name) {
        return Err(Error::Invalid(format!(
            "{name} says who the agent is and cannot be written from chat; its owner edits it on the agent's Files page"
        )));
    }
    if content.len() > MAX_FILE_BYTES {
        return Err(Error::Invalid(format!(
            "{name} is too large (at most {} KiB)",
            MAX_FILE_BYTES >> 10
        )));
    }
    let owner = (level == Level::User).then_some(user_id);
    if content.trim().is_empty() {
        store::context_files::delete(c, agent_id, owner, name).await?;
    } else {
        store::context_files::put(
            c,
            agent_id,
            owner,
            name,
            &seal(dk, agent_id, owner, name, content),
            &now(),
        )
        .await?;
    }
    Ok(level)
}

/// An agent of the user's, with its type: anyone else's is a missing one.
async fn agent_kind(st: &AppState, user: &AuthUser, agent_id: i64) -> Result<AgentKind> {
    let row = store::agents::get(&mut st.db.conn().await?, user.id(), agent_id)
        .await?
        .ok_or(Error::NotFound("agent"))?;
    AgentKind::parse(&row.kind).ok_or_else(|| Error::Internal("unknown agent type".into()))
}

/// `GET /api/agents/{id}/files`: the files the user's calls with the agent use.
pub async fn list_files(
    st: &AppState,
    user: &AuthUser,
    agent_id: i64,
) -> Result<Vec<ContextFileDto>> {
    let kind = agent_kind(st, user, agent_id).await?;
    let files = seeded_files(st, user, agent_id, kind).await?;
    Ok(listing(&files, &[("AVAILABILITY.md", availability())]))
}

/// The agent's files as the user's calls use them, seeded first if they never were.
async fn seeded_files(
    st: &AppState,
    user: &AuthUser,
    agent_id: i64,
    kind: AgentKind,
) -> Result<Vec<File>> {
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    st.db
        .write_with(async |tx| {
            ensure_seeded(tx, &dk, agent_id, user.id(), kind).await?;
            merged(tx, &dk, agent_id, user.id()).await
        })
        .await
}

/// `GET /api/agents/{id}/files/{name}`: the file as the user's calls read it (a missing
/// one is empty, at the level it would be written to).
pub async fn read_file(
    st: &AppState,
    user: &AuthUser,
    agent_id: i64,
    name: &str,
) -> Result<ContextFileContent> {
    let kind = agent_kind(st, user, agent_id).await?;
    if VIRTUAL.contains(&name) {
        return Ok(ContextFileContent {
            name: name.to_owned(),
            level: "virtual".into(),
            content: availability(),
        });
    }
    let level = check_name(kind, name)?;
    let files = seeded_files(st, user, agent_id, kind).await?;
    Ok(match files.into_iter().find(|f| f.name == name) {
        Some(f) => ContextFileContent {
            name: f.name,
            level: f.level.as_str().into(),
            content: f.content,
        },
        None => ContextFileContent {
            name: name.to_owned(),
            level: level.as_str().into(),
            content: String::new(),
        },
    })
}

/// `PUT /api/agents/{id}/files/{name}`: the owner writes a file at the level it is routed
/// to; empty content deletes it.
pub async fn write_file(
    st: &AppState,
    user: &AuthUser,
    agent_id: i64,
    name: &str,
    content: &str,
) -> Result<ContextFileContent> {
    let kind = agent_kind(st, user, agent_id).await?;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let level = st
        .db
        .write_with(async |tx| {
            ensure_seeded(tx, &dk, agent_id, user.id(), kind).await?;
            let of = Of {
                agent_id,
                user_id: user.id(),
                kind,
            };
            write(tx, &dk, of, name, content, Writer::Owner).await
        })
        .await?;
    Ok(ContextFileContent {
        name: name.to_owned(),
        level: level.as_str().into(),
        content: if content.trim().is_empty() {
            String::new()
        } else {
            content.to_owned()
        },
    })
}
