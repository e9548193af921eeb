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

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// The tag that holds what a call returned in what the agent is told
/// ([`crate::conversation::context::told`]).
pub const RESULT_TAG: &str = "function_result";

/// How far past a `<` a tag's name is looked for: further, no reader takes it for one.
const LOOKAHEAD: usize = 256;

/// Characters a reader does not see: zero-width spaces and joiners, direction marks,
/// variation selectors, the soft hyphen, tags.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E0FFF}')
}

/// What `c` reads as, lowercased, into `out` (nothing for what is not seen): its
/// compatibility decomposition without combining marks (fullwidth, mathematical, circled
/// and accented letters read as plain ones), and the other angle brackets and slashes a
/// reader may take for `<`, `>` and `/`.
fn fold(c: char, out: &mut impl FnMut(char)) {
    if c.is_ascii() {
        return out(c.to_ascii_lowercase());
    }
    if invisible(c) {
        return;
    }
    let plain = match c {
        '\u{FE64}' | '\u{2039}' | '\u{2329}' | '\u{27E8}' | '\u{3008}' | '\u{02C2}'
        | '\u{276E}' => '<',
        '\u{FE65}' | '\u{203A}' | '\u{232A}' | '\u{27E9}' | '\u{3009}' | '\u{02C3}'
        | '\u{276F}' => '>',
        '\u{2044}' | '\u{2215}' | '\u{29F8}' => '/',
        '\u{FE4D}' | '\u{FE4E}' | '\u{FE4F}' => '_',
        _ => {
            for d in std::iter::once(c).nfkd() {
                if !is_combining_mark(d) && !invisible(d) {
                    for l in d.to_lowercase() {
                        out(l);
                    }
                }
            }
            return;
        }
    };
    out(plain)
}

/// Whether `c` reads as `<`.
fn opens_like(c: char) -> bool {
    let mut first = None;
    fold(c, &mut |f| {
        first.get_or_insert(f);
    });
    first == Some('<')
}

/// Whether a tag named `name` (lowercase ASCII) begins at `rest`, just after a `<`: any
/// spaces and slashes, then the name in any case, width or script a reader takes for it,
/// with unseen characters anywhere and its `_` written as `-`, `.`, a space or nothing.
fn names_tag(rest: &str, name: &str) -> bool {
    let mut seen = Vec::with_capacity(LOOKAHEAD);
    for c in rest.chars() {
        if seen.len() >= LOOKAHEAD {
            break;
        }
        fold(c, &mut |f| seen.push(f));
    }
    let mut at = seen
        .iter()
        .position(|c| !(c.is_whitespace() || *c == '/'))
        .unwrap_or(seen.len());
    for want in name.chars() {
        let got = seen.get(at).copied();
        if want == '_' {
            if matches!(got, Some('_' | '-' | '.' | ' ')) {
                at += 1;
            }
            continue;
        }
        if got != Some(want) {
            return false;
        }
        at += 1;
    }
    true
}

/// Where a tag of `names` would begin in `text`: the byte offsets of its `<`s.
fn tag_starts<'a>(text: &'a str, names: &'a [&str]) -> impl Iterator<Item = (usize, char)> + 'a {
    text.char_indices().filter(move |&(i, c)| {
        opens_like(c)
            && names
                .iter()
                .any(|n| names_tag(&text[i + c.len_utf8()..], n))
    })
}

/// `text` with every place a tag of `names` (lowercase ASCII) would begin made inert.
pub fn escape_tags<'a>(text: &'a str, names: &[&str]) -> Cow<'a, str> {
    let starts: Vec<usize> = tag_starts(text, names).map(|(i, _)| i).collect();
    if starts.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 4 * starts.len());
    let mut next = starts.iter().peekable();
    for (i, c) in text.char_indices() {
        if next.next_if(|&&s| s == i).is_some() {
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
    tag_starts(text, names).next().is_some()
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
            "<\u{200B}/context_file>",
            "</context\u{200B}_file>",
            "</con\u{00AD}text_file>",
            "<//context_file>",
            "< / / context_file>",
            "</context-file>",
            "</context file>",
            "</contextfile>",
            "</𝐜𝐨𝐧𝐭𝐞𝐱𝐭_𝐟𝐢𝐥𝐞>",
            "</ⓒⓞⓝⓣⓔⓧⓣ_ⓕⓘⓛⓔ>",
            "</cöntéxt_file>",
            "❮/context_file❯",
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
            Just("\u{200B}".to_string()),
            Just("-".to_string()),
            Just("𝐜𝐨𝐧𝐭𝐞𝐱𝐭".to_string()),
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
                s.replace("&lt;", "<").chars().map(|c| if opens_like(c) { '<' } else { c }).collect()
            };
            prop_assert_eq!(norm(&out), norm(&text));
        }
    }
}
