//! `hml-prompt`, read into what the inline question widget needs (reference 003: input
//! types, options as JSON in a `data` child, `answered` with a `response` child).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Element, ElementKind, PromptType, decode_entities};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptOption {
    pub label: String,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    pub id: String,
    pub input: PromptType,
    /// The question, newlines collapsed: a prompt renders inline.
    pub question: String,
    /// For `select`, `radio`, `checkboxes`: from the `data` JSON (strings, numbers, or
    /// `{label, value}` objects; an object of `value: label` pairs works too).
    pub options: Vec<PromptOption>,
    pub answered: bool,
    /// The answer was recorded by the agent from what the user said in chat
    /// (`answered-by="agent"`, which only compiling the log writes), not given here: the
    /// page says so, and the user may still answer.
    pub by_agent: bool,
    /// The answer in the `response` child, entities decoded.
    pub response: Option<String>,
    /// `min`, `max`, `step`, `placeholder`, `default` and the like, as written.
    pub attributes: Vec<(String, String)>,
}

impl Prompt {
    /// `None` unless `e` is an `hml-prompt`.
    pub fn from_element(e: &Element) -> Option<Prompt> {
        if e.kind != ElementKind::HmlPrompt {
            return None;
        }
        let question = e.text().split_whitespace().collect::<Vec<_>>().join(" ");
        let options = e
            .child(ElementKind::Data)
            .map(|d| parse_options(&d.content))
            .unwrap_or_default();
        let response = e
            .child(ElementKind::Response)
            .map(|r| decode_entities(r.content.trim()));
        // A prompt cut short was never answered, whatever it says.
        let answered = !e.truncated && (e.has_attr("answered") || response.is_some());
        Some(Prompt {
            by_agent: answered && e.attr("answered-by") == Some("agent"),
            id: e.id.clone(),
            input: PromptType::from_attr(e.attr("type")),
            question,
            options,
            answered,
            response,
            attributes: e.attributes.clone(),
        })
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Options from the `data` JSON; what cannot be read is left out, never an error.
pub fn parse_options(json: &str) -> Vec<PromptOption> {
    let Ok(v) = serde_json::from_str::<Value>(json.trim()) else {
        return Vec::new();
    };
    match v {
        Value::Array(items) => items
            .iter()
            .filter_map(|i| match i {
                Value::Object(o) => {
                    let label = o.get("label").and_then(scalar);
                    let value = o.get("value").and_then(scalar);
                    match (label, value) {
                        (Some(l), Some(v)) => Some(PromptOption { label: l, value: v }),
                        (Some(x), None) | (None, Some(x)) => Some(PromptOption {
                            label: x.clone(),
                            value: x,
                        }),
                        (None, None) => None,
                    }
                }
                other => scalar(other).map(|s| PromptOption {
                    label: s.clone(),
                    value: s,
                }),
            })
            .collect(),
        Value::Object(o) => o
            .iter()
            .filter_map(|(k, v)| {
                scalar(v).map(|l| PromptOption {
                    label: l,
                    value: k.clone(),
                })
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hml::parse;
    use expect_test::expect;

    #[test]
    fn prompts_read_for_the_widget() {
        let doc = parse(
            "<hml-prompt id=c type=select>Favourite\n  colour?<data>[\"red\", {\"label\": \"Deep blue\", \"value\": \"blue\"}, 3, {\"x\": 1}]</data></hml-prompt>\
             <hml-prompt id=n type=range min=0 max=10 answered>How much?<response>7 &amp; more</response></hml-prompt>\
             <hml-prompt id=o type=radio><data>{\"y\": \"Yes\", \"n\": \"No\"}</data>Sure?</hml-prompt><hml-prompt id=bad type=select><data>[oops</data>Q</hml-prompt>",
        );
        let prompts: Vec<Prompt> = doc.elements().filter_map(Prompt::from_element).collect();
        let got: Vec<String> = prompts
            .iter()
            .map(|p| {
                let opts: Vec<String> = p
                    .options
                    .iter()
                    .map(|o| format!("{}={}", o.value, o.label))
                    .collect();
                format!(
                    "{} {} {:?} [{}] answered={} {:?}",
                    p.id,
                    p.input.name(),
                    p.question,
                    opts.join(", "),
                    p.answered,
                    p.response
                )
            })
            .collect();
        expect![[r#"
            [
                "c select \"Favourite colour?\" [red=red, blue=Deep blue, 3=3] answered=false None",
                "n range \"How much?\" [] answered=true Some(\"7 & more\")",
                "o radio \"Sure?\" [n=No, y=Yes] answered=false None",
                "bad select \"Q\" [] answered=false None",
            ]
        "#]]
        .assert_debug_eq(&got);
    }
}
