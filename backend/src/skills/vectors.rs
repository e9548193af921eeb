//! Hybrid skill search (reference 002 §10–11): BM25 over names and descriptions, and, where
//! embeddings are on, the cosine of each skill's vector with the query's, fused
//! ([`crate::search::fuse`]). A skill's vector is cached in the `embeddings` table by its
//! text's tag: public skills' (Hero's, the administrator's) under SHA-256, a user's under an
//! HMAC keyed from their data key, sealed. A failed call leaves that search to BM25, with a
//! note; nothing is lost.

use std::collections::HashMap;
use std::sync::Arc;

use hkdf::hmac::{Hmac, Mac};
use sha2::Digest;

use super::{Hit, MAX_QUERY_CHARS, MAX_RESULTS, Skill, Tier};
use crate::crypto::{self, SecretKey};
use crate::search::embed::{self, Endpoint};
use crate::search::fuse;
use crate::{AppState, now_text};

/// What a search found.
#[derive(Debug, Clone)]
pub struct Found {
    /// Whether vectors took part.
    pub hybrid: bool,
    pub hits: Vec<Hit>,
    /// Why vectors were wanted and did not take part.
    pub note: Option<String>,
}

/// The text of a skill that is embedded.
fn text_of(s: &Skill) -> String {
    format!("{}: {}", s.md.name, s.md.description)
}

fn public(s: &Skill) -> bool {
    matches!(s.tier, Tier::Builtin | Tier::Global)
}

/// A text's tag: SHA-256's first 16 bytes for a public one; for a user's, HMAC-SHA-256
/// under a key derived from their data key (the tag tells nothing of the text).
fn tag(text: &str, user_key: Option<&[u8; 32]>) -> Vec<u8> {
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
fn tag_key(dk: &SecretKey) -> [u8; 32] {
    let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(b"hero"), dk.bytes());
    let mut key = [0u8; 32];
    hk.expand(b"hero/embedding-tag/v1", &mut key)
        .expect("HKDF output length");
    key
}

fn aad(at: &Endpoint, tag: &[u8]) -> Vec<u8> {
    let mut aad = format!("embedding|{}|{}|", at.base, at.model).into_bytes();
    aad.extend_from_slice(tag);
    aad
}

/// The vectors of `skills` at `at`: cached ones read, the others embedded (in calls of at
/// most [`embed::MAX_INPUTS`]) and cached. `dk`: the user's data key, for their skills.
pub async fn of_skills(
    st: &AppState,
    at: &Endpoint,
    user: Option<(i64, &SecretKey)>,
    skills: &[Arc<Skill>],
) -> Result<Vec<Arc<Vec<f32>>>, String> {
    let key = user.map(|(_, dk)| tag_key(dk));
    let texts: Vec<String> = skills.iter().map(|s| text_of(s)).collect();
    let tags: Vec<Vec<u8>> = skills
        .iter()
        .zip(&texts)
        .map(|(s, t)| tag(t, if public(s) { None } else { key.as_ref() }))
        .collect();
    // Held open in memory first, then stored (opened, and held), then asked for.
    let place: Arc<str> = Arc::from(format!("{}|{}", at.base, at.model));
    let mut known: HashMap<Vec<u8>, Arc<Vec<f32>>> = HashMap::new();
    for t in &tags {
        if let Some(v) = st.index_cache.get(&(place.clone(), t.clone())) {
            known.insert(t.clone(), v);
        }
    }
    let unknown: Vec<Vec<u8>> = tags
        .iter()
        .filter(|t| !known.contains_key(*t))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        let cached = st
            .db
            .read_with(async |c| {
                crate::store::skills::embeddings(c, &at.base, &at.model, &unknown).await
            })
            .await
            .map_err(|e| format!("the cached vectors could not be read: {e}"))?;
        let sealed: HashMap<&[u8], bool> = skills
            .iter()
            .zip(&tags)
            .map(|(s, t)| (t.as_slice(), !public(s)))
            .collect();
        for (t, stored) in cached {
            let plain = match user {
                Some((_, dk)) if sealed.get(t.as_slice()) == Some(&true) => {
                    crypto::open(dk, &aad(at, &t), &stored).ok()
                }
                _ => Some(stored),
            };
            if let Some(v) = plain.as_deref().and_then(embed::from_bytes) {
                let v = Arc::new(v);
                st.index_cache.put((place.clone(), t.clone()), v.clone());
                known.insert(t, v);
            }
        }
    }
    let missing: Vec<usize> = (0..skills.len())
        .filter(|&i| !known.contains_key(&tags[i]))
        .collect();
    if !missing.is_empty() {
        let asked: Vec<String> = missing.iter().map(|&i| texts[i].clone()).collect();
        let got = embed::embed(&st.http, at, &asked).await?;
        let now = now_text();
        let rows: Vec<(Vec<u8>, Option<i64>, Vec<u8>)> = missing
            .iter()
            .zip(&got)
            .map(|(&i, v)| {
                let bytes = embed::to_bytes(v);
                match user {
                    Some((user_id, dk)) if !public(&skills[i]) => (
                        tags[i].clone(),
                        Some(user_id),
                        crypto::seal(dk, &aad(at, &tags[i]), &bytes),
                    ),
                    _ => (tags[i].clone(), None, bytes),
                }
            })
            .collect();
        // Stored for the installation's endpoint alone: an agent's own (a URL its user
        // chose) has its vectors held in memory only, so no user can make the table grow
        // by naming endpoints.
        if st.settings.embeddings.shared().as_ref() == Some(at) {
            store(st, at, user.map(|(id, _)| id), &rows, &now).await?;
        }
        for (&i, v) in missing.iter().zip(got) {
            let v = Arc::new(v);
            st.index_cache
                .put((place.clone(), tags[i].clone()), v.clone());
            known.insert(tags[i].clone(), v);
        }
    }
    Ok(tags
        .iter()
        .map(|t| known.get(t).cloned().unwrap_or_default())
        .collect())
}

