//! `/api/agents`: the user's agents. Keys go in, never out: answers say `has_api_key`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use hero_backend::{AppState, agents};
use hero_shared::api::{AgentDto, CreateAgentRequest, UpdateAgentRequest};

use super::{ApiJson, ApiPath, ApiResult, Authed};

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
) -> ApiResult<(StatusCode, Json<AgentDto>)> {
    Ok((
        StatusCode::CREATED,
        Json(agents::create(&st.db, &st.keys, &st.settings.egress, &user, req).await?),
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
) -> ApiResult<StatusCode> {
    agents::delete(&st.db, &user, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
