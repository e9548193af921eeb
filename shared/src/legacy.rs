//! Legacy assertions (reference 000, "Assertions (Legacy)"): the operation format from before
//! HML, still read for backwards compatibility. An assertion is a JSON object with a string
//! `assertion`, standing alone at the top level of a reply: at the start of a line of prose
//! (outside code and elements) with nothing after it on its line, as the whole of a
//! ```` ```json ```` fence, or as the items of a JSON array standing so.
//!
//! Each maps to what HML says today ([`map`]), one mapping for the page and for `act`:
//! `command` is a call of its `name` (`web_search` is `websearch`, its `message` the query),
//! `question` an `ask`, `response` prose, and `thinking`, `link`, `todo` and `progress` those
//! elements; any other shows as the JSON it is. The stored text is never rewritten: the page
//! draws a message through [`expand`], and `act` finds its calls through [`find`], both
//! numbering a message's assertions alike (`assertion-1`, …: the element id of each, and the
//! origin of its call).

use serde_json::{Map, Value};

use crate::hml::{Document, Node, parse};

/// One legacy assertion of a message, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// 1 for the message's first assertion.
    pub index: usize,
    /// Where it stands in the message (bytes).
    pub at: usize,
    pub mapped: Mapped,
}

/// What an assertion stands for.
#[derive(Clone, Debug, PartialEq)]
pub enum Mapped {
    /// HML markup drawn in its place (its element's id `assertion-<index>`), and the call
    /// it makes, if it is one: (function, arguments, why it cannot run).
    Markup {
        markup: String,
        call: Option<(String, Value, Option<String>)>,
    },
    /// Prose (a `response`, or JSON of a type not known, as a code block).
    Prose(String),
}

/// Whether `text` may hold an assertion at all (a cheap test before parsing).
pub fn may_hold(text: &str) -> bool {
    text.contains("\"assertion\"")
}

/// The assertions of a message, parsed into `doc`, in order.
pub fn find(doc: &Document) -> Vec<Found> {
    let mut found = Vec::new();
    let mut at = 0;
    for node in &doc.nodes {
        match node {
            Node::Element(e) => at = e.span.end as usize,
            Node::Text(text) => {
                for piece in split(text) {
                    if let Piece::Assertions { offset, items } = piece {
                        for item in items {
                            let index = found.len() + 1;
                            found.push(Found {
                                index,
                                at: at + offset,
                                mapped: map(index, &item),
                            });
                        }
                    }
                }
                at += text.len();
            }
        }
    }
    found
}

/// The message's nodes with each assertion drawn as what it maps to.
pub fn expand(doc: Document) -> Vec<Node> {
    let mut out = Vec::with_capacity(doc.nodes.len());
    let mut index = 0;
    for node in doc.nodes {
        let Node::Text(text) = node else {
            out.push(node);
            continue;
        };
        for piece in split(&text) {
            match piece {
                Piece::Prose(p) => out.push(Node::Text(p.to_owned())),
                Piece::Assertions { items, .. } => {
                    for item in items {
                        index += 1;
                        match map(index, &item) {
                            Mapped::Prose(p) => out.push(Node::Text(p)),
                            Mapped::Markup { markup, .. } => out.extend(parse(&markup).nodes),
                        }
                    }
                }
            }
        }
    }
    out
}

/// A piece of prose: as written, or assertions standing alone.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Prose(&'a str),
    /// `offset`: where the first of them stands in the prose.
    Assertions {
        offset: usize,
        items: Vec<Map<String, Value>>,
    },
}

