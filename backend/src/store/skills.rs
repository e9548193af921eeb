//! The `personal_skills` table: a user's personal skills (reference 002's tier 3). The name
//! is plain, unique per user; the skill (SKILL.md and its files) arrives and leaves sealed
//! ([`crate::skills::personal`] seals and opens it, bound to the row's user and name).

use super::{Conn, Write};
use crate::Result;

/// A personal skill as stored.
pub struct PersonalSkillRow {
    pub name: String,
    pub sealed: Vec<u8>,
}

fn read(r: &impl super::Columns) -> Result<PersonalSkillRow> {
    Ok(PersonalSkillRow {
        name: r.get(0)?,
        sealed: r.get(1)?,
    })
}

/// The user's personal skills (the caller sorts them by name: the backends' collations
/// differ).
pub async fn list(c: &mut Conn<'_>, user_id: i64) -> Result<Vec<PersonalSkillRow>> {
    let sql = "SELECT name, sealed FROM personal_skills WHERE user_id = $1 ORDER BY id";
    rows!(c, read, sql, user_id)
}

/// How many personal skills the user has, and the bytes they take sealed, `name` left out.
pub async fn usage_but(c: &mut Conn<'_>, user_id: i64, name: &str) -> Result<(i64, i64)> {
    let count = "SELECT COUNT(*) FROM personal_skills WHERE user_id = $1 AND name <> $2";
    let bytes = "SELECT COALESCE(SUM(LENGTH(sealed)), 0) FROM personal_skills \
         WHERE user_id = $1 AND name <> $2";
    Ok((
        scalar!(c, i64, count, user_id, name)?.unwrap_or(0),
        scalar!(c, i64, bytes, user_id, name)?.unwrap_or(0),
    ))
}

/// Whether the user has a personal skill named `name`.
pub async fn exists(c: &mut Conn<'_>, user_id: i64, name: &str) -> Result<bool> {
    let sql = "SELECT COUNT(*) FROM personal_skills WHERE user_id = $1 AND name = $2";
    Ok(scalar!(c, i64, sql, user_id, name)?.unwrap_or(0) > 0)
}

/// Stores the user's personal skill `name`, new or replaced.
pub async fn put(
    c: &mut Write<'_>,
    user_id: i64,
    name: &str,
    sealed: &[u8],
    now: &str,
) -> Result<()> {
    let sql = "INSERT INTO personal_skills (user_id, name, sealed, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $4) \
         ON CONFLICT (user_id, name) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at";
    execute!(c, sql, user_id, name, sealed, now)?;
    Ok(())
}

/// Removes the user's personal skill `name`; answers whether there was one.
pub async fn delete(c: &mut Write<'_>, user_id: i64, name: &str) -> Result<bool> {
    let sql = "DELETE FROM personal_skills WHERE user_id = $1 AND name = $2";
    Ok(execute!(c, sql, user_id, name)? > 0)
}

// The administrator's skills (tables `skills`, `skill_versions`, `skill_user_grants`,
// `skill_agent_grants`): what the disk cannot keep of them, and who may see internal ones.

/// A global skill's row.
#[derive(Debug, Clone)]
pub struct GlobalRow {
    pub id: i64,
    pub name: String,
    pub visibility: String,
    pub version: i64,
}

fn read_global(r: &impl super::Columns) -> Result<GlobalRow> {
    Ok(GlobalRow {
        id: r.get(0)?,
        name: r.get(1)?,
        visibility: r.get(2)?,
        version: r.get(3)?,
    })
}

/// Every global skill's name and hash, as last recorded.
pub async fn global_hashes(c: &mut Conn<'_>) -> Result<Vec<(String, String)>> {
    let sql = "SELECT name, hash FROM skills";
    rows!(c, pair, sql)
}

/// A row's first two columns.
fn pair<A: super::Column, B: super::Column>(r: &impl super::Columns) -> Result<(A, B)> {
    Ok((r.get(0)?, r.get(1)?))
}

/// A row's first three columns.
fn triple<A: super::Column, B: super::Column, C: super::Column>(
    r: &impl super::Columns,
) -> Result<(A, B, C)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
}

/// A row's first column.
fn first<A: super::Column>(r: &impl super::Columns) -> Result<A> {
    r.get(0)
}

/// Every global skill's row.
pub async fn globals(c: &mut Conn<'_>) -> Result<Vec<GlobalRow>> {
    let sql = "SELECT id, name, visibility, version FROM skills ORDER BY id";
    rows!(c, read_global, sql)
}

/// The global skill `name`'s row.
pub async fn global(c: &mut Conn<'_>, name: &str) -> Result<Option<GlobalRow>> {
    let sql = "SELECT id, name, visibility, version FROM skills WHERE name = $1";
    row!(c, read_global, sql, name)
}

/// How many texts of a global skill are kept for pinned agents.
pub const KEPT_VERSIONS: i64 = 20;

