//! `/api/abilities` (reference 000's abilities): every function and process the user has,
//! and the user's own processes created, changed, deleted and rendered.

use axum::Json;
use axum::extract::State;
use hero_backend::AppState;
use hero_backend::agents::abilities::{self, Filter};
use hero_shared::api::{
    AbilityDto, AbilitySource, AbilityType, CreateProcessRequest, RenderProcessRequest,
    UpdateProcessRequest,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Created;
use super::{ApiJson, ApiPath, ApiQuery, ApiResult, Authed, Status};
use axum::response::NoContent;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AbilityQuery {
    #[serde(rename = "type")]
    kind: Option<AbilityType>,
    source: Option<AbilitySource>,
    category: Option<String>,
}

/// `GET /api/plugins`: the plugins an administrator installed, their state and abilities.
pub async fn plugins(
    State(st): State<AppState>,
    Authed(_user): Authed,
) -> ApiResult<Json<Vec<hero_shared::api::PluginDto>>> {
    Ok(Json(st.plugins.dtos()))
}

/// `GET /api/abilities?type=&source=&category=`.
pub async fn list(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiQuery(q): ApiQuery<AbilityQuery>,
) -> ApiResult<Json<Vec<AbilityDto>>> {
    let filter = Filter {
        kind: q.kind,
        source: q.source,
        category: q.category,
    };
    Ok(Json(abilities::list(&st, &user, &filter).await?))
}

/// `GET /api/abilities/{id}`: with its content, schema and examples.
pub async fn get(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<AbilityDto>> {
    Ok(Json(abilities::get(&st, &user, &id).await?))
}

/// `POST /api/abilities` `{name, description?, content}`: 201 with the new process.
pub async fn create(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiJson(req): ApiJson<CreateProcessRequest>,
) -> ApiResult<Created<AbilityDto>> {
    Ok(Status(abilities::create(&st, &user, req).await?))
}

/// `PATCH /api/abilities/{id}`.
pub async fn update(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<UpdateProcessRequest>,
) -> ApiResult<Json<AbilityDto>> {
    Ok(Json(abilities::update(&st, &user, &id, req).await?))
}

/// `DELETE /api/abilities/{id}`: 204.
pub async fn delete(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<NoContent> {
    abilities::delete(&st, &user, &id).await?;
    Ok(NoContent)
}

/// `POST /api/abilities/{id}/render` `{session_id?, args?}` → `{content}`.
pub async fn render(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<RenderProcessRequest>,
) -> ApiResult<Json<Value>> {
    let content = abilities::render(&st, &user, &id, req).await?;
    Ok(Json(json!({ "content": content })))
}
