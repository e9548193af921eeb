//! What the skills' routes answer (`/api/skills`): a user's skills by tier, one with its
//! details and files, and a search.

use hero_shared::api::{
    AgentSkillsDto, PutSkillRequest, SkillDetail, SkillDto, SkillFile, SkillFileText, SkillHitDto,
    SkillSearchDto, SkillSearchRequest, SkillsDto,
};

use super::grants::Snapshot;
use super::{DEFAULT_RESULTS, Failed, Skill, Tier, View};
use crate::accounts::auth::AuthUser;
use crate::{AppState, Error, Result};

fn dto(a: &Snapshot, s: &Skill, overridden_by: Option<Tier>) -> SkillDto {
    SkillDto {
        name: s.md.name.clone(),
        description: s.md.description.clone(),
        tier: s.tier.as_str().to_owned(),
        visibility: a.visibility(s.tier, &s.md.name).to_owned(),
        version: a.version_of(s),
        overridden_by: overridden_by.map(|t| t.as_str().to_owned()),
        error: None,
        detail: None,
    }
}

fn failed_dto(a: &Snapshot, f: &Failed) -> SkillDto {
    SkillDto {
        name: f.name.clone(),
        description: String::new(),
        tier: f.tier.as_str().to_owned(),
        visibility: a.visibility(f.tier, &f.name).to_owned(),
        version: String::new(),
        overridden_by: None,
        error: Some(f.error.clone()),
        detail: None,
    }
}

/// The user as the API sees them.
fn seer(user: &AuthUser) -> super::Seer {
    super::Seer::User {
        id: user.id(),
        admin: user.is_admin(),
    }
}

