//! The grammar of one complete tag's attributes, in nom.
//!
//! The stream scanner finds where a tag ends (the first `>` outside a quoted value) and
//! hands the text between the name and that `>` here, whole. This grammar is total: any
//! byte it cannot place in an attribute is skipped, so a tag the scanner accepted always
//! yields attributes (STYLE.md rule 8, parsers of model output never fail).

use nom::{
    IResult, Parser,
    branch::alt,
    bytes::complete::{take_till, take_till1, take_while},
    character::complete::char,
    combinator::opt,
    sequence::{delimited, preceded},
};

/// Attributes in source order, names lower-cased, values entity-decoded. A bare
/// (boolean) attribute has the empty string as value, as in the DOM.
pub type Attributes = Vec<(String, String)>;

fn is_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c')
}

fn ws(i: &str) -> IResult<&str, &str> {
    take_while(is_ws).parse(i)
}

fn attr_name(i: &str) -> IResult<&str, &str> {
    take_till1(|c| is_ws(c) || matches!(c, '=' | '"' | '\'' | '/' | '<' | '>')).parse(i)
}

fn attr_value(i: &str) -> IResult<&str, &str> {
    alt((
        delimited(char('"'), take_till(|c| c == '"'), opt(char('"'))),
        delimited(char('\''), take_till(|c| c == '\''), opt(char('\''))),
        take_till1(is_ws),
    ))
    .parse(i)
}

fn attribute(i: &str) -> IResult<&str, (&str, Option<&str>)> {
    (attr_name, opt(preceded((ws, char('='), ws), attr_value))).parse(i)
}

/// Parses the text between a start tag's name and its closing `>`; returns the
/// attributes and whether the tag closed itself. As in HTML, an unquoted value runs to the
/// next whitespace and keeps a trailing `/` (`<link href=https://x.com/>` links to
/// `https://x.com/`, `<bash cwd=/>ls</bash>` runs in `/`): only a `/` that stands after the
/// name, whitespace, a bare attribute or a quoted value closes the tag
/// (`<progress value="1" max="2"/>`, `<progress value=1 max=2 />`).
pub fn parse_attributes(inner: &str) -> (Attributes, bool) {
    let body = inner.trim_end_matches(is_ws);
    let mut attrs: Attributes = Vec::new();
    let mut self_closing = false;
    let mut rest = body;
    loop {
        rest = rest.trim_start_matches(is_ws);
        if rest.is_empty() {
            break;
        }
        match attribute(rest) {
            Ok((next, (name, value))) => {
                let name = name.to_ascii_lowercase();
                // The first of duplicated attributes wins, as in HTML.
                if !attrs.iter().any(|(n, _)| *n == name) {
                    attrs.push((name, value.map(decode_entities).unwrap_or_default()));
                }
                rest = next;
            }
            Err(_) => {
                // A byte that cannot start an attribute (a stray quote, `=`, `/`): skip it.
                // A `/` that is the tag's last byte closes it.
                let mut chars = rest.chars();
                self_closing = chars.next() == Some('/') && chars.as_str().is_empty();
                rest = chars.as_str();
            }
        }
    }
    (attrs, self_closing)
}

