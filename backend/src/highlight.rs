//! Code highlighted on the server: a code block's text cut into classed tokens
//! ([`hero_shared::html::Hl`]) by Sublime Text's grammars (syntect), for the page to draw
//! through `hero_shared::html::highlighted_html`. The grammars load once, at the first
//! block; the page asks only when a code block appears, so nothing of this reaches the
//! wasm. A leaf.

use std::sync::LazyLock;

use hero_shared::html::Hl;
use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxSet};
use syntect::util::LinesWithEndings;

use crate::{Error, Result};

/// The most code one request highlights, in bytes.
pub const MAX_CODE_BYTES: usize = 64 << 10;
/// The longest language name taken.
pub const MAX_LANG_CHARS: usize = 32;

static SYNTAXES: LazyLock<SyntaxSet> = LazyLock::new(SyntaxSet::load_defaults_newlines);

/// Each class and the scopes it stands for, the first that matches a scope (innermost
/// first) winning.
static CLASSES: LazyLock<Vec<(Scope, Hl)>> = LazyLock::new(|| {
    [
        ("comment", Hl::Comment),
        ("string", Hl::String),
        ("constant.numeric", Hl::Number),
        ("constant", Hl::Constant),
        ("entity.name.function", Hl::Function),
        ("support.function", Hl::Function),
        ("variable.function", Hl::Function),
        ("entity.name.type", Hl::Type),
        ("support.type", Hl::Type),
        ("storage.type", Hl::Keyword),
        ("storage.modifier", Hl::Keyword),
        ("keyword", Hl::Keyword),
    ]
    .into_iter()
    .filter_map(|(s, hl)| Scope::new(s).ok().map(|s| (s, hl)))
    .collect()
});

fn class_of(stack: &ScopeStack) -> Hl {
    for scope in stack.as_slice().iter().rev() {
        if let Some((_, hl)) = CLASSES.iter().find(|(p, _)| p.is_prefix_of(*scope)) {
            return *hl;
        }
    }
    Hl::Plain
}

/// `code` in `lang` (a name or a file extension, as a code fence says it) as tokens, runs
/// of one class merged; one plain token when the language is not known.
pub fn tokens(lang: &str, code: &str) -> Result<Vec<(Hl, String)>> {
    if code.len() > MAX_CODE_BYTES {
        return Err(Error::Invalid(format!(
            "code to highlight is at most {} KiB",
            MAX_CODE_BYTES >> 10
        )));
    }
    if lang.chars().count() > MAX_LANG_CHARS {
        return Err(Error::Invalid("that is no language name".into()));
    }
    let Some(syntax) = SYNTAXES
        .find_syntax_by_token(lang.trim())
        .filter(|_| !lang.trim().is_empty())
    else {
        return Ok(vec![(Hl::Plain, code.to_owned())]);
    };
    let mut state = ParseState::new(syntax);
    let mut stack = ScopeStack::new();
    let mut out: Vec<(Hl, String)> = Vec::new();
    let mut push = |hl: Hl, text: &str| {
        if text.is_empty() {
            return;
        }
        match out.last_mut() {
            Some((last, t)) if *last == hl => t.push_str(text),
            _ => out.push((hl, text.to_owned())),
        }
    };
    for line in LinesWithEndings::from(code) {
        let ops = state
            .parse_line(line, &SYNTAXES)
            .map_err(|e| Error::Invalid(format!("this code could not be read as {lang}: {e}")))?;
        let mut at = 0;
        for (pos, op) in ops {
            let pos = pos.min(line.len());
            if let Some(text) = line.get(at..pos) {
                push(class_of(&stack), text);
                at = pos;
            }
            stack
                .apply(&op)
                .map_err(|e| Error::Internal(format!("highlighting failed: {e}")))?;
        }
        push(class_of(&stack), line.get(at..).unwrap_or_default());
    }
    Ok(out)
}

/// [`tokens`] on a thread of its own (a long block's grammar work is not the runtime's).
pub async fn tokens_apart(lang: String, code: String) -> Result<Vec<(Hl, String)>> {
    tokio::task::spawn_blocking(move || tokens(&lang, &code))
        .await
        .map_err(|e| Error::Internal(format!("highlighting failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(tokens: &[(Hl, String)], hl: Hl) -> Vec<String> {
        tokens
            .iter()
            .filter(|(h, _)| *h == hl)
            .map(|(_, t)| t.trim().to_owned())
            .collect()
    }

    #[test]
    fn rust_is_cut_into_its_kinds_and_gives_back_its_text() {
        let code = "// greet\nfn main() {\n    let n = 42;\n    println!(\"hi {n}\");\n}\n";
        let t = tokens("rust", code).unwrap();
        assert_eq!(t.iter().map(|(_, s)| s.as_str()).collect::<String>(), code);
        assert!(
            of(&t, Hl::Comment).iter().any(|c| c.contains("greet")),
            "{t:?}"
        );
        assert!(of(&t, Hl::Keyword).iter().any(|k| k == "fn"), "{t:?}");
        assert!(of(&t, Hl::Number).contains(&"42".to_owned()), "{t:?}");
        assert!(of(&t, Hl::String).iter().any(|s| s.contains("hi")), "{t:?}");
    }

    #[test]
    fn a_language_by_extension_an_unknown_one_plain_and_bounds() {
        let t = tokens("py", "def f():\n    return 'x'\n").unwrap();
        assert!(of(&t, Hl::Keyword).iter().any(|k| k == "def"), "{t:?}");
        assert_eq!(
            tokens("klingon", "qapla'").unwrap(),
            vec![(Hl::Plain, "qapla'".to_owned())]
        );
        assert_eq!(tokens("", "x").unwrap(), vec![(Hl::Plain, "x".to_owned())]);
        let big = "x".repeat(MAX_CODE_BYTES + 1);
        assert!(
            tokens("rust", &big)
                .unwrap_err()
                .to_string()
                .contains("at most 64 KiB")
        );
        assert!(tokens(&"l".repeat(40), "x").is_err());
    }
}
