//! `/api/sessions/{id}/export` (Markdown or JSON, streamed), `/api/export` (everything, a
//! tar archive) and `/api/sessions/import` (a JSON export, as the body or as a form's file:
//! a form is sent on to the new session). The formats and the checks are
//! `hero_backend::conversation::export`'s.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use futures::TryStreamExt;
use hero_backend::AppState;
use hero_backend::conversation::export::{self, Format};
use serde::Deserialize;

use super::{ApiError, ApiPath, ApiQuery, ApiResult, Authed};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportQuery {
    format: Option<String>,
}

fn download(content_type: &'static str, file: &str, body: Body) -> Response {
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{file}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    r
}

/// A stream's error ends the download (the status has gone); it is logged.
fn body(s: impl futures::Stream<Item = hero_backend::Result<Bytes>> + Send + 'static) -> Body {
    Body::from_stream(s.inspect_err(|e| tracing::error!(error = %e, "an export stopped")))
}

/// `GET /api/sessions/{id}/export?format=markdown|json` (JSON by default).
pub async fn session(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<ExportQuery>,
) -> ApiResult<Response> {
    let format = Format::parse(q.format.as_deref().unwrap_or("json"))?;
    let (session, stream) = export::session(&st, &user, id, format).await?;
    Ok(download(
        format.content_type(),
        &export::file_name(&session, format),
        body(stream),
    ))
}

/// `GET /api/export`: everything the user owns, a tar archive.
pub async fn everything(State(st): State<AppState>, Authed(user): Authed) -> ApiResult<Response> {
    let stream = export::everything(&st, &user).await?;
    Ok(download(
        "application/x-tar",
        &export::archive_name(),
        body(stream),
    ))
}

/// An import's body that could not be read: its reason, except that one too large is a
/// 400 naming the limit, as the import's other problems are.
fn unreadable(status: StatusCode, reason: String) -> ApiError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        let most = hero_backend::conversation::export::MAX_IMPORT_BYTES >> 20;
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("an import is at most {most} MiB"),
        );
    }
    ApiError::new(status, reason)
}

/// `POST /api/sessions/import`: a JSON export as the body (201 with the new session), or a
/// form's `file` (`multipart/form-data`: sent on to the new session's page).
pub async fn import(
    State(st): State<AppState>,
    Authed(user): Authed,
    req: Request,
) -> ApiResult<Response> {
    let form = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("multipart/form-data"));
    let data = if form {
        let mut parts = Multipart::from_request(req, &st)
            .await
            .map_err(|e| unreadable(e.status(), e.body_text()))?;
        let mut file = None;
        while let Some(part) = parts
            .next_field()
            .await
            .map_err(|e| unreadable(e.status(), e.body_text()))?
        {
            if part.name() == Some("file") {
                file = Some(
                    part.bytes()
                        .await
                        .map_err(|e| unreadable(e.status(), e.body_text()))?,
                );
            }
        }
        file.ok_or_else(|| ApiError::new(StatusCode::BAD_REQUEST, "choose a file to import"))?
    } else {
        Bytes::from_request(req, &st)
            .await
            .map_err(|e| unreadable(e.status(), e.body_text()))?
    };
    let session = export::import(&st, &user, &data).await?;
    if form {
        let to = format!("{}/s/{}", st.settings.base_path, session.id);
        return Ok(Redirect::to(&to).into_response());
    }
    Ok((StatusCode::CREATED, axum::Json(session)).into_response())
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchRequest {
    from_frame_id: String,
}

/// `POST /api/sessions/{id}/branch` `{from_frame_id}`: 201 with the new session.
pub async fn branch(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    super::ApiJson(req): super::ApiJson<BranchRequest>,
) -> ApiResult<super::Created<hero_shared::api::SessionDto>> {
    let session = export::branch(&st, &user, id, &req.from_frame_id).await?;
    Ok(super::Status(session))
}
