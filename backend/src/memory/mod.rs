//! An agent's memory (reference 002 §1, §14–§15): Markdown files the agent writes and
//! searches — `MEMORY.md` for lasting facts, `memory/YYYY-MM-DD.md` for a day's notes —
//! that outlast a conversation's summary.
//!
//! - Files ([`store::memory`]): at the agent's own scope (written by its owner on the page
//!   or through the API) or the user's (written also by the agent, `memory_write`), sealed
//!   with the owner's data key and bound to (agent, user, path). A file's `hash` is an HMAC
//!   under a key derived from that data key, so a stored hash confirms no guessed text.
//!   Written only through Hero: a write is seen by the next search, with no watcher.
//! - Chunks ([`chunk`]) and the index ([`index`]): built in memory from the opened files at
//!   the first search, kept in [`crate::search::IndexCache`], and brought up to date at each
//!   search with the files' stored hashes (a changed file chunked again, the others left).
//!   No chunk is stored, and no full-text table, which would hold the text in plaintext.
//! - Search: BM25 over the chunks, normalised over the query's best, fused with the cosine
//!   of the chunks' vectors (0.3 and 0.7, [`crate::search::fuse`]); the user's scope × 1.2,
//!   and a user's copy of a path hides the agent's.

pub mod chunk;
pub mod index;
pub mod path;

use std::sync::Arc;

use hero_shared::api::{
    MemoryFileContent, MemoryFileDto, MemoryHitDto, MemorySearchDto, MemoryWrittenDto,
};

use crate::accounts::auth::AuthUser;
use crate::crypto::{self, SecretKey};
use crate::search::embed::Endpoint;
use crate::search::vectors;
use crate::store::{self, Conn};
use crate::{AppState, Error, Result, now_text};

pub use index::Index;

/// The largest memory file, as a context file.
pub const MAX_FILE_BYTES: usize = 256 << 10;
/// The most files an agent has at one scope.
pub const MAX_FILES_PER_SCOPE: i64 = 1_000;
/// The most memory a user has in all, over their agents and scopes, unless the installation
/// says otherwise (`--max-memory-mib`).
pub const DEFAULT_MAX_BYTES_PER_USER: usize = 16 << 20;
/// The longest query.
pub const MAX_QUERY_CHARS: usize = 1_000;
/// Results a search gives unless asked for more.
pub const DEFAULT_RESULTS: usize = 6;
/// The most results a search gives.
pub const MAX_RESULTS: usize = 20;
/// How many of each channel's best are fused.
pub const CANDIDATES: usize = 50;
/// What a chunk of the user's own scope weighs over the agent's.
pub const USER_BOOST: f64 = 1.2;

/// Whose a memory file is: the agent's own (its owner's to write, used by whoever it works
/// for) or the user's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Agent,
    User,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Agent => "agent",
            Scope::User => "user",
        }
    }

    pub fn parse(s: &str) -> Result<Scope> {
        match s {
            "agent" => Ok(Scope::Agent),
            "user" => Ok(Scope::User),
            other => Err(Error::Invalid(format!(
                "{other:?} is no memory scope: it is user or agent"
            ))),
        }
    }

    fn of(user_id: Option<i64>) -> Scope {
        if user_id.is_some() {
            Scope::User
        } else {
            Scope::Agent
        }
    }
}

/// Whose memory: an agent, and the user it works for (its owner).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Of {
    pub agent_id: i64,
    pub user_id: i64,
}

impl Of {
    fn user_at(self, scope: Scope) -> Option<i64> {
        (scope == Scope::User).then_some(self.user_id)
    }
}

fn aad(of: Of, scope: Scope, path: &str) -> Vec<u8> {
    format!(
        "memory_file|{}|{}|{path}",
        of.agent_id,
        of.user_at(scope).unwrap_or(0)
    )
    .into_bytes()
}

/// The key a user's memory files' hashes are made with, derived from their data key.
fn hash_key(dk: &SecretKey) -> [u8; 32] {
    crypto::derived_key(dk, b"hero/memory-hash/v1")
}

fn open(dk: &SecretKey, of: Of, row: &store::memory::MemoryRow) -> Result<String> {
    let bytes = crypto::open(
        dk,
        &aad(of, Scope::of(row.user_id), &row.path),
        &row.content,
    )?;
    String::from_utf8(bytes).map_err(|_| Error::Internal("a memory file is not text".into()))
}

