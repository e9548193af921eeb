//! The vectors of texts (reference 002 §11, §13), made once and kept: held open in memory
//! ([`super::IndexCache`]) and stored in the `embeddings` table by (endpoint, model, the
//! text's tag). A public text's tag is SHA-256's first 16 bytes; a user's text's is an HMAC
//! under a key derived from their data key, and its vector is sealed with that key, so the
//! table tells nothing of what a user wrote. Skills and memory ask here.

use std::collections::HashMap;
use std::sync::Arc;

use hkdf::hmac::{Hmac, Mac};
use sha2::Digest;

use super::embed::{self, Endpoint};
use crate::crypto::{self, SecretKey};
use crate::{AppState, now_text};

/// A text's tag: SHA-256's first 16 bytes for a public one; for a user's, HMAC-SHA-256
/// under `user_key` ([`tag_key`]): the tag tells nothing of the text.
pub fn tag(text: &str, user_key: Option<&[u8; 32]>) -> Vec<u8> {
    match user_key {
        None => sha2::Sha256::digest(text.as_bytes())[..16].to_vec(),
        Some(key) => {
            let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(key).expect("any key length");
            mac.update(text.as_bytes());
            mac.finalize().into_bytes()[..16].to_vec()
        }
    }
}

/// The key a user's tags are made with, derived from their data key.
pub fn tag_key(dk: &SecretKey) -> [u8; 32] {
    crypto::derived_key(dk, b"hero/embedding-tag/v1")
}

fn aad(at: &Endpoint, tag: &[u8]) -> Vec<u8> {
    let mut aad = format!("embedding|{}|{}|", at.base, at.model).into_bytes();
    aad.extend_from_slice(tag);
    aad
}

/// A text to be given a vector: the text, its tag, and whether it is the user's (its
/// vector sealed) rather than public.
pub struct Text<'a> {
    pub text: &'a str,
    pub tag: &'a [u8],
    pub private: bool,
}

