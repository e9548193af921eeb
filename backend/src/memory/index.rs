//! An agent's memory as a search reads it: every file's chunks, in file order, a BM25 index
//! over them and each chunk's vector once it is known. Built from the opened files and kept
//! up to date a file at a time: a changed file's chunks are spliced out and its new ones in
//! ([`Bm25::splice`]), the others untouched.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::chunk::{self, Chunk};
use super::{CANDIDATES, Scope, USER_BOOST, path};
use crate::search::embed::Endpoint;
use crate::search::{Bm25, dot, fuse, norm, tokens, vectors};

/// A memory index and the lock its updates take turns on (one update at a time reads the
/// stored hashes and applies them, so an older one never undoes a newer).
#[derive(Default)]
pub struct Cell {
    pub updating: tokio::sync::Mutex<()>,
    pub index: std::sync::Mutex<Index>,
}

/// One file's place in the index.
#[derive(Debug)]
struct File {
    scope: Scope,
    path: Arc<str>,
    hash: Vec<u8>,
    /// Its chunks are `chunks[start..start + len]`.
    start: usize,
    len: usize,
}

/// One chunk.
#[derive(Debug)]
struct Entry {
    scope: Scope,
    path: Arc<str>,
    start_line: usize,
    end_line: usize,
    text: String,
    /// Its text's tag ([`vectors::tag`], keyed from the user's data key).
    tag: Vec<u8>,
    /// Its vector, where it came from (endpoint and model), and its length.
    vector: Option<(Arc<str>, Arc<Vec<f32>>, f32)>,
}

#[derive(Debug, Default)]
pub struct Index {
    files: Vec<File>,
    chunks: Vec<Entry>,
    bm25: Bm25,
}

/// A file opened and chunked, ready to go in.
pub struct FileChunks {
    scope: Scope,
    path: Arc<str>,
    hash: Vec<u8>,
    chunks: Vec<(Chunk, Vec<u8>)>,
}

impl FileChunks {
    /// Chunks each opened file `(scope, path, hash, text)`, tagging each chunk under
    /// `tag_key`.
    pub fn of_all(
        opened: Vec<(Scope, String, Vec<u8>, String)>,
        tag_key: &[u8; 32],
    ) -> Vec<FileChunks> {
        opened
            .into_iter()
            .map(|(scope, path, hash, text)| FileChunks {
                scope,
                path: Arc::from(path),
                hash,
                chunks: chunk::chunks(&text)
                    .into_iter()
                    .map(|c| {
                        let tag = vectors::tag(&c.text, Some(tag_key));
                        (c, tag)
                    })
                    .collect(),
            })
            .collect()
    }
}

/// A chunk a search found.
#[derive(Debug, Clone)]
pub struct Hit {
    pub path: Arc<str>,
    pub scope: Scope,
    pub start_line: usize,
    pub end_line: usize,
    pub score: f64,
    /// Its BM25 part, over the query's best (0 to 1).
    pub bm25: f64,
    /// Its cosine with the query (0 to 1), when vectors took part.
    pub vector: Option<f64>,
    pub text: String,
}

/// Where a vector comes from, as the index remembers it.
fn place(at: &Endpoint) -> String {
    format!("{}|{}", at.base, at.model)
}

impl Index {
    /// How many chunks it holds.
    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// How many files it holds.
    pub fn files_count(&self) -> usize {
        self.files.len()
    }

    /// Of the stored files `(user_id, path, hash)`, those the index lacks or holds another
    /// version of.
    pub fn stale(&self, stamps: &[(Option<i64>, String, Vec<u8>)]) -> Vec<(Option<i64>, String)> {
        let held: HashMap<(Scope, &str), &[u8]> = self
            .files
            .iter()
            .map(|f| ((f.scope, &*f.path), f.hash.as_slice()))
            .collect();
        stamps
            .iter()
            .filter(|(user, path, hash)| {
                held.get(&(Scope::of(*user), path.as_str())) != Some(&hash.as_slice())
            })
            .map(|(user, path, _)| (*user, path.clone()))
            .collect()
    }

