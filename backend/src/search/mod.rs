//! Ranking texts for a query (reference 002 §10–11, §15), for skills and memory:
//! [`tokens`], a [`Bm25`] index over a list of documents (spliced a run at a time), [`fuse`],
//! the hybrid score of BM25 and vector similarity, and [`dot`] and [`cosine`] for the
//! vectors. The index is in memory only, built from what the caller holds: nothing here
//! stores text. [`vectors`] keeps texts' vectors (sealed in `embeddings` for a user's), and
//! [`IndexCache`] holds them and the memories' indexes within a bound.
//!
//! BM25 is a hundred lines of our own rather than a search engine's crate: the documents are
//! skills' names and descriptions and memory chunks (tens of thousands at most), kept
//! nowhere but here, and the formula is 002's exactly.

pub mod cache;
pub mod embed;
pub mod vectors;

pub use cache::IndexCache;

use std::collections::HashMap;

/// BM25's term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25's length normalisation.
pub const B: f64 = 0.75;
/// The weight of the BM25 part in a hybrid score; the vector part weighs the rest.
pub const BM25_WEIGHT: f64 = 0.3;
/// The weight of the vector part in a hybrid score.
pub const VECTOR_WEIGHT: f64 = 0.7;

/// A text's tokens: lowercased, every character that is not a letter or digit (Unicode)
/// a separator, tokens of one character dropped.
pub fn tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| t.chars().nth(1).is_some())
        .map(str::to_owned)
        .collect()
}

/// One document's length and term counts.
#[derive(Debug, Clone, Default)]
struct Doc {
    len: usize,
    tf: HashMap<String, u32>,
}

/// A BM25 index over documents given in order (their index is their id).
#[derive(Debug, Clone, Default)]
pub struct Bm25 {
    docs: Vec<Doc>,
    /// In how many documents each term is.
    df: HashMap<String, u32>,
    /// The documents' lengths summed.
    total_len: usize,
    avg_len: f64,
}

impl Doc {
    fn of(text: &str) -> Doc {
        let mut doc = Doc::default();
        for t in tokens(text) {
            doc.len += 1;
            *doc.tf.entry(t).or_default() += 1;
        }
        doc
    }
}

impl Bm25 {
    pub fn new<'a>(texts: impl IntoIterator<Item = &'a str>) -> Bm25 {
        let mut index = Bm25::default();
        index.splice(0..0, texts);
        index
    }

    /// Replaces the documents in `range` with `texts` (as [`Vec::splice`]): the documents
    /// after them move by the difference. Only the documents named are read: a changed
    /// file's chunks are indexed again, not the others.
    pub fn splice<'a>(
        &mut self,
        range: std::ops::Range<usize>,
        texts: impl IntoIterator<Item = &'a str>,
    ) {
        let fresh: Vec<Doc> = texts.into_iter().map(Doc::of).collect();
        for doc in &fresh {
            self.total_len += doc.len;
            for t in doc.tf.keys() {
                *self.df.entry(t.clone()).or_default() += 1;
            }
        }
        for old in self.docs.splice(range, fresh) {
            self.total_len -= old.len;
            for t in old.tf.keys() {
                if let Some(n) = self.df.get_mut(t) {
                    *n -= 1;
                    if *n == 0 {
                        self.df.remove(t);
                    }
                }
            }
        }
        self.avg_len = if self.docs.is_empty() {
            0.0
        } else {
            self.total_len as f64 / self.docs.len() as f64
        };
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// About the bytes the index holds: each term counted once per document it is in, and
    /// once in the document frequencies, with its map entry's share.
    pub fn approx_bytes(&self) -> usize {
        let entry = |term: &String| term.len() + std::mem::size_of::<(String, u32)>() + 8;
        self.docs
            .iter()
            .map(|d| std::mem::size_of::<Doc>() + d.tf.keys().map(entry).sum::<usize>())
            .sum::<usize>()
            + self.df.keys().map(entry).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// `log((N − df + 0.5) / (df + 0.5) + 1)`: always above 0.
    pub fn idf(&self, term: &str) -> f64 {
        let n = self.docs.len() as f64;
        let df = f64::from(self.df.get(term).copied().unwrap_or(0));
        ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
    }

    /// Document `doc`'s score for the query's distinct tokens.
    pub fn score(&self, query: &[String], doc: usize) -> f64 {
        let Some(d) = self.docs.get(doc) else {
            return 0.0;
        };
        let norm = if self.avg_len > 0.0 {
            1.0 - B + B * d.len as f64 / self.avg_len
        } else {
            1.0
        };
        let mut seen: Vec<&str> = Vec::with_capacity(query.len());
        let mut sum = 0.0;
        for t in query {
            if seen.contains(&t.as_str()) {
                continue;
            }
            seen.push(t);
            let tf = f64::from(d.tf.get(t).copied().unwrap_or(0));
            if tf > 0.0 {
                sum += self.idf(t) * tf * (K1 + 1.0) / (tf + K1 * norm);
            }
        }
        sum
    }

    /// The documents sharing a token with `query`, best first (ties in document order),
    /// `limit` at most: `(document, score)`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<(usize, f64)> {
        let q = tokens(query);
        let mut hits: Vec<(usize, f64)> = (0..self.docs.len())
            .map(|i| (i, self.score(&q, i)))
            .filter(|(_, s)| *s > 0.0)
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(limit);
        hits
    }
}