/// The agent `agent_id` if it is the user's: anyone else's is a missing one.
async fn agent_of(st: &AppState, user: &AuthUser, agent_id: i64) -> Result<Of> {
    store::agents::get(&mut st.db.conn().await?, user.id(), agent_id)
        .await?
        .ok_or(Error::NotFound("agent"))?;
    Ok(Of {
        agent_id,
        user_id: user.id(),
    })
}

/// `GET /api/agents/{id}/memory/files`: the agent's files of both scopes, by path, the
/// agent's before the user's.
pub async fn list(st: &AppState, user: &AuthUser, agent_id: i64) -> Result<Vec<MemoryFileDto>> {
    let of = agent_of(st, user, agent_id).await?;
    let mut rows = st
        .db
        .read_with(async |c| store::memory::list(c, of.agent_id, of.user_id).await)
        .await?;
    rows.sort_by(|a, b| {
        (a.path.as_str(), a.user_id.is_some()).cmp(&(b.path.as_str(), b.user_id.is_some()))
    });
    Ok(rows
        .into_iter()
        .map(|r| MemoryFileDto {
            path: r.path,
            scope: Scope::of(r.user_id).as_str().into(),
            size: r.size as u64,
            updated_at: r.updated_at,
        })
        .collect())
}

/// A file as a search sees it: the user's copy where there is one, else the agent's;
/// `MEMORY.md` missing at both, `memory.md`. `scope` asks for one scope's.
pub async fn read(
    c: &mut Conn<'_>,
    dk: &SecretKey,
    of: Of,
    path: &str,
    scope: Option<Scope>,
) -> Result<Option<(Scope, String)>> {
    let scopes: &[Scope] = match scope {
        Some(Scope::User) => &[Scope::User],
        Some(Scope::Agent) => &[Scope::Agent],
        None => &[Scope::User, Scope::Agent],
    };
    let names: &[&str] = if path == path::MAIN {
        &[path::MAIN, path::FALLBACK]
    } else {
        &[path]
    };
    for name in names {
        for &s in scopes {
            if let Some(row) = store::memory::get(c, of.agent_id, of.user_at(s), name).await? {
                return Ok(Some((s, open(dk, of, &row)?)));
            }
        }
    }
    Ok(None)
}

/// `GET /api/agents/{id}/memory/files/{*path}`.
pub async fn read_file(
    st: &AppState,
    user: &AuthUser,
    agent_id: i64,
    path: &str,
    scope: Option<&str>,
) -> Result<MemoryFileContent> {
    let of = agent_of(st, user, agent_id).await?;
    let scope = scope.map(Scope::parse).transpose()?;
    path::check(path).map_err(Error::Invalid)?;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let (scope, content) = st
        .db
        .read_with(async |c| read(c, &dk, of, path, scope).await)
        .await?
        .ok_or(Error::NotFound("memory file"))?;
    Ok(MemoryFileContent {
        path: path.to_owned(),
        scope: scope.as_str().into(),
        content,
    })
}

/// What a write is.
#[derive(Clone, Copy, Debug)]
pub struct Write<'a> {
    pub path: &'a str,
    pub content: &'a str,
    pub scope: Scope,
    /// Added at the file's end (on a line of its own) rather than replacing it.
    pub append: bool,
}

/// What a write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    /// Stored, with its size; `changed` false when the file already held this.
    Stored {
        size: usize,
        changed: bool,
    },
    Deleted,
}