/// Splits prose at the assertions standing alone in it: an object (or an array of them) at
/// a line start with nothing after it on its line, or a whole ```` ```json ```` fence of one;
/// other fences are code and left alone.
fn split(prose: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let (mut from, mut line) = (0, 0);
    let mut fence: Option<(&str, usize)> = None;
    while line < prose.len() {
        let end = prose[line..]
            .find('\n')
            .map_or(prose.len(), |i| line + i + 1);
        let text = &prose[line..end];
        let trimmed = text.trim_start();
        match fence {
            Some((marker, open)) => {
                if trimmed.trim_end() == marker {
                    fence = None;
                    // The whole fence, if it holds assertions and nothing else.
                    let head = &prose[open..];
                    let body_at = open + head.find('\n').map_or(head.len(), |i| i + 1);
                    let info = prose[open..body_at]
                        .trim()
                        .trim_start_matches(marker)
                        .trim();
                    if info.eq_ignore_ascii_case("json")
                        && let Some(items) = assertions_in(prose[body_at..line].trim())
                    {
                        if from < open {
                            pieces.push(Piece::Prose(&prose[from..open]));
                        }
                        pieces.push(Piece::Assertions {
                            offset: open,
                            items,
                        });
                        from = end;
                    }
                }
                line = end;
                continue;
            }
            None if trimmed.starts_with("```") || trimmed.starts_with("~~~") => {
                fence = Some((&trimmed[..3], line));
                line = end;
                continue;
            }
            None => {}
        }
        if text.starts_with(['{', '[']) {
            let mut values =
                serde_json::Deserializer::from_str(&prose[line..]).into_iter::<Value>();
            if let Some(Ok(v)) = values.next() {
                let after = line + values.byte_offset();
                let rest_end = prose[after..]
                    .find('\n')
                    .map_or(prose.len(), |i| after + i + 1);
                if prose[after..rest_end].trim().is_empty()
                    && let Some(items) = assertions_of(v)
                {
                    if from < line {
                        pieces.push(Piece::Prose(&prose[from..line]));
                    }
                    pieces.push(Piece::Assertions {
                        offset: line,
                        items,
                    });
                    from = rest_end;
                    line = rest_end;
                    continue;
                }
            }
        }
        line = end;
    }
    if from < prose.len() {
        pieces.push(Piece::Prose(&prose[from..]));
    }
    pieces
}

fn assertions_in(json: &str) -> Option<Vec<Map<String, Value>>> {
    assertions_of(serde_json::from_str(json).ok()?)
}