/// A hybrid score from its parts: BM25 over the query's best (0 to 1) and the cosine
/// similarity (clamped to 0 to 1). Both present: `0.3·bm25 + 0.7·vector`; one alone weighs
/// 1.0.
pub fn fuse(bm25: Option<f64>, vector: Option<f64>) -> f64 {
    let v = vector.map(|v| v.clamp(0.0, 1.0));
    match (bm25, v) {
        (Some(b), Some(v)) => BM25_WEIGHT * b + VECTOR_WEIGHT * v,
        (Some(b), None) => b,
        (None, Some(v)) => v,
        (None, None) => 0.0,
    }
}

/// The cosine similarity of two vectors (0 when either is all zeros or they differ in
/// length).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

/// The dot product of two vectors of equal length, in `f32` with eight sums side by side
/// (the compiler makes SIMD of them): a hybrid memory search takes ten thousand of these of
/// 1,536 numbers, where [`cosine`]'s `f64` loop cost most of its time (docs/perf.md).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        // As arrays, the eight steps have no bounds to check.
        let (x, y): (&[f32; 8], &[f32; 8]) = (
            x.try_into().unwrap_or(&[0.0; 8]),
            y.try_into().unwrap_or(&[0.0; 8]),
        );
        for i in 0..8 {
            sums[i] += x[i] * y[i];
        }
    }
    sums.iter().sum::<f32>() + tail
}

