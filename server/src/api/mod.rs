//! The JSON API under `/api`, for scripts and other clients. Each handler parses its input
//! into a typed value, requires the signed-in user (cookie or bearer token) and calls the
//! same `hero_backend` function the server functions call. Every failure is a JSON
//! `{"error": "..."}` with a 4xx a person can act on (or a 5xx whose detail stays in the log).

use axum::extract::{FromRef, FromRequest, FromRequestParts, State};
use axum::http::{HeaderValue, StatusCode, header, request::Parts};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hero_backend::accounts::auth::{self, AuthUser};
use hero_backend::{AppState, Error, conversation::sessions};
use hero_shared::api::{
    ChangePasswordRequest, CreateSessionRequest, ErrorBody, LoginRequest, LoginResponse,
    SessionDto, UpdateSessionRequest, UserDto,
};

mod abilities;
mod admin;
mod agents;
mod calls;
mod chat;
mod export;
mod memory;
mod skills;
mod spend;
mod sse;
pub mod ws;

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    AppState: FromRef<S>,
{
    Router::new()
        .route("/auth/login", post(login))
        .route("/auth/logout", post(logout))
        .route("/me", get(me))
        .route("/me/password", post(change_password))
        .route("/admin/users", get(admin::list).post(admin::create))
        .route("/admin/users/{id}", axum::routing::patch(admin::update))
        .route("/sessions", get(list_sessions).post(create_session))
        .route("/search", get(chat::search))
        .route("/export", get(export::everything))
        .route(
            "/sessions/import",
            post(export::import).layer(axum::extract::DefaultBodyLimit::max(
                hero_backend::conversation::export::MAX_IMPORT_BYTES + (64 << 10),
            )),
        )
        .route("/sessions/{id}/export", get(export::session))
        .route("/sessions/{id}/branch", post(export::branch))
        .route("/sessions/{id}", get(get_session).patch(update_session))
        .route("/agents", get(agents::list).post(agents::create))
        .route(
            "/agents/{id}",
            get(agents::get)
                .patch(agents::update)
                .delete(agents::delete),
        )
        .route("/agents/{id}/files", get(agents::files))
        .route("/agents/{id}/summon", post(agents::summon))
        .route("/agents/{id}/memory/files", get(memory::list))
        .route(
            "/agents/{id}/memory/files/{*path}",
            get(memory::read).put(memory::write),
        )
        .route("/agents/{id}/memory/search", post(memory::search))
        .route(
            "/agents/{id}/files/{name}",
            get(agents::read_file).put(agents::write_file),
        )
        .route("/sessions/{id}/system-prompt", get(agents::system_prompt))
        .route("/sessions/{id}/messages", post(chat::post_batch))
        .route("/sessions/{id}/messages/stream", post(chat::post_stream))
        .route(
            "/sessions/{id}/messages/{frame_id}",
            axum::routing::put(chat::edit_message),
        )
        .route(
            "/sessions/{id}/messages/{frame_id}/regenerate",
            post(chat::regenerate),
        )
        .route(
            "/sessions/{id}/messages/{frame_id}/current",
            post(chat::set_current),
        )
        .route("/sessions/{id}/events", get(chat::events))
        .route("/sessions/{id}/frames", get(chat::list_frames))
        .route("/sessions/{id}/frames/stats", get(chat::frame_stats))
        .route("/sessions/{id}/frames/{frame_id}", get(chat::get_frame))
        .route("/sessions/{id}/view", get(chat::view))
        .route("/sessions/{id}/view/earlier", get(chat::earlier))
        .route(
            "/sessions/{id}/frames/{frame_id}/hidden",
            axum::routing::put(chat::set_hidden),
        )
        .route(
            "/sessions/{id}/approvals/{request_frame_id}",
            post(calls::decide),
        )
        .route("/sessions/{id}/answers", post(calls::answer))
        .route("/permissions", get(calls::list))
        .route(
            "/workspace",
            get(calls::workspace).delete(calls::empty_workspace),
        )
        .route("/permissions/{function}", axum::routing::put(calls::set))
        .route("/spend", get(spend::lines))
        .route(
            "/spend/corrections",
            get(spend::corrections).post(spend::correct),
        )
        .route(
            "/spend/settings",
            get(spend::settings).put(spend::set_settings),
        )
        .route("/prices", get(spend::prices))
        .route("/abilities", get(abilities::list).post(abilities::create))
        .route(
            "/abilities/{id}",
            get(abilities::get)
                .patch(abilities::update)
                .delete(abilities::delete),
        )
        .route("/abilities/{id}/render", post(abilities::render))
        .route("/plugins", get(abilities::plugins))
        .route("/skills", get(skills::list))
        .route("/skills/search", post(skills::search))
        .route(
            "/skills/{name}",
            get(skills::get)
                .put(skills::put)
                .delete(skills::delete)
                // A personal skill is up to 8 MiB of files, sent as JSON.
                .layer(axum::extract::DefaultBodyLimit::max(12 << 20)),
        )
        .route("/agents/{id}/skills", get(skills::for_agent))
        .route("/skills/{name}/files/{*path}", get(skills::file))
        .route(
            "/skills/{name}/visibility",
            axum::routing::put(skills::visibility),
        )
        .route(
            "/skills/{name}/grants",
            get(skills::grants).post(skills::grant),
        )
        .route(
            "/skills/{name}/grants/{grant_id}",
            axum::routing::delete(skills::revoke),
        )
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such API route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "this route does not take that method",
            )
        })
}

