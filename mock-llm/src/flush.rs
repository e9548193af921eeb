//! Hero's memory flush (its reference 002 §16) answered as an agent would: the request whose
//! last prompt says "Store durable memories now." is answered with a `memory_write` of a
//! line about the conversation, appended to the file the prompt names, then, once the
//! result is back, a short text without a call. A `[[mock flush=…]]` in an earlier user
//! message plays it otherwise: `loop` calls `memory_search` every time (a model that never
//! stops), `slow` answers a byte at a time, slower than any flush waits, `quiet` saves
//! nothing.

use serde_json::{Value, json};

use crate::request::text_of;
use crate::script::{Answer, ToolCall};

/// The words that make a request a flush.
pub(crate) const MARK: &str = "Store durable memories now.";

/// How a flush is played.
pub(crate) const PLAYS: [&str; 4] = ["write", "loop", "slow", "quiet"];

fn is(m: &Value, role: &str) -> bool {
    m.get("role").and_then(Value::as_str) == Some(role)
}

/// The answer to `context` if it is a flush, played as `play` says (`write` by default).
pub(crate) fn answer(context: &[Value], play: Option<&str>) -> Option<Answer> {
    let at = context
        .iter()
        .rposition(|m| is(m, "user") && text_of(m).contains(MARK))?;
    let prompt = text_of(&context[at]);
    let rounds = context[at + 1..]
        .iter()
        .filter(|m| is(m, "assistant"))
        .count();
    Some(match play.unwrap_or("write") {
        "loop" => Answer {
            text: "Looking again.".into(),
            tool_calls: vec![ToolCall {
                name: "memory_search".into(),
                input: json!({"query": "what matters"}),
            }],
            ..Answer::default()
        },
        "slow" => Answer {
            text: "Thinking about what to keep. ".repeat(20),
            chunk_bytes: Some(1),
            delay_ms: Some(200),
            ..Answer::default()
        },
        "quiet" => Answer::text("Nothing here is worth keeping."),
        _ if rounds > 0 => Answer::text("Saved what should last."),
        _ => Answer {
            text: "Saving what should last.".into(),
            tool_calls: vec![ToolCall {
                name: "memory_write".into(),
                input: json!({
                    "path": path_in(&prompt).unwrap_or_else(|| "memory/notes.md".into()),
                    "content": format!("- {}", gist(context)),
                    "append": true,
                }),
            }],
            ..Answer::default()
        },
    })
}

/// The file the prompt says the day's notes go to (`memory/YYYY-MM-DD.md`).
fn path_in(prompt: &str) -> Option<String> {
    let start = prompt.find("memory/")?;
    let rest = &prompt[start..];
    let end = rest.find(".md")? + 3;
    Some(rest[..end].to_owned())
}

/// A line about the conversation: its first user message, without directives, cut short.
fn gist(context: &[Value]) -> String {
    // A user message may hold several texts (paragraphs where Hero joined its own notes,
    // `[System] …`, to the user's words): the first with a directive is a test's words,
    // else the first that is not Hero's.
    let paragraphs: Vec<String> = context
        .iter()
        .filter(|m| is(m, "user"))
        .flat_map(|m| {
            let text = text_of(m);
            text.split("\n\n").map(str::to_owned).collect::<Vec<_>>()
        })
        .collect();
    let first = paragraphs
        .iter()
        .find(|t| t.contains("[[mock"))
        .or_else(|| {
            paragraphs
                .iter()
                .find(|t| !t.trim().is_empty() && !t.starts_with("[System]"))
        })
        .cloned()
        .unwrap_or_default();
    let mut plain = String::new();
    let mut rest = first.as_str();
    while let Some(open) = rest.find("[[mock") {
        plain.push_str(&rest[..open]);
        rest = rest[open..]
            .find("]]")
            .map_or("", |close| &rest[open + close + 2..]);
    }
    plain.push_str(rest);
    let line: String = plain.split_whitespace().collect::<Vec<_>>().join(" ");
    let line: String = line.chars().take(200).collect();
    if line.is_empty() {
        "The conversation went on.".into()
    } else {
        format!("Talked about: {line}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flush_context(after: &[Value]) -> Vec<Value> {
        let mut c = vec![
            json!({"role": "user", "content": "Plan the garden [[mock text=ok]] for spring"}),
            json!({"role": "assistant", "content": "ok"}),
            json!({"role": "user", "content": "[System] Store durable memories now. Today's notes appended to memory/2026-11-24.md (\"append\": true)."}),
        ];
        c.extend_from_slice(after);
        c
    }

    #[test]
    fn a_flush_writes_the_day_then_stops() {
        let first = answer(&flush_context(&[]), None).unwrap();
        assert_eq!(first.tool_calls[0].name, "memory_write");
        assert_eq!(
            first.tool_calls[0].input,
            json!({"path": "memory/2026-11-24.md", "content": "- Talked about: Plan the garden for spring", "append": true})
        );
        let then = answer(
            &flush_context(&[json!({"role": "assistant", "content": "x"})]),
            None,
        )
        .unwrap();
        assert!(then.tool_calls.is_empty());
        assert!(answer(&flush_context(&[])[..2], None).is_none());
        assert_eq!(
            answer(&flush_context(&[]), Some("loop"))
                .unwrap()
                .tool_calls[0]
                .name,
            "memory_search"
        );
    }
}
