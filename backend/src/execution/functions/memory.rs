//! `memory_search`, `memory_get` and `memory_write` (reference 002 §15): an agent searches
//! its memory ([`crate::memory`]) before answering about earlier work, reads the lines it
//! needs, and keeps what should last. It writes only the user's scope of its memory: the
//! agent's own scope is its owner's, on the Memory page or through the API.

use futures::future::BoxFuture;
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use serde_json::{Value, json};

use super::{Ctx, Function, Spec};
use crate::memory::{self, Of, Scope};
use crate::{Error, store};

/// The memory of the calling session's agent, for its user, with the user's data key.
async fn of(cx: &Ctx<'_>) -> crate::Result<(Of, crate::crypto::SecretKey)> {
    let (st, user_id, session_id) = (cx.st, cx.user_id, cx.session_id);
    let agent_id = match cx.agent_id {
        Some(a) => a,
        None => st
            .db
            .read_with(async |c| store::sessions::agent_of(c, user_id, session_id).await)
            .await?
            .ok_or(Error::Invalid("this session has no agent".into()))?,
    };
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user_id).await?;
    Ok((Of { agent_id, user_id }, dk))
}

fn text_arg<'a>(args: &'a Value, name: &str) -> &'a str {
    args.get(name).and_then(Value::as_str).unwrap_or_default()
}

pub struct MemorySearch;

impl Function for MemorySearch {
    fn spec(&self) -> Spec {
        Spec {
            name: "memory_search".into(),
            description: "Searches your memory (MEMORY.md and memory/*.md) for what fits a question: the best chunks (6 by default), each with its file, lines, score and text. Read more of a file with memory_get.".into(),
            plugin: None,
            default: Permission::Always,
            permissions: FunctionPermissions::allowed(DangerLevel::Safe),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what to look for", "minLength": 1, "maxLength": memory::MAX_QUERY_CHARS},
                    "limit": {"type": "integer", "description": "how many chunks (default 6)", "minimum": 1, "maximum": memory::MAX_RESULTS}
                },
                "required": ["query"]
            }),
            examples: vec![json!({"query": "which database the user chose for the project"})],
        }
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let query = text_arg(args, "query");
            let limit = args
                .get("limit")
                .and_then(Value::as_u64)
                .map_or(memory::DEFAULT_RESULTS, |l| l as usize);
            let run = async {
                let (of, dk) = of(cx).await?;
                let at = memory::endpoint(cx.st, of).await;
                memory::search(cx.st, &dk, of, at.as_ref(), query, limit).await
            };
            let found = run.await.map_err(|e| e.public_message())?;
            let note = found.note.map(|n| format!("({n})\n")).unwrap_or_default();
            if found.hits.is_empty() {
                return Ok(format!("{note}Nothing in memory fits {query:?}."));
            }
            let listed = found
                .hits
                .iter()
                .map(|h| {
                    format!(
                        "{}:{}-{} ({} memory, score {:.2})\n{}",
                        h.path,
                        h.start_line,
                        h.end_line,
                        if h.scope == Scope::User {
                            "your"
                        } else {
                            "the agent's"
                        },
                        h.score,
                        h.text
                    )
                })
                .collect::<Vec<_>>()
                .join("\n\n");
            Ok(format!("{note}{listed}"))
        })
    }
}

pub struct MemoryGet;

/// The most lines `memory_get` gives unless asked for fewer.
pub const DEFAULT_LINES: usize = 200;

impl Function for MemoryGet {
    fn spec(&self) -> Spec {
        Spec {
            name: "memory_get".into(),
            description: "Reads lines of a memory file (your copy where you have one, else the agent's): from `from_line` (1 by default), `lines` of them (200 by default).".into(),
            plugin: None,
            default: Permission::Always,
            permissions: FunctionPermissions::allowed(DangerLevel::Safe),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "the file, such as MEMORY.md or memory/2026-11-24.md", "minLength": 1, "maxLength": memory::path::MAX_PATH_BYTES},
                    "from_line": {"type": "integer", "description": "the first line (1-based)", "minimum": 1},
                    "lines": {"type": "integer", "description": "how many lines", "minimum": 1, "maximum": 100_000}
                },
                "required": ["path"]
            }),
            examples: vec![json!({"path": "MEMORY.md"}), json!({"path": "memory/2026-11-24.md", "from_line": 12, "lines": 20})],
        }
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let path = text_arg(args, "path").trim();
            let from = args
                .get("from_line")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1) as usize;
            let count = args
                .get("lines")
                .and_then(Value::as_u64)
                .map_or(DEFAULT_LINES, |n| n as usize);
            let run = async {
                memory::path::check(path).map_err(Error::Invalid)?;
                let (of, dk) = of(cx).await?;
                cx.st
                    .db
                    .read_with(async |c| memory::read(c, &dk, of, path, None).await)
                    .await
            };
            let Some((_, content)) = run.await.map_err(|e| e.public_message())? else {
                return Err(format!(
                    "there is no memory file {path}; memory_search finds what there is"
                ));
            };
            let lines = memory::chunk::lines(&content);
            if lines.is_empty() {
                return Ok(format!("{path} is empty."));
            }
            if from > lines.len() {
                return Err(format!(
                    "{path} has {} lines; from_line {from} is past its end",
                    lines.len()
                ));
            }
            let to = (from - 1).saturating_add(count).min(lines.len());
            let body = lines[from - 1..to].join("\n");
            Ok(format!(
                "{path}, lines {from}-{to} of {}:\n{body}",
                lines.len()
            ))
        })
    }
}

pub struct MemoryWrite;

impl Function for MemoryWrite {
    fn spec(&self) -> Spec {
        Spec {
            name: "memory_write".into(),
            description: "Writes a memory file of yours: lasting facts in MEMORY.md, the day's notes in memory/YYYY-MM-DD.md (other names under memory/ as you see fit, all .md). With `append` the content is added at the end; otherwise it replaces the file, and empty content deletes it.".into(),
            plugin: None,
            default: Permission::Always,
            permissions: FunctionPermissions::allowed(DangerLevel::Moderate),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "the file, such as MEMORY.md or memory/2026-11-24.md", "minLength": 1, "maxLength": memory::path::MAX_PATH_BYTES},
                    "content": {"type": "string", "description": "the text to write", "maxLength": memory::MAX_FILE_BYTES},
                    "append": {"type": "boolean", "description": "add to the end instead of replacing (default false)"}
                },
                "required": ["path", "content"]
            }),
            examples: vec![
                json!({"path": "MEMORY.md", "content": "# Memory\n\n- The user prefers PostgreSQL.\n"}),
                json!({"path": "memory/2026-11-24.md", "content": "- Chose the name Hero for the project.", "append": true}),
            ],
        }
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let path = text_arg(args, "path").trim();
            let content = text_arg(args, "content");
            let append = args.get("append").and_then(Value::as_bool).unwrap_or(false);
            let run = async {
                let (of, dk) = of(cx).await?;
                let at = memory::endpoint(cx.st, of).await;
                let w = memory::Write {
                    path,
                    content,
                    scope: Scope::User,
                    append,
                };
                memory::write_now(cx.st, &dk, of, w, at.as_ref()).await
            };
            match run.await.map_err(|e| e.public_message())? {
                memory::Written::Deleted => Ok(format!("Deleted {path}.")),
                memory::Written::Stored { changed: false, .. } => {
                    Ok(format!("{path} already holds this; nothing changed."))
                }
                memory::Written::Stored { size, .. } => Ok(format!(
                    "Saved to memory: {path} ({size} bytes{}).",
                    if append { ", appended" } else { "" }
                )),
            }
        })
    }
}