/// Writes one memory file of `of` in the open transaction: empty content without `append`
/// deletes it. Checks the path, the size and the bounds first: a refused write stores
/// nothing.
pub async fn write(
    tx: &mut store::Write<'_>,
    dk: &SecretKey,
    of: Of,
    w: Write<'_>,
    max_bytes_per_user: usize,
) -> Result<Written> {
    path::check(w.path).map_err(Error::Invalid)?;
    if w.content.contains('\0') {
        return Err(Error::Invalid(
            "a memory file is text: it cannot hold a NUL character".into(),
        ));
    }
    let user_id = of.user_at(w.scope);
    if w.append && w.content.trim().is_empty() {
        // Nothing to add: nothing changes (not even a file made empty).
        let size = store::memory::get(tx, of.agent_id, user_id, w.path)
            .await?
            .map_or(0, |r| r.size as usize);
        return Ok(Written::Stored {
            size,
            changed: false,
        });
    }
    // The owner's memory is counted and changed one write at a time (PostgreSQL locks
    // their row; SQLite has one writer already).
    store::users::lock(tx, of.user_id).await?;
    let old = match store::memory::get(tx, of.agent_id, user_id, w.path).await? {
        Some(row) => Some(open(dk, of, &row)?),
        None => None,
    };
    let content = match (&old, w.append) {
        (Some(old), true) if !old.is_empty() => {
            let sep = if old.ends_with('\n') { "" } else { "\n" };
            format!("{old}{sep}{}", w.content)
        }
        _ => w.content.to_owned(),
    };
    if !w.append && content.trim().is_empty() {
        store::memory::delete(tx, of.agent_id, user_id, w.path).await?;
        return Ok(Written::Deleted);
    }
    if content.len() > MAX_FILE_BYTES {
        return Err(Error::Invalid(format!(
            "{} would be {} KiB: a memory file is at most {} KiB",
            w.path,
            content.len().div_ceil(1024),
            MAX_FILE_BYTES >> 10
        )));
    }
    if old.as_deref() == Some(content.as_str()) {
        return Ok(Written::Stored {
            size: content.len(),
            changed: false,
        });
    }
    let (files, bytes) =
        store::memory::usage_but(tx, of.user_id, of.agent_id, user_id, w.path).await?;
    if old.is_none() && files >= MAX_FILES_PER_SCOPE {
        return Err(Error::Limit(format!(
            "this agent has {MAX_FILES_PER_SCOPE} memory files at this scope, the most it may have; delete one first"
        )));
    }
    if bytes as usize + content.len() > max_bytes_per_user {
        return Err(Error::Limit(format!(
            "your memory would pass {} MiB, the most a user may have; delete or shorten files first",
            max_bytes_per_user >> 20
        )));
    }
    let at = store::memory::Place {
        agent_id: of.agent_id,
        owner_id: of.user_id,
        user_id,
        path: w.path,
    };
    let sealed = crypto::seal(dk, &aad(of, w.scope, w.path), content.as_bytes());
    // 002's hash (SHA-256's first 16 bytes), taken as an HMAC under a key of the user's.
    let hash = vectors::tag(&content, Some(&hash_key(dk)));
    store::memory::put(tx, at, &sealed, &hash, content.len() as i64, &now_text()).await?;
    Ok(Written::Stored {
        size: content.len(),
        changed: true,
    })
}

/// Writes a file in a transaction of its own, then has its chunks embedded (so that the
/// next search need not wait for them; a failure there loses nothing, the search makes
/// them).
pub async fn write_now(
    st: &AppState,
    dk: &SecretKey,
    of: Of,
    w: Write<'_>,
    embed_at: Option<&Endpoint>,
) -> Result<Written> {
    let max = st.settings.max_memory_bytes;
    let written = st
        .db
        .write_with(async |tx| write(tx, dk, of, w, max).await)
        .await?;
    if let (Written::Stored { changed: true, .. }, Some(at)) = (&written, embed_at) {
        let stored = st
            .db
            .read_with(async |c| read(c, dk, of, w.path, Some(w.scope)).await)
            .await?;
        if let Some((_, content)) = stored {
            let key = vectors::tag_key(dk);
            // A blank chunk says nothing to embed.
            let chunks: Vec<chunk::Chunk> = chunk::chunks(&content)
                .into_iter()
                .filter(|c| !c.text.trim().is_empty())
                .collect();
            let tags: Vec<Vec<u8>> = chunks
                .iter()
                .map(|c| vectors::tag(&c.text, Some(&key)))
                .collect();
            let texts: Vec<vectors::Text> = chunks
                .iter()
                .zip(&tags)
                .map(|(c, tag)| vectors::Text {
                    text: &c.text,
                    tag,
                    private: true,
                })
                .collect();
            let made = tokio::time::timeout(
                vectors::SEARCH_DEADLINE,
                vectors::of_texts(st, at, Some((of.user_id, dk)), &texts),
            )
            .await;
            match made {
                Ok(Ok(_)) => {}
                Ok(Err(why)) => tracing::warn!(%why, "a memory file's vectors could not be made"),
                Err(_) => tracing::warn!("a memory file's vectors took too long"),
            }
        }
    }
    Ok(written)
}

