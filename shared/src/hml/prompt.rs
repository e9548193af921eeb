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

impl Prompt {
    /// The attribute `name` as written, if it is there.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    }

    /// Whether `answer` is one this prompt's widget could give, within the bounds its
    /// attributes set (reference 000 "Answer Flow"). `Err` names the prompt and the rule
    /// the answer breaks, in words for the person who gave it: "fav-number must be at most
    /// 10". Text: a string, not blank, within `maxlength` characters; number and range: within
    /// `min` and `max`, on the `step` grid counted from `min` (range: 0, 100 and 1 unless
    /// given; a number has no grid unless given one, and `step="any"` none); color:
    /// `#rrggbb`; checkbox: true or false; radio and select: one option's value; checkboxes:
    /// distinct option values, none at all included.
    pub fn check(&self, answer: &Value) -> Result<(), String> {
        let rule = |r: String| Err(format!("{} {r}", self.id));
        match self.input {
            PromptType::Text => {
                let Some(text) = answer.as_str() else {
                    return rule("must be text".into());
                };
                if text.trim().is_empty() {
                    return rule("needs an answer".into());
                }
                if let Some((max, written)) = self.bound("maxlength")
                    && text.chars().count() as f64 > max
                {
                    return rule(format!("must be at most {written} characters"));
                }
                Ok(())
            }
            PromptType::Number | PromptType::Range => {
                let Some(v) = answer.as_f64() else {
                    return rule("must be a number".into());
                };
                let range = self.input == PromptType::Range;
                let min = self.bound("min").or(range.then_some((0.0, "0")));
                let max = self.bound("max").or(range.then_some((100.0, "100")));
                if let Some((min, written)) = min
                    && v < min
                {
                    return rule(format!("must be at least {written}"));
                }
                if let Some((max, written)) = max
                    && v > max
                {
                    return rule(format!("must be at most {written}"));
                }
                let step = match self.attr("step") {
                    Some(s) if s.eq_ignore_ascii_case("any") => None,
                    Some(_) => self.bound("step").filter(|(s, _)| *s > 0.0),
                    None => range.then_some((1.0, "1")),
                };
                if let Some((step, written)) = step {
                    let (base, from) = min.unwrap_or((0.0, "0"));
                    let k = (v - base) / step;
                    if (k - k.round()).abs() > 1e-9 * k.abs().max(1.0) {
                        return rule(match (base == 0.0, step == 1.0) {
                            (true, true) => "must be a whole number".into(),
                            (true, false) => format!("must be a multiple of {written}"),
                            (false, _) => format!("must be {from} plus a multiple of {written}"),
                        });
                    }
                }
                Ok(())
            }
            PromptType::Color => {
                let ok = answer.as_str().is_some_and(|c| {
                    c.len() == 7
                        && c.starts_with('#')
                        && c[1..].bytes().all(|b| b.is_ascii_hexdigit())
                });
                if ok {
                    Ok(())
                } else {
                    rule("must be a colour written #rrggbb".into())
                }
            }
            PromptType::Checkbox => match answer {
                Value::Bool(_) => Ok(()),
                _ => rule("must be true or false".into()),
            },
            PromptType::Radio | PromptType::Select => {
                match answer.as_str().filter(|a| self.has_option(a)) {
                    Some(_) => Ok(()),
                    None => rule(format!("must be one of {}", self.option_list())),
                }
            }
            PromptType::Checkboxes => {
                let Some(chosen) = answer.as_array() else {
                    return rule(format!("must be a list of {}", self.option_list()));
                };
                let mut seen = std::collections::HashSet::new();
                for c in chosen {
                    let Some(c) = c.as_str().filter(|c| self.has_option(c)) else {
                        return rule(format!("may only choose among {}", self.option_list()));
                    };
                    if !seen.insert(c) {
                        return rule(format!("chooses {c} twice"));
                    }
                }
                Ok(())
            }
        }
    }

    /// A numeric attribute, with its text as written; one that is no finite number is as
    /// if it were not there (the widget ignores it too).
    fn bound(&self, name: &str) -> Option<(f64, &str)> {
        let written = self.attr(name)?;
        written
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(|v| (v, written))
    }

    fn has_option(&self, value: &str) -> bool {
        self.options.iter().any(|o| o.value == value)
    }

