//! The browser's one `fetch` with a body read as text: the chat's calls (`rpc`), the pages'
//! forms (`enhance`), uploads and imports all go through it, so its code is in the wasm once.

use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// Fetches `url` as `init` says: whether it answered 2xx, its status and its text; `None`
/// when the server could not be reached.
pub async fn fetch(url: &str, init: &web_sys::RequestInit) -> Option<(bool, u16, String)> {
    let window = web_sys::window()?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str_and_init(url, init))
        .await
        .ok()?
        .unchecked_into();
    let text = match response.text() {
        Ok(p) => JsFuture::from(p)
            .await
            .ok()
            .and_then(|t| t.as_string())
            .unwrap_or_default(),
        Err(_) => String::new(),
    };
    Some((response.ok(), response.status(), text))
}
