//! What the handlers need from a chat request, whichever wire format it came in.

use serde_json::Value;

/// A validated chat request: made only by `anthropic::validate` and `openai::validate`.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub model: String,
    pub stream: bool,
    /// OpenAI's `stream_options.include_usage`; Anthropic always reports usage.
    pub include_usage: bool,
    /// The messages as received (Anthropic's `system` first, as a system message): what
    /// echo answers with.
    pub context: Vec<Value>,
    /// Text of the user message directives are read from: the last one holding a
    /// directive, else the last one.
    pub last_user_text: String,
    /// How many assistant messages follow that message (0: it is the one being answered).
    pub rounds_after: usize,
    /// Characters of prompt text, for the default input-token count.
    pub prompt_chars: usize,
}

/// Where a request's directives are read: the text of the last user message that holds
/// one (with the number of assistant messages after it: the model's replies since, tool
/// calls and follow-ups), else of the last user message.
pub(crate) fn directive_source(messages: &[Value]) -> (String, usize) {
    let is = |m: &Value, role: &str| m.get("role").and_then(Value::as_str) == Some(role);
    for (i, m) in messages.iter().enumerate().rev() {
        if is(m, "user") {
            let text = text_of(m);
            if text.contains("[[mock") {
                let after = messages[i + 1..]
                    .iter()
                    .filter(|m| is(m, "assistant"))
                    .count();
                return (text, after);
            }
        }
    }
    (last_user_text(messages), 0)
}

/// The text of the last message with role `user`: its string content, or its text blocks
/// (Anthropic `{"type":"text"}`, OpenAI `{"type":"text"}` parts) joined by newlines.
pub(crate) fn last_user_text(messages: &[Value]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(text_of)
        .unwrap_or_default()
}

/// Whether `v` is a non-empty string of standard base64 (what image data must be).
pub(crate) fn is_base64(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        !s.is_empty()
            && s.len() % 4 == 0
            && s.trim_end_matches('=')
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    })
}

pub(crate) fn text_of(last: &Value) -> String {
    match last.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Characters of every string in the messages except the structural `role` and `type`
/// fields: close enough to "prompt text" for a made-up token count.
pub(crate) fn prompt_chars(messages: &[Value]) -> usize {
    fn walk(v: &Value) -> usize {
        match v {
            Value::String(s) => s.chars().count(),
            Value::Array(a) => a.iter().map(walk).sum(),
            Value::Object(o) => o
                .iter()
                .filter(|(k, _)| *k != "role" && *k != "type")
                .map(|(_, v)| walk(v))
                .sum(),
            _ => 0,
        }
    }
    messages.iter().map(walk).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn last_user_text_reads_strings_and_text_blocks() {
        let m = [
            json!({"role": "user", "content": "first"}),
            json!({"role": "assistant", "content": "reply"}),
            json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}),
        ];
        assert_eq!(last_user_text(&m), "a\nb");
        assert_eq!(last_user_text(&m[..2]), "first");
        assert_eq!(prompt_chars(&m), 5 + 5 + 2);
    }
}