    /// The options' values as a sentence lists them.
    fn option_list(&self) -> String {
        if self.options.is_empty() {
            return "its options (it has none)".into();
        }
        let values: Vec<&str> = self.options.iter().map(|o| o.value.as_str()).collect();
        values.join(", ")
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
    use serde_json::json;

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

    fn prompt(markup: &str) -> Prompt {
        let doc = parse(markup);
        let p = doc.elements().find_map(Prompt::from_element);
        p.expect("a prompt")
    }

    /// Each widget's answers, in bounds and out: the rule broken is named with the prompt.
    #[test]
    fn answers_are_checked_against_their_prompt() {
        let cases = [
            (r#"<hml-prompt id=name>Name?</hml-prompt>"#, json!("Ada")),
            (r#"<hml-prompt id=name>Name?</hml-prompt>"#, json!("  ")),
            (r#"<hml-prompt id=name>Name?</hml-prompt>"#, json!(7)),
            (
                r#"<hml-prompt id=name maxlength=3>Name?</hml-prompt>"#,
                json!("Adé"),
            ),
            (
                r#"<hml-prompt id=name maxlength=3>Name?</hml-prompt>"#,
                json!("Adam"),
            ),
            (
                r#"<hml-prompt id=fav-number type=number min=1 max=10>N?</hml-prompt>"#,
                json!(10),
            ),
            (
                r#"<hml-prompt id=fav-number type=number min=1 max=10>N?</hml-prompt>"#,
                json!(11),
            ),
            (
                r#"<hml-prompt id=fav-number type=number min=1 max=10>N?</hml-prompt>"#,
                json!(0.5),
            ),
            (
                r#"<hml-prompt id=fav-number type=number min=1 max=10>N?</hml-prompt>"#,
                json!(2.5),
            ),
            (
                r#"<hml-prompt id=fav-number type=number min=1 max=10>N?</hml-prompt>"#,
                json!("7"),
            ),
            (
                r#"<hml-prompt id=n type=number min=1 step=3>N?</hml-prompt>"#,
                json!(7),
            ),
            (
                r#"<hml-prompt id=n type=number min=1 step=3>N?</hml-prompt>"#,
                json!(6),
            ),
            (
                r#"<hml-prompt id=n type=number step=0.1>N?</hml-prompt>"#,
                json!(0.3),
            ),
            (
                r#"<hml-prompt id=n type=number step=any>N?</hml-prompt>"#,
                json!(0.123),
            ),
            (
                r#"<hml-prompt id=n type=number max=lots>N?</hml-prompt>"#,
                json!(1e9),
            ),
            (
                r#"<hml-prompt id=r type=range>How much?</hml-prompt>"#,
                json!(100),
            ),
            (
                r#"<hml-prompt id=r type=range>How much?</hml-prompt>"#,
                json!(101),
            ),
            (
                r#"<hml-prompt id=r type=range>How much?</hml-prompt>"#,
                json!(2.5),
            ),
            (
                r#"<hml-prompt id=r type=range>How much?</hml-prompt>"#,
                json!(-1),
            ),
            (
                r#"<hml-prompt id=c type=color>Colour?</hml-prompt>"#,
                json!("#1A2b3c"),
            ),
            (
                r#"<hml-prompt id=c type=color>Colour?</hml-prompt>"#,
                json!("blue"),
            ),
            (
                r#"<hml-prompt id=b type=checkbox>Sure?</hml-prompt>"#,
                json!(false),
            ),
            (
                r#"<hml-prompt id=b type=checkbox>Sure?</hml-prompt>"#,
                json!("yes"),
            ),
            (
                r#"<hml-prompt id=s type=select><data>["red","blue"]</data>Q</hml-prompt>"#,
                json!("blue"),
            ),
            (
                r#"<hml-prompt id=s type=select><data>["red","blue"]</data>Q</hml-prompt>"#,
                json!("green"),
            ),
            (
                r#"<hml-prompt id=s type=radio><data>{"y":"Yes"}</data>Q</hml-prompt>"#,
                json!("Yes"),
            ),
            (
                r#"<hml-prompt id=s type=radio><data>[oops</data>Q</hml-prompt>"#,
                json!("x"),
            ),
            (
                r#"<hml-prompt id=m type=checkboxes><data>["a","b"]</data>Q</hml-prompt>"#,
                json!([]),
            ),
            (
                r#"<hml-prompt id=m type=checkboxes><data>["a","b"]</data>Q</hml-prompt>"#,
                json!(["b", "a"]),
            ),
            (
                r#"<hml-prompt id=m type=checkboxes><data>["a","b"]</data>Q</hml-prompt>"#,
                json!(["a", "a"]),
            ),
            (
                r#"<hml-prompt id=m type=checkboxes><data>["a","b"]</data>Q</hml-prompt>"#,
                json!(["c"]),
            ),
            (
                r#"<hml-prompt id=m type=checkboxes><data>["a","b"]</data>Q</hml-prompt>"#,
                json!("a"),
            ),
        ];
        let got: Vec<String> = cases
            .iter()
            .map(|(markup, answer)| match prompt(markup).check(answer) {
                Ok(()) => format!("{answer}: ok"),
                Err(e) => format!("{answer}: {e}"),
            })
            .collect();
        expect![[r##"
            [
                "\"Ada\": ok",
                "\"  \": name needs an answer",
                "7: name must be text",
                "\"Adé\": ok",
                "\"Adam\": name must be at most 3 characters",
                "10: ok",
                "11: fav-number must be at most 10",
                "0.5: fav-number must be at least 1",
                "2.5: ok",
                "\"7\": fav-number must be a number",
                "7: ok",
                "6: n must be 1 plus a multiple of 3",
                "0.3: ok",
                "0.123: ok",
                "1000000000.0: ok",
                "100: ok",
                "101: r must be at most 100",
                "2.5: r must be a whole number",
                "-1: r must be at least 0",
                "\"#1A2b3c\": ok",
                "\"blue\": c must be a colour written #rrggbb",
                "false: ok",
                "\"yes\": b must be true or false",
                "\"blue\": ok",
                "\"green\": s must be one of red, blue",
                "\"Yes\": s must be one of y",
                "\"x\": s must be one of its options (it has none)",
                "[]: ok",
                "[\"b\",\"a\"]: ok",
                "[\"a\",\"a\"]: m chooses a twice",
                "[\"c\"]: m may only choose among a, b",
                "\"a\": m must be a list of a, b",
            ]
        "##]]
        .assert_debug_eq(&got);
    }

    /// What a simple reading of the rules says, in whole numbers (the property test's
    /// attributes are integers, its numbers halves): the checker must agree with it.
    fn reference(p: &Prompt, answer: &Value) -> bool {
        let int = |name: &str| p.attr(name).and_then(|v| v.parse::<i64>().ok());
        let values: Vec<&str> = p.options.iter().map(|o| o.value.as_str()).collect();
        match p.input {
            PromptType::Text => match answer {
                Value::String(s) => {
                    !s.trim().is_empty()
                        && int("maxlength").is_none_or(|m| s.chars().count() as i64 <= m)
                }
                _ => false,
            },
            PromptType::Number | PromptType::Range => {
                let Some(v) = answer.as_f64() else {
                    return false;
                };
                // In halves: every number the test makes is a multiple of 0.5.
                let twice = (v * 2.0) as i64;
                let range = p.input == PromptType::Range;
                let min = int("min").or(range.then_some(0));
                let max = int("max").or(range.then_some(100));
                let step = int("step")
                    .filter(|s| *s > 0)
                    .or(range.then_some(1).filter(|_| p.attr("step").is_none()));
                min.is_none_or(|m| twice >= 2 * m)
                    && max.is_none_or(|m| twice <= 2 * m)
                    && step.is_none_or(|s| (twice - 2 * min.unwrap_or(0)) % (2 * s) == 0)
            }
            PromptType::Color => answer.as_str().is_some_and(|c| {
                c.strip_prefix('#')
                    .is_some_and(|hex| hex.len() == 6 && hex.chars().all(|h| h.is_ascii_hexdigit()))
            }),
            PromptType::Checkbox => answer.is_boolean(),
            PromptType::Radio | PromptType::Select => {
                answer.as_str().is_some_and(|a| values.contains(&a))
            }
            PromptType::Checkboxes => answer.as_array().is_some_and(|chosen| {
                let mut names: Vec<&str> = chosen.iter().filter_map(Value::as_str).collect();
                let all_known =
                    names.len() == chosen.len() && names.iter().all(|n| values.contains(n));
                names.sort_unstable();
                names.dedup();
                all_known && names.len() == chosen.len()
            }),
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn prompts() -> impl Strategy<Value = Prompt> {
            let types = prop::sample::select(vec![
                "text",
                "number",
                "color",
                "checkbox",
                "checkboxes",
                "radio",
                "select",
                "range",
            ]);
            let int = prop::option::of(-20i64..40);
            (
                types,
                int.clone(),
                int.clone(),
                prop::option::of(-1i64..6),
                prop::option::of(0i64..8),
                prop::collection::vec("[a-c]", 0..4),
            )
                .prop_map(|(ty, min, max, step, maxlength, options)| {
                    let mut attrs = format!("type={ty}");
                    for (name, v) in [
                        ("min", min),
                        ("max", max),
                        ("step", step),
                        ("maxlength", maxlength),
                    ] {
                        if let Some(v) = v {
                            attrs.push_str(&format!(" {name}={v}"));
                        }
                    }
                    let data = serde_json::to_string(&options).unwrap();
                    prompt(&format!(
                        "<hml-prompt id=p {attrs}><data>{data}</data>Q?</hml-prompt>"
                    ))
                })
        }

        /// Answers as the widgets send them, and JSON no widget sends.
        fn answers() -> impl Strategy<Value = Value> {
            prop_oneof![
                "[ a-c]{0,9}".prop_map(Value::String),
                "#[0-9a-fA-Fg]{5,7}".prop_map(Value::String),
                (-50i64..100).prop_map(|h| json!(h as f64 / 2.0)),
                (-50i64..100).prop_map(|n| json!(n)),
                any::<bool>().prop_map(Value::Bool),
                prop::collection::vec("[a-d]", 0..4).prop_map(|v| json!(v)),
                prop::collection::vec(any::<bool>(), 0..3).prop_map(|v| json!(v)),
                Just(Value::Null),
                Just(json!({"a": 1})),
            ]
        }

        proptest! {
            #[test]
            fn the_checker_agrees_with_the_reference(p in prompts(), answer in answers()) {
                prop_assert_eq!(p.check(&answer).is_ok(), reference(&p, &answer), "{:?} {}", p.attributes, answer);
            }
        }
    }
}
