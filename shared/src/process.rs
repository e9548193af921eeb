//! Processes (reference 000's "Abilities"): instruction macros in markdown, with a closed set
//! of variables filled in when one is used, and the startup rule that orders the processes a
//! session begins with. Substitution only: no loops, includes or calls, so rendering a
//! process can neither fail nor run anything.
//!
//! The variables are [`VARIABLES`]: `{{user.name}}`, `{{agent.name}}`, `{{session.name}}`,
//! `{{date}}` and `{{time}}` (UTC), `{{args}}` (what the process was loaded with). Spaces
//! inside the braces are allowed (`{{ date }}`); `\{{` is a literal `{{`. A process that
//! names any other variable is refused when it is saved ([`check`]).

/// The variables a process may use.
pub const VARIABLES: [&str; 6] = [
    "user.name",
    "agent.name",
    "session.name",
    "date",
    "time",
    "args",
];

/// The most characters a process's name has.
pub const MAX_NAME_CHARS: usize = 64;

/// The most bytes a process's content has.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;
/// The longest description a process may have (characters).
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;

/// What the variables stand for when a process is rendered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vars {
    pub user_name: String,
    pub agent_name: String,
    pub session_name: String,
    /// `YYYY-MM-DD`, UTC.
    pub date: String,
    /// `HH:MM`, UTC.
    pub time: String,
    pub args: String,
}

impl Vars {
    fn get(&self, name: &str) -> Option<&str> {
        Some(match name {
            "user.name" => &self.user_name,
            "agent.name" => &self.agent_name,
            "session.name" => &self.session_name,
            "date" => &self.date,
            "time" => &self.time,
            "args" => &self.args,
            _ => return None,
        })
    }
}

/// A piece of a process's text.
enum Piece<'a> {
    Text(&'a str),
    /// `{{name}}`, its name trimmed.
    Var(&'a str),
}

/// Reads `text` into text and variables, each `\{{` as a literal `{{`, a `{{` with no
/// `}}` after it as text, of three braces or more the last two as the variable's opening,
/// and of several `{{` before one `}}` the last as the variable's (the ones before it are
/// text). One pass: each `}}` is looked for once.
fn pieces(text: &str, mut each: impl FnMut(Piece<'_>)) {
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        if rest[..open].ends_with('\\') {
            each(Piece::Text(&rest[..open - 1]));
            each(Piece::Text("{{"));
            rest = &rest[open + 2..];
            continue;
        }
        let after = &rest[open + 2..];
        // Of three braces or more, the last two open the variable: `{{{date}}` is `{` and
        // the date.
        if after.starts_with('{') {
            each(Piece::Text(&rest[..open + 1]));
            rest = &rest[open + 1..];
            continue;
        }
        let Some(len) = after.find("}}") else {
            break;
        };
        // A later `{{` before the `}}` opens the variable: what is before it is text (its
        // escape, if it has one, is read as such on the next turn).
        if let Some(inner) = after[..len].rfind("{{") {
            let mut at = open + 2 + inner;
            if rest[..at].ends_with('\\') {
                at -= 1;
            }
            each(Piece::Text(&rest[..at]));
            rest = &rest[at..];
            continue;
        }
        each(Piece::Text(&rest[..open]));
        each(Piece::Var(after[..len].trim()));
        rest = &after[len + 2..];
    }
    each(Piece::Text(rest));
}

/// The most bytes a rendered process has: past it, the text is cut and says so.
pub const MAX_RENDERED_BYTES: usize = 256 * 1024;

/// What a cut rendering ends with.
pub const CUT: &str = "\n[… cut: the process was longer]";

/// The process with its variables filled in; a name outside [`VARIABLES`] is left as
/// written (a saved process has none: [`check`]). At most [`MAX_RENDERED_BYTES`] (then
/// ending with [`CUT`]), however often a long value is used.
pub fn render(text: &str, vars: &Vars) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_RENDERED_BYTES));
    let mut full = false;
    let mut push = |out: &mut String, piece: &str| {
        if full {
            return;
        }
        let room = MAX_RENDERED_BYTES - out.len();
        if piece.len() <= room {
            out.push_str(piece);
        } else {
            let mut end = room;
            while !piece.is_char_boundary(end) {
                end -= 1;
            }
            out.push_str(&piece[..end]);
            full = true;
        }
    };
    pieces(text, |p| match p {
        Piece::Text(t) => push(&mut out, t),
        Piece::Var(name) => match vars.get(name) {
            Some(v) => push(&mut out, v),
            None => {
                push(&mut out, "{{");
                push(&mut out, name);
                push(&mut out, "}}");
            }
        },
    });
    if full {
        out.push_str(CUT);
    }
    out
}

