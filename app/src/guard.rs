//! The guard every server function starts with, and how domain errors reach the browser.
//! Server functions are public HTTP endpoints: none runs its body without a signed-in user.

use hero_backend::{AppState, accounts::auth::AuthUser};
use leptos::prelude::*;

/// The backend state and the signed-in user, or a 401 for the caller.
pub async fn require_user() -> Result<(AppState, AuthUser), ServerFnError> {
    let st = state()?;
    let parts: http::request::Parts = leptos_axum::extract().await?;
    match hero_backend::accounts::auth::authenticate_headers(&st, &parts.headers).await {
        Ok(user) => Ok((st, user)),
        Err(e) => Err(fail(e)),
    }
}

pub fn state() -> Result<AppState, ServerFnError> {
    use_context::<AppState>().ok_or_else(|| ServerFnError::new("server state is missing"))
}

/// Where server functions are served; see the `prefix` of each `#[server]`.
pub const SERVER_FN_PREFIX: &str = "/_fn/";

/// Sets the HTTP status the error deserves and turns it into what the browser may read.
///
/// The status is set only when a server function is called over HTTP: while a page renders
/// on the server, the same function runs in-process and its error is the page's to show (a
/// sign-in redirect, a message), not a status for the whole page.
pub fn fail(e: hero_backend::Error) -> ServerFnError {
    let called_over_http = use_context::<http::request::Parts>()
        .is_some_and(|p| p.uri.path().starts_with(SERVER_FN_PREFIX));
    if called_over_http && let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(e.status());
    }
    if e.status().is_server_error() {
        tracing::error!("server function failed: {e}");
    }
    ServerFnError::new(e.public_message())
}
