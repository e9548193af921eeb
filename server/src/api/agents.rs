//! `/api/agents`: the user's agents. Keys go in, never out: answers say `has_api_key`.

use axum::Json;
use axum::extract::State;
use hero_backend::{AppState, agents};
use hero_shared::api::{
    AgentDto, ContextFileContent, ContextFileDto, CreateAgentRequest, PutContextFileRequest,
    SummonRequest, SystemPromptDto, UpdateAgentRequest,
};

use super::{ApiJson, ApiPath, ApiResult, Authed, Created, Status};
use axum::response::NoContent;

pub async fn list(
    State(st): State<AppState>,
    Authed(user): Authed,
) -> ApiResult<Json<Vec<AgentDto>>> {
    Ok(Json(agents::list(&st.db, &st.keys, &user).await?))
}

pub async fn create(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiJson(req): ApiJson<CreateAgentRequest>,
) -> ApiResult<Created<AgentDto>> {
    Ok(Status(
        agents::create(&st.db, &st.keys, &st.settings.egress, &user, req).await?,
    ))
}

pub async fn get(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<AgentDto>> {
    Ok(Json(agents::get(&st.db, &st.keys, &user, id).await?))
}

pub async fn update(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<UpdateAgentRequest>,
) -> ApiResult<Json<AgentDto>> {
    Ok(Json(
        agents::update(&st.db, &st.keys, &st.settings.egress, &user, id, req).await?,
    ))
}

pub async fn delete(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<NoContent> {
    agents::delete(&st.db, &user, id).await?;
    Ok(NoContent)
}

/// The agent's context files as the signed-in user's calls use them.
pub async fn files(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<Vec<ContextFileDto>>> {
    Ok(Json(
        hero_backend::agents::context_files::list_files(&st, &user, id).await?,
    ))
}

pub async fn read_file(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((id, name)): ApiPath<(i64, String)>,
) -> ApiResult<Json<ContextFileContent>> {
    Ok(Json(
        hero_backend::agents::context_files::read_file(&st, &user, id, &name).await?,
    ))
}

/// Writes a file at the level the agent's type routes it to; empty content deletes it.
pub async fn write_file(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((id, name)): ApiPath<(i64, String)>,
    ApiJson(req): ApiJson<PutContextFileRequest>,
) -> ApiResult<Json<ContextFileContent>> {
    let written =
        hero_backend::agents::context_files::write_file(&st, &user, id, &name, &req.content)
            .await?;
    // SOUL.md and AGENTS.md are configuration keys too: the edit is their next version.
    hero_backend::agents::config::api::file_written(&st, &user, id, &name).await?;
    Ok(Json(written))
}

/// What the session's next call would send as its system prompt.
pub async fn system_prompt(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(session_id): ApiPath<i64>,
) -> ApiResult<Json<SystemPromptDto>> {
    Ok(Json(SystemPromptDto {
        prompt: hero_backend::agents::persona::for_session(&st, &user, session_id).await?,
    }))
}

/// Writes the agent's persona files from a description: 202 with the agent, `summoning`;
/// `agent_status` on the user's sockets says how it ends.
pub async fn summon(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<SummonRequest>,
) -> ApiResult<Status<202, AgentDto>> {
    Ok(Status(
        hero_backend::agents::summon::summon(&st, &user, id, req).await?,
    ))
}
