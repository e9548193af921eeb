//! `/api/capabilities` and `/api/configs` (reference 004): the capability chain, each
//! configuration key with its versions, and the changes agents proposed, decided here as
//! the call that proposed each is (`turn::decide`: one decision, 409 after).

use axum::Json;
use axum::extract::State;
use hero_backend::agents::config::api;
use hero_backend::{AppState, Error, conversation::turn};
use hero_shared::api::{
    CapabilityDto, ConfigChangeDto, ConfigDto, ConfigKeyDto, ConfigVersionDto, DecideChangeRequest,
    DecidedChangeDto, PutConfigRequest,
};
use serde::Deserialize;

use super::{ApiJson, ApiPath, ApiQuery, ApiResult, Authed};

/// `?agent_id=`: the agent whose keys (`soul`, `agents`) are meant.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentQuery {
    agent_id: Option<i64>,
}

/// `?status=`: `pending`, `approved`, `rejected` or `stale`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusQuery {
    status: Option<String>,
}

/// `GET /api/capabilities`.
pub async fn capabilities(
    State(st): State<AppState>,
    Authed(user): Authed,
) -> ApiResult<Json<Vec<CapabilityDto>>> {
    Ok(Json(api::capabilities(&st, &user).await?))
}

/// `GET /api/configs?agent_id=`.
pub async fn list(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiQuery(q): ApiQuery<AgentQuery>,
) -> ApiResult<Json<Vec<ConfigKeyDto>>> {
    Ok(Json(api::list(&st, &user, q.agent_id).await?))
}

/// `GET /api/configs/{key}?agent_id=`.
pub async fn get(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(key): ApiPath<String>,
    ApiQuery(q): ApiQuery<AgentQuery>,
) -> ApiResult<Json<ConfigDto>> {
    Ok(Json(api::get(&st, &user, &key, q.agent_id).await?))
}

/// `PUT /api/configs/{key}`: a new version, against `base_version`.
pub async fn put(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(key): ApiPath<String>,
    ApiJson(req): ApiJson<PutConfigRequest>,
) -> ApiResult<Json<ConfigDto>> {
    Ok(Json(api::put(&st, &user, &key, req).await?))
}

/// `POST /api/configs/{key}/default`: a capability's newer shipped instructions (the
/// `offered` diff) written as its next version.
pub async fn adopt(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(key): ApiPath<String>,
) -> ApiResult<Json<ConfigDto>> {
    Ok(Json(api::adopt(&st, &user, &key).await?))
}

/// `GET /api/configs/{key}/versions?agent_id=`: newest first, each with its diff.
pub async fn versions(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(key): ApiPath<String>,
    ApiQuery(q): ApiQuery<AgentQuery>,
) -> ApiResult<Json<Vec<ConfigVersionDto>>> {
    Ok(Json(api::versions(&st, &user, &key, q.agent_id).await?))
}

/// `GET /api/configs/{key}/versions/{n}?agent_id=`.
pub async fn version(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((key, n)): ApiPath<(String, i64)>,
    ApiQuery(q): ApiQuery<AgentQuery>,
) -> ApiResult<Json<ConfigDto>> {
    Ok(Json(api::version(&st, &user, &key, n, q.agent_id).await?))
}

/// `GET /api/configs/changes?status=`.
pub async fn changes(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiQuery(q): ApiQuery<StatusQuery>,
) -> ApiResult<Json<Vec<ConfigChangeDto>>> {
    Ok(Json(api::changes(&st, &user, q.status.as_deref()).await?))
}

/// `GET /api/configs/changes/{id}`.
pub async fn change(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ConfigChangeDto>> {
    Ok(Json(api::change(&st, &user, &id).await?))
}

/// `POST /api/configs/changes/{id}`: the user's decision, which is the decision on the
/// call that proposed it. A second decision is a 409, and so is an approval of a change
/// whose key moved on since it was proposed (the change is then `stale`, and the agent
/// told so).
pub async fn decide(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<DecideChangeRequest>,
) -> ApiResult<Json<DecidedChangeDto>> {
    let ch = api::change(&st, &user, &id).await?;
    if ch.status != "pending" {
        return Err(
            Error::Conflict(format!("this change was already decided: {}", ch.status)).into(),
        );
    }
    turn::decide(&st, &user, ch.session_id, &id, req.approved).await?;
    let ch = api::change(&st, &user, &id).await?;
    if ch.status == "stale" {
        return Err(Error::Conflict(format!(
            "stale: {} changed since the change was proposed against v{}; it was not applied",
            ch.key, ch.base_version
        ))
        .into());
    }
    Ok(Json(DecidedChangeDto {
        status: ch.status,
        version: ch.version,
    }))
}