/// Where vectors come from for the agent's memory: the installation's endpoint, else the
/// agent's own provider if it speaks OpenAI's API; none when embeddings are off.
pub async fn endpoint(st: &AppState, of: Of) -> Option<Endpoint> {
    let agent = crate::agents::runtime(&st.db, &st.keys, of.user_id, of.agent_id)
        .await
        .ok()?;
    st.settings.embeddings.for_agent(&agent.endpoint)
}

/// `PUT /api/agents/{id}/memory/files/{*path}`: the owner writes a file at either scope.
pub async fn write_file(
    st: &AppState,
    user: &AuthUser,
    agent_id: i64,
    path: &str,
    content: &str,
    scope: Option<&str>,
) -> Result<MemoryWrittenDto> {
    let of = agent_of(st, user, agent_id).await?;
    let scope = scope.map(Scope::parse).transpose()?.unwrap_or(Scope::User);
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let at = endpoint(st, of).await;
    let w = Write {
        path,
        content,
        scope,
        append: false,
    };
    let size = match write_now(st, &dk, of, w, at.as_ref()).await? {
        Written::Stored { size, .. } => size as u64,
        Written::Deleted => 0,
    };
    Ok(MemoryWrittenDto {
        path: path.to_owned(),
        scope: scope.as_str().into(),
        size,
    })
}

/// The key of an agent's memory index in the cache.
fn index_key(of: Of) -> crate::search::cache::Key {
    let mut id = of.agent_id.to_le_bytes().to_vec();
    id.extend_from_slice(&of.user_id.to_le_bytes());
    (Arc::from("memory-index"), id)
}

/// The agent's memory index, brought up to date with what is stored: the files whose hash
/// changed are opened and chunked again, those gone leave it. Held in the cache after (if
/// it fits).
pub async fn index(st: &AppState, dk: &SecretKey, of: Of) -> Result<Arc<index::Cell>> {
    let key = index_key(of);
    let held = st.index_cache.get_any::<index::Cell>(&key);
    // Counted (and put in the cache) again only when it changed or was not held.
    let mut changed = held.is_none();
    let cell = held.unwrap_or_default();
    {
        // One update at a time reads the stored hashes and applies them.
        let _turn = cell.updating.lock().await;
        let stamps = st
            .db
            .read_with(async |c| store::memory::stamps(c, of.agent_id, of.user_id).await)
            .await?;
        let stale = lock(&cell).stale(&stamps);
        if !stale.is_empty() {
            // One read for many files (the first search), else one a file.
            let rows = st
                .db
                .read_with(async |c| {
                    if stale.len() > 16 {
                        store::memory::all(c, of.agent_id, of.user_id).await
                    } else {
                        let mut rows = Vec::new();
                        for (user_id, path) in &stale {
                            rows.extend(store::memory::get(c, of.agent_id, *user_id, path).await?);
                        }
                        Ok(rows)
                    }
                })
                .await?;
            let stale: std::collections::HashSet<(Option<i64>, String)> =
                stale.into_iter().collect();
            let mut opened = Vec::new();
            for row in rows {
                if stale.contains(&(row.user_id, row.path.clone())) {
                    let text = open(dk, of, &row)?;
                    opened.push((Scope::of(row.user_id), row.path, row.hash, text));
                }
            }
            let tag_key = vectors::tag_key(dk);
            let big = opened.iter().map(|o| o.3.len()).sum::<usize>() > MAX_FILE_BYTES;
            let files = if big {
                // Chunking and tokenizing megabytes is work for a thread of its own.
                tokio::task::spawn_blocking(move || index::FileChunks::of_all(opened, &tag_key))
                    .await
                    .map_err(|e| Error::Internal(format!("indexing memory failed: {e}")))?
            } else {
                index::FileChunks::of_all(opened, &tag_key)
            };
            lock(&cell).update(&stamps, files);
            changed = true;
        } else if lock(&cell).files_count() != stamps.len() {
            lock(&cell).update(&stamps, Vec::new());
            changed = true;
        }
    }
    if changed {
        let bytes = lock(&cell).approx_bytes();
        st.index_cache.put_any(key, cell.clone(), bytes);
    }
    Ok(cell)
}

fn lock(cell: &index::Cell) -> std::sync::MutexGuard<'_, Index> {
    cell.index.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a search found.
