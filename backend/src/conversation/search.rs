//! Search across a user's sessions (`GET /api/search`, the Search page): words and
//! "quoted phrases" in their messages and their sessions' names, ranked by BM25 or newest
//! first, each with a snippet and where its words are in it.
//!
//! The plaintext stays off disk: the index is held in memory only
//! ([`crate::search::IndexCache`], one entry per user, in the cache's bound, let go least
//! recently used first), built from the user's frames, opened with their key, at their
//! first search. Each search brings it up to date first: a session whose last `seq` moved
//! has its new message frames read and added, one gone leaves. The log is append-only, so
//! nothing indexed ever changes under it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::accounts::auth::AuthUser;
use crate::crypto::SecretKey;
use crate::search::Bm25;
use crate::{AppState, Error, Result, store};
use hero_shared::frame::{AuthorType, FrameType};

/// The longest query taken, in characters.
pub const MAX_QUERY_CHARS: usize = 500;
/// Results given unless asked otherwise, and at most.
pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 100;
/// How much of one message is indexed (and searched for phrases), in characters.
pub const MAX_INDEXED_CHARS: usize = 20_000;
/// The most messages one user's index holds: past it (and a tenth more, so that the trim is
/// rare), the oldest are let go and the rest indexed again. About 140 MiB at the bench's
/// 1,391 bytes a message.
pub const MAX_INDEXED_MESSAGES: usize = 100_000;
/// More new messages than this are opened and indexed on a blocking thread.
const BLOCKING_ROWS: usize = 256;
/// About how long a snippet is, in characters.
pub const SNIPPET_CHARS: usize = 160;

/// How results are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    #[default]
    Relevance,
    Recent,
}

impl Order {
    pub fn parse(s: &str) -> Result<Order> {
        match s {
            "relevance" => Ok(Order::Relevance),
            "recent" => Ok(Order::Recent),
            _ => Err(Error::Invalid(format!(
                "{s:?} is no order: relevance or recent"
            ))),
        }
    }
}

/// One result: a message (`frame_id`), or a session by its name (no `frame_id`).
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub session_id: i64,
    pub session_name: String,
    pub frame_id: Option<String>,
    /// `user` or `agent` for a message; `session` for a name.
    pub kind: &'static str,
    pub snippet: String,
    /// Where the query's words are in `snippet`: `[start, end)` in characters.
    pub highlights: Vec<(usize, usize)>,
    pub score: f64,
    pub created_at: String,
}

/// One indexed message.
#[derive(Debug)]
struct Doc {
    session_id: i64,
    frame_id: String,
    kind: &'static str,
    timestamp: String,
    text: String,
}

#[derive(Debug, Default)]
pub struct Index {
    docs: Vec<Doc>,
    bm25: Bm25,
    /// Each session's last seq read.
    seen: HashMap<i64, i64>,
    /// Each session's name and when it last changed, from the latest stamps.
    names: HashMap<i64, (String, String)>,
}

/// An index and the lock its updates take turns on.
#[derive(Default)]
pub struct Cell {
    updating: tokio::sync::Mutex<()>,
    index: std::sync::Mutex<Index>,
}

fn lock(cell: &Cell) -> std::sync::MutexGuard<'_, Index> {
    cell.index.lock().unwrap_or_else(|p| p.into_inner())
}

fn key(user_id: i64) -> crate::search::cache::Key {
    (Arc::from("session-search"), user_id.to_le_bytes().to_vec())
}

/// What a message says, as words: its prose and its elements' text (an element's raw body,
/// a command or code, as it is), tags left out; cut at [`MAX_INDEXED_CHARS`].
pub fn words_of(content: &str) -> String {
    fn walk(nodes: &[hero_shared::hml::Node], out: &mut String) {
        for n in nodes {
            match n {
                hero_shared::hml::Node::Text(t) => out.push_str(t),
                hero_shared::hml::Node::Element(e) if e.children.is_empty() => {
                    out.push_str(&e.content)
                }
                hero_shared::hml::Node::Element(e) => walk(&e.children, out),
            }
            out.push(' ');
        }
    }
    let mut out = String::new();
    if content.contains('<') {
        walk(&hero_shared::hml::parse(content).nodes, &mut out);
    } else {
        out.push_str(content);
    }
    let text = out.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(MAX_INDEXED_CHARS) {
        Some((cut, _)) => text[..cut].to_owned(),
        None => text,
    }
}

