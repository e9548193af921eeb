//! `/api/tasks` (reference 004's tasks): the user's tasks, each by its number or its
//! identifier (`PER-123`), their history, and their teams. A change made here is the
//! user's; an agent's comes through the `tasks` capability. Both are heard on the user's
//! sockets (`task_changed`).

use axum::Json;
use axum::extract::State;
use hero_backend::AppState;
use hero_backend::tasks::{self, Actor};
use hero_shared::api::{
    CreateTaskRequest, CreateTeamRequest, TaskDto, TaskEventDto, TeamDto, UpdateTaskRequest,
};
use serde::Deserialize;

use super::openapi::{Created, Status};
use super::{ApiJson, ApiPath, ApiQuery, ApiResult, Authed};

/// `?status=&team=`: one status (`triage`, `backlog`, `todo`, `in_progress`, `done`,
/// `canceled`), one team (its key or name).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskQuery {
    status: Option<String>,
    team: Option<String>,
}

/// `GET /api/tasks`: newest first.
pub async fn list(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiQuery(q): ApiQuery<TaskQuery>,
) -> ApiResult<Json<Vec<TaskDto>>> {
    Ok(Json(
        tasks::list(&st, user.id(), q.status.as_deref(), q.team.as_deref()).await?,
    ))
}

/// `POST /api/tasks`: 201 with the task.
pub async fn create(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiJson(req): ApiJson<CreateTaskRequest>,
) -> ApiResult<Created<TaskDto>> {
    Ok(Status(
        tasks::create(&st, user.id(), Actor::User, req).await?,
    ))
}

/// `GET /api/tasks/{id}` (its number or `PER-123`).
pub async fn get(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<TaskDto>> {
    Ok(Json(tasks::get(&st, user.id(), &id).await?))
}

/// `PATCH /api/tasks/{id}`: the fields given.
pub async fn update(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<UpdateTaskRequest>,
) -> ApiResult<Json<TaskDto>> {
    Ok(Json(
        tasks::update(&st, user.id(), Actor::User, &id, req).await?,
    ))
}

/// `GET /api/tasks/{id}/history`: oldest first.
pub async fn history(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Vec<TaskEventDto>>> {
    Ok(Json(tasks::history(&st, user.id(), &id).await?))
}

/// `GET /api/tasks/teams` (Personal made on first use).
pub async fn teams(
    State(st): State<AppState>,
    Authed(user): Authed,
) -> ApiResult<Json<Vec<TeamDto>>> {
    Ok(Json(tasks::teams(&st, user.id()).await?))
}

/// `POST /api/tasks/teams`: 201 with the team; 409 when its key is taken.
pub async fn create_team(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiJson(req): ApiJson<CreateTeamRequest>,
) -> ApiResult<Created<TeamDto>> {
    Ok(Status(tasks::create_team(&st, user.id(), req).await?))
}