/// An assertion object, or a non-empty array of nothing else.
fn assertions_of(v: Value) -> Option<Vec<Map<String, Value>>> {
    let is = |o: &Map<String, Value>| o.get("assertion").is_some_and(Value::is_string);
    match v {
        Value::Object(o) if is(&o) => Some(vec![o]),
        Value::Array(items) if !items.is_empty() => items
            .into_iter()
            .map(|i| match i {
                Value::Object(o) if is(&o) => Some(o),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// What assertion `a`, the message's `index`th, stands for.
pub fn map(index: usize, a: &Map<String, Value>) -> Mapped {
    // The first of `keys` the assertion has, as text (a string as it is, anything else as
    // its JSON).
    let first = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| a.get(*k))
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
    };
    let text = |keys: &[&str]| first(keys).unwrap_or_default();
    let id = format!("assertion-{index}");
    let message = text(&["message", "content", "text"]);
    let markup = |markup: String, call| Mapped::Markup { markup, call };
    match a
        .get("assertion")
        .and_then(Value::as_str)
        .unwrap_or_default()
    {
        "command" => {
            let name = text(&["name", "command", "function"]);
            let function = match name.as_str() {
                "web_search" | "search" => "websearch".to_owned(),
                other => other.to_owned(),
            };
            let given = ["args", "arguments", "payload", "parameters"]
                .iter()
                .find_map(|k| a.get(*k).filter(|v| v.is_object()).cloned());
            let main = match function.as_str() {
                "websearch" => Some("query"),
                "bash" => Some("command"),
                "ask" => Some("question"),
                _ => None,
            };
            let args = match (given, main) {
                (Some(args), _) => args,
                (None, Some(key)) if !message.is_empty() => serde_json::json!({ key: message }),
                _ => Value::Object(Map::new()),
            };
            let problem = function
                .is_empty()
                .then(|| "a command assertion names no function (its `name`)".to_owned());
            let shown = if function == "websearch" && problem.is_none() {
                format!(
                    "<websearch id=\"{id}\">{}</websearch>",
                    escape(
                        args.get("query")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                    )
                )
            } else {
                let call = serde_json::json!({
                    "target_id": "@system",
                    "target_property": function,
                    "payload": args,
                });
                format!("<interaction id=\"{id}\">{call}</interaction>")
            };
            markup(shown, Some((function, args, problem)))
        }
        "question" => {
            let mut args = serde_json::json!({ "question": message });
            let mut attrs = String::new();
            if let Some(options) = a.get("options").and_then(Value::as_array) {
                let options: Vec<String> = options
                    .iter()
                    .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_owned))
                    .collect();
                attrs.push_str(&format!(" options=\"{}\"", escape(&options.join(","))));
                args["options"] = serde_json::json!(options);
            }
            for key in ["timeout", "default"] {
                if let Some(v) = a.get(key) {
                    let shown = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    attrs.push_str(&format!(" {key}=\"{}\"", escape(&shown)));
                    args[key] = v.clone();
                }
            }
            markup(
                format!("<ask id=\"{id}\"{attrs}>{}</ask>", escape(&message)),
                Some(("ask".to_owned(), args, None)),
            )
        }
        "response" => Mapped::Prose(format!("{message}\n\n")),
        "thinking" => markup(
            format!("<thinking id=\"{id}\">{}</thinking>", escape(&message)),
            None,
        ),
        "link" => {
            let href = text(&["url", "href", "link"]);
            let title = text(&["title", "message", "text"]);
            let title = if title.is_empty() {
                href.clone()
            } else {
                title
            };
            markup(
                format!(
                    "<link id=\"{id}\" href=\"{}\">{}</link>",
                    escape(&href),
                    escape(&title)
                ),
                None,
            )
        }
        "todo" => {
            let title = text(&["title", "message"]);
            let items = ["items", "todos", "tasks"]
                .iter()
                .find_map(|k| a.get(*k).and_then(Value::as_array))
                .map(|items| {
                    items
                        .iter()
                        .map(|i| {
                            let (what, status) = match i {
                                Value::Object(o) => (
                                    ["text", "title", "content", "message", "task"]
                                        .iter()
                                        .find_map(|k| o.get(*k).and_then(Value::as_str))
                                        .unwrap_or_default(),
                                    o.get("status").and_then(Value::as_str).unwrap_or("pending"),
                                ),
                                Value::String(s) => (s.as_str(), "pending"),
                                _ => ("", "pending"),
                            };
                            format!(
                                "<item status=\"{}\">{}</item>",
                                escape(status),
                                escape(what)
                            )
                        })
                        .collect::<String>()
                })
                .unwrap_or_default();
            markup(
                format!(
                    "<todo id=\"{id}\" title=\"{}\">{items}</todo>",
                    escape(&title)
                ),
                None,
            )
        }
        "progress" => {
            let mut attrs = String::new();
            for (name, keys) in [
                ("value", &["value", "current"][..]),
                ("max", &["max", "total"][..]),
                ("status", &["status", "message"][..]),
            ] {
                if let Some(v) = first(keys) {
                    attrs.push_str(&format!(" {name}=\"{}\"", escape(&v)));
                }
            }
            markup(format!("<progress id=\"{id}\"{attrs}/>"), None)
        }
        _ => {
            let json = serde_json::to_string_pretty(&Value::Object(a.clone())).unwrap_or_default();
            Mapped::Prose(format!("```json\n{json}\n```\n\n"))
        }
    }
}

