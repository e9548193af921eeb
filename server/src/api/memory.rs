//! `/api/agents/{id}/memory` (reference 002 §1, §14–§15): an agent's memory files, of both
//! scopes, one read or written, and a search over them.

use axum::Json;
use axum::extract::State;
use hero_backend::AppState;
use hero_backend::memory;
use hero_shared::api::{
    MemoryFileContent, MemoryFileDto, MemorySearchDto, MemorySearchRequest, MemoryWrittenDto,
    PutMemoryFileRequest,
};
use serde::Deserialize;

use super::{ApiJson, ApiPath, ApiQuery, ApiResult, Authed};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeQuery {
    scope: Option<String>,
}

/// `GET /api/agents/{id}/memory/files`.
pub async fn list(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<Vec<MemoryFileDto>>> {
    Ok(Json(memory::list(&st, &user, id).await?))
}

/// `GET /api/agents/{id}/memory/files/{*path}?scope=`: by default the copy a search uses.
pub async fn read(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((id, path)): ApiPath<(i64, String)>,
    ApiQuery(q): ApiQuery<ScopeQuery>,
) -> ApiResult<Json<MemoryFileContent>> {
    Ok(Json(
        memory::read_file(&st, &user, id, &path, q.scope.as_deref()).await?,
    ))
}

/// `PUT /api/agents/{id}/memory/files/{*path}` `{content, scope?}`: empty content deletes.
pub async fn write(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((id, path)): ApiPath<(i64, String)>,
    ApiJson(req): ApiJson<PutMemoryFileRequest>,
) -> ApiResult<Json<MemoryWrittenDto>> {
    Ok(Json(
        memory::write_file(&st, &user, id, &path, &req.content, req.scope.as_deref()).await?,
    ))
}

/// `POST /api/agents/{id}/memory/search` `{query, limit?}`.
pub async fn search(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<MemorySearchRequest>,
) -> ApiResult<Json<MemorySearchDto>> {
    Ok(Json(
        memory::search_files(&st, &user, id, &req.query, req.limit).await?,
    ))
}