/// Records the global skill `name` as it now is on disk (its SKILL.md `content`, whose hash
/// is `hash`): a new row at version 1, or the next version if its hash changed; its text kept
/// with the version, the oldest past [`KEPT_VERSIONS`] let go unless an agent is pinned to
/// one. Safe to run at once from two
/// instances: a version is raised by one of them only.
pub async fn record_global(
    c: &mut Write<'_>,
    name: &str,
    hash: &str,
    content: &str,
    now: &str,
) -> Result<()> {
    let insert = "INSERT INTO skills (name, visibility, version, hash, updated_at) \
         VALUES ($1, 'public', 1, $2, $3) ON CONFLICT (name) DO NOTHING";
    let raise = "UPDATE skills SET version = version + 1, hash = $1, updated_at = $2 \
         WHERE name = $3 AND hash <> $4";
    let changed =
        execute!(c, insert, name, hash, now)? > 0 || execute!(c, raise, hash, now, name, hash)? > 0;
    if !changed {
        return Ok(());
    }
    let Some(row) = global(c, name).await? else {
        return Ok(());
    };
    let keep = "INSERT INTO skill_versions (skill_id, version, hash, content, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (skill_id, version) DO NOTHING";
    execute!(c, keep, row.id, row.version, hash, content, now)?;
    // The versions an agent is pinned to are kept however old.
    let prune = "DELETE FROM skill_versions WHERE skill_id = $1 AND version <= $2 \
         AND version NOT IN (SELECT pinned_version FROM skill_agent_grants \
         WHERE skill_id = $3 AND pinned_version IS NOT NULL)";
    execute!(c, prune, row.id, row.version - KEPT_VERSIONS, row.id)?;
    Ok(())
}

/// A global skill's kept versions, newest first.
pub async fn versions(c: &mut Conn<'_>, skill_id: i64) -> Result<Vec<i64>> {
    let sql = "SELECT version FROM skill_versions WHERE skill_id = $1 ORDER BY version DESC";
    rows!(c, first, sql, skill_id)
}

/// Sets a global skill's visibility (`public` or `internal`).
pub async fn set_visibility(c: &mut Write<'_>, skill_id: i64, visibility: &str) -> Result<()> {
    let sql = "UPDATE skills SET visibility = $1 WHERE id = $2";
    execute!(c, sql, visibility, skill_id)?;
    Ok(())
}

/// Every grant of every internal skill: `(skill_id, user_id)`.
pub async fn user_grants(c: &mut Conn<'_>) -> Result<Vec<(i64, i64)>> {
    let sql = "SELECT skill_id, user_id FROM skill_user_grants";
    rows!(c, pair, sql)
}

/// Every grant to an agent: `(skill_id, agent_id, pinned_version)`.
pub async fn agent_grants(c: &mut Conn<'_>) -> Result<Vec<(i64, i64, Option<i64>)>> {
    let sql = "SELECT skill_id, agent_id, pinned_version FROM skill_agent_grants";
    rows!(c, triple, sql)
}

/// The texts agents are pinned to: `(skill_id, version, content)`.
pub async fn pinned_texts(c: &mut Conn<'_>) -> Result<Vec<(i64, i64, String)>> {
    let sql = "SELECT DISTINCT v.skill_id, v.version, v.content FROM skill_versions v \
         JOIN skill_agent_grants g ON g.skill_id = v.skill_id AND g.pinned_version = v.version";
    rows!(c, triple, sql)
}

/// One grant of a skill, as listed.
#[derive(Debug, Clone)]
pub struct GrantRow {
    /// `user` or `agent`.
    pub kind: &'static str,
    pub id: i64,
    pub username: Option<String>,
    pub agent_id: Option<i64>,
    pub pinned_version: Option<i64>,
    pub granted_by: String,
    pub created_at: String,
}

fn user_grant(r: &impl super::Columns) -> Result<GrantRow> {
    Ok(GrantRow {
        kind: "user",
        id: r.get(0)?,
        username: Some(r.get(1)?),
        agent_id: None,
        pinned_version: None,
        granted_by: r.get(2)?,
        created_at: r.get(3)?,
    })
}

fn agent_grant(r: &impl super::Columns) -> Result<GrantRow> {
    Ok(GrantRow {
        kind: "agent",
        id: r.get(0)?,
        username: None,
        agent_id: Some(r.get(1)?),
        pinned_version: r.get(2)?,
        granted_by: r.get(3)?,
        created_at: r.get(4)?,
    })
}

/// A global skill's grants, users' then agents', oldest first.
pub async fn grants_of(c: &mut Conn<'_>, skill_id: i64) -> Result<Vec<GrantRow>> {
    let users = "SELECT g.id, u.username, b.username, g.created_at FROM skill_user_grants g \
         JOIN users u ON u.id = g.user_id JOIN users b ON b.id = g.granted_by \
         WHERE g.skill_id = $1 ORDER BY g.id";
    let agents = "SELECT g.id, g.agent_id, g.pinned_version, b.username, g.created_at \
         FROM skill_agent_grants g JOIN users b ON b.id = g.granted_by \
         WHERE g.skill_id = $1 ORDER BY g.id";
    let mut out: Vec<GrantRow> = rows!(c, user_grant, users, skill_id)?;
    let by_agent: Vec<GrantRow> = rows!(c, agent_grant, agents, skill_id)?;
    out.extend(by_agent);
    Ok(out)
}

