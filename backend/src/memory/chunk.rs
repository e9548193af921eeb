//! A memory file cut into chunks (reference 002 §14), the units a search finds: lines
//! accumulate; once a chunk holds at least [`SOFT_CHARS`] characters a blank line ends it;
//! a line that would take it past [`MAX_CHARS`] starts the next; a line longer than that is
//! cut every [`MAX_CHARS`]. Characters are Unicode scalar values, and a chunk's text is its
//! lines joined by newlines (a cut line's pieces are in chunks of their own).

/// The most characters in a chunk.
pub const MAX_CHARS: usize = 1_000;
/// From this many characters on, a blank line ends a chunk.
pub const SOFT_CHARS: usize = MAX_CHARS / 2;

/// A chunk: its lines (1-based, inclusive) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub start_line: usize,
    pub end_line: usize,
    pub text: String,
}

/// The file's lines: split at newlines, a final newline ending the last line rather than
/// starting an empty one.
pub fn lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    if text.ends_with('\n') || text.is_empty() {
        lines.pop();
    }
    lines
}

/// Cuts `text` into chunks, in order.
pub fn chunks(text: &str) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut cur: Option<(Chunk, usize)> = None;
    for (i, line) in lines(text).into_iter().enumerate() {
        let number = i + 1;
        for piece in pieces(line) {
            let len = piece.chars().count();
            if let Some((chunk, chars)) = &mut cur {
                if *chars + 1 + len > MAX_CHARS {
                    out.push(cur.take().expect("a chunk is open").0);
                } else {
                    chunk.text.push('\n');
                    chunk.text.push_str(piece);
                    chunk.end_line = number;
                    *chars += 1 + len;
                    continue;
                }
            }
            cur = Some((
                Chunk {
                    start_line: number,
                    end_line: number,
                    text: piece.to_owned(),
                },
                len,
            ));
        }
        if line.trim().is_empty() && cur.as_ref().is_some_and(|(_, chars)| *chars >= SOFT_CHARS) {
            out.extend(cur.take().map(|(c, _)| c));
        }
    }
    out.extend(cur.map(|(c, _)| c));
    out
}

/// A line as pieces of at most [`MAX_CHARS`] characters (an empty line is one empty piece).
fn pieces(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    loop {
        match rest.char_indices().nth(MAX_CHARS) {
            Some((at, _)) => {
                out.push(&rest[..at]);
                rest = &rest[at..];
            }
            None => {
                out.push(rest);
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paragraphs_past_half_end_at_a_blank_line() {
        let para = "word ".repeat(120); // 600 characters
        let text = format!("{para}\n\nsecond\n");
        let c = chunks(&text);
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!((c[0].start_line, c[0].end_line), (1, 2));
        assert_eq!((c[1].start_line, c[1].end_line), (3, 3));
        assert_eq!(c[1].text, "second");
        // Short paragraphs stay together.
        let c = chunks("a\n\nb\n\nc");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].text, "a\n\nb\n\nc");
    }

    #[test]
    fn a_long_line_is_cut_every_thousand_characters() {
        let line = "é".repeat(2_500);
        let c = chunks(&format!("head\n{line}\ntail"));
        let sizes: Vec<usize> = c.iter().map(|c| c.text.chars().count()).collect();
        assert_eq!(sizes, [4, 1_000, 1_000, 505]);
        assert_eq!(
            c.iter()
                .map(|c| (c.start_line, c.end_line))
                .collect::<Vec<_>>(),
            [(1, 1), (2, 2), (2, 2), (2, 3)]
        );
        assert!(chunks("").is_empty());
    }

    /// The file's lines from its chunks: consecutive chunks on one line are its pieces.
    fn rebuilt(chunks: &[Chunk]) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        let mut last_line = 0;
        for c in chunks {
            for (k, l) in c.text.split('\n').enumerate() {
                let number = c.start_line + k;
                if k == 0 && number == last_line {
                    lines.last_mut().unwrap().push_str(l);
                } else {
                    lines.push(l.to_owned());
                }
                last_line = number;
            }
        }
        lines
    }

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                Just(String::new()),
                "[a-z é日]{0,80}",
                "[a-z]{300,700}",
                "[ab]{900,2200}",
            ],
            0..40,
        )
        .prop_map(|lines| lines.join("\n"))
    }

    proptest! {
        #[test]
        fn chunking_keeps_every_line_in_order_within_the_bounds(text in text()) {
            let c = chunks(&text);
            let lines = lines(&text);
            for chunk in &c {
                prop_assert!(chunk.text.chars().count() <= MAX_CHARS);
                prop_assert!(chunk.start_line <= chunk.end_line);
                prop_assert_eq!(chunk.text.split('\n').count(), chunk.end_line - chunk.start_line + 1);
            }
            // Chunks in order give back the file's lines.
            prop_assert_eq!(rebuilt(&c), lines.iter().map(|l| l.to_string()).collect::<Vec<_>>());
            // Ranges in order, covering every line, sharing one only where a line is cut.
            let mut next = 1;
            for (k, chunk) in c.iter().enumerate() {
                if chunk.start_line + 1 == next {
                    let line = lines[chunk.start_line - 1];
                    prop_assert!(line.chars().count() > MAX_CHARS, "line {} shared but not cut", chunk.start_line);
                } else {
                    prop_assert_eq!(chunk.start_line, next, "chunk {} skips or repeats", k);
                }
                next = chunk.end_line + 1;
            }
            prop_assert_eq!(next, lines.len() + 1);
            // A chunk under half ends only at the file's end or before what would pass the
            // maximum.
            for w in c.windows(2) {
                let chars = w[0].text.chars().count();
                if chars < SOFT_CHARS {
                    let first = w[1].text.split('\n').next().unwrap().chars().count();
                    prop_assert!(chars + 1 + first > MAX_CHARS, "{} then {}", chars, first);
                }
            }
        }
    }
}
