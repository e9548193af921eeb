//! The interaction detector: finds what an agent asks the system to do and turns it into
//! validated [`InteractionCall`]s (parse, don't validate: the server never sees raw JSON).
//!
//! Two forms (reference 000):
//! - `<interaction>{"interaction_id": .., "target_id": "@system", "target_property":
//!   "websearch", "payload": {..}}</interaction>`; its body may also be a call, below.
//! - `@target(method, args)` in prose, e.g. `@system(websearch, { query: "hiking boots" })`,
//!   `args` in a relaxed object syntax: unquoted keys, single or double quotes, trailing
//!   commas, bare words as strings. In prose only the targets `system`, `user` and
//!   `agent` count (so "@john(see above)" is prose), and never inside code, nor inside
//!   display elements such as `thinking`: an agent quoting a call runs nothing.
//!
//! Authority comes from the authenticated user, never from model text: every field but
//! `interaction_id`, `target_id`, `target_property` and `payload` is stripped (`sender_id`,
//! `user_id`, `session_id`, `source_id`, `ts`: the system sets those), and so is any
//! `sender_id` nested in the payload.

use nom::{
    IResult, Parser,
    branch::alt,
    bytes::complete::{tag, take_while, take_while1},
    character::complete::{char, multispace0},
    combinator::{opt, recognize},
    number::complete::recognize_float,
    sequence::preceded,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::hml::{ElementKind, Event, StreamParser};

/// The fields an agent may set; anything else is the system's.
pub const AGENT_FIELDS: [&str; 4] = ["interaction_id", "target_id", "target_property", "payload"];
/// Targets recognised in the `@target(...)` form in prose.
pub const PROSE_TARGETS: [&str; 3] = ["system", "user", "agent"];
/// Nesting bound of the relaxed args syntax (a parser of model output must not overflow
/// its stack).
const MAX_DEPTH: usize = 64;

/// A validated interaction, ready for the permission check and the bus.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InteractionCall {
    /// As the agent gave it, else derived from where it was found (`e3`, `call-1`).
    pub interaction_id: String,
    /// `@system`, `@user`, `@agent` or a function id, with its `@`.
    pub target_id: String,
    pub target_property: String,
    pub payload: Value,
    pub source: CallSource,
    /// Fields removed because only the system may set them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stripped: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "form", rename_all = "snake_case")]
pub enum CallSource {
    /// An `<interaction>` element, by its element id.
    Block { element_id: String },
    /// An `@target(...)` call in prose, at this byte offset of the message.
    Call { offset: u64 },
}

/// Why a candidate interaction was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum InteractionError {
    /// The body is neither JSON nor a call.
    Malformed { detail: String },
    /// The body is JSON but not an object.
    NotAnObject,
    /// A required field is missing, empty or not a string.
    MissingField { field: String },
    /// The `<interaction>` element was cut off by the end of the stream (or too large).
    Incomplete,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    pub calls: Vec<InteractionCall>,
    pub rejected: Vec<(CallSource, InteractionError)>,
}

/// Finds every interaction in a complete message.
pub fn detect(text: &str) -> Detection {
    let mut det = Detection::default();
    let mut parser = StreamParser::new();
    let mut prose = String::new();
    let mut prose_at = 0u64;
    let mut pos = 0u64;
    let mut calls = 0usize;
    let mut flush = |prose: &mut String, at: u64, det: &mut Detection| {
        if !prose.is_empty() {
            for (offset, call) in find_calls(prose) {
                calls += 1;
                let source = CallSource::Call {
                    offset: at + offset as u64,
                };
                let id = format!("call-{calls}");
                match call.into_interaction(id, source.clone()) {
                    Ok(c) => det.calls.push(c),
                    Err(e) => det.rejected.push((source, e)),
                }
            }
            prose.clear();
        }
    };
    let mut on_event = |e: Event<'_>| match e {
        Event::Text { text, code: false } => {
            if prose.is_empty() {
                prose_at = pos;
            }
            prose.push_str(text);
            pos += text.len() as u64;
        }
        Event::Text { text, code: true } => {
            flush(&mut prose, prose_at, &mut det);
            pos += text.len() as u64;
        }
        Event::Start { offset, .. } => {
            flush(&mut prose, prose_at, &mut det);
            pos = offset;
        }
        Event::Complete {
            id,
            kind: ElementKind::Interaction,
            content,
            truncated,
            span,
            ..
        } => {
            pos = span.end;
            let source = CallSource::Block {
                element_id: id.to_owned(),
            };
            if truncated {
                det.rejected.push((source, InteractionError::Incomplete));
            } else {
                match parse_block(content, id) {
                    Ok(c) => det.calls.push(c),
                    Err(err) => det.rejected.push((source, err)),
                }
            }
        }
        Event::Complete { span, .. } => pos = span.end,
        Event::Error {
            id,
            kind: ElementKind::Interaction,
            ..
        } => {
            det.rejected.push((
                CallSource::Block {
                    element_id: id.to_owned(),
                },
                InteractionError::Incomplete,
            ));
        }
        _ => {}
    };
    parser.feed_str_with(text, &mut on_event);
    parser.finish_with(&mut on_event);
    flush(&mut prose, prose_at, &mut det);
    det
}