/// The message frames worth finding, opened: the user's and the agents' words, not notices,
/// not a memory flush's hidden exchange, not the agent's private bookkeeping.
fn doc_of(frame: hero_shared::frame::Frame) -> Option<Doc> {
    if frame.frame_type != FrameType::Message {
        return None;
    }
    let kind = match frame.author_type {
        AuthorType::User => "user",
        AuthorType::Agent => "agent",
        AuthorType::System => return None,
    };
    let p = &frame.payload;
    let flag = |k: &str| p.get(k).and_then(serde_json::Value::as_bool) == Some(true);
    if flag("flush") || p.get("startup").is_some() || p.get("notice").is_some() {
        return None;
    }
    let content = p.get("content").and_then(serde_json::Value::as_str)?;
    let text = words_of(content);
    if text.is_empty() {
        return None;
    }
    Some(Doc {
        session_id: frame.session_id,
        frame_id: frame.id,
        kind,
        timestamp: frame.timestamp,
        text,
    })
}

impl Index {
    fn approx_bytes(&self) -> usize {
        self.bm25.approx_bytes()
            + self
                .docs
                .iter()
                .map(|d| d.text.len() + d.frame_id.len() + d.timestamp.len() + 64)
                .sum::<usize>()
            + self
                .names
                .values()
                .map(|(n, t)| n.len() + t.len() + 48)
                .sum::<usize>()
    }

    /// Takes the sessions' names from the stamps and forgets the sessions no longer stamped
    /// (and their messages).
    fn restamp(&mut self, stamps: &[(i64, String, String, i64)]) {
        let live: HashSet<i64> = stamps.iter().map(|s| s.0).collect();
        if self.seen.keys().any(|s| !live.contains(s)) {
            // A session gone (none is deleted today; kept right if one ever is).
            let kept: Vec<Doc> = std::mem::take(&mut self.docs)
                .into_iter()
                .filter(|d| live.contains(&d.session_id))
                .collect();
            self.bm25 = Bm25::new(kept.iter().map(|d| d.text.as_str()));
            self.docs = kept;
            self.seen.retain(|s, _| live.contains(s));
        }
        for (id, name, updated, _) in stamps {
            self.names.insert(*id, (name.clone(), updated.clone()));
        }
        self.names.retain(|s, _| live.contains(s));
    }

    /// Takes in a session's new messages, read up to `last`; past `most` messages (and a
    /// tenth), only the newest `most` are kept.
    fn add(&mut self, session_id: i64, last: i64, docs: Vec<Doc>, most: usize) {
        let at = self.docs.len();
        self.bm25
            .splice(at..at, docs.iter().map(|d| d.text.as_str()));
        self.docs.extend(docs);
        self.seen.insert(session_id, last);
        if self.docs.len() > most + most / 10 {
            let mut docs = std::mem::take(&mut self.docs);
            docs.sort_by(|a, b| b.timestamp.cmp(&a.timestamp));
            docs.truncate(most);
            self.bm25 = Bm25::new(docs.iter().map(|d| d.text.as_str()));
            self.docs = docs;
        }
    }

    /// [`Index::restamp`], then each stamped session's `docs` added (tests build so).
    #[cfg(test)]
    fn update(&mut self, stamps: &[(i64, String, String, i64)], docs: Vec<Doc>) {
        self.restamp(stamps);
        let mut by: HashMap<i64, Vec<Doc>> = HashMap::new();
        for d in docs {
            by.entry(d.session_id).or_default().push(d);
        }
        for (id, _, _, last) in stamps {
            let docs = by.remove(id).unwrap_or_default();
            self.add(*id, *last, docs, MAX_INDEXED_MESSAGES);
        }
    }

    /// Whether a session was made, renamed, touched or is gone since the last stamps.
    fn names_differ(&self, stamps: &[(i64, String, String, i64)]) -> bool {
        self.names.len() != stamps.len()
            || stamps.iter().any(|(id, name, updated, _)| {
                self.names
                    .get(id)
                    .is_none_or(|(n, u)| n != name || u != updated)
            })
    }

    /// The sessions whose last seq moved past what was read: `(session, read up to, the
    /// stamp's last)`.
    fn stale(&self, stamps: &[(i64, String, String, i64)]) -> Vec<(i64, i64, i64)> {
        stamps
            .iter()
            .filter_map(|(id, _, _, last)| {
                let seen = self.seen.get(id).copied().unwrap_or(0);
                (*last > seen).then_some((*id, seen, *last))
            })
            .collect()
    }

