//! What the skills' routes answer (`/api/skills`): a user's skills by tier, one with its
//! details and files, and a search.

use hero_shared::api::{
    AgentSkillsDto, PutSkillRequest, SkillDetail, SkillDto, SkillFile, SkillFileText, SkillHitDto,
    SkillSearchDto, SkillSearchRequest, SkillsDto,
};

use super::{DEFAULT_RESULTS, Failed, Skill, Tier, View};
use crate::accounts::auth::AuthUser;
use crate::{AppState, Error, Result};

fn visibility(tier: Tier) -> &'static str {
    match tier {
        Tier::Builtin | Tier::Global => "public",
        _ => "private",
    }
}

fn dto(s: &Skill, overridden_by: Option<Tier>) -> SkillDto {
    SkillDto {
        name: s.md.name.clone(),
        description: s.md.description.clone(),
        tier: s.tier.as_str().to_owned(),
        visibility: visibility(s.tier).to_owned(),
        version: s.version.clone(),
        overridden_by: overridden_by.map(|t| t.as_str().to_owned()),
        error: None,
        detail: None,
    }
}

fn failed_dto(f: &Failed) -> SkillDto {
    SkillDto {
        name: f.name.clone(),
        description: String::new(),
        tier: f.tier.as_str().to_owned(),
        visibility: visibility(f.tier).to_owned(),
        version: String::new(),
        overridden_by: None,
        error: Some(f.error.clone()),
        detail: None,
    }
}

/// Every skill the user has, by tier (highest first) then name: those in use, those a
/// higher tier hides, and the folders that are no skill, with why.
pub async fn list(st: &AppState, user: &AuthUser) -> Result<SkillsDto> {
    let view = super::of_user(st, user.id()).await?;
    let mut skills: Vec<SkillDto> = view.skills.iter().map(|s| dto(s, None)).collect();
    skills.extend(view.overridden.iter().map(|(s, by)| dto(s, Some(*by))));
    skills.extend(view.failed.iter().map(failed_dto));
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
        search_mode: "bm25".into(),
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
    let view = super::of_user(st, user.id()).await?;
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
        ..dto(&s, by)
    })
}

/// `GET /api/skills/{name}/files/{path}`: a text file of the skill in use.
pub async fn file(st: &AppState, user: &AuthUser, name: &str, path: &str) -> Result<SkillFileText> {
    let view = super::of_user(st, user.id()).await?;
    let s = view.get(name).ok_or(Error::NotFound("skill"))?;
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
    Ok(super::of_user(st, user.id())
        .await?
        .allowed(allow.as_deref()))
}

/// `GET /api/agents/{id}/skills`.
pub async fn for_agent(st: &AppState, user: &AuthUser, agent_id: i64) -> Result<AgentSkillsDto> {
    let skills = of_agent(st, user, agent_id).await?;
    Ok(AgentSkillsDto {
        prompt_mode: if super::inline(&skills) {
            "inline"
        } else {
            "search"
        }
        .into(),
        estimated_tokens: super::estimated_tokens(&skills),
        skills: skills.iter().map(|s| dto(s, None)).collect(),
    })
}

/// `PUT /api/skills/{name}`: the user's personal skill, new (`true`) or replaced.
pub async fn put(
    st: &AppState,
    user: &AuthUser,
    name: &str,
    req: PutSkillRequest,
) -> Result<(bool, SkillDto)> {
    if req.tier.as_deref().is_some_and(|t| t != "personal") {
        return Err(Error::Invalid(
            "skills written here are personal: a global one is a folder in the server's skills directory".into(),
        ));
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
    let among = match req.agent_id {
        Some(agent) => of_agent(st, user, agent).await?,
        None => super::of_user(st, user.id()).await?.skills,
    };
    let hits = super::search(&among, &req.query, req.limit.unwrap_or(DEFAULT_RESULTS))
        .map_err(Error::Invalid)?;
    Ok(SkillSearchDto {
        mode: "bm25".into(),
        results: hits
            .into_iter()
            .map(|h| SkillHitDto {
                name: h.skill.md.name.clone(),
                description: h.skill.md.description.clone(),
                tier: h.skill.tier.as_str().to_owned(),
                score: h.score,
                bm25: h.bm25,
                vector: None,
            })
            .collect(),
    })
}