/// Reads the body of a complete `<interaction>` element (JSON or a call).
pub fn parse_block(body: &str, element_id: &str) -> Result<InteractionCall, InteractionError> {
    let source = CallSource::Block {
        element_id: element_id.to_owned(),
    };
    let t = body.trim();
    if t.starts_with('@') {
        return match call(t, true) {
            Ok((rest, c)) if rest.trim().is_empty() => {
                c.into_interaction(element_id.to_owned(), source)
            }
            _ => Err(InteractionError::Malformed {
                detail: "not a call of the form @target(method, args)".into(),
            }),
        };
    }
    let value: Value = serde_json::from_str(t).map_err(|e| InteractionError::Malformed {
        detail: e.to_string(),
    })?;
    from_value(value, element_id.to_owned(), source)
}

/// Validates a JSON interaction object (from a block, or from a client), stripping the
/// fields only the system may set.
pub fn from_value(
    value: Value,
    default_id: String,
    source: CallSource,
) -> Result<InteractionCall, InteractionError> {
    let Value::Object(mut obj) = value else {
        return Err(InteractionError::NotAnObject);
    };
    let mut stripped: Vec<String> = obj
        .keys()
        .filter(|k| !AGENT_FIELDS.contains(&k.as_str()))
        .cloned()
        .collect();
    obj.retain(|k, _| AGENT_FIELDS.contains(&k.as_str()));
    let text = |obj: &Map<String, Value>, field: &str| -> Result<String, InteractionError> {
        match obj.get(field) {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_owned()),
            _ => Err(InteractionError::MissingField {
                field: field.to_owned(),
            }),
        }
    };
    let target_id = text(&obj, "target_id")?;
    let target_property = text(&obj, "target_property")?;
    let interaction_id = match obj.get("interaction_id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        _ => default_id,
    };
    let mut payload = obj.remove("payload").unwrap_or(Value::Null);
    strip_nested(&mut payload, &mut stripped, 0);
    Ok(InteractionCall {
        interaction_id,
        target_id,
        target_property,
        payload,
        source,
        stripped,
    })
}

/// Removes every `sender_id` nested anywhere in `v` (a tool call's input, a payload);
/// answers whether there was one.
pub fn strip_sender_ids(v: &mut Value) -> bool {
    let mut stripped = Vec::new();
    strip_nested(v, &mut stripped, 0);
    !stripped.is_empty()
}

fn strip_nested(v: &mut Value, stripped: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(o) => {
            if o.remove("sender_id").is_some() {
                stripped.push("payload.sender_id".into());
            }
            for x in o.values_mut() {
                strip_nested(x, stripped, depth + 1);
            }
        }
        Value::Array(a) => {
            for x in a {
                strip_nested(x, stripped, depth + 1);
            }
        }
        _ => {}
    }
}

/// An `@target(method, args)` call as written.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub target: String,
    pub method: String,
    pub args: Value,
}

impl Call {
    fn into_interaction(
        self,
        id: String,
        source: CallSource,
    ) -> Result<InteractionCall, InteractionError> {
        let mut obj = Map::new();
        obj.insert(
            "target_id".into(),
            Value::String(format!("@{}", self.target)),
        );
        obj.insert("target_property".into(), Value::String(self.method));
        obj.insert("payload".into(), self.args);
        from_value(Value::Object(obj), id, source)
    }
}

/// Every `@target(...)` call in a piece of prose, with its byte offset.
pub fn find_calls(prose: &str) -> Vec<(usize, Call)> {
    let b = prose.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(k) = memchr::memchr(b'@', &b[i..]) {
        let at = i + k;
        let boundary = at == 0
            || !(b[at - 1].is_ascii_alphanumeric()
                || matches!(b[at - 1], b'_' | b'.' | b'-' | b'@'));
        if boundary && let Ok((rest, c)) = call(&prose[at..], false) {
            out.push((at, c));
            i = prose.len() - rest.len();
            continue;
        }
        i = at + 1;
    }
    out
}

