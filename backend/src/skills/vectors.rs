//! Hybrid skill search (reference 002 §10–11): BM25 over names and descriptions, and, where
//! embeddings are on, the cosine of each skill's vector with the query's, fused
//! ([`crate::search::fuse`]). A skill's vector is kept by [`crate::search::vectors`]: public
//! skills' (Hero's, the administrator's) under SHA-256, a user's under an HMAC keyed from
//! their data key, sealed. A failed call leaves that search to BM25, with a note; nothing is
//! lost.

use std::sync::Arc;

use super::{Hit, MAX_QUERY_CHARS, MAX_RESULTS, Skill, Tier};
use crate::AppState;
use crate::crypto::SecretKey;
use crate::search::embed::Endpoint;
use crate::search::fuse;
use crate::search::vectors::{self, SEARCH_DEADLINE};

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

/// The vectors of `skills` at `at` ([`vectors::of_texts`]). `user`: whose skills they are,
/// with their data key (their own skills' tags are keyed from it, their vectors sealed).
pub async fn of_skills(
    st: &AppState,
    at: &Endpoint,
    user: Option<(i64, &SecretKey)>,
    skills: &[Arc<Skill>],
) -> Result<Vec<Arc<Vec<f32>>>, String> {
    let key = user.map(|(_, dk)| vectors::tag_key(dk));
    let texts: Vec<String> = skills.iter().map(|s| text_of(s)).collect();
    let tags: Vec<Vec<u8>> = skills
        .iter()
        .zip(&texts)
        .map(|(s, t)| vectors::tag(t, if public(s) { None } else { key.as_ref() }))
        .collect();
    let asked: Vec<vectors::Text> = skills
        .iter()
        .zip(texts.iter().zip(&tags))
        .map(|(s, (text, tag))| vectors::Text {
            text,
            tag,
            private: !public(s),
        })
        .collect();
    vectors::of_texts(st, at, user, &asked).await
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
        let q = vectors::of_query(st, at, user, query).await?;
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