/// Decodes the usual character references: the five XML ones, `&nbsp;`, and numeric
/// ones (decimal and hex). Unknown or malformed references stay as written.
pub fn decode_entities(s: &str) -> String {
    let Some(first) = memchr::memchr(b'&', s.as_bytes()) else {
        return s.to_owned();
    };
    let mut out = String::with_capacity(s.len());
    out.push_str(&s[..first]);
    let mut rest = &s[first..];
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        match decode_one(rest) {
            Some((c, used)) => {
                out.push(c);
                rest = &rest[used..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `s` starts with `&`; returns the decoded char and the bytes the reference used.
fn decode_one(s: &str) -> Option<(char, usize)> {
    let semi = s.as_bytes().iter().take(12).position(|&b| b == b';')?;
    let name = &s[1..semi];
    let c = match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => '\u{a0}',
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse::<u32>().ok()?,
            };
            char::from_u32(code)
                .filter(|&c| c != '\0')
                .unwrap_or('\u{fffd}')
        }
    };
    Some((c, semi + 1))
}

/// Writes `value` so that [`decode_entities`] gives it back inside a double-quoted
/// attribute or element text.
pub fn escape_text(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
}

/// Prints a start tag (without the `>`), the inverse of [`parse_attributes`].
pub fn write_start_tag(name: &str, attrs: &[(String, String)], out: &mut String) {
    out.push('<');
    out.push_str(name);
    for (n, v) in attrs {
        out.push(' ');
        out.push_str(n);
        if !v.is_empty() {
            out.push_str("=\"");
            escape_text(v, out);
            out.push('"');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::{Expect, expect};

    fn check(inner: &str, expect: Expect) {
        let (attrs, sc) = parse_attributes(inner);
        expect.assert_eq(&format!("{attrs:?} self_closing={sc}"));
    }

    #[test]
    fn attribute_forms() {
        check(
            r#" cwd="/tmp" timeout=5"#,
            expect![[r#"[("cwd", "/tmp"), ("timeout", "5")] self_closing=false"#]],
        );
        check(
            " status='done'",
            expect![[r#"[("status", "done")] self_closing=false"#]],
        );
        check(
            " id=fav answered",
            expect![[r#"[("id", "fav"), ("answered", "")] self_closing=false"#]],
        );
        check(
            " value=1 max=2/",
            expect![[r#"[("value", "1"), ("max", "2/")] self_closing=false"#]],
        );
        check(
            " value=1 max=2 /",
            expect![[r#"[("value", "1"), ("max", "2")] self_closing=true"#]],
        );
        check(
            " href=https://x.com/",
            expect![[r#"[("href", "https://x.com/")] self_closing=false"#]],
        );
        check(" cwd=/", expect![[r#"[("cwd", "/")] self_closing=false"#]]);
        check(
            " answered/",
            expect![[r#"[("answered", "")] self_closing=true"#]],
        );
        check("/", expect![["[] self_closing=true"]]);
        check(" a='b'/", expect![[r#"[("a", "b")] self_closing=true"#]]);
        check(" / a", expect![[r#"[("a", "")] self_closing=false"#]]);
        check(
            r#" value="1" max="2" / "#,
            expect![[r#"[("value", "1"), ("max", "2")] self_closing=true"#]],
        );
        check(
            r#" NOTE="exit code > 0" Note=x"#,
            expect![[r#"[("note", "exit code > 0")] self_closing=false"#]],
        );
        check(
            r#" href="a?b=1&amp;c=&#60;&#x3E;&bogus;&""#,
            expect![[r#"[("href", "a?b=1&c=<>&bogus;&")] self_closing=false"#]],
        );
        check(
            r#" title="it's \"quoted\"""#,
            expect![[r#"[("title", "it's \\"), ("quoted\\", "")] self_closing=false"#]],
        );
        check(
            r#" = "x" ='y' a = "b""#,
            expect![[r#"[("x", ""), ("y", ""), ("a", "b")] self_closing=false"#]],
        );
        check(
            r#" a="unterminated"#,
            expect![[r#"[("a", "unterminated")] self_closing=false"#]],
        );
        check("", expect![["[] self_closing=false"]]);
    }

    #[test]
    fn entities() {
        assert_eq!(
            decode_entities("&lt;b&gt; &quot;x&apos; &nbsp;&#0;&#1114112;"),
            "<b> \"x' \u{a0}\u{fffd}\u{fffd}"
        );
        let mut s = String::new();
        escape_text("a<b & \"c\">", &mut s);
        assert_eq!(decode_entities(&s), "a<b & \"c\">");
    }
}