/// Grants a skill to a user (again: nothing changes); answers whether it is new.
pub async fn grant_user(
    c: &mut Write<'_>,
    skill_id: i64,
    user_id: i64,
    by: i64,
    now: &str,
) -> Result<bool> {
    let sql = "INSERT INTO skill_user_grants (skill_id, user_id, granted_by, created_at) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (skill_id, user_id) DO NOTHING";
    Ok(execute!(c, sql, skill_id, user_id, by, now)? > 0)
}

/// Grants a skill to an agent, pinned to a version or following the newest (again: the pin
/// is set); answers whether it is new.
pub async fn grant_agent(
    c: &mut Write<'_>,
    skill_id: i64,
    agent_id: i64,
    pinned: Option<i64>,
    by: i64,
    now: &str,
) -> Result<bool> {
    let had = "SELECT COUNT(*) FROM skill_agent_grants WHERE skill_id = $1 AND agent_id = $2";
    let had = scalar!(c, i64, had, skill_id, agent_id)?.unwrap_or(0) > 0;
    let sql = "INSERT INTO skill_agent_grants \
         (skill_id, agent_id, pinned_version, granted_by, created_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (skill_id, agent_id) DO UPDATE SET pinned_version = excluded.pinned_version";
    execute!(c, sql, skill_id, agent_id, pinned, by, now)?;
    Ok(!had)
}

/// Removes a grant of `skill_id` (`kind` `user` or `agent`); answers whether there was one.
pub async fn revoke(c: &mut Write<'_>, kind: &str, id: i64, skill_id: i64) -> Result<bool> {
    let sql = match kind {
        "user" => "DELETE FROM skill_user_grants WHERE id = $1 AND skill_id = $2",
        "agent" => "DELETE FROM skill_agent_grants WHERE id = $1 AND skill_id = $2",
        _ => return Ok(false),
    };
    Ok(execute!(c, sql, id, skill_id)? > 0)
}

/// How many tags one query asks for.
const EMBEDDINGS_AT_ONCE: usize = 200;

/// The vectors cached for `tags` at (endpoint, model): `(tag, vector)`, sealed when the
/// text was a user's.
pub async fn embeddings(
    c: &mut Conn<'_>,
    endpoint: &str,
    model: &str,
    tags: &[Vec<u8>],
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    for chunk in tags.chunks(EMBEDDINGS_AT_ONCE) {
        let marks: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 3)).collect();
        let sql = format!(
            "SELECT tag, vector FROM embeddings WHERE endpoint = $1 AND model = $2 AND tag IN ({})",
            marks.join(", ")
        );
        out.extend(match c.on() {
            super::On::Sqlite(h) => {
                h.run(|c| {
                    let mut st = c.prepare(&sql)?;
                    let mut params: Vec<&dyn rusqlite::ToSql> = vec![&endpoint, &model];
                    params.extend(chunk.iter().map(|t| t as &dyn rusqlite::ToSql));
                    let mut rows = st.query(params.as_slice())?;
                    let mut found = Vec::new();
                    while let Some(r) = rows.next()? {
                        found.push(pair(r)?);
                    }
                    Ok(found)
                })
                .await?
            }
            super::On::Postgres(pg) => {
                let mut q = sqlx::query(&sql).bind(endpoint).bind(model);
                for t in chunk {
                    q = q.bind(t.as_slice());
                }
                q.fetch_all(pg)
                    .await?
                    .iter()
                    .map(pair)
                    .collect::<Result<Vec<_>>>()?
            }
        });
    }
    Ok(out)
}

/// Lets the oldest vectors of `user_id`'s texts go past the newest `keep`.
pub async fn prune_embeddings(c: &mut Write<'_>, user_id: i64, keep: i64) -> Result<()> {
    let cut = "SELECT created_at FROM embeddings WHERE user_id = $1 \
         ORDER BY created_at DESC LIMIT 1 OFFSET $2";
    if let Some(cut) = scalar!(c, String, cut, user_id, keep)? {
        let sql = "DELETE FROM embeddings WHERE user_id = $1 AND created_at <= $2";
        execute!(c, sql, user_id, cut)?;
    }
    Ok(())
}

/// Caches a vector (sealed if `user_id` is set: the text was theirs).
pub async fn put_embedding(
    c: &mut Write<'_>,
    (endpoint, model): (&str, &str),
    tag: &[u8],
    user_id: Option<i64>,
    vector: &[u8],
    now: &str,
) -> Result<()> {
    let sql = "INSERT INTO embeddings (endpoint, model, tag, user_id, vector, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (endpoint, model, tag) DO NOTHING";
    execute!(c, sql, endpoint, model, tag, user_id, vector, now)?;
    Ok(())
}