/// `text` as an error may repeat it: its first 80 characters.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Whether a process may be saved: within [`MAX_CONTENT_BYTES`], and naming only the
/// [`VARIABLES`]; else one sentence saying why.
pub fn check(text: &str) -> Result<(), String> {
    if text.len() > MAX_CONTENT_BYTES {
        return Err(format!(
            "a process is at most {} KiB (this one is {} bytes)",
            MAX_CONTENT_BYTES / 1024,
            text.len()
        ));
    }
    let mut unknown = None;
    pieces(text, |p| {
        if let Piece::Var(name) = p
            && unknown.is_none()
            && !VARIABLES.contains(&name)
        {
            unknown = Some(name.to_owned());
        }
    });
    match unknown {
        None => Ok(()),
        Some(name) => Err(format!(
            "{{{{{}}}}} is not a variable a process may use (it may use {}; write \\{{{{ for a literal {{{{)",
            quoted(&name),
            VARIABLES.map(|v| format!("{{{{{v}}}}}")).join(", ")
        )),
    }
}

/// Whether `name` may name a process: 1 to [`MAX_NAME_CHARS`] of `A-Z a-z 0-9 _ -`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "a process's name is 1 to {MAX_NAME_CHARS} letters, digits, `_` or `-` ({:?} is not)",
            quoted(name)
        ))
    }
}

/// How many leading underscores a startup process's name has: names of one or more
/// underscores, then `onstart_` (`__onstart_`, `_onstart_greet`). `None`: not a startup one.
pub fn startup_rank(name: &str) -> Option<usize> {
    let underscores = name.bytes().take_while(|b| *b == b'_').count();
    (underscores > 0 && name[underscores..].starts_with("onstart_")).then_some(underscores)
}

