//! How the pages' resources travel from the server render to the browser: JSON, read in the
//! browser with `serde_json::from_slice`, the decoder server functions' answers go through
//! too. Leptos's default codec reads with `from_str`; each type that arrives both ways (a
//! session list, a compiled view) would have its whole decoder in the wasm twice.

use leptos::prelude::*;
use leptos::server::codee::{Decoder, Encoder};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The resources' codec: `serde_json` both ways, bytes in the browser.
pub struct Json;

impl<T: Serialize> Encoder<T> for Json {
    type Error = serde_json::Error;
    type Encoded = String;

    fn encode(val: &T) -> Result<String, serde_json::Error> {
        serde_json::to_string(val)
    }
}

impl<T: DeserializeOwned> Decoder<T> for Json {
    type Error = serde_json::Error;
    type Encoded = str;

    fn decode(val: &str) -> Result<T, serde_json::Error> {
        serde_json::from_slice(val.as_bytes())
    }
}

/// A resource through [`Json`]: what `Resource::new` is, with the one decoder.
#[track_caller]
pub fn resource<T, S, Fut>(
    source: impl Fn() -> S + Send + Sync + 'static,
    fetcher: impl Fn(S) -> Fut + Send + Sync + 'static,
) -> Resource<T, Json>
where
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
    S: PartialEq + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    Resource::new_with_options(source, fetcher, false)
}
