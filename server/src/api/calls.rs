//! `/api/permissions` (each function's default level and the user's own) and
//! `/api/sessions/{id}/approvals/{request_frame_id}` (the user's decision on a call that
//! waits for it). A decision comes only from the signed-in user's own request.

use axum::Json;
use axum::extract::State;
use hero_backend::{AppState, conversation::turn, execution::permissions};
use hero_shared::api::{
    AnswerRequest, ApprovalRequest, PermissionDto, SetPermissionRequest, WorkspaceDto,
};
use hero_shared::calls::CallStatus;
use serde_json::{Value, json};

use super::{ApiJson, ApiPath, ApiResult, Authed};
use axum::response::NoContent;

pub async fn list(
    State(st): State<AppState>,
    Authed(user): Authed,
) -> ApiResult<Json<Vec<PermissionDto>>> {
    Ok(Json(permissions::list(&st, &user).await?))
}

/// `GET /api/workspace`.
pub async fn workspace(
    State(st): State<AppState>,
    Authed(user): Authed,
) -> ApiResult<Json<WorkspaceDto>> {
    Ok(Json(
        hero_backend::execution::functions::bash::workspace(&st, &user).await?,
    ))
}

/// `DELETE /api/workspace`: empties it.
pub async fn empty_workspace(
    State(st): State<AppState>,
    Authed(user): Authed,
) -> ApiResult<Json<WorkspaceDto>> {
    Ok(Json(
        hero_backend::execution::functions::bash::empty_workspace(&st, &user).await?,
    ))
}

pub async fn set(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(function): ApiPath<String>,
    ApiJson(req): ApiJson<SetPermissionRequest>,
) -> ApiResult<Json<PermissionDto>> {
    Ok(Json(
        permissions::set(&st, &user, &function, req.level).await?,
    ))
}

/// Approves or denies a pending call: 409 if it was decided already.
pub async fn decide(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath((session_id, request_id)): ApiPath<(i64, String)>,
    ApiJson(req): ApiJson<ApprovalRequest>,
) -> ApiResult<Json<Value>> {
    let status = turn::decide(&st, &user, session_id, &request_id, req.approved).await?;
    Ok(Json(json!({
        "request_id": request_id,
        "status": match status {
            CallStatus::Approved => "approved",
            _ => "denied",
        },
    })))
}

/// Answers a question in a message (an `hml-prompt`): 409 if it was answered already.
pub async fn answer(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(session_id): ApiPath<i64>,
    ApiJson(req): ApiJson<AnswerRequest>,
) -> ApiResult<NoContent> {
    hero_backend::conversation::answers::answer(
        &st,
        &user,
        session_id,
        &req.message_id,
        &req.element_id,
        req.answer,
    )
    .await?;
    Ok(NoContent)
}
