//! Text that Hero puts inside a tag of its own in what a model reads (a context file in its
//! `<context_file>`, a call's output in its `<function_result>`): it must not be able to
//! close that tag, or open one of Hero's, and so pass for Hero's own words.
//!
//! A model reads tags loosely, as an HTML-ish reader would: in any case, with spaces after
//! the `<` or around the `/`, and in the fullwidth forms (`＜／ＣＯＮＴＥＸＴ＿ＦＩＬＥ＞`). So
//! the check folds each of those to plain lowercase ASCII before it compares, and where a
//! tag of `names` would begin, the `<` (or its look-alike) becomes `&lt;`: the text stays
//! readable and nothing in it is a tag any more.

use std::borrow::Cow;

/// The plain ASCII character a look-alike stands for, lowercased: fullwidth forms
/// (U+FF01..U+FF5E) and the other angle brackets and slashes a reader may take for `<`
/// and `/`.
fn fold(c: char) -> char {
    let c = match c {
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        '\u{FE64}' | '\u{2039}' | '\u{2329}' | '\u{27E8}' | '\u{3008}' | '\u{02C2}' => '<',
        '\u{FE65}' | '\u{203A}' | '\u{232A}' | '\u{27E9}' | '\u{3009}' | '\u{02C3}' => '>',
        '\u{2044}' | '\u{2215}' | '\u{29F8}' => '/',
        '\u{FE4D}' | '\u{FE4E}' | '\u{FE4F}' => '_',
        c => c,
    };
    c.to_ascii_lowercase()
}

/// Whether a tag named `name` (lowercase ASCII) begins at `rest`, just after a `<`: spaces,
/// an optional `/` with spaces around it, then the name in any case or width.
fn names_tag(rest: &str, name: &str) -> bool {
    let mut chars = rest.chars().map(fold).peekable();
    let skip_space = |it: &mut std::iter::Peekable<_>| {
        while it.next_if(|c: &char| c.is_whitespace()).is_some() {}
    };
    skip_space(&mut chars);
    if chars.next_if_eq(&'/').is_some() {
        skip_space(&mut chars);
    }
    name.chars().all(|want| chars.next() == Some(want))
}

/// `text` with every place a tag of `names` (lowercase ASCII) would begin made inert.
pub fn escape_tags<'a>(text: &'a str, names: &[&str]) -> Cow<'a, str> {
    let opens = |(i, c): &(usize, char)| {
        fold(*c) == '<'
            && names
                .iter()
                .any(|n| names_tag(&text[i + c.len_utf8()..], n))
    };
    if !text.char_indices().any(|ic| opens(&ic)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for (i, c) in text.char_indices() {
        if opens(&(i, c)) {
            out.push_str("&lt;");
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether `text` still holds a tag of `names` in any spelling (what [`escape_tags`] leaves
/// none of).
pub fn holds_tag(text: &str, names: &[&str]) -> bool {
    text.char_indices().any(|(i, c)| {
        fold(c) == '<'
            && names
                .iter()
                .any(|n| names_tag(&text[i + c.len_utf8()..], n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NAMES: [&str; 2] = ["context_file", "system_context"];

    #[test]
    fn every_spelling_of_the_tag_is_made_inert() {
        for spelling in [
            "</context_file>",
            "</CONTEXT_FILE>",
            "</Context_File>",
            "< /context_file>",
            "<  /  context_file >",
            "</\tcontext_file>",
            "<\n/context_file>",
            "＜/context_file＞",
            "＜／ｃｏｎｔｅｘｔ＿ｆｉｌｅ＞",
            "</ＣＯＮＴＥＸＴ_FILE>",
            "﹤/context_file>",
            "<context_file name=\"X\">",
            "<System_Context name=\"X\">",
            "〈/context_file〉",
        ] {
            let text = format!("before {spelling} after");
            let out = escape_tags(&text, &NAMES);
            assert!(!holds_tag(&out, &NAMES), "{spelling:?} -> {out:?}");
            assert!(out.contains("&lt;"), "{spelling:?} -> {out:?}");
            assert!(
                out.ends_with(" after") && out.starts_with("before "),
                "{out}"
            );
        }
    }

    #[test]
    fn other_text_is_left_as_it_is() {
        for text in [
            "a < b and c > d",
            "<context>",
            "<file>",
            "<p>context_file</p>",
            "x</context",
            "",
            "<",
        ] {
            assert!(
                matches!(escape_tags(text, &NAMES), Cow::Borrowed(t) if t == text),
                "{text:?}"
            );
        }
    }

    /// Pieces from which hostile text is made: the tag's letters in both cases and widths,
    /// angle brackets and slashes and their look-alikes, spaces.
    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("<".to_string()),
            Just("＜".to_string()),
            Just("﹤".to_string()),
            Just("〈".to_string()),
            Just("/".to_string()),
            Just("／".to_string()),
            Just(" ".to_string()),
            Just("\t".to_string()),
            Just(">".to_string()),
            Just("&lt;".to_string()),
            Just("context_file".to_string()),
            Just("CONTEXT_FILE".to_string()),
            Just("Context_File".to_string()),
            Just("ｃｏｎｔｅｘｔ＿ｆｉｌｅ".to_string()),
            Just("system_context".to_string()),
            Just("SYSTEM_context".to_string()),
            "[a-zA-Z_ <>/]{0,6}",
            any::<char>().prop_map(String::from),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever the text, what comes out holds no tag of the names in any spelling, and
        /// differs from it only where a `<` became `&lt;`.
        #[test]
        fn no_spelling_survives(pieces in proptest::collection::vec(piece(), 0..24)) {
            let text: String = pieces.concat();
            let out = escape_tags(&text, &NAMES);
            prop_assert!(!holds_tag(&out, &NAMES), "{:?} -> {:?}", text, out);
            let norm = |s: &str| -> String {
                s.replace("&lt;", "<").chars().map(|c| if fold(c) == '<' { '<' } else { c }).collect()
            };
            prop_assert_eq!(norm(&out), norm(&text));
        }
    }
}