#[derive(Debug, Clone)]
pub struct Found {
    /// Whether vectors took part.
    pub hybrid: bool,
    pub hits: Vec<index::Hit>,
    /// Why vectors were wanted and did not take part.
    pub note: Option<String>,
}

/// Searches the agent's memory: BM25 alone without `at`, else hybrid (BM25 alone again,
/// with a note, when the vectors cannot be had in time).
pub async fn search(
    st: &AppState,
    dk: &SecretKey,
    of: Of,
    at: Option<&Endpoint>,
    query: &str,
    limit: usize,
) -> Result<Found> {
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(Error::Invalid(format!(
            "a query is at most {MAX_QUERY_CHARS} characters"
        )));
    }
    let limit = limit.clamp(1, MAX_RESULTS);
    let index = index(st, dk, of).await?;
    let Some(at) = at else {
        return Ok(Found {
            hybrid: false,
            hits: lock(&index).search(query, None, limit),
            note: None,
        });
    };
    let vectors = async {
        let missing = lock(&index).without_vectors(at);
        if !missing.is_empty() {
            let texts: Vec<vectors::Text> = missing
                .iter()
                .map(|(text, tag)| vectors::Text {
                    text,
                    tag,
                    private: true,
                })
                .collect();
            let made = vectors::of_texts(st, at, Some((of.user_id, dk)), &texts).await?;
            let made: Vec<(Vec<u8>, Arc<Vec<f32>>)> =
                missing.into_iter().map(|(_, tag)| tag).zip(made).collect();
            lock(&index).set_vectors(at, made);
            // It holds them now: counted again.
            let bytes = lock(&index).approx_bytes();
            st.index_cache.put_any(index_key(of), index.clone(), bytes);
        }
        vectors::of_query(st, at, Some((of.user_id, dk)), query).await
    };
    let q = tokio::time::timeout(vectors::SEARCH_DEADLINE, vectors)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "vectors took more than {:?}",
                vectors::SEARCH_DEADLINE
            ))
        });
    match q {
        Ok(q) => Ok(Found {
            hybrid: true,
            hits: lock(&index).search(query, Some((at, &q)), limit),
            note: None,
        }),
        Err(why) => {
            // The detail (an endpoint's address, its answer) is for the log, not the user.
            tracing::warn!(%why, "a memory search fell back to BM25");
            Ok(Found {
                hybrid: false,
                hits: lock(&index).search(query, None, limit),
                note: Some("vector search is unavailable just now; BM25 alone".into()),
            })
        }
    }
}

/// `POST /api/agents/{id}/memory/search`.
pub async fn search_files(
    st: &AppState,
    user: &AuthUser,
    agent_id: i64,
    query: &str,
    limit: Option<usize>,
) -> Result<MemorySearchDto> {
    let of = agent_of(st, user, agent_id).await?;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let at = endpoint(st, of).await;
    let found = search(
        st,
        &dk,
        of,
        at.as_ref(),
        query,
        limit.unwrap_or(DEFAULT_RESULTS),
    )
    .await?;
    Ok(dto(found))
}

