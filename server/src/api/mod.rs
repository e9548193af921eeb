//! The JSON API under `/api`, for scripts and other clients. Each handler parses its input
//! into a typed value, requires the signed-in user (cookie or bearer token) and calls the
//! same `hero_backend` function the server functions call. Every failure is a JSON
//! `{"error": "..."}` with a 4xx a person can act on (or a 5xx whose detail stays in the log).

use aide::axum::ApiRouter;
use aide::axum::routing::{delete, get, get_with, patch, post, post_with, put};
use axum::extract::{FromRef, FromRequest, FromRequestParts, State};
use axum::http::{HeaderValue, StatusCode, header, request::Parts};
use axum::response::{IntoResponse, Response};
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
mod attachments;
mod calls;
mod chat;
mod configs;
mod export;
mod mcp;
mod memory;
pub mod openapi;
use axum::response::NoContent;
pub use openapi::{Created, Put, Status};
mod skills;
mod spend;
mod sse;
mod tasks;
pub mod ws;

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    AppState: FromRef<S>,
{
    // Before the routes: their operations are made as each is added.
    aide::generate::infer_responses(true);
    aide::generate::extract_schemas(true);
    let routes = ApiRouter::new()
        .api_route(
            "/auth/login",
            post_with(login, |op| {
                op.description("Signs in: the token, and the session cookie a browser keeps.")
                    .response::<200, Json<LoginResponse>>()
            }),
        )
        .api_route(
            "/auth/logout",
            post_with(logout, |op| op.response::<204, NoContent>()),
        )
        .api_route("/me", get(me))
        .api_route("/me/password", post(change_password))
        .api_route("/admin/users", get(admin::list).post(admin::create))
        .api_route("/admin/users/{id}", patch(admin::update))
        .api_route("/sessions", get(list_sessions).post(create_session))
        .api_route("/search", get(chat::search))
        .api_route(
            "/export",
            get_with(export::everything, |op| {
                let tar = openapi::answer_of("application/x-tar", "everything the user owns, a tar archive");
                openapi::answers(op, 200, tar)
            }),
        )
        .api_route(
            "/sessions/import",
            post_with(export::import, |op| {
                let op = openapi::reads(
                    op,
                    &["application/json", "multipart/form-data"],
                    "a JSON export (hero-session), or a form's `file` holding one",
                );
                let op = op.response::<201, Json<SessionDto>>();
                openapi::answers(op, 303, openapi::answer_of("text/html", "a form's import: sent on to the new session's page"))
            })
            .layer(axum::extract::DefaultBodyLimit::max(
                hero_backend::conversation::export::MAX_IMPORT_BYTES + (64 << 10),
            )),
        )
        .api_route(
            "/sessions/{id}/export",
            get_with(export::session, |op| {
                let file = openapi::answer_of(
                    "text/markdown",
                    "a download, streamed: Markdown, or with format=json the versioned JSON (application/json)",
                );
                openapi::answers(op, 200, file)
            }),
        )
        .api_route("/sessions/{id}/branch", post(export::branch))
        .api_route(
            "/sessions/{id}/attachments",
            post_with(attachments::upload, |op| {
                openapi::reads(op, &["multipart/form-data"], "the file, as the form's `file`")
            })
            .layer(axum::extract::DefaultBodyLimit::max(
                attachments::MAX_UPLOAD_BODY,
            )),
        )
        .api_route(
            "/attachments/{id}",
            get_with(attachments::download, |op| {
                let file = openapi::answer_of("application/octet-stream", "the file as it was attached (its own media type)");
                openapi::answers(op, 200, file)
            }),
        )
        .api_route("/sessions/{id}", get(get_session).patch(update_session))
        .api_route("/agents", get(agents::list).post(agents::create))
        .api_route(
            "/agents/{id}",
            get(agents::get)
                .patch(agents::update)
                .delete(agents::delete),
        )
        .api_route("/agents/{id}/files", get(agents::files))
        .api_route("/agents/{id}/summon", post(agents::summon))
        .api_route("/agents/{id}/memory/files", get(memory::list))
        .api_route(
            "/agents/{id}/memory/files/{*path}",
            get(memory::read).put(memory::write),
        )
        .api_route("/agents/{id}/memory/search", post(memory::search))
        .api_route(
            "/agents/{id}/files/{name}",
            get(agents::read_file).put(agents::write_file),
        )
        .api_route("/sessions/{id}/system-prompt", get(agents::system_prompt))
        .api_route("/sessions/{id}/messages", post(chat::post_batch))
        .api_route("/sessions/{id}/messages/stream", post(chat::post_stream))
        .api_route(
            "/sessions/{id}/messages/{frame_id}",
            put(chat::edit_message),
        )
        .api_route(
            "/sessions/{id}/messages/{frame_id}/regenerate",
            post(chat::regenerate),
        )
        .api_route(
            "/sessions/{id}/messages/{frame_id}/current",
            post(chat::set_current),
        )
        .api_route("/sessions/{id}/events", get(chat::events))
        .api_route("/sessions/{id}/frames", get(chat::list_frames))
        .api_route("/sessions/{id}/frames/stats", get(chat::frame_stats))
        .api_route("/sessions/{id}/frames/{frame_id}", get(chat::get_frame))
        .api_route("/sessions/{id}/view", get(chat::view))
        .api_route("/sessions/{id}/view/earlier", get(chat::earlier))
        .api_route(
            "/sessions/{id}/frames/{frame_id}/hidden",
            put(chat::set_hidden),
        )
        .api_route(
            "/sessions/{id}/approvals/{request_frame_id}",
            post(calls::decide),
        )
        .api_route("/sessions/{id}/answers", post(calls::answer))
        .api_route("/permissions", get(calls::list))
        .api_route("/tasks", get(tasks::list).post(tasks::create))
        .api_route("/tasks/teams", get(tasks::teams).post(tasks::create_team))
        .api_route("/tasks/{id}", get(tasks::get).patch(tasks::update))
        .api_route("/tasks/{id}/history", get(tasks::history))
        .api_route("/mcp/servers", get(mcp::list).post(mcp::create))
        .api_route(
            "/mcp/servers/{id}",
            get(mcp::get).patch(mcp::update).delete(mcp::delete),
        )
        .api_route("/mcp/servers/{id}/test", post(mcp::test))
        .api_route("/capabilities", get(configs::capabilities))
        .api_route("/configs", get(configs::list))
        .api_route("/configs/changes", get(configs::changes))
        .api_route(
            "/configs/changes/{id}",
            get(configs::change).post(configs::decide),
        )
        .api_route("/configs/{key}", get(configs::get).put(configs::put))
        .api_route("/configs/{key}/versions", get(configs::versions))
        .api_route("/configs/{key}/default", post(configs::adopt))
        .api_route("/configs/{key}/versions/{n}", get(configs::version))
        .api_route(
            "/workspace",
            get(calls::workspace).delete(calls::empty_workspace),
        )
        .api_route("/permissions/{function}", put(calls::set))
        .api_route("/spend", get(spend::lines))
        .api_route(
            "/spend/corrections",
            get(spend::corrections).post(spend::correct),
        )
        .api_route(
            "/spend/settings",
            get(spend::settings).put(spend::set_settings),
        )
        .api_route("/prices", get(spend::prices))
        .api_route("/abilities", get(abilities::list).post(abilities::create))
        .api_route(
            "/abilities/{id}",
            get(abilities::get)
                .patch(abilities::update)
                .delete(abilities::delete),
        )
        .api_route("/abilities/{id}/render", post(abilities::render))
        .api_route("/plugins", get(abilities::plugins))
        .api_route("/skills", get(skills::list))
        .api_route("/skills/search", post(skills::search))
        .api_route(
            "/skills/{name}",
            get(skills::get)
                .put(skills::put)
                .delete(skills::delete)
                // A personal skill is up to 8 MiB of files, sent as JSON.
                .layer(axum::extract::DefaultBodyLimit::max(12 << 20)),
        )
        .api_route("/agents/{id}/skills", get(skills::for_agent))
        .api_route("/skills/{name}/files/{*path}", get(skills::file))
        .api_route(
            "/skills/{name}/visibility",
            put(skills::visibility),
        )
        .api_route(
            "/skills/{name}/grants",
            get(skills::grants).post(skills::grant),
        )
        .api_route(
            "/skills/{name}/grants/{grant_id}",
            delete(skills::revoke),
        );
    let mut api = aide::openapi::OpenApi {
        info: aide::openapi::Info {
            title: "Hero".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: Some("Hero's JSON API: every route, its parameters, bodies and answers, made from the handlers' own types. Errors are {\"error\": \"...\"}.".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let router = routes.finish_api(&mut api);
    let doc = std::sync::Arc::new(openapi::document(api));
    router
        .route(
            "/openapi.json",
            axum::routing::get(move |State(st): State<AppState>| async move {
                Json(openapi::as_served(&doc, &st.settings))
            }),
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
) -> ApiResult<NoContent> {
    auth::change_password(&st, &user, client, &req.current_password, &req.new_password).await?;
    Ok(NoContent)
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
) -> ApiResult<Created<SessionDto>> {
    Ok(Status(sessions::create(&st, &user, req).await?))
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