/// Text for markup: what would open a tag or an entity is written as an entity.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    fn shown(text: &str) -> String {
        let nodes = expand(parse(text));
        nodes
            .iter()
            .map(|n| match n {
                Node::Text(t) => format!("text {t:?}"),
                Node::Element(e) => format!(
                    "{} {} {:?} {:?}",
                    e.kind.name(),
                    e.id,
                    e.attributes,
                    e.text()
                ),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// All seven types, alone on a line, in a ```json fence and in an array; one quoted
    /// in code, one with words after it, and one inside an element are left as written.
    #[test]
    fn assertions_are_drawn_as_what_they_stand_for() {
        let text = r#"Here:
{"id": "a", "assertion": "command", "name": "web_search", "message": "rust leptos"}
{"assertion": "question", "message": "Go on?", "options": ["yes", "no"], "timeout": 30000, "default": "no"}
{"assertion": "response", "message": "Done **well**."}
```json
[{"assertion": "thinking", "message": "hm <b>"}, {"assertion": "link", "url": "https://x.dev", "title": "X"}]
```
{"assertion": "todo", "title": "Plan", "items": [{"text": "a", "status": "done"}, "b"]}
[{"assertion": "progress", "value": 3, "max": 10, "status": "going"}, {"assertion": "dance", "n": 1}]
`{"assertion": "thinking", "message": "quoted"}`
{"assertion": "thinking", "message": "not alone"} and more
```
{"assertion": "thinking", "message": "code"}
```
<thinking>
{"assertion": "thinking", "message": "inside"}
</thinking>
"#;
        expect![[r#"
            text "Here:\n"
            websearch assertion-1 [("id", "assertion-1")] ""
            ask assertion-2 [("id", "assertion-2"), ("options", "yes,no"), ("timeout", "30000"), ("default", "no")] ""
            text "Done **well**.\n\n"
            thinking assertion-4 [("id", "assertion-4")] "hm &lt;b&gt;"
            link assertion-5 [("id", "assertion-5"), ("href", "https://x.dev")] "X"
            todo assertion-6 [("id", "assertion-6"), ("title", "Plan")] ""
            progress assertion-7 [("id", "assertion-7"), ("value", "3"), ("max", "10"), ("status", "going")] ""
            text "```json\n{\n  \"assertion\": \"dance\",\n  \"n\": 1\n}\n```\n\n"
            text "`{\"assertion\": \"thinking\", \"message\": \"quoted\"}`\n{\"assertion\": \"thinking\", \"message\": \"not alone\"} and more\n```\n{\"assertion\": \"thinking\", \"message\": \"code\"}\n```\n"
            thinking e1 [] "\n{\"assertion\": \"thinking\", \"message\": \"inside\"}\n"
            text "\n""#]].assert_eq(&shown(text));
        let doc = parse(text);
        let calls: Vec<String> = find(&doc)
            .into_iter()
            .filter_map(|f| match f.mapped {
                Mapped::Markup {
                    call: Some((function, args, problem)),
                    ..
                } => Some(format!(
                    "{} {function} {args} {problem:?} at {}",
                    f.index, f.at
                )),
                _ => None,
            })
            .collect();
        expect![[r#"
            [
                "1 websearch {\"query\":\"rust leptos\"} None at 6",
                "2 ask {\"default\":\"no\",\"options\":[\"yes\",\"no\"],\"question\":\"Go on?\",\"timeout\":30000} None at 90",
            ]
        "#]].assert_debug_eq(&calls);
    }

    #[test]
    fn a_command_naming_no_function_says_so_and_bad_json_stays_prose() {
        let doc = parse(
            "{\"assertion\": \"command\", \"message\": \"x\"}\n{\"assertion\": \"todo\", oops}\n",
        );
        let found = find(&doc);
        assert_eq!(found.len(), 1);
        let Mapped::Markup {
            call: Some((_, _, problem)),
            ..
        } = &found[0].mapped
        else {
            panic!("a call");
        };
        assert_eq!(
            problem.as_deref(),
            Some("a command assertion names no function (its `name`)")
        );
        assert!(shown("{\"assertion\": \"todo\", oops}\n").starts_with("text "));
        assert!(find(&parse("no assertion here {\"assertion\": 1}\n[]\n")).is_empty());
    }
}