/// An error answer: status plus a message the client may read.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            retry_after: None,
        }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        if e.status().is_server_error() && !matches!(e, Error::Unavailable(_)) {
            tracing::error!(error = %e, "request failed");
        }
        let retry_after = match &e {
            Error::TooManyAttempts { retry_after } => Some(retry_after.as_secs().max(1)),
            Error::Unavailable(_) => Some(2),
            _ => None,
        };
        ApiError {
            status: e.status(),
            message: e.public_message(),
            retry_after,
        }
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(r: axum::extract::rejection::JsonRejection) -> Self {
        // The rejection knows the right 4xx: 415 without a JSON content type, 400 for broken
        // syntax, 422 for a body of the wrong shape.
        ApiError::new(r.status(), format!("invalid JSON body: {}", r.body_text()))
    }
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(r: axum::extract::rejection::QueryRejection) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("invalid query: {}", r.body_text()),
        )
    }
}

impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(r: axum::extract::rejection::PathRejection) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("invalid id in the URL: {}", r.body_text()),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (
            self.status,
            Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// A JSON body whose rejection is an [`ApiError`] (axum's own answers in plain text).
#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// A path parameter whose rejection is an [`ApiError`].
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// Query parameters whose rejection is an [`ApiError`].
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// The signed-in user; a handler that takes one cannot run without one.
pub struct Authed(pub AuthUser);

impl<S> FromRequestParts<S> for Authed
where
    S: Send + Sync,
    AppState: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let st = AppState::from_ref(state);
        Ok(Authed(
            auth::authenticate_headers(&st, &parts.headers).await?,
        ))
    }
}

/// The address a request came from ([`auth::client_address`]): the connection's peer, or,
/// behind a trusted proxy, the address it forwarded. `None` when the server was not told
/// its peers (in-process callers).
pub struct Client(pub Option<std::net::IpAddr>);

impl<S> FromRequestParts<S> for Client
where
    S: Send + Sync,
    AppState: FromRef<S>,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let st = AppState::from_ref(state);
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip());
        Ok(Client(auth::client_address(
            &parts.headers,
            peer,
            &st.settings.trusted_proxies,
        )))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

fn set_cookie(resp: &mut Response, value: &str) -> ApiResult<()> {
    let v = HeaderValue::from_str(value)
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "cookie encoding failed"))?;
    resp.headers_mut().append(header::SET_COOKIE, v);
    Ok(())
}

async fn login(
    State(st): State<AppState>,
    Client(client): Client,
    ApiJson(req): ApiJson<LoginRequest>,
) -> ApiResult<Response> {
    let l = auth::login_from(&st, client, &req.username, &req.password).await?;
    let mut resp = Json(LoginResponse {
        user: l.user.dto(),
        token: l.token.clone(),
        expires_at: l.expires_at,
    })
    .into_response();
    let cookie = auth::session_cookie(
        &l.token,
        st.settings.token_ttl.whole_seconds(),
        &st.settings,
    );
    set_cookie(&mut resp, &cookie)?;
    Ok(resp)
}

async fn logout(State(st): State<AppState>, Authed(user): Authed) -> ApiResult<Response> {
    auth::logout(&st, &user).await?;
    let mut resp = StatusCode::NO_CONTENT.into_response();
    set_cookie(&mut resp, &auth::clear_cookie(&st.settings))?;
    Ok(resp)
}

async fn me(Authed(user): Authed) -> Json<UserDto> {
    Json(user.dto())
}

async fn change_password(
    State(st): State<AppState>,
    Authed(user): Authed,
    Client(client): Client,
    ApiJson(req): ApiJson<ChangePasswordRequest>,
) -> ApiResult<StatusCode> {
    auth::change_password(&st, &user, client, &req.current_password, &req.new_password).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_sessions(
    State(st): State<AppState>,
    Authed(user): Authed,
) -> ApiResult<Json<Vec<SessionDto>>> {
    Ok(Json(sessions::list(&st.db, &user).await?))
}

async fn create_session(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiJson(req): ApiJson<CreateSessionRequest>,
) -> ApiResult<(StatusCode, Json<SessionDto>)> {
    Ok((
        StatusCode::CREATED,
        Json(sessions::create(&st, &user, req).await?),
    ))
}

async fn get_session(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<SessionDto>> {
    Ok(Json(sessions::get(&st.db, &user, id).await?))
}

async fn update_session(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiJson(req): ApiJson<UpdateSessionRequest>,
) -> ApiResult<Json<SessionDto>> {
    Ok(Json(sessions::update(&st.db, &user, id, req).await?))
}