/// What the API answers for a search.
pub fn dto(found: Found) -> MemorySearchDto {
    MemorySearchDto {
        mode: if found.hybrid { "hybrid" } else { "bm25" }.into(),
        note: found.note,
        results: found
            .hits
            .into_iter()
            .map(|h| MemoryHitDto {
                path: h.path.to_string(),
                scope: h.scope.as_str().into(),
                start_line: h.start_line as u32,
                end_line: h.end_line as u32,
                score: h.score,
                text: h.text,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{rows_in, signed_in, state};

    async fn agent_of_user(st: &AppState, user: &AuthUser) -> Of {
        let agent = crate::agents::create(
            &st.db,
            &st.keys,
            &st.settings.egress,
            user,
            serde_json::from_value(serde_json::json!({
                "name": "memo", "provider": "anthropic", "model": "claude-test",
                "api_key": "sk-test-key-123456"
            }))
            .unwrap(),
        )
        .await
        .unwrap();
        Of {
            agent_id: agent.id,
            user_id: user.id(),
        }
    }

    async fn put(st: &AppState, dk: &SecretKey, of: Of, w: Write<'_>) -> Result<Written> {
        let max = st.settings.max_memory_bytes;
        st.db
            .write_with(async |tx| write(tx, dk, of, w, max).await)
            .await
    }

    fn w<'a>(path: &'a str, content: &'a str) -> Write<'a> {
        Write {
            path,
            content,
            scope: Scope::User,
            append: false,
        }
    }

    #[tokio::test]
    async fn writes_append_delete_and_keep_within_their_bounds() {
        let (_dir, st) = state().await;
        let user = signed_in(&st, "ada").await;
        let of = agent_of_user(&st, &user).await;
        let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id())
            .await
            .unwrap();
        let read = async |path: &str| {
            st.db
                .read_with(async |c| read(c, &dk, of, path, None).await)
                .await
                .unwrap()
        };
        // memory.md is read only while there is no MEMORY.md.
        put(&st, &dk, of, w("memory.md", "old name")).await.unwrap();
        assert_eq!(
            read("MEMORY.md").await,
            Some((Scope::User, "old name".into()))
        );
        put(&st, &dk, of, w("MEMORY.md", "new name")).await.unwrap();
        assert_eq!(
            read("MEMORY.md").await,
            Some((Scope::User, "new name".into()))
        );
        // Appending puts the text on a line of its own; the same text again changes nothing.
        let add = Write {
            append: true,
            ..w("MEMORY.md", "more")
        };
        put(&st, &dk, of, add).await.unwrap();
        assert_eq!(read("MEMORY.md").await.unwrap().1, "new name\nmore");
        assert_eq!(
            put(&st, &dk, of, w("MEMORY.md", "new name\nmore"))
                .await
                .unwrap(),
            Written::Stored {
                size: 13,
                changed: false
            }
        );
        assert_eq!(
            put(&st, &dk, of, w("MEMORY.md", "  \n")).await.unwrap(),
            Written::Deleted
        );
        assert_eq!(
            read("MEMORY.md").await,
            Some((Scope::User, "old name".into()))
        );
        // Text only.
        let err = put(&st, &dk, of, w("memory/a.md", "a\0b"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("NUL"), "{err}");

        // 1,000 files at one scope; the next is refused (429) and not stored, while a
        // file of the other scope, and a rewrite, still go in.
        let names: Vec<String> = (0..MAX_FILES_PER_SCOPE - 1)
            .map(|i| format!("memory/n{i}.md"))
            .collect();
        st.db
            .write_with(async |tx| {
                for n in &names {
                    write(tx, &dk, of, w(n, "x"), usize::MAX).await?;
                }
                Ok(())
            })
            .await
            .unwrap();
        let before = rows_in(&st, "memory_files").await;
        assert_eq!(before, MAX_FILES_PER_SCOPE);
        let err = put(&st, &dk, of, w("memory/one-more.md", "x"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Limit(_)), "{err}");
        assert_eq!(rows_in(&st, "memory_files").await, before);
        put(&st, &dk, of, w("memory/n0.md", "rewritten"))
            .await
            .unwrap();
        let theirs = Write {
            scope: Scope::Agent,
            ..w("memory/one-more.md", "x")
        };
        put(&st, &dk, of, theirs).await.unwrap();
    }

    #[tokio::test]
    async fn an_index_is_kept_within_the_cache_and_serves_one_larger_than_it() {
        let settings = crate::Settings {
            index_cache_bytes: 64 << 10,
            ..crate::Settings::default()
        };
        let t = crate::test_support::state_with(settings).await;
        let st = t.st;
        let user = signed_in(&st, "ada").await;
        let of = agent_of_user(&st, &user).await;
        let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id())
            .await
            .unwrap();
        put(&st, &dk, of, w("memory/small.md", "a small note on tea"))
            .await
            .unwrap();
        let found = search(&st, &dk, of, None, "tea", 6).await.unwrap();
        assert_eq!(found.hits.len(), 1);
        assert!(st.index_cache.bytes() > 0 && st.index_cache.bytes() <= 64 << 10);
        // Past the whole cache: the search is served, the index not kept.
        let big = "tea and biscuits\n\n".repeat(8_000);
        put(&st, &dk, of, w("memory/big.md", &big)).await.unwrap();
        let found = search(&st, &dk, of, None, "biscuits", 20).await.unwrap();
        assert_eq!(found.hits.len(), 20);
        assert!(st.index_cache.bytes() <= 64 << 10);
        assert!(
            st.index_cache
                .get_any::<index::Cell>(&index_key(of))
                .is_none()
        );
    }
}
