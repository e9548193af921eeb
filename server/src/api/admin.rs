//! `/api/admin/users`: an administrator lists accounts with their use, makes one, and
//! changes one (disable, enable, password, administrator). 403 for everyone else; the rules
//! live in `hero_backend::accounts::admin`.

use axum::Json;
use axum::extract::State;
use hero_backend::AppState;
use hero_backend::accounts::admin;
use hero_backend::store::users::Usage;
use hero_shared::api::{AdminCreateUserRequest, AdminUpdateUserRequest, AdminUserDto};

use super::Created;
use super::{ApiJson, ApiPath, ApiResult, Authed, Status};

/// `GET /api/admin/users`.
pub async fn list(
    State(st): State<AppState>,
    Authed(user): Authed,
) -> ApiResult<Json<Vec<AdminUserDto>>> {
    let rows = admin::list(&st, &user).await?;
    Ok(Json(
        rows.into_iter().map(|(u, n)| admin::dto(u, n)).collect(),
    ))
}

/// `POST /api/admin/users` `{username, password, is_admin?}`: 201 with the account.
pub async fn create(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiJson(req): ApiJson<AdminCreateUserRequest>,
) -> ApiResult<Created<AdminUserDto>> {
    let u = admin::create(&st, &user, &req.username, &req.password, req.is_admin).await?;
    Ok(Status(admin::dto(u, Usage::default())))
}

/// `PATCH /api/admin/users/{id}` `{disabled?, is_admin?, password?}`: the account after.
pub async fn update(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<AdminUpdateUserRequest>,
) -> ApiResult<Json<AdminUserDto>> {
    let change = admin::Change {
        disabled: req.disabled,
        is_admin: req.is_admin,
        password: req.password,
    };
    admin::update(&st, &user, id, change).await?;
    let (u, usage) = admin::list(&st, &user)
        .await?
        .into_iter()
        .find(|(u, _)| u.id == id)
        .ok_or(hero_backend::Error::NotFound("user"))?;
    Ok(Json(admin::dto(u, usage)))
}