    /// Brings the index to the stored files: those not among `stamps` leave it, and each of
    /// `fresh` replaces its older version (or comes in).
    pub fn update(&mut self, stamps: &[(Option<i64>, String, Vec<u8>)], fresh: Vec<FileChunks>) {
        let stored: HashSet<(Scope, &str)> = stamps
            .iter()
            .map(|(u, p, _)| (Scope::of(*u), p.as_str()))
            .collect();
        let gone: Vec<usize> = (0..self.files.len())
            .filter(|&i| !stored.contains(&(self.files[i].scope, &*self.files[i].path)))
            .collect();
        for i in gone.into_iter().rev() {
            self.splice_file(i, None);
        }
        for f in fresh {
            match self
                .files
                .iter()
                .position(|h| h.scope == f.scope && h.path == f.path)
            {
                Some(i) if self.files[i].hash == f.hash => {}
                Some(i) => self.splice_file(i, Some(f)),
                None => {
                    self.files.push(File {
                        scope: f.scope,
                        path: f.path.clone(),
                        hash: Vec::new(),
                        start: self.chunks.len(),
                        len: 0,
                    });
                    self.splice_file(self.files.len() - 1, Some(f));
                }
            }
        }
    }

    /// Replaces file `i`'s chunks with `fresh`'s, or removes the file.
    fn splice_file(&mut self, i: usize, fresh: Option<FileChunks>) {
        let (start, len) = (self.files[i].start, self.files[i].len);
        let entries: Vec<Entry> = match &fresh {
            None => Vec::new(),
            Some(f) => f
                .chunks
                .iter()
                .map(|(c, tag)| Entry {
                    scope: f.scope,
                    path: f.path.clone(),
                    start_line: c.start_line,
                    end_line: c.end_line,
                    text: c.text.clone(),
                    tag: tag.clone(),
                    vector: None,
                })
                .collect(),
        };
        let added = entries.len();
        self.bm25
            .splice(start..start + len, entries.iter().map(|e| e.text.as_str()));
        self.chunks.splice(start..start + len, entries);
        match fresh {
            None => {
                self.files.remove(i);
            }
            Some(f) => {
                self.files[i].hash = f.hash;
                self.files[i].len = added;
            }
        }
        // The files are in chunk order: each starts where the one before it ends (an
        // empty file starts where the next does, so no comparison of starts would do).
        let mut at = 0;
        for f in &mut self.files {
            f.start = at;
            at += f.len;
        }
    }

    /// About the bytes it holds, its vectors included: it keeps them alive, whether or not
    /// the cache still holds them apart (then they are counted twice, never not at all).
    pub fn approx_bytes(&self) -> usize {
        let entries: usize = self
            .chunks
            .iter()
            .map(|e| {
                std::mem::size_of::<Entry>()
                    + e.text.len()
                    + e.tag.len()
                    + e.vector.as_ref().map_or(0, |(_, v, _)| v.len() * 4)
            })
            .sum();
        let files: usize = self
            .files
            .iter()
            .map(|f| std::mem::size_of::<File>() + f.path.len() + f.hash.len())
            .sum();
        entries + files + self.bm25.approx_bytes()
    }

    /// The texts and tags of the chunks with no vector from `at` (each tag once).
    pub fn without_vectors(&self, at: &Endpoint) -> Vec<(String, Vec<u8>)> {
        let place = place(at);
        let mut seen = HashSet::new();
        self.chunks
            .iter()
            // A blank chunk says nothing to embed (and an endpoint may refuse it).
            .filter(|e| !e.text.trim().is_empty())
            .filter(|e| e.vector.as_ref().is_none_or(|(p, _, _)| **p != *place))
            .filter(|e| seen.insert(e.tag.as_slice()))
            .map(|e| (e.text.clone(), e.tag.clone()))
            .collect()
    }

