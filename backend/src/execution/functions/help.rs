//! `help`: what the agent can call, from the registry itself (each function's description,
//! arguments and examples, and how to call it). Runs without asking.

use futures::future::BoxFuture;
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use serde_json::{Value, json};

use super::{Ctx, Function, Spec};

pub struct Help;

impl Function for Help {
    fn spec(&self) -> Spec {
        Spec {
            name: "help".into(),
            description: "Lists the functions you can call, with their arguments and examples; give `function` for one of them.".into(),
            plugin: None,
            default: Permission::Always,
            permissions: FunctionPermissions::allowed(DangerLevel::Safe),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "function": {"type": "string", "description": "the function to explain", "maxLength": 100}
                }
            }),
            examples: vec![json!({}), json!({"function": "websearch"})],
        }
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let only = args.get("function").and_then(Value::as_str);
            let specs: Vec<&Spec> = cx
                .registry
                .specs()
                .filter(|s| only.is_none_or(|o| o == s.name))
                .collect();
            if specs.is_empty() {
                let names: Vec<&str> = cx.registry.specs().map(|s| &*s.name).collect();
                return Err(format!(
                    "there is no function `{}`; the functions are: {}",
                    only.unwrap_or_default(),
                    names.join(", ")
                ));
            }
            Ok(describe(&specs))
        })
    }
}

/// The registry's functions as the agent reads them.
pub fn describe(specs: &[&Spec]) -> String {
    let mut out = String::from(
        "Call a function with @system(name, {arguments}) in your reply, or with \
         <interaction>{\"target_id\": \"@system\", \"target_property\": \"name\", \"payload\": {arguments}}</interaction>. \
         The result comes back to you in the next message.\n",
    );
    for s in specs {
        out.push_str(&format!(
            "\n## {}\n{}\nRuns: {}.\n",
            s.name,
            s.description,
            match s.default {
                _ if s.answered_by_user => "when the user answers (or at its timeout)",
                Permission::Always => "at once",
                Permission::Ask => "after the user approves it",
                Permission::Never => "never, unless the user allows it",
            }
        ));
        if let Some(props) = s.schema.get("properties").and_then(Value::as_object) {
            let required: Vec<&str> = s
                .schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if props.is_empty() {
                out.push_str("Arguments: none.\n");
            } else {
                out.push_str("Arguments:\n");
            }
            for (name, p) in props {
                out.push_str(&format!(
                    "- `{name}` ({}{}): {}\n",
                    p.get("type").and_then(Value::as_str).unwrap_or("any"),
                    if required.contains(&name.as_str()) {
                        ", required"
                    } else {
                        ""
                    },
                    p.get("description").and_then(Value::as_str).unwrap_or("")
                ));
            }
        }
        for e in &s.examples {
            out.push_str(&format!("Example: @system({}, {e})\n", s.name));
        }
    }
    out
}
