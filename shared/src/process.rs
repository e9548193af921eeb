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

/// Reads `text` into text and variables, each `\{{` as a literal `{{` and a `{{` with no
/// `}}` after it as text.
fn pieces(text: &str, mut each: impl FnMut(Piece<'_>)) {
    let mut rest = text;
    while let Some(at) = rest.find("{{") {
        if rest[..at].ends_with('\\') {
            each(Piece::Text(&rest[..at - 1]));
            each(Piece::Text("{{"));
            rest = &rest[at + 2..];
            continue;
        }
        let Some(len) = rest[at + 2..].find("}}") else {
            break;
        };
        // `{{` with another `{{` before its `}}`: the first is text.
        if rest[at + 2..at + 2 + len].contains("{{") {
            each(Piece::Text(&rest[..at + 2]));
            rest = &rest[at + 2..];
            continue;
        }
        each(Piece::Text(&rest[..at]));
        each(Piece::Var(rest[at + 2..at + 2 + len].trim()));
        rest = &rest[at + 2 + len + 2..];
    }
    each(Piece::Text(rest));
}

/// The process with its variables filled in; a name outside [`VARIABLES`] is left as
/// written (a saved process has none: [`check`]).
pub fn render(text: &str, vars: &Vars) -> String {
    let mut out = String::with_capacity(text.len());
    pieces(text, |p| match p {
        Piece::Text(t) => out.push_str(t),
        Piece::Var(name) => match vars.get(name) {
            Some(v) => out.push_str(v),
            None => {
                out.push_str("{{");
                out.push_str(name);
                out.push_str("}}");
            }
        },
    });
    out
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
            "{{{{{name}}}}} is not a variable a process may use (it may use {}; write \\{{{{ for a literal {{{{)",
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
            "a process's name is 1 to {MAX_NAME_CHARS} letters, digits, `_` or `-` ({name:?} is not)"
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