    /// Gives the chunks of each tag its vector from `at`.
    pub fn set_vectors(&mut self, at: &Endpoint, made: Vec<(Vec<u8>, Arc<Vec<f32>>)>) {
        let place: Arc<str> = Arc::from(place(at));
        let made: HashMap<Vec<u8>, Arc<Vec<f32>>> = made.into_iter().collect();
        for e in &mut self.chunks {
            if let Some(v) = made.get(&e.tag) {
                e.vector = Some((place.clone(), v.clone(), norm(v)));
            }
        }
    }

    /// The chunks a search is not shown: the agent's copy of a path the user has, and
    /// `memory.md` where there is a `MEMORY.md`.
    fn hidden(&self) -> impl Fn(&Entry) -> bool + '_ {
        let users: HashSet<&str> = self
            .files
            .iter()
            .filter(|f| f.scope == Scope::User)
            .map(|f| &*f.path)
            .collect();
        let has_main = self.files.iter().any(|f| &*f.path == path::MAIN);
        move |e: &Entry| {
            (e.scope == Scope::Agent && users.contains(&*e.path))
                || (has_main && &*e.path == path::FALLBACK)
        }
    }

    /// The best `limit` chunks for `query`: BM25's best [`CANDIDATES`] and, with
    /// `vector` (the endpoint and the query's vector), the cosine's, fused; the user's
    /// scope × [`USER_BOOST`]. Best first, then by path and line; zero scores dropped.
    pub fn search(
        &self,
        query: &str,
        vector: Option<(&Endpoint, &[f32])>,
        limit: usize,
    ) -> Vec<Hit> {
        let q = tokens(query);
        let hidden = self.hidden();
        let shown: Vec<usize> = (0..self.chunks.len())
            .filter(|&i| !hidden(&self.chunks[i]))
            .collect();
        let mut lexical: Vec<(usize, f64)> = shown
            .iter()
            .map(|&i| (i, self.bm25.score(&q, i)))
            .filter(|(_, s)| *s > 0.0)
            .collect();
        lexical.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let best = lexical.first().map(|b| b.1);
        lexical.truncate(CANDIDATES);
        // Each shown chunk's cosine with the query, by chunk (0 for one with no vector).
        let cosines: Option<Vec<f64>> = vector.map(|(at, qv)| {
            let place = place(at);
            let qn = norm(qv);
            let mut all = vec![0.0; self.chunks.len()];
            for &i in &shown {
                if let Some((p, v, vn)) = &self.chunks[i].vector
                    && **p == *place
                    && v.len() == qv.len()
                    && *vn * qn > 0.0
                {
                    all[i] = f64::from(dot(v, qv) / (vn * qn)).clamp(0.0, 1.0);
                }
            }
            all
        });
        let mut candidates: Vec<usize> = lexical.iter().map(|(i, _)| *i).collect();
        if let Some(all) = &cosines {
            // The vector channel's best, without sorting them all.
            let mut best: Vec<(usize, f64)> = shown.iter().map(|&i| (i, all[i])).collect();
            let by_score =
                |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
            if best.len() > CANDIDATES {
                best.select_nth_unstable_by(CANDIDATES, by_score);
                best.truncate(CANDIDATES);
            }
            candidates.extend(best.iter().map(|(i, _)| *i));
        }
        candidates.sort_unstable();
        candidates.dedup();
        let mut hits: Vec<Hit> = candidates
            .into_iter()
            .map(|i| {
                let e = &self.chunks[i];
                let b = best.map(|best| self.bm25.score(&q, i) / best);
                let v = cosines.as_ref().map(|all| all[i]);
                let boost = if e.scope == Scope::User {
                    USER_BOOST
                } else {
                    1.0
                };
                Hit {
                    path: e.path.clone(),
                    scope: e.scope,
                    start_line: e.start_line,
                    end_line: e.end_line,
                    score: fuse(b, v) * boost,
                    bm25: b.unwrap_or(0.0),
                    vector: v,
                    text: e.text.clone(),
                }
            })
            .filter(|h| h.score > 0.0)
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.path.cmp(&b.path))
                .then(a.start_line.cmp(&b.start_line))
        });
        hits.truncate(limit);
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: [u8; 32] = [7; 32];

    fn file(scope: Scope, path: &str, text: &str) -> FileChunks {
        let hash = crate::search::vectors::tag(text, None);
        FileChunks::of_all(vec![(scope, path.into(), hash, text.into())], &KEY)
            .pop()
            .unwrap()
    }

    fn stamp(f: &FileChunks) -> (Option<i64>, String, Vec<u8>) {
        (
            (f.scope == Scope::User).then_some(1),
            f.path.to_string(),
            f.hash.clone(),
        )
    }

    fn index(files: Vec<FileChunks>) -> Index {
        let stamps: Vec<_> = files.iter().map(stamp).collect();
        let mut i = Index::default();
        i.update(&stamps, files);
        i
    }

    fn at() -> Endpoint {
        Endpoint {
            base: "http://e".into(),
            key: None,
            model: "m".into(),
        }
    }

    #[test]
    fn the_users_copy_hides_the_agents_and_outranks_an_equal_match() {
        let i = index(vec![
            file(Scope::Agent, "MEMORY.md", "The user likes green tea."),
            file(Scope::User, "memory/a.md", "The user likes green tea."),
            file(Scope::Agent, "memory/a.md", "hidden tea"),
            file(Scope::Agent, "memory.md", "old tea, hidden by MEMORY.md"),
        ]);
        let hits = i.search("green tea", None, 10);
        let got: Vec<(&str, Scope)> = hits.iter().map(|h| (&*h.path, h.scope)).collect();
        assert_eq!(
            got,
            [("memory/a.md", Scope::User), ("MEMORY.md", Scope::Agent)]
        );
        assert!((hits[0].score - 1.2 * hits[1].score).abs() < 1e-12);
        assert_eq!(hits[1].score, 1.0);
    }

    #[test]
    fn a_changed_file_is_spliced_and_a_gone_one_leaves() {
        let a = file(Scope::User, "memory/a.md", "alpha");
        let b = file(Scope::User, "memory/b.md", "beta");
        let mut i = index(vec![a, b]);
        assert_eq!(i.search("beta", None, 5).len(), 1);
        let a2 = file(Scope::User, "memory/a.md", &"alpha gamma\n\n".repeat(200));
        let b_stamp = stamp(&file(Scope::User, "memory/b.md", "beta"));
        let stamps = vec![stamp(&a2), b_stamp.clone()];
        assert_eq!(i.stale(&stamps), [(Some(1), "memory/a.md".to_owned())]);
        i.update(&stamps, vec![a2]);
        assert!(i.stale(&stamps).is_empty());
        assert!(i.len() > 2);
        let b_hit = &i.search("beta", None, 5)[0];
        assert_eq!((&*b_hit.path, b_hit.text.as_str()), ("memory/b.md", "beta"));
        // b deleted: its chunks leave.
        i.update(
            &[stamp(&file(
                Scope::User,
                "memory/a.md",
                &"alpha gamma\n\n".repeat(200),
            ))],
            vec![],
        );
        assert!(i.search("beta", None, 5).is_empty());
        assert_eq!(i.files.len(), 1);
    }

    /// An empty file starts where the next one does: filling it later, then removing the
    /// next, must leave every file's chunks its own (the review's scenario).
    #[test]
    fn an_empty_file_filled_later_keeps_every_range_right() {
        let a = file(Scope::User, "memory/a.md", "alpha");
        let e = file(Scope::User, "memory/e.md", "");
        let b = file(Scope::User, "memory/b.md", "beta");
        let stamps = |fs: &[&FileChunks]| fs.iter().map(|f| stamp(f)).collect::<Vec<_>>();
        let mut i = Index::default();
        i.update(
            &stamps(&[&a]),
            vec![file(Scope::User, "memory/a.md", "alpha")],
        );
        i.update(
            &stamps(&[&a, &e]),
            vec![file(Scope::User, "memory/e.md", "")],
        );
        i.update(
            &stamps(&[&a, &e, &b]),
            vec![file(Scope::User, "memory/b.md", "beta")],
        );
        let e2 = file(Scope::User, "memory/e.md", "echo");
        i.update(
            &stamps(&[&a, &e2, &b]),
            vec![file(Scope::User, "memory/e.md", "echo")],
        );
        assert_eq!(i.search("echo", None, 5)[0].text, "echo");
        assert_eq!(i.search("beta", None, 5)[0].text, "beta");
        // b deleted: beta is gone, echo stays.
        i.update(&stamps(&[&a, &e2]), vec![]);
        assert!(i.search("beta", None, 5).is_empty());
        assert_eq!(i.search("echo", None, 5)[0].text, "echo");
        assert_eq!(i.search("alpha", None, 5)[0].text, "alpha");
    }

    #[test]
    fn vectors_rank_alone_when_no_chunk_shares_a_word() {
        let mut i = index(vec![
            file(Scope::Agent, "memory/a.md", "cats"),
            file(Scope::Agent, "memory/b.md", "dogs"),
        ]);
        let missing = i.without_vectors(&at());
        assert_eq!(missing.len(), 2);
        let made = missing
            .into_iter()
            .map(|(text, tag)| {
                (
                    tag,
                    Arc::new(if text == "cats" {
                        vec![1.0, 0.0]
                    } else {
                        vec![0.6, 0.8]
                    }),
                )
            })
            .collect();
        i.set_vectors(&at(), made);
        assert!(i.without_vectors(&at()).is_empty());
        let hits = i.search("felines", Some((&at(), &[1.0, 0.0])), 5);
        assert_eq!(
            hits.iter().map(|h| &*h.path).collect::<Vec<_>>(),
            ["memory/a.md", "memory/b.md"]
        );
        assert!((hits[0].score - 1.0).abs() < 1e-9);
        assert!((hits[1].score - 0.6).abs() < 1e-6);
        // Both channels: exactly 0.3 and 0.7.
        let hits = i.search("dogs", Some((&at(), &[1.0, 0.0])), 5);
        let b = hits.iter().find(|h| &*h.path == "memory/b.md").unwrap();
        assert!((b.score - (0.3 * 1.0 + 0.7 * 0.6)).abs() < 1e-6, "{b:?}");
    }

    fn words() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec!["tea", "git", "mail", "rust", "dogs", "x"]),
            1..30,
        )
        .prop_map(|w| w.join(" "))
    }

    proptest! {
        #[test]
        fn fused_scores_are_normalised_and_ordered(
            texts in prop::collection::vec((words(), any::<bool>()), 1..12),
            limit in 1usize..20,
        ) {
            let files: Vec<FileChunks> = texts
                .iter()
                .enumerate()
                .map(|(k, (t, user))| file(if *user { Scope::User } else { Scope::Agent }, &format!("memory/{k}.md"), t))
                .collect();
            let i = index(files);
            let hits = i.search("tea rust", None, limit);
            prop_assert!(hits.len() <= limit);
            for h in &hits {
                prop_assert!(h.bm25 > 0.0 && h.bm25 <= 1.0);
                let boost = if h.scope == Scope::User { USER_BOOST } else { 1.0 };
                prop_assert!((h.score - h.bm25 * boost).abs() < 1e-12);
            }
            for w in hits.windows(2) {
                prop_assert!(w[0].score >= w[1].score);
            }
            // The best BM25 match, before the boost, is 1.
            let all = i.search("tea rust", None, 20);
            if !all.is_empty() {
                prop_assert!(all.iter().any(|h| (h.bm25 - 1.0).abs() < 1e-12));
            }
        }
    }
}