    pub fn search(&self, query: &Query, order: Order, limit: usize) -> Vec<Hit> {
        // What was found, ordered and cut first; a snippet is made for the results alone.
        enum Found {
            Doc(usize),
            Name(i64),
        }
        let mut found: Vec<(Found, f64, &str)> = self
            .bm25
            .search(&query.text, usize::MAX)
            .into_iter()
            .filter(|(i, _)| query.phrases_in(&self.docs[*i].text))
            .map(|(i, score)| (Found::Doc(i), score, self.docs[i].timestamp.as_str()))
            .collect();
        // A session whose name holds every word (and phrase) leads the relevance order.
        let top = found.first().map_or(1.0, |f| f.1) + 1.0;
        for (id, (name, updated)) in &self.names {
            if query.all_in(name) {
                found.push((Found::Name(*id), top, updated.as_str()));
            }
        }
        match order {
            Order::Relevance => {
                found.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.2.cmp(a.2)))
            }
            Order::Recent => found.sort_by(|a, b| b.2.cmp(a.2).then_with(|| b.1.total_cmp(&a.1))),
        }
        found.truncate(limit);
        let name_of = |id: i64| self.names.get(&id).map(|n| n.0.clone()).unwrap_or_default();
        found
            .into_iter()
            .map(|(f, score, at)| {
                let (session_id, frame_id, kind, text) = match f {
                    Found::Doc(i) => {
                        let d = &self.docs[i];
                        (
                            d.session_id,
                            Some(d.frame_id.clone()),
                            d.kind,
                            d.text.as_str(),
                        )
                    }
                    Found::Name(id) => {
                        let name = self.names.get(&id).map_or("", |n| n.0.as_str());
                        (id, None, "session", name)
                    }
                };
                let (snippet, highlights) = snippet(text, &query.needles);
                Hit {
                    session_id,
                    session_name: name_of(session_id),
                    frame_id,
                    kind,
                    snippet,
                    highlights,
                    score,
                    created_at: at.to_owned(),
                }
            })
            .collect()
    }
}

/// A query read: its words (for BM25), its "quoted phrases" (each must appear as written,
/// whatever its case), and what a snippet highlights.
#[derive(Debug, Clone)]
pub struct Query {
    text: String,
    words: Vec<String>,
    phrases: Vec<String>,
    needles: Vec<String>,
}

impl Query {
    pub fn parse(q: &str) -> Result<Query> {
        let q = q.trim();
        if q.chars().count() > MAX_QUERY_CHARS {
            return Err(Error::Invalid(format!(
                "a search is at most {MAX_QUERY_CHARS} characters"
            )));
        }
        let words = crate::search::tokens(q);
        if words.is_empty() {
            return Err(Error::Invalid(
                "search for at least one word of two letters or more".into(),
            ));
        }
        let phrases: Vec<String> = q
            .split('"')
            .skip(1)
            .step_by(2)
            .map(|p| {
                p.split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_lowercase()
            })
            .filter(|p| !p.is_empty())
            .collect();
        let mut needles: Vec<String> = phrases.clone();
        needles.extend(words.iter().cloned());
        Ok(Query {
            text: q.to_owned(),
            words,
            phrases,
            needles,
        })
    }

    fn phrases_in(&self, text: &str) -> bool {
        if self.phrases.is_empty() {
            return true;
        }
        let lower = text.to_lowercase();
        self.phrases.iter().all(|p| lower.contains(p.as_str()))
    }

    /// Whether every word and phrase is in `text` (a session's name).
    fn all_in(&self, text: &str) -> bool {
        let tokens = crate::search::tokens(text);
        self.words.iter().all(|w| tokens.contains(w)) && self.phrases_in(text)
    }
}

