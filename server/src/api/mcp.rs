//! `/api/mcp/servers` (reference 004: MCP servers as a capability source): the user's own
//! servers, each a stdio program in their sandbox or a streamable-HTTP URL behind the egress
//! policy. Environment values and headers are never shown back, only their names. A test
//! that fails is a result (`ok: false` and why), not an error.

use axum::Json;
use axum::extract::State;
use axum::response::NoContent;
use hero_backend::AppState;
use hero_backend::execution::mcp;
use hero_shared::api::{
    CreateMcpServerRequest, McpServerDto, McpTestResult, UpdateMcpServerRequest,
};

use super::openapi::{Created, Status};
use super::{ApiJson, ApiPath, ApiResult, Authed};

/// `GET /api/mcp/servers`: by name.
pub async fn list(
    State(st): State<AppState>,
    Authed(user): Authed,
) -> ApiResult<Json<Vec<McpServerDto>>> {
    Ok(Json(mcp::list(&st, user.id()).await?))
}

/// `POST /api/mcp/servers`: 201 with the server, started and listed when enabled (one that
/// does not start is kept, `failed`, saying why); 400 for a bad name, a command outside
/// `/usr` and `/workspace` or a URL the egress policy refuses; 409 for a name taken.
pub async fn create(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiJson(req): ApiJson<CreateMcpServerRequest>,
) -> ApiResult<Created<McpServerDto>> {
    Ok(Status(mcp::create(&st, user.id(), req).await?))
}

/// `GET /api/mcp/servers/{id}`.
pub async fn get(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<McpServerDto>> {
    Ok(Json(mcp::get(&st, user.id(), id).await?))
}

/// `PATCH /api/mcp/servers/{id}`: the fields given; the server's connection is stopped.
pub async fn update(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<UpdateMcpServerRequest>,
) -> ApiResult<Json<McpServerDto>> {
    Ok(Json(mcp::update(&st, user.id(), id, req).await?))
}

/// `DELETE /api/mcp/servers/{id}`: 204; the server is stopped.
pub async fn delete(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<NoContent> {
    mcp::delete(&st, user.id(), id).await?;
    Ok(NoContent)
}

/// `POST /api/mcp/servers/{id}/test`: starts it afresh and lists its tools.
pub async fn test(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<McpTestResult>> {
    Ok(Json(mcp::test(&st, user.id(), id).await?))
}
