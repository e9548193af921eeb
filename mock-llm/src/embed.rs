//! The vectors `POST /v1/embeddings` answers with: deterministic, so tests and benchmarks
//! can rely on them, and meaningful enough to find a text by a word it does not contain.
//! A text's tokens (lowercased, split at every character that is not a letter or digit,
//! one-character tokens dropped) each become their group's word in a small table of
//! synonyms, which is hashed to one of the vector's dimensions, with a sign; the sum is
//! scaled to length 1. Texts that share words, or synonyms, point the same way.

/// Words that mean the same, for the mock's purposes: the first of each group stands for it.
const SYNONYMS: &[&[&str]] = &[
    &[
        "ship",
        "deploy",
        "deployment",
        "release",
        "rollout",
        "launch",
        "publish",
    ],
    &["car", "automobile", "vehicle", "auto"],
    &["picture", "image", "photo", "photograph", "illustration"],
    &["bug", "defect", "fault", "flaw", "issue"],
    &["document", "pdf", "paper", "form"],
    &["translate", "translation", "interpret", "language"],
    &["money", "invoice", "billing", "payment", "bill"],
    &["mail", "email", "letter", "message"],
    &["history", "log", "past", "changelog"],
    &["test", "check", "verify", "assert"],
];

/// The word a token stands for.
fn canonical(token: &str) -> &str {
    SYNONYMS
        .iter()
        .find(|group| group.contains(&token))
        .map_or(token, |group| group[0])
}

/// FNV-1a: small, stable across runs and platforms.
fn hash(word: &str) -> u64 {
    word.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The vector of `text`, of `dimensions` numbers, of length 1 (all zeros for a text with no
/// token).
pub(crate) fn vector(text: &str, dimensions: usize) -> Vec<f32> {
    let dimensions = dimensions.max(1);
    let mut v = vec![0f32; dimensions];
    let lower = text.to_lowercase();
    for token in lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| t.chars().nth(1).is_some())
    {
        let h = hash(canonical(token));
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        v[(h % dimensions as u64) as usize] += sign;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn vectors_are_unit_length_deterministic_and_find_synonyms() {
        let a = vector("Deploy the service", 64);
        assert_eq!(a, vector("Deploy the service", 64));
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-5);
        assert_eq!(vector("a", 8), vec![0.0; 8]);
        let ship = vector("release", 256);
        let deploy = vector("deploy", 256);
        assert!((cosine(&ship, &deploy) - 1.0).abs() < 1e-5);
        assert!(cosine(&vector("car", 256), &vector("deploy", 256)).abs() < 0.5);
        assert_eq!(vector("x y", 16).len(), 16);
    }
}