/// Every skill the user has, by tier (highest first) then name: those in use, those a
/// higher tier hides, and the folders that are no skill, with why.
pub async fn list(st: &AppState, user: &AuthUser) -> Result<SkillsDto> {
    let view = super::of_user(st, seer(user)).await?;
    let a = super::grants::ready(st).await?;
    let mut skills: Vec<SkillDto> = view.skills.iter().map(|s| dto(&a, s, None)).collect();
    skills.extend(view.overridden.iter().map(|(s, by)| dto(&a, s, Some(*by))));
    skills.extend(view.failed.iter().map(|f| failed_dto(&a, f)));
    let rank = |t: &str| {
        [
            Tier::Workspace,
            Tier::Project,
            Tier::Personal,
            Tier::Global,
            Tier::Builtin,
        ]
        .iter()
        .position(|x| x.as_str() == t)
    };
    skills.sort_by(|a, b| {
        rank(&a.tier)
            .cmp(&rank(&b.tier))
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(SkillsDto {
        search_mode: if st.settings.embeddings.shared().is_some() {
            "hybrid"
        } else {
            "bm25"
        }
        .into(),
        skills,
    })
}

/// The skill `name` (the one in use, or of `tier`), with its details.
fn find(
    view: &View,
    name: &str,
    tier: Option<&str>,
) -> Option<(std::sync::Arc<Skill>, Option<Tier>)> {
    let in_use = view.get(name).cloned().map(|s| (s, None));
    match tier {
        None => in_use,
        Some(t) => in_use.filter(|(s, _)| s.tier.as_str() == t).or_else(|| {
            view.overridden
                .iter()
                .find(|(s, _)| s.md.name == name && s.tier.as_str() == t)
                .map(|(s, by)| (s.clone(), Some(*by)))
        }),
    }
}

/// `GET /api/skills/{name}?tier=`.
pub async fn get(
    st: &AppState,
    user: &AuthUser,
    name: &str,
    tier: Option<&str>,
) -> Result<SkillDto> {
    let view = super::of_user(st, seer(user)).await?;
    let a = super::grants::ready(st).await?;
    let (s, by) = find(&view, name, tier).ok_or(Error::NotFound("skill"))?;
    Ok(SkillDto {
        detail: Some(SkillDetail {
            license: s.md.license.clone(),
            compatibility: s.md.compatibility.clone(),
            metadata: s.md.metadata.clone(),
            allowed_tools: s.md.allowed_tools.clone(),
            content: s.body(),
            files: s
                .files
                .iter()
                .map(|(path, size)| SkillFile {
                    path: path.clone(),
                    size: *size,
                })
                .collect(),
        }),
        ..dto(&a, &s, by)
    })
}

/// `GET /api/skills/{name}/files/{path}?tier=`: a text file of the skill in use, or of the
/// one of `tier`.
pub async fn file(
    st: &AppState,
    user: &AuthUser,
    name: &str,
    path: &str,
    tier: Option<&str>,
) -> Result<SkillFileText> {
    let view = super::of_user(st, seer(user)).await?;
    let (s, _) = find(&view, name, tier).ok_or(Error::NotFound("skill"))?;
    if path == "SKILL.md" {
        return Ok(SkillFileText {
            path: path.into(),
            content: s.body(),
        });
    }
    if !s.files.iter().any(|(p, _)| p == path) {
        return Err(Error::NotFound("file"));
    }
    let content = s.file(path).map_err(Error::Invalid)?;
    Ok(SkillFileText {
        path: path.into(),
        content,
    })
}

/// The skills the user's agent `agent_id` may use (404 for another user's agent).
async fn of_agent(
    st: &AppState,
    user: &AuthUser,
    agent_id: i64,
) -> Result<Vec<std::sync::Arc<Skill>>> {
    let allow = crate::agents::skill_allow_list(&st.db, user.id(), agent_id).await?;
    Ok(super::of_user(
        st,
        super::Seer::Agent {
            user_id: user.id(),
            agent_id,
        },
    )
    .await?
    .allowed(allow.as_deref()))
}

/// `GET /api/agents/{id}/skills`.
pub async fn for_agent(st: &AppState, user: &AuthUser, agent_id: i64) -> Result<AgentSkillsDto> {
    let skills = of_agent(st, user, agent_id).await?;
    let a = super::grants::ready(st).await?;
    Ok(AgentSkillsDto {
        prompt_mode: if super::inline(&skills) {
            "inline"
        } else {
            "search"
        }
        .into(),
        estimated_tokens: super::estimated_tokens(&skills),
        skills: skills.iter().map(|s| dto(&a, s, None)).collect(),
    })
}

/// `PUT /api/skills/{name}`: the user's personal skill, new (`true`) or replaced.
pub async fn put(
    st: &AppState,
    user: &AuthUser,
    name: &str,
    req: PutSkillRequest,
) -> Result<(bool, SkillDto)> {
    match req.tier.as_deref() {
        None | Some("personal") => {}
        Some("global") => {
            let new = put_global(st, user, name, req).await?;
            return Ok((new, get(st, user, name, Some("global")).await?));
        }
        Some(other) => {
            return Err(Error::Invalid(format!(
                "a skill is written as personal, or global by an administrator, not {other:?}"
            )));
        }
    }
    let new = super::personal::put(
        st,
        user.id(),
        name,
        &req.content,
        req.files.unwrap_or_default(),
    )
    .await?;
    Ok((new, get(st, user, name, Some("personal")).await?))
}

/// An administrator's global skill, written as a folder under the server's skills
/// directory (the whole folder replaced at once), then read again; answers whether it is
/// new.
async fn put_global(
    st: &AppState,
    user: &AuthUser,
    name: &str,
    req: PutSkillRequest,
) -> Result<bool> {
    if !user.is_admin() {
        return Err(Error::Forbidden(
            "only an administrator writes a global skill",
        ));
    }
    let files = req.files.unwrap_or_default();
    super::personal::check(name, &req.content, &files)?;
    let Some(root) = st.settings.skills_dir.clone() else {
        return Err(Error::Invalid(
            "this server has no skills directory for global skills".into(),
        ));
    };
    let (name, content) = (name.to_owned(), req.content.replace("\r\n", "\n"));
    let new = tokio::task::spawn_blocking(move || {
        super::files::replace_folder(&root, &name, &content, &files)
    })
    .await
    .map_err(|e| Error::Internal(format!("a skill could not be written: {e}")))?
    .map_err(|e| Error::Internal(format!("a skill could not be written: {e}")))?;
    let library = st.skills.clone();
    tokio::task::spawn_blocking(move || library.reload())
        .await
        .map_err(|e| Error::Internal(format!("the skills could not be read again: {e}")))?;
    Ok(new)
}

/// `DELETE /api/skills/{name}`: the user's personal skill.
pub async fn delete(st: &AppState, user: &AuthUser, name: &str) -> Result<()> {
    super::personal::delete(st, user.id(), name).await
}

/// `POST /api/skills/search`: among the user's skills, or those `agent_id` may use.
pub async fn search(
    st: &AppState,
    user: &AuthUser,
    req: &SkillSearchRequest,
) -> Result<SkillSearchDto> {
    if req.query.trim().is_empty() {
        return Err(Error::Invalid("the query is empty".into()));
    }
    let (among, at) = match req.agent_id {
        Some(agent) => {
            let runtime = crate::agents::runtime(&st.db, &st.keys, user.id(), agent).await?;
            (
                of_agent(st, user, agent).await?,
                st.settings.embeddings.for_agent(&runtime.endpoint),
            )
        }
        None => (
            super::of_user(st, seer(user)).await?.skills,
            st.settings.embeddings.shared(),
        ),
    };
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let found = super::vectors::search(
        st,
        at.as_ref(),
        Some((user.id(), &dk)),
        &among,
        &req.query,
        req.limit.unwrap_or(DEFAULT_RESULTS),
    )
    .await
    .map_err(Error::Invalid)?;
    Ok(SkillSearchDto {
        mode: if found.hybrid { "hybrid" } else { "bm25" }.into(),
        note: found.note,
        results: found
            .hits
            .into_iter()
            .map(|h| SkillHitDto {
                name: h.skill.md.name.clone(),
                description: h.skill.md.description.clone(),
                tier: h.skill.tier.as_str().to_owned(),
                score: h.score,
                bm25: h.bm25,
                vector: h.vector,
            })
            .collect(),
    })
}
