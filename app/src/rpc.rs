//! The browser's calls of the chat's server functions, without server_fn's own client:
//! each is one `POST` of the function's arguments as JSON (the chat's functions all take
//! JSON, `input = Json`) to its path, answered with JSON, or refused with the sentence
//! [`crate::enhance::error_sentence`] reads. What that client brings to the wasm (its
//! request types, gloo-net, streams) stays out of the chat's first load (docs/perf.md).

use leptos::server_fn::ServerFn;
use leptos::server_fn::error::ServerFnError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use wasm_bindgen::JsValue;

/// Calls the server function `F` with `args` (its arguments' struct).
pub async fn call<F>(args: F) -> Result<F::Output, ServerFnError>
where
    F: ServerFn + Serialize,
    F::Output: DeserializeOwned,
{
    let body = serde_json::to_string(&args).map_err(|_| refused(0, ""))?;
    let text = post(F::PATH, &body).await?;
    serde_json::from_str(&text).map_err(|_| refused(200, ""))
}

/// The refusal a status and a body say.
fn refused(status: u16, body: &str) -> ServerFnError {
    ServerFnError::ServerError(crate::enhance::error_sentence(status, body))
}

/// `POST`s `body` (JSON) to the function at `path`: its answer's text, or its refusal.
/// One copy for every function (only the JSON around it is theirs).
async fn post(path: &str, body: &str) -> Result<String, ServerFnError> {
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_body(&JsValue::from_str(body));
    let headers = web_sys::Headers::new().map_err(|_| refused(0, ""))?;
    let _ = headers.set("Content-Type", "application/json");
    let _ = headers.set("Accept", "application/json");
    init.set_headers(&headers);
    let (ok, status, text) = crate::http::fetch(&crate::base::href(path), &init)
        .await
        .ok_or_else(|| refused(0, ""))?;
    match ok {
        true => Ok(text),
        false => Err(refused(status, &text)),
    }
}