/// The most vectors of a user's skills kept stored; past them, the oldest are let go (a
/// skill whose description changes often leaves a vector for each).
pub const MAX_STORED_PER_USER: i64 = 5_000;

async fn store(
    st: &AppState,
    at: &Endpoint,
    user_id: Option<i64>,
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
            if let Some(user_id) = user_id {
                crate::store::skills::prune_embeddings(tx, user_id, MAX_STORED_PER_USER).await?;
            }
            Ok(())
        })
        .await
        .map_err(|e| format!("the vectors could not be cached: {e}"))
}

/// The longest the vector part of one search may take, however many skills it embeds;
/// past it, the search is BM25 alone.
pub const SEARCH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(15);

/// The query's vector: held in memory (under its tag) or asked for.
async fn of_query(
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

/// The skills of `among` that best fit `query`, `limit` at most, best first, ties by name:
/// BM25 alone without `at`, else hybrid (BM25 alone again, with a note, if vectors fail).
pub async fn search(
    st: &AppState,
    at: Option<&Endpoint>,
    user: Option<(i64, &SecretKey)>,
    among: &[Arc<Skill>],
    query: &str,
    limit: usize,
) -> Result<Found, String> {
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(format!("a query is at most {MAX_QUERY_CHARS} characters"));
    }
    let limit = limit.clamp(1, MAX_RESULTS);
    let Some(at) = at else {
        return Ok(Found {
            hybrid: false,
            hits: super::search(among, query, limit)?,
            note: None,
        });
    };
    let vectors = async {
        let skills = of_skills(st, at, user, among).await?;
        let q = of_query(st, at, user, query).await?;
        Ok::<_, String>((skills, q))
    };
    let vectors = tokio::time::timeout(SEARCH_DEADLINE, vectors)
        .await
        .unwrap_or_else(|_| Err(format!("vectors took more than {SEARCH_DEADLINE:?}")));
    let (skills, q) = match vectors {
        Ok(v) => v,
        Err(why) => {
            // The detail (an endpoint's address, its answer) is for the log, not the user.
            tracing::warn!(%why, "a skill search fell back to BM25");
            return Ok(Found {
                hybrid: false,
                hits: super::search(among, query, limit)?,
                note: Some("vector search is unavailable just now; BM25 alone".into()),
            });
        }
    };
    let bm25 = super::bm25(among, query, among.len());
    // One channel alone weighs 1.0: when no skill shares a word with the query, the
    // vectors rank alone.
    let lexical = !bm25.is_empty();
    let mut by_doc = vec![0.0; among.len()];
    for (i, b) in bm25 {
        by_doc[i] = b;
    }
    let mut hits: Vec<Hit> = among
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let vector = crate::search::cosine(&skills[i], &q).clamp(0.0, 1.0);
            Hit {
                skill: s.clone(),
                score: fuse(lexical.then_some(by_doc[i]), Some(vector)),
                bm25: by_doc[i],
                vector: Some(vector),
            }
        })
        .filter(|h| h.score > 0.0)
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.skill.md.name.cmp(&b.skill.md.name))
    });
    hits.truncate(limit);
    Ok(Found {
        hybrid: true,
        hits,
        note: None,
    })
}

/// Embeds the public skills (Hero's, the administrator's) in the background, so that the
/// first search does not wait for them: after start-up and after each reading again of the
/// administrator's folder (002 §11). Only where one endpoint serves everyone.
pub fn backfill(st: &AppState) {
    let Some(at) = st.settings.embeddings.shared() else {
        return;
    };
    let st = st.clone();
    tokio::spawn(async move {
        let public: Vec<Arc<Skill>> = st
            .skills
            .fixed_skills()
            .into_iter()
            .filter(|s| public(s))
            .collect();
        match of_skills(&st, &at, None, &public).await {
            Ok(_) => tracing::debug!(
                skills = public.len(),
                "the public skills' vectors are ready"
            ),
            Err(why) => {
                tracing::warn!(%why, "the public skills' vectors could not be made; searches make them")
            }
        }
    });
}
