//! `POST /api/sessions/{id}/attachments` (a form's `file`: the file stored for the session's
//! next message) and `GET /api/attachments/{id}` (its owner's download). The checks and
//! the bounds are `hero_backend::conversation::attachments`'.

use axum::extract::State;
use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hero_backend::AppState;
use hero_backend::conversation::attachments::{self, MAX_ATTACHMENT_BYTES};
use hero_shared::api::AttachmentDto;

use super::{ApiError, ApiPath, ApiResult, Authed, Created, Status};

/// The most a request that uploads a file may hold: the file and the form around it.
pub const MAX_UPLOAD_BODY: usize = MAX_ATTACHMENT_BYTES + (64 << 10);

/// `POST /api/sessions/{id}/attachments` (`multipart/form-data`, its `file`): 201 with the
/// attachment, whose id a message names in `attachments`.
pub async fn upload(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<i64>,
    form: Result<Multipart, MultipartRejection>,
) -> ApiResult<Created<AttachmentDto>> {
    let mut form = form.map_err(|e| ApiError::new(e.status(), e.body_text()))?;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the file is too large: an attachment holds at most {} MiB",
                MAX_ATTACHMENT_BYTES >> 20
            ),
        )
    };
    let broken = |e: axum::extract::multipart::MultipartError| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => too_large(),
        s => ApiError::new(s, e.body_text()),
    };
    while let Some(mut field) = form.next_field().await.map_err(broken)? {
        if field.name() != Some("file") {
            continue;
        }
        let name = field.file_name().unwrap_or("attachment").to_owned();
        let mut bytes = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(broken)? {
            if bytes.len() + chunk.len() > MAX_ATTACHMENT_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        return Ok(Status(
            attachments::upload(&st, &user, id, &name, bytes).await?,
        ));
    }
    Err(ApiError::new(
        StatusCode::BAD_REQUEST,
        "send the file as the form's `file` field",
    ))
}

/// `GET /api/attachments/{id}`: the file, to its owner only (404 for anyone else's).
pub async fn download(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let (name, media_type, bytes) = attachments::download(&st, &user, &id).await?;
    let mut r = bytes.into_response();
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&media_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&disposition(&name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(r)
}

/// `Content-Disposition` for a download named `name`: an ASCII name for old clients, and
/// the exact one percent-encoded (RFC 6266).
fn disposition(name: &str) -> String {
    let ascii: String = name
        .chars()
        .map(|c| match c {
            ' '..='~' if c != '"' && c != '\\' => c,
            _ => '_',
        })
        .collect();
    let mut exact = String::new();
    for b in name.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' => exact.push(b as char),
            _ => exact.push_str(&format!("%{b:02X}")),
        }
    }
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{exact}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_download_is_named_safely() {
        assert_eq!(
            super::disposition("Été \"q\".pdf"),
            "attachment; filename=\"_t_ _q_.pdf\"; filename*=UTF-8''%C3%89t%C3%A9%20%22q%22.pdf"
        );
    }
}