/// About [`SNIPPET_CHARS`] of `text` around the first of `needles` found (its start when
/// none is), on word boundaries, "…" where it was cut; and where each needle is in it.
pub fn snippet(text: &str, needles: &[String]) -> (String, Vec<(usize, usize)>) {
    let chars: Vec<char> = text.chars().collect();
    let lower: Vec<char> = chars
        .iter()
        .map(|c| c.to_lowercase().next().unwrap_or(*c))
        .collect();
    let find = |from: usize, needle: &[char]| -> Option<usize> {
        (from..lower.len().saturating_sub(needle.len() - 1))
            .find(|&i| lower[i..].starts_with(needle) && at_word_start(&lower, i))
    };
    let needles: Vec<Vec<char>> = needles
        .iter()
        .map(|n| n.chars().collect::<Vec<_>>())
        .filter(|n| !n.is_empty())
        .collect();
    let first = needles.iter().filter_map(|n| find(0, n)).min().unwrap_or(0);
    let mut start = first.saturating_sub(SNIPPET_CHARS / 3);
    // Back to a word's start, but not far: in a long word (an address, base64) the match
    // must stay in the snippet.
    let floor = start.saturating_sub(30);
    while start > floor && !chars[start - 1].is_whitespace() {
        start -= 1;
    }
    let mut end = (start + SNIPPET_CHARS).min(chars.len());
    while end < chars.len() && !chars[end].is_whitespace() && end - start < SNIPPET_CHARS + 30 {
        end += 1;
    }
    let lead = if start > 0 { "…" } else { "" };
    let shift = lead.chars().count();
    let mut highlights = Vec::new();
    for n in &needles {
        let mut from = start;
        while let Some(i) = find(from, n) {
            if i + n.len() > end {
                break;
            }
            highlights.push((i - start + shift, i - start + shift + n.len()));
            from = i + n.len();
        }
    }
    highlights.sort_unstable();
    // Overlapping marks (a phrase and its words) become one.
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in highlights {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let mut out = String::from(lead);
    out.extend(&chars[start..end]);
    if end < chars.len() {
        out.push('…');
    }
    (out, merged)
}

fn at_word_start(lower: &[char], i: usize) -> bool {
    i == 0 || !lower[i - 1].is_alphanumeric()
}

/// The user's index, brought up to date with their sessions' frames first.
pub async fn index(st: &AppState, dk: &SecretKey, user_id: i64) -> Result<Arc<Cell>> {
    let key = key(user_id);
    // Held at once when new: a second search of the user's meanwhile waits for this one's
    // build (the `updating` lock) instead of building another.
    let (cell, mut changed) = st.index_cache.get_or_default::<Cell>(&key, 0);
    {
        let _turn = cell.updating.lock().await;
        let stamps = store::sessions::stamps(&st.db, user_id).await?;
        let (stale, renamed) = {
            let ix = lock(&cell);
            (ix.stale(&stamps), ix.names_differ(&stamps))
        };
        if !stale.is_empty() || renamed {
            lock(&cell).restamp(&stamps);
            // A session at a time: what is held while indexing is one session's messages.
            for (session_id, after, last) in stale {
                // Up to the stamp's seq alone: what was stored since is read next time, once
                // (the stamp is what the index records as read).
                let rows: Vec<_> =
                    store::frames::list(&st.db, session_id, after, Some("message"), i64::MAX)
                        .await?
                        .into_iter()
                        .filter(|r| r.seq <= last)
                        .collect();
                let many = rows.len() > BLOCKING_ROWS;
                let (dk, held) = (dk.clone(), cell.clone());
                let add = move || {
                    let mut docs = Vec::new();
                    for row in rows {
                        // A frame that cannot be opened is left out of the search, not the
                        // search.
                        let (id, session) = (row.id.clone(), row.session_id);
                        match row.open(&dk) {
                            Ok(frame) => docs.extend(doc_of(frame)),
                            Err(e) => {
                                tracing::warn!(frame = %id, session, error = %e, "a frame left out of search")
                            }
                        }
                    }
                    lock(&held).add(session_id, last, docs, MAX_INDEXED_MESSAGES);
                };
                // Opening and indexing thousands of messages is work for a thread of its
                // own; a few new ones are not.
                if many {
                    tokio::task::spawn_blocking(add)
                        .await
                        .map_err(|e| Error::Internal(format!("indexing messages failed: {e}")))?;
                } else {
                    add();
                }
            }
            changed = true;
        }
    }
    if changed {
        let bytes = lock(&cell).approx_bytes();
        st.index_cache.put_any(key, cell.clone(), bytes);
    }
    Ok(cell)
}

/// Searches the user's sessions: `q` as [`Query::parse`] reads it, `limit` results at most
/// ([`DEFAULT_LIMIT`] when none is asked, never past [`MAX_LIMIT`]).
pub async fn search(
    st: &AppState,
    user: &AuthUser,
    q: &str,
    order: Order,
    limit: Option<usize>,
) -> Result<Vec<Hit>> {
    let query = Query::parse(q)?;
    let limit = limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let cell = index(st, &dk, user.id()).await?;
    let hits = lock(&cell).search(&query, order, limit);
    Ok(hits)
}

impl Hit {
    pub fn dto(self) -> hero_shared::api::SearchHitDto {
        hero_shared::api::SearchHitDto {
            session_id: self.session_id,
            session_name: self.session_name,
            frame_id: self.frame_id,
            kind: self.kind.to_owned(),
            snippet: self.snippet,
            highlights: self.highlights,
            score: self.score,
            created_at: self.created_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(session_id: i64, id: &str, at: &str, text: &str) -> Doc {
        Doc {
            session_id,
            frame_id: id.into(),
            kind: "user",
            timestamp: at.into(),
            text: text.into(),
        }
    }

    fn stamp(id: i64, name: &str, last: i64) -> (i64, String, String, i64) {
        (id, name.into(), "2026-11-01T00:00:00Z".into(), last)
    }

    fn index() -> Index {
        let mut ix = Index::default();
        ix.update(
            &[stamp(1, "Garden plans", 3), stamp(2, "Rust questions", 2)],
            vec![
                doc(
                    1,
                    "a",
                    "2026-11-01T10:00:00Z",
                    "the tomatoes need more sun this year",
                ),
                doc(
                    1,
                    "b",
                    "2026-11-02T10:00:00Z",
                    "plant the tomatoes near the fence",
                ),
                doc(
                    2,
                    "c",
                    "2026-11-03T10:00:00Z",
                    "the borrow checker says the sun is not Send",
                ),
            ],
        );
        ix
    }

    fn ids(hits: &[Hit]) -> Vec<Option<&str>> {
        hits.iter().map(|h| h.frame_id.as_deref()).collect()
    }

    #[test]
    fn words_rank_by_relevance_or_by_time() {
        let ix = index();
        let q = Query::parse("tomatoes sun").unwrap();
        let by_score = ix.search(&q, Order::Relevance, 10);
        assert_eq!(ids(&by_score)[0], Some("a"), "both words beat one");
        assert_eq!(by_score.len(), 3);
        let by_time = ix.search(&q, Order::Recent, 10);
        assert_eq!(ids(&by_time), vec![Some("c"), Some("b"), Some("a")]);
        assert_eq!(ix.search(&q, Order::Recent, 2).len(), 2);
    }

    #[test]
    fn a_quoted_phrase_must_appear_as_written() {
        let ix = index();
        let hits = ix.search(
            &Query::parse("\"the TOMATOES near\"").unwrap(),
            Order::Relevance,
            10,
        );
        assert_eq!(ids(&hits), vec![Some("b")]);
        assert_eq!(hits[0].snippet, "plant the tomatoes near the fence");
        assert_eq!(
            hits[0].highlights,
            vec![(6, 23), (24, 27)],
            "the phrase and its words one mark, the other \"the\" its own"
        );
        assert!(
            ix.search(
                &Query::parse("\"sun tomatoes\"").unwrap(),
                Order::Relevance,
                10
            )
            .is_empty()
        );
    }

    #[test]
    fn a_session_name_holding_every_word_is_found_and_leads() {
        let ix = index();
        let hits = ix.search(&Query::parse("garden").unwrap(), Order::Relevance, 10);
        assert_eq!(hits.len(), 1);
        assert_eq!(
            (
                hits[0].session_id,
                hits[0].kind,
                hits[0].frame_id.as_deref()
            ),
            (1, "session", None)
        );
        let hits = ix.search(&Query::parse("rust checker").unwrap(), Order::Relevance, 10);
        assert_eq!(
            ids(&hits),
            vec![Some("c")],
            "a name with one of two words is no hit"
        );
        let hits = ix.search(
            &Query::parse("rust questions").unwrap(),
            Order::Relevance,
            10,
        );
        assert_eq!(hits[0].kind, "session");
    }

    #[test]
    fn new_frames_and_renames_are_taken_in_and_stale_sessions_named() {
        let mut ix = index();
        assert!(
            ix.stale(&[stamp(1, "Garden plans", 3), stamp(2, "Rust questions", 2)])
                .is_empty()
        );
        assert_eq!(
            ix.stale(&[
                stamp(1, "Garden plans", 5),
                stamp(2, "Rust", 2),
                stamp(3, "New", 1)
            ]),
            vec![(1, 3, 5), (3, 0, 1)]
        );
        ix.update(
            &[stamp(1, "Allotment", 5), stamp(2, "Rust questions", 2)],
            vec![doc(1, "d", "2026-11-04T10:00:00Z", "courgettes everywhere")],
        );
        let q = |ix: &Index, s: &str| ix.search(&Query::parse(s).unwrap(), Order::Relevance, 10);
        assert_eq!(ids(&q(&ix, "courgettes")), vec![Some("d")]);
        assert!(q(&ix, "garden").is_empty() && q(&ix, "allotment").len() == 1);
        assert_eq!(q(&ix, "borrow").len(), 1);
        // A session gone takes its messages with it.
        ix.update(&[stamp(1, "Allotment", 5)], Vec::new());
        assert!(q(&ix, "borrow").is_empty());
        assert_eq!(ids(&q(&ix, "courgettes")), vec![Some("d")]);
    }

    #[test]
    fn past_its_bound_an_index_keeps_the_newest_messages() {
        let mut ix = Index::default();
        ix.restamp(&[stamp(1, "Diary", 30)]);
        for i in 0..30 {
            let at = format!("2026-11-01T10:{i:02}:00Z");
            ix.add(
                1,
                i + 1,
                vec![doc(
                    1,
                    &format!("m{i}"),
                    &at,
                    &format!("entry number{i} tea"),
                )],
                20,
            );
        }
        // 22 is past 20 and a tenth: the newest 20 were kept, then 8 more came.
        assert!(ix.docs.len() <= 22, "{}", ix.docs.len());
        let q = |s: &str| ix.search(&Query::parse(s).unwrap(), Order::Relevance, 100);
        assert!(q("number0").is_empty(), "the oldest went");
        assert_eq!(q("number29").len(), 1, "the newest stayed");
        assert_eq!(
            q("tea").len(),
            ix.docs.len(),
            "the index matches what is kept"
        );
        assert_eq!(ix.seen[&1], 30);
    }

    #[test]
    fn bad_queries_say_why() {
        let long = "a".repeat(MAX_QUERY_CHARS + 1);
        for (q, says) in [
            ("", "at least one word"),
            ("a ?", "at least one word"),
            (long.as_str(), "at most"),
        ] {
            let e = Query::parse(q).unwrap_err().to_string();
            assert!(e.contains(says), "{q:?}: {e}");
        }
        assert!(
            Order::parse("oldest")
                .unwrap_err()
                .to_string()
                .contains("relevance or recent")
        );
    }

    #[test]
    fn a_snippet_is_cut_around_the_first_match_on_word_boundaries() {
        let text = format!(
            "{} needle here {}",
            "word ".repeat(100),
            "tail ".repeat(100)
        );
        let (s, marks) = snippet(&text, &["needle".into()]);
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(
            s.chars().count() <= SNIPPET_CHARS + 32,
            "{}",
            s.chars().count()
        );
        let chars: Vec<char> = s.chars().collect();
        let (a, b) = marks[0];
        assert_eq!(chars[a..b].iter().collect::<String>(), "needle");
        // Only at a word's start: "needles" is marked, "unneeded" is not.
        let (_, marks) = snippet("unneeded needles", &["nee".into()]);
        assert_eq!(marks, vec![(9, 12)]);
        // In one long word, the match stays in the snippet.
        let long = format!(
            "https://x.example/{}/needle/{}",
            "a".repeat(400),
            "b".repeat(400)
        );
        let (s, marks) = snippet(&long, &["needle".into()]);
        assert_eq!(marks.len(), 1, "{s}");
        // Characters, not bytes.
        let (s, marks) = snippet("é café au lait", &["café".into()]);
        assert_eq!(
            s.chars().skip(marks[0].0).take(4).collect::<String>(),
            "café"
        );
    }

    #[test]
    fn a_message_is_searched_as_words_without_its_tags() {
        let w = words_of(
            "Sure.\n<bash>ls   -la</bash>\n<thinking>the user wants files</thinking> done",
        );
        assert_eq!(w, "Sure. ls -la the user wants files done");
        assert_eq!(
            words_of(&"x".repeat(MAX_INDEXED_CHARS + 5)).len(),
            MAX_INDEXED_CHARS
        );
    }
}