/// A vector's length.
pub fn norm(a: &[f32]) -> f32 {
    dot(a, a).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tokens_are_lowercased_split_on_what_is_not_a_letter_or_digit() {
        assert_eq!(
            tokens("PDF-Tools: read a PDF, fill forms (v2)!"),
            ["pdf", "tools", "read", "pdf", "fill", "forms", "v2"]
        );
        assert_eq!(
            tokens("Ünïcode wörter_und Zahlen42"),
            ["ünïcode", "wörter", "und", "zahlen42"]
        );
        assert_eq!(tokens("a b c"), Vec::<String>::new());
        assert_eq!(tokens("日本 語"), ["日本"]);
    }

    #[test]
    fn a_document_sharing_no_token_is_not_found() {
        let index = Bm25::new(["pdf forms", "spreadsheet formulas", "git history"]);
        let hits = index.search("PDF", 5);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, 0);
        assert!(index.search("weather", 5).is_empty());
    }

    /// BM25 as 002 writes it, term by term, with nothing shared with the index.
    fn naive(docs: &[String], query: &str, doc: usize) -> f64 {
        let toks: Vec<Vec<String>> = docs.iter().map(|d| tokens(d)).collect();
        let n = docs.len() as f64;
        let avg = toks.iter().map(Vec::len).sum::<usize>() as f64 / n;
        let mut q = tokens(query);
        q.sort();
        q.dedup();
        q.iter()
            .map(|t| {
                let df = toks.iter().filter(|d| d.contains(t)).count() as f64;
                let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                let tf = toks[doc].iter().filter(|x| *x == t).count() as f64;
                let len = toks[doc].len() as f64;
                let norm = if avg > 0.0 {
                    1.0 - B + B * len / avg
                } else {
                    1.0
                };
                idf * tf * (K1 + 1.0) / (tf + K1 * norm)
            })
            .sum()
    }

    fn corpus() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec(
            prop::collection::vec(
                prop::sample::select(vec![
                    "pdf", "forms", "git", "sheet", "mail", "rust", "test", "docs",
                ]),
                0..8,
            )
            .prop_map(|w| w.join(" ")),
            1..12,
        )
    }

    proptest! {
        #[test]
        fn bm25_equals_a_naive_evaluation(docs in corpus(), query in "(pdf|git|mail|rust|zzz| ){1,20}") {
            let index = Bm25::new(docs.iter().map(String::as_str));
            let q = tokens(&query);
            for d in 0..docs.len() {
                let fast = index.score(&q, d);
                let slow = naive(&docs, &query, d);
                prop_assert!((fast - slow).abs() < 1e-9, "{fast} against {slow}");
            }
            for t in &q {
                prop_assert!(index.idf(t) > 0.0);
            }
        }

        #[test]
        fn a_spliced_index_equals_one_built_anew(
            docs in corpus(), more in corpus(), at in 0usize..12, cut in 0usize..12,
        ) {
            let start = at.min(docs.len());
            let end = (start + cut).min(docs.len());
            let mut spliced = Bm25::new(docs.iter().map(String::as_str));
            spliced.splice(start..end, more.iter().map(String::as_str));
            let mut after = docs.clone();
            after.splice(start..end, more.iter().cloned());
            let anew = Bm25::new(after.iter().map(String::as_str));
            prop_assert_eq!(spliced.len(), anew.len());
            prop_assert_eq!(&spliced.df, &anew.df);
            let q = tokens("pdf git mail rust docs");
            for d in 0..after.len() {
                prop_assert!((spliced.score(&q, d) - anew.score(&q, d)).abs() < 1e-9);
            }
        }

        #[test]
        fn results_are_sorted_within_the_limit_with_stable_ties(docs in corpus(), limit in 1usize..6) {
            let index = Bm25::new(docs.iter().map(String::as_str));
            let hits = index.search("pdf git rust", limit);
            prop_assert!(hits.len() <= limit);
            for w in hits.windows(2) {
                prop_assert!(w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0));
            }
            for (d, s) in &hits {
                prop_assert!(*s > 0.0);
                prop_assert!(tokens(&docs[*d]).iter().any(|t| ["pdf", "git", "rust"].contains(&t.as_str())));
            }
        }

        #[test]
        fn fusion_is_the_weighted_sum_and_never_falls_as_a_part_rises(
            b in 0.0f64..=1.0, v in 0.0f64..=1.0, up in 0.0f64..=1.0,
        ) {
            prop_assert_eq!(fuse(Some(b), Some(v)), 0.3 * b + 0.7 * v);
            prop_assert_eq!(fuse(Some(b), None), b);
            prop_assert_eq!(fuse(None, Some(v)), v);
            let raised_b = (b + up).min(1.0);
            let raised_v = (v + up).min(1.0);
            prop_assert!(fuse(Some(raised_b), Some(v)) >= fuse(Some(b), Some(v)));
            prop_assert!(fuse(Some(b), Some(raised_v)) >= fuse(Some(b), Some(v)));
        }

        #[test]
        fn one_channel_alone_keeps_its_ranking(xs in prop::collection::vec(0.0f64..=1.0, 2..10)) {
            let mut by_raw: Vec<usize> = (0..xs.len()).collect();
            by_raw.sort_by(|a, b| xs[*b].total_cmp(&xs[*a]).then(a.cmp(b)));
            let mut by_fused: Vec<usize> = (0..xs.len()).collect();
            by_fused.sort_by(|a, b| fuse(Some(xs[*b]), None).total_cmp(&fuse(Some(xs[*a]), None)).then(a.cmp(b)));
            prop_assert_eq!(&by_raw, &by_fused);
            let mut by_vector: Vec<usize> = (0..xs.len()).collect();
            by_vector.sort_by(|a, b| fuse(None, Some(xs[*b])).total_cmp(&fuse(None, Some(xs[*a]))).then(a.cmp(b)));
            prop_assert_eq!(by_raw, by_vector);
        }
    }

    proptest! {
        #[test]
        fn dot_over_norms_is_the_cosine(
            pair in (1usize..40).prop_flat_map(|n| (
                prop::collection::vec(-1.0f32..1.0, n),
                prop::collection::vec(-1.0f32..1.0, n),
            )),
        ) {
            let (a, b) = pair;
            let (na, nb) = (norm(&a), norm(&b));
            prop_assume!(na > 1e-3 && nb > 1e-3);
            let fast = f64::from(dot(&a, &b) / (na * nb));
            prop_assert!((fast - cosine(&a, &b)).abs() < 1e-4, "{} against {}", fast, cosine(&a, &b));
        }
    }

    #[test]
    fn cosine_of_like_and_unlike_vectors() {
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 1.0]), 0.0);
    }
}
