//! Embeddings (reference 002 §11): the vectors of texts, from an OpenAI-compatible endpoint
//! (`POST {base}/embeddings`), through the egress policy, at most [`MAX_INPUTS`] texts a
//! call and [`TIMEOUT`] a call. No model runs here and no weights are downloaded.

use std::time::Duration;

use serde_json::{Value, json};

use crate::execution::egress::Outbound;

/// The most texts one call embeds.
pub const MAX_INPUTS: usize = 64;
/// The longest one call may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The most numbers a vector may have (the largest models give 4,096).
pub const MAX_DIMENSIONS: usize = 8_192;
/// The largest answer read (64 vectors of 4,096 numbers as JSON fit well within it).
pub const MAX_ANSWER_BYTES: usize = 16 << 20;

/// The installation's embeddings: on when `model` is set. `url` (and `api_key`) name one
/// endpoint for everyone; without it an agent whose provider speaks OpenAI's API embeds
/// through its own base URL and key, so that a user's text goes only where their chat goes.
#[derive(Clone, Default)]
pub struct Settings {
    pub model: Option<String>,
    pub url: Option<String>,
    pub api_key: Option<String>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("model", &self.model)
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Settings {
    /// The endpoint for everyone, if the installation names one.
    pub fn shared(&self) -> Option<Endpoint> {
        Some(Endpoint {
            base: self.url.clone()?,
            key: self.api_key.clone(),
            model: self.model.clone()?,
        })
    }

    /// The endpoint for a call of an agent at `provider`: the shared one, else the agent's
    /// own if it speaks OpenAI's API; none when embeddings are off.
    pub fn for_agent(&self, provider: &crate::providers::Endpoint) -> Option<Endpoint> {
        use hero_shared::api::ProviderKind;
        let model = self.model.clone()?;
        if let Some(shared) = self.shared() {
            return Some(shared);
        }
        match provider.provider {
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => Some(Endpoint {
                base: provider
                    .base_url
                    .clone()
                    .unwrap_or_else(|| crate::providers::openai::DEFAULT_BASE_URL.to_owned()),
                key: provider.api_key.clone(),
                model,
            }),
            _ => None,
        }
    }
}

/// Where vectors come from: an endpoint's base URL (`…/v1`), its key, and the model.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub base: String,
    pub key: Option<String>,
    pub model: String,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("base", &self.base)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .finish()
    }
}

/// The vectors of `texts`, in order, or why there are none.
pub async fn embed(
    http: &Outbound,
    at: &Endpoint,
    texts: &[String],
) -> Result<Vec<Vec<f32>>, String> {
    let url = http
        .check(&format!("{}/embeddings", at.base.trim_end_matches('/')))
        .map_err(|e| format!("the embeddings endpoint is not allowed: {e}"))?;
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(MAX_INPUTS) {
        let mut req = http
            .post(&url)
            .json(&json!({"model": at.model, "input": chunk}));
        if let Some(key) = &at.key {
            req = req.bearer_auth(key);
        }
        let call = async {
            let resp = req
                .send()
                .await
                .map_err(|e| format!("the embeddings endpoint cannot be reached: {e}"))?;
            let status = resp.status();
            let body = read_bounded(resp).await?;
            if !status.is_success() {
                return Err(format!("the embeddings endpoint answered {status}"));
            }
            vectors(&body, chunk.len())
        };
        let got = tokio::time::timeout(TIMEOUT, call)
            .await
            .map_err(|_| format!("the embeddings endpoint took more than {TIMEOUT:?}"))??;
        out.extend(got);
    }
    Ok(out)
}

async fn read_bounded(mut resp: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("the embeddings endpoint's answer broke off: {e}"))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(format!(
                "the embeddings endpoint's answer is over {} MiB",
                MAX_ANSWER_BYTES >> 20
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The `n` vectors of an answer in OpenAI's shape, by their `index`, all of one length.
fn vectors(body: &[u8], n: usize) -> Result<Vec<Vec<f32>>, String> {
    let bad = |why: &str| format!("the embeddings endpoint's answer is not understood: {why}");
    let v: Value = serde_json::from_slice(body).map_err(|_| bad("not JSON"))?;
    let data = v["data"].as_array().ok_or_else(|| bad("no data"))?;
    if data.len() != n {
        return Err(bad(&format!("{} vectors for {n} texts", data.len())));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for d in data {
        let i = d["index"].as_u64().map_or(usize::MAX, |i| i as usize);
        let slot = out.get_mut(i).ok_or_else(|| bad("an index out of range"))?;
        let numbers = d["embedding"]
            .as_array()
            .ok_or_else(|| bad("no embedding"))?;
        let vector: Option<Vec<f32>> = numbers
            .iter()
            .map(|x| x.as_f64().map(|x| x as f32))
            .collect();
        *slot = Some(vector.ok_or_else(|| bad("a vector of something other than numbers"))?);
    }
    let out: Vec<Vec<f32>> = out
        .into_iter()
        .collect::<Option<_>>()
        .ok_or_else(|| bad("an index twice"))?;
    if out.first().is_some_and(|v| v.len() > MAX_DIMENSIONS) {
        return Err(bad(&format!(
            "vectors of more than {MAX_DIMENSIONS} numbers"
        )));
    }
    if out.windows(2).any(|w| w[0].len() != w[1].len()) || out.first().is_some_and(Vec::is_empty) {
        return Err(bad("vectors of different lengths"));
    }
    Ok(out)
}

/// A vector as stored: its numbers, little-endian.
pub fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A vector as stored, read back (none if its length is no whole number of numbers).
pub fn from_bytes(b: &[u8]) -> Option<Vec<f32>> {
    if !b.len().is_multiple_of(4) {
        return None;
    }
    Some(
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_by_index_and_checked() {
        let body = br#"{"data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}]}"#;
        assert_eq!(vectors(body, 2).unwrap(), [vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert!(vectors(body, 3).is_err());
        assert!(vectors(br#"{"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}"#, 2).is_err());
        assert!(vectors(br#"{"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}"#, 2).is_err());
        assert!(vectors(b"nope", 1).is_err());
        let v = vec![0.5f32, -1.25, 3.0];
        assert_eq!(from_bytes(&to_bytes(&v)).unwrap(), v);
        assert!(from_bytes(&[1, 2, 3]).is_none());
    }
}