/// The startup processes among `names`, in the order a session begins with them (reference
/// 000, "Startup Abilities"): most leading underscores first, then by name.
pub fn startup_order<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut found: Vec<(usize, &str)> = names
        .into_iter()
        .filter_map(|n| Some((startup_rank(n)?, n)))
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    found.dedup_by(|a, b| a.1 == b.1);
    found.into_iter().map(|(_, n)| n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vars() -> Vars {
        Vars {
            user_name: "Ada".into(),
            agent_name: "Helper".into(),
            session_name: "Research".into(),
            date: "2026-11-28".into(),
            time: "07:05".into(),
            args: "the figures".into(),
        }
    }

    #[test]
    fn every_variable_is_filled() {
        let text = "Hi {{user.name}}, I am {{ agent.name }} in {{session.name}} on {{date}} at {{time}}: {{args}}. \\{{date}} stays; {{ unclosed";
        assert_eq!(check(text), Ok(()));
        assert_eq!(
            render(text, &vars()),
            "Hi Ada, I am Helper in Research on 2026-11-28 at 07:05: the figures. {{date}} stays; {{ unclosed"
        );
    }

    #[test]
    fn an_unknown_variable_is_refused_by_name() {
        let e = check("Hello {{user.email}} and {{date}}").unwrap_err();
        assert!(e.starts_with("{{user.email}} is not a variable"), "{e}");
        assert!(e.contains("{{session.name}}"), "{e}");
        assert!(check(&"x".repeat(MAX_CONTENT_BYTES + 1)).is_err());
        assert_eq!(check(&"x".repeat(MAX_CONTENT_BYTES)), Ok(()));
    }

    #[test]
    fn a_rendering_is_bounded_and_a_long_input_is_not_repeated() {
        let many = "{{args}}".repeat(8_192);
        let v = Vars {
            args: "é".repeat(1_000),
            ..vars()
        };
        let out = render(&many, &v);
        assert!(out.len() <= MAX_RENDERED_BYTES + CUT.len(), "{}", out.len());
        assert!(out.ends_with(CUT));
        let long = format!("{{{{{}}}}}", "x".repeat(10_000));
        assert!(check(&long).unwrap_err().len() < 600);
        assert!(check_name(&"é".repeat(10_000)).unwrap_err().len() < 600);
        // Many `{{` before one `}}`: one pass, the last opens the variable.
        let nested = format!("{}date}}}}", "{{".repeat(20_000));
        assert!(render(&nested, &vars()).ends_with("2026-11-28"));
        assert_eq!(
            render("a {{ b \\{{date}} {{date}}", &vars()),
            "a {{ b {{date}} 2026-11-28"
        );
    }

    #[test]
    fn names() {
        for good in ["act", "__onstart_", "a-b_C9", &"x".repeat(64)] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in ["", "a b", "é", "a/b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn startup_processes_run_most_underscores_first_then_by_name() {
        let names = [
            "_onstart_b",
            "act",
            "__onstart_",
            "onstart_x",
            "_onstart_a",
            "___onstart_x",
            "_onstartx",
        ];
        assert_eq!(
            startup_order(names),
            ["___onstart_x", "__onstart_", "_onstart_a", "_onstart_b"]
        );
    }

    #[test]
    fn three_braces_are_a_brace_and_a_variable() {
        let v = Vars {
            user_name: "U".into(),
            ..Vars::default()
        };
        assert_eq!(render("{{{user.name}}", &v), "{U");
        assert_eq!(render("{{{{user.name}}}}", &v), "{{U}}");
    }

    proptest! {
        /// Rendering never panics, leaves none of the variables it knows (outside an escape),
        /// and adds nothing but their values.
        #[test]
        fn rendering_fills_every_known_variable(text in "(\\PC|\\{\\{ ?(user\\.name|agent\\.name|session\\.name|date|time|args|nope) ?\\}\\}|\\\\\\{\\{){0,40}") {
            let v = Vars { user_name: "U".into(), agent_name: "A".into(), session_name: "S".into(), date: "D".into(), time: "T".into(), args: "R".into() };
            let out = render(&text, &v);
            if !text.contains("\\{{") {
                for name in VARIABLES {
                    let left = format!("{{{{{name}}}}}");
                    prop_assert!(!out.contains(&left), "{left} left in {out:?}");
                }
            }
            // A text with no braces is itself.
            if !text.contains("{{") {
                prop_assert_eq!(out, text);
            }
        }

        /// Any names sort by the startup rule, whatever order they come in.
        #[test]
        fn the_startup_order_is_one_order(mut names in proptest::collection::vec("_{0,3}(onstart_)?[a-c]{0,2}", 0..12)) {
            let first: Vec<String> = startup_order(names.iter().map(String::as_str)).into_iter().map(str::to_owned).collect();
            names.reverse();
            let again: Vec<String> = startup_order(names.iter().map(String::as_str)).into_iter().map(str::to_owned).collect();
            prop_assert_eq!(&first, &again);
            for w in first.windows(2) {
                let (a, b) = (startup_rank(&w[0]).unwrap(), startup_rank(&w[1]).unwrap());
                prop_assert!(a > b || (a == b && w[0] < w[1]));
            }
        }
    }
}
