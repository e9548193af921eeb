//! `ask`: the agent asks the user a question and waits (reference 000, "Question Flow").
//! `<ask>Continue?</ask>` waits for as long as it takes (demand); `<ask timeout="30000"
//! default="no" options="yes,no">` takes its default when the time (milliseconds, as in
//! reference 000; `30s` reads too) is up. It is not run:
//! its request waits (status `asking`) until the user's answer, or the default, is stored
//! as its result ([`crate::conversation::turn::answer_question`]), and then the agent is given it.

use futures::future::BoxFuture;
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use hero_shared::hml::{Element, ElementKind};
use serde_json::{Value, json};

use super::{Ctx, Function, Spec};

/// The longest a timed question may wait (milliseconds: an hour).
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;

pub struct Ask;

impl Function for Ask {
    fn spec(&self) -> Spec {
        Spec {
            name: "ask".into(),
            description: "Asks the user a question and waits for the answer, which comes back to you as the result. With `timeout` (milliseconds), `default` is the answer if the user says nothing in time; `options` are the answers offered as buttons.".into(),
            plugin: None,
            default: Permission::Always,
            permissions: FunctionPermissions::allowed(DangerLevel::Safe),
            answered_by_user: true,
            schema: json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string", "description": "the question", "minLength": 1, "maxLength": 2000},
                    "options": {"type": "array", "description": "answers offered as buttons", "maxItems": 10,
                        "items": {"type": "string", "minLength": 1, "maxLength": 200}},
                    "timeout": {"type": "integer", "unit": "ms", "description": "milliseconds to wait before `default` is the answer (30000 for 30 s)", "minimum": 1000, "maximum": MAX_TIMEOUT_MS},
                    "default": {"type": "string", "description": "the answer when the time is up", "maxLength": 200}
                },
                "required": ["question"]
            }),
            examples: vec![
                json!({"question": "Shall I go on?"}),
                json!({"question": "Deploy now?", "options": ["yes", "no"], "timeout": 30000, "default": "no"}),
            ],
        }
    }

    fn args_of_element(&self, e: &Element) -> Option<Value> {
        if e.kind != ElementKind::Ask {
            return None;
        }
        let mut args = json!({"question": e.content.trim()});
        if let Some(o) = e.attr("options") {
            let options: Vec<&str> = o
                .split(',')
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .collect();
            args["options"] = json!(options);
        }
        if let Some(t) = e.attr("timeout") {
            // As written: reading it ([`super::schema::read_durations`]) says what is wrong.
            args["timeout"] = json!(t);
        }
        if let Some(d) = e.attr("default") {
            args["default"] = json!(d);
        }
        Some(args)
    }

    fn run<'a>(
        &'a self,
        _cx: &'a Ctx<'a>,
        _args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async { Err("a question is answered by the user, not run".to_owned()) })
    }
}

/// An answer as the agent reads it: text as it is, anything else as JSON.
pub fn answer_text(answer: &Value) -> String {
    match answer {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hero_shared::hml::parse;

    fn args(src: &str) -> Value {
        let doc = parse(src);
        let e = doc.elements().next().unwrap();
        Ask.args_of_element(e).unwrap()
    }

    #[test]
    fn an_ask_element_is_a_question_with_its_options_timeout_and_default() {
        assert_eq!(
            args("<ask>Continue?</ask>"),
            json!({"question": "Continue?"})
        );
        assert_eq!(
            args(r#"<ask timeout="30s" default="no" options="yes, no,">Deploy?</ask>"#),
            json!({"question": "Deploy?", "options": ["yes", "no"], "timeout": "30s", "default": "no"})
        );
        let spec = Ask.spec();
        let read = |mut a: Value| {
            super::super::schema::read_durations("ask", &spec.schema, &mut a)
                .and_then(|()| super::super::schema::validate("ask", &spec.schema, &a))
                .map(|()| a)
        };
        let timed = args(r#"<ask timeout="30s">q</ask>"#);
        assert_eq!(read(timed), Ok(json!({"question": "q", "timeout": 30000})));
        assert_eq!(
            read(args(r#"<ask timeout="30">q</ask>"#)),
            Err("ask's argument `timeout` is in milliseconds: for 30 seconds write 30000".into())
        );
        for bad in [
            json!({"question": ""}),
            json!({"question": "q", "timeout": 999}),
            json!({"question": "q", "timeout": MAX_TIMEOUT_MS + 1}),
            json!({"question": "q", "options": [1]}),
            json!({"question": "q", "options": vec!["a"; 11]}),
            args(r#"<ask timeout="soon">q</ask>"#),
        ] {
            assert!(read(bad.clone()).is_err(), "{bad}");
        }
    }
}