fn ident(i: &str) -> IResult<&str, &str> {
    recognize((
        take_while1(|c: char| c.is_ascii_alphabetic() || c == '_'),
        take_while(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
    ))
    .parse(i)
}

/// `@target(method[, args])`; `any_target` admits targets beyond [`PROSE_TARGETS`].
fn call(i: &str, any_target: bool) -> IResult<&str, Call> {
    let (i, target) = preceded(char('@'), ident).parse(i)?;
    if !any_target && !PROSE_TARGETS.contains(&target) {
        return Err(nom::Err::Error(nom::error::Error::new(
            i,
            nom::error::ErrorKind::Tag,
        )));
    }
    let (i, _) = char('(').parse(i)?;
    let (i, _) = multispace0(i)?;
    let (i, method) = alt((ident, string_lit_str)).parse(i)?;
    let (i, _) = multispace0(i)?;
    let (i, args) = opt(preceded((char(','), multispace0), |i| relaxed_value(i, 0))).parse(i)?;
    let (i, _) = multispace0(i)?;
    let (i, _) = opt(char(',')).parse(i)?;
    let (i, _) = multispace0(i)?;
    let (i, _) = char(')').parse(i)?;
    Ok((
        i,
        Call {
            target: target.to_owned(),
            method: method.to_owned(),
            args: args.unwrap_or(Value::Null),
        },
    ))
}

fn string_lit_str(i: &str) -> IResult<&str, &str> {
    // A method name in quotes: no escapes needed.
    alt((
        nom::sequence::delimited(char('"'), take_while1(|c| c != '"'), char('"')),
        nom::sequence::delimited(char('\''), take_while1(|c| c != '\''), char('\'')),
    ))
    .parse(i)
}

/// A quoted string with JSON-style escapes, either quote.
fn string_lit(i: &str) -> IResult<&str, String> {
    let quote = match i.chars().next() {
        Some(q @ ('"' | '\'')) => q,
        _ => {
            return Err(nom::Err::Error(nom::error::Error::new(
                i,
                nom::error::ErrorKind::Char,
            )));
        }
    };
    let mut out = String::new();
    let mut chars = i[1..].char_indices();
    while let Some((k, c)) = chars.next() {
        if c == quote {
            return Ok((&i[1 + k + 1..], out));
        }
        if c == '\\' {
            match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, 'u')) => {
                    let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                    out.push(
                        u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .unwrap_or('\u{fffd}'),
                    );
                }
                Some((_, other)) => out.push(other),
                None => break,
            }
        } else {
            out.push(c);
        }
    }
    Err(nom::Err::Error(nom::error::Error::new(
        i,
        nom::error::ErrorKind::Char,
    )))
}

fn ws_comma_list<'a>(
    i: &'a str,
    close: char,
    mut item: impl FnMut(&'a str) -> IResult<&'a str, ()>,
) -> IResult<&'a str, ()> {
    let (mut i, _) = multispace0(i)?;
    loop {
        if let Ok((r, _)) = char::<&str, nom::error::Error<&str>>(close).parse(i) {
            return Ok((r, ()));
        }
        let (r, _) = item(i)?;
        let (r, _) = multispace0(r)?;
        if let Ok((r2, _)) = char::<&str, nom::error::Error<&str>>(',').parse(r) {
            let (r2, _) = multispace0(r2)?;
            i = r2;
        } else {
            let (r, _) = char(close).parse(r)?;
            return Ok((r, ()));
        }
    }
}