/// The vectors of `texts` at `at`, in order: those held or stored read, the others embedded
/// (in calls of at most [`embed::MAX_INPUTS`], each batch kept as it comes) and kept. `user`: whose private texts they
/// are, with their data key.
pub async fn of_texts(
    st: &AppState,
    at: &Endpoint,
    user: Option<(i64, &SecretKey)>,
    texts: &[Text<'_>],
) -> Result<Vec<Arc<Vec<f32>>>, String> {
    // Held open in memory first, then stored (opened, and held), then asked for.
    let place: Arc<str> = Arc::from(format!("{}|{}", at.base, at.model));
    let mut known: HashMap<&[u8], Arc<Vec<f32>>> = HashMap::new();
    for t in texts {
        if let Some(v) = st.index_cache.get(&(place.clone(), t.tag.to_vec())) {
            known.insert(t.tag, v);
        }
    }
    let mut unknown: Vec<Vec<u8>> = texts
        .iter()
        .filter(|t| !known.contains_key(t.tag))
        .map(|t| t.tag.to_vec())
        .collect();
    unknown.sort();
    unknown.dedup();
    if !unknown.is_empty() {
        let cached = st
            .db
            .read_with(async |c| {
                crate::store::skills::embeddings(c, &at.base, &at.model, &unknown).await
            })
            .await
            .map_err(|e| format!("the cached vectors could not be read: {e}"))?;
        let sealed: HashMap<&[u8], bool> = texts.iter().map(|t| (t.tag, t.private)).collect();
        for (t, stored) in cached {
            let Some((&tag, &private)) = sealed.get_key_value(t.as_slice()) else {
                continue;
            };
            let plain = match user {
                Some((_, dk)) if private => crypto::open(dk, &aad(at, tag), &stored).ok(),
                _ => Some(stored),
            };
            if let Some(v) = plain.as_deref().and_then(embed::from_bytes) {
                let v = Arc::new(v);
                st.index_cache.put((place.clone(), tag.to_vec()), v.clone());
                known.insert(tag, v);
            }
        }
    }
    // Each missing text once, however often it is given.
    let mut missing: Vec<&Text> = Vec::new();
    for t in texts {
        if !known.contains_key(t.tag) && !missing.iter().any(|m| m.tag == t.tag) {
            missing.push(t);
        }
    }
    // A batch at a time, each kept as it comes: a search cut short by its deadline leaves
    // the batches done for the next one.
    let mut stored = false;
    for batch in missing.chunks(embed::MAX_INPUTS) {
        let asked: Vec<String> = batch.iter().map(|t| t.text.to_owned()).collect();
        let got = embed::embed(&st.http, at, &asked).await?;
        let now = now_text();
        let rows: Vec<(Vec<u8>, Option<i64>, Vec<u8>)> = batch
            .iter()
            .zip(&got)
            .map(|(t, v)| {
                let bytes = embed::to_bytes(v);
                match user {
                    Some((user_id, dk)) if t.private => (
                        t.tag.to_vec(),
                        Some(user_id),
                        crypto::seal(dk, &aad(at, t.tag), &bytes),
                    ),
                    _ => (t.tag.to_vec(), None, bytes),
                }
            })
            .collect();
        // Stored for the installation's endpoint alone: an agent's own (a URL its user
        // chose) has its vectors held in memory only, so no user can make the table grow
        // by naming endpoints.
        if st.settings.embeddings.shared().as_ref() == Some(at) {
            store(st, at, &rows, &now).await?;
            stored = true;
        }
        for (t, v) in batch.iter().zip(got) {
            let v = Arc::new(v);
            st.index_cache
                .put((place.clone(), t.tag.to_vec()), v.clone());
            known.insert(t.tag, v);
        }
    }
    // A user's stored vectors are bounded: once a call, the oldest past the bound go.
    if stored && let Some((user_id, _)) = user {
        st.db
            .write_with(async |tx| {
                crate::store::skills::prune_embeddings(tx, user_id, MAX_STORED_PER_USER).await
            })
            .await
            .map_err(|e| format!("the vectors could not be pruned: {e}"))?;
    }
    Ok(texts
        .iter()
        .map(|t| known.get(t.tag).cloned().unwrap_or_default())
        .collect())
}

/// The most vectors of a user's texts kept stored; past them, the oldest are let go (a
/// text that changes often leaves a vector for each). A user's whole memory (16 MiB, at
/// least 500 characters a chunk) and their skills fit within it.
pub const MAX_STORED_PER_USER: i64 = 40_000;

async fn store(
    st: &AppState,
    at: &Endpoint,
    rows: &[(Vec<u8>, Option<i64>, Vec<u8>)],
    now: &str,
) -> Result<(), String> {
    st.db
        .write_with(async |tx| {
            for (t, owner, bytes) in rows {
                crate::store::skills::put_embedding(
                    tx,
                    (&at.base, &at.model),
                    t,
                    *owner,
                    bytes,
                    now,
                )
                .await?;
            }
            Ok(())
        })
        .await
        .map_err(|e| format!("the vectors could not be cached: {e}"))
}

/// The longest the vector part of one search may take, however many texts it embeds;
/// past it, the search is BM25 alone.
pub const SEARCH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(15);

/// A query's vector: held in memory (under its tag) or asked for.
pub async fn of_query(
    st: &AppState,
    at: &Endpoint,
    user: Option<(i64, &SecretKey)>,
    query: &str,
) -> Result<Arc<Vec<f32>>, String> {
    let key = user.map(|(_, dk)| tag_key(dk));
    let held = (
        Arc::<str>::from(format!("query|{}|{}", at.base, at.model)),
        tag(query, key.as_ref()),
    );
    if let Some(v) = st.index_cache.get(&held) {
        return Ok(v);
    }
    let v = Arc::new(
        embed::embed(&st.http, at, &[query.to_owned()])
            .await?
            .into_iter()
            .next()
            .unwrap_or_default(),
    );
    st.index_cache.put(held, v.clone());
    Ok(v)
}
