//! `/api/skills` (reference 002 §8–10): the user's skills by tier, one with its details and
//! files, and a search over them.

use axum::Json;
use axum::extract::State;
use hero_backend::AppState;
use hero_backend::skills::{api, grants};
use hero_shared::api::{
    AgentSkillsDto, PutSkillRequest, SkillDto, SkillFileText, SkillGrantDto, SkillGrantRequest,
    SkillGrantsDto, SkillSearchDto, SkillSearchRequest, SkillVisibilityRequest, SkillsDto,
};
use serde::Deserialize;

use super::Put;
use super::{ApiJson, ApiPath, ApiQuery, ApiResult, Authed};
use axum::response::NoContent;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TierQuery {
    tier: Option<String>,
}

/// `GET /api/skills`.
pub async fn list(State(st): State<AppState>, Authed(user): Authed) -> ApiResult<Json<SkillsDto>> {
    Ok(Json(api::list(&st, &user).await?))
}

/// `GET /api/skills/{name}?tier=`.
pub async fn get(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<TierQuery>,
) -> ApiResult<Json<SkillDto>> {
    Ok(Json(api::get(&st, &user, &name, q.tier.as_deref()).await?))
}

/// `GET /api/skills/{name}/files/{*path}?tier=`.
pub async fn file(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((name, path)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<TierQuery>,
) -> ApiResult<Json<SkillFileText>> {
    Ok(Json(
        api::file(&st, &user, &name, &path, q.tier.as_deref()).await?,
    ))
}

/// `PUT /api/skills/{name}` `{content, files?}`: a personal skill, 201 new or 200 replaced.
pub async fn put(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(name): ApiPath<String>,
    ApiJson(req): ApiJson<PutSkillRequest>,
) -> ApiResult<Put<SkillDto>> {
    let (made, value) = api::put(&st, &user, &name, req).await?;
    Ok(Put { made, value })
}

/// `DELETE /api/skills/{name}`: a personal skill; 204.
pub async fn delete(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<NoContent> {
    api::delete(&st, &user, &name).await?;
    Ok(NoContent)
}

/// `POST /api/skills/search` `{query, agent_id?, limit?}`.
pub async fn search(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiJson(req): ApiJson<SkillSearchRequest>,
) -> ApiResult<Json<SkillSearchDto>> {
    Ok(Json(api::search(&st, &user, &req).await?))
}

/// `GET /api/agents/{id}/skills`: the skills the agent may use, and the prompt's mode.
pub async fn for_agent(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<AgentSkillsDto>> {
    Ok(Json(api::for_agent(&st, &user, id).await?))
}

/// `GET /api/skills/{name}/grants` (administrators): a global skill's visibility, versions
/// and grants.
pub async fn grants(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<SkillGrantsDto>> {
    Ok(Json(grants::list(&st, &user, &name).await?))
}

/// `PUT /api/skills/{name}/visibility` `{visibility}` (administrators).
pub async fn visibility(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(name): ApiPath<String>,
    ApiJson(req): ApiJson<SkillVisibilityRequest>,
) -> ApiResult<Json<SkillGrantsDto>> {
    Ok(Json(
        grants::set_visibility(&st, &user, &name, &req.visibility).await?,
    ))
}

/// `POST /api/skills/{name}/grants` `{user}` or `{agent_id, pinned_version?}`
/// (administrators): 201 new, 200 granted already.
pub async fn grant(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(name): ApiPath<String>,
    ApiJson(req): ApiJson<SkillGrantRequest>,
) -> ApiResult<Put<SkillGrantDto>> {
    let (made, value) = grants::grant(&st, &user, &name, &req).await?;
    Ok(Put { made, value })
}

/// `DELETE /api/skills/{name}/grants/{grant_id}` (administrators): 204.
pub async fn revoke(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((name, grant_id)): ApiPath<(String, String)>,
) -> ApiResult<NoContent> {
    grants::revoke(&st, &user, &name, &grant_id).await?;
    Ok(NoContent)
}