/// The relaxed object syntax of reference 000's calls: JSON plus unquoted keys, single
/// quotes, trailing commas and bare words.
pub fn relaxed_value(i: &str, depth: usize) -> IResult<&str, Value> {
    if depth > MAX_DEPTH {
        return Err(nom::Err::Failure(nom::error::Error::new(
            i,
            nom::error::ErrorKind::TooLarge,
        )));
    }
    let (i, _) = multispace0(i)?;
    match i.chars().next() {
        Some('{') => {
            let mut obj = Map::new();
            let (r, _) = ws_comma_list(&i[1..], '}', |i| {
                let (i, key) = alt((string_lit, ident.map(str::to_owned))).parse(i)?;
                let (i, _) = (multispace0, char(':')).parse(i)?;
                let (i, v) = relaxed_value(i, depth + 1)?;
                obj.insert(key, v);
                Ok((i, ()))
            })?;
            Ok((r, Value::Object(obj)))
        }
        Some('[') => {
            let mut arr = Vec::new();
            let (r, _) = ws_comma_list(&i[1..], ']', |i| {
                let (i, v) = relaxed_value(i, depth + 1)?;
                arr.push(v);
                Ok((i, ()))
            })?;
            Ok((r, Value::Array(arr)))
        }
        Some('"' | '\'') => string_lit.map(Value::String).parse(i),
        _ => alt((
            tag("true").map(|_| Value::Bool(true)),
            tag("false").map(|_| Value::Bool(false)),
            tag("null").map(|_| Value::Null),
            recognize_float.map_opt(|n: &str| {
                n.parse::<i64>().ok().map(Value::from).or_else(|| {
                    n.parse::<f64>()
                        .ok()
                        .and_then(serde_json::Number::from_f64)
                        .map(Value::Number)
                })
            }),
            take_while1(|c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':'))
                .map(|s: &str| Value::String(s.to_owned())),
        ))
        .parse(i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::{Expect, expect};

    fn check(text: &str, expect: Expect) {
        let d = detect(text);
        let mut out = String::new();
        for c in &d.calls {
            out.push_str(&format!(
                "call {} {} {} {} {:?}{}\n",
                c.interaction_id,
                c.target_id,
                c.target_property,
                c.payload,
                c.source,
                if c.stripped.is_empty() {
                    String::new()
                } else {
                    format!(" stripped={:?}", c.stripped)
                }
            ));
        }
        for (s, e) in &d.rejected {
            out.push_str(&format!("rejected {s:?} {e:?}\n"));
        }
        expect.assert_eq(&out);
    }

    #[test]
    fn json_blocks() {
        check(
            r#"Searching. <interaction>
{"interaction_id": "ws-1", "target_id": "@system", "target_property": "websearch",
 "payload": {"query": "a </interaction> b", "sender_id": 1}, "sender_id": 7, "user_id": 2, "ts": 5}
</interaction> and <interaction>{"target_id": "@system", "target_property": "help"}</interaction>"#,
            expect![[r#"
                call ws-1 @system websearch {"query":"a </interaction> b"} Block { element_id: "e1" } stripped=["sender_id", "ts", "user_id", "payload.sender_id"]
                call e2 @system help null Block { element_id: "e2" }
            "#]],
        );
        check(
            r#"<interaction>{"target_id": "@system"}</interaction><interaction>[1]</interaction><interaction>{oops</interaction><interaction>{"target_id": "@system", "target_property": "x"}"#,
            expect![[r#"
                rejected Block { element_id: "e1" } MissingField { field: "target_property" }
                rejected Block { element_id: "e2" } NotAnObject
                rejected Block { element_id: "e3" } Malformed { detail: "key must be a string at line 1 column 2" }
                rejected Block { element_id: "e4" } Incomplete
            "#]],
        );
    }

    #[test]
    fn call_form() {
        check(
            r#"@system(websearch, { query: "hiking boots" }) then @user(notify, {message: 'Done!', n: 3, tags: [a, "b",], deep: {x: -1.5e2}},) and @agent(queue)"#,
            expect![[r#"
                call call-1 @system websearch {"query":"hiking boots"} Call { offset: 0 }
                call call-2 @user notify {"deep":{"x":-150.0},"message":"Done!","n":3,"tags":["a","b"]} Call { offset: 51 }
                call call-3 @agent queue null Call { offset: 132 }
            "#]],
        );
        check(
            "mail me@system(x) or @john(see above), `@system(websearch, {q: 1})`,\n```\n@system(help)\n```\n<thinking>@system(help)</thinking><interaction>@system(websearch, {query: \"x\"})</interaction> @system(broken",
            expect![[r#"
                call e2 @system websearch {"query":"x"} Block { element_id: "e2" }
            "#]],
        );
    }

    #[test]
    fn relaxed_syntax_is_bounded() {
        let deep = format!("@system(x, {}{})", "[".repeat(200), "]".repeat(200));
        assert!(find_calls(&deep).is_empty());
        assert_eq!(
            relaxed_value("{a:1,}", 0).map(|(r, v)| (r, v.to_string())),
            Ok(("", r#"{"a":1}"#.to_owned()))
        );
    }
}
