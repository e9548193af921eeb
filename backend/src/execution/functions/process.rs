//! `process`: the agent loads a process (reference 000's abilities: instructions in
//! markdown) by its name, Hero's or the user's own, with `args` for its `{{args}}`; what it
//! is given is the process's text with its variables filled ([`crate::agents::abilities`]).
//! Safe, so it runs without asking: it reads the user's own instructions, and changes nothing.

use futures::future::BoxFuture;
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use serde_json::{Value, json};

use super::{Ctx, Function, Spec};

pub struct LoadProcess;

impl Function for LoadProcess {
    fn spec(&self) -> Spec {
        Spec {
            name: "process".into(),
            description: "Loads a process (instructions in markdown) by its name, with `args` for what it is about: you are given its text, its variables filled in. Call it as @system(process, {\"name\": \"act\"}).".into(),
            plugin: None,
            default: Permission::Always,
            permissions: FunctionPermissions::allowed(DangerLevel::Safe),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "the process's name", "minLength": 1, "maxLength": hero_shared::process::MAX_NAME_CHARS},
                    "args": {"type": "string", "description": "what the process is about, for its {{args}}", "maxLength": crate::agents::abilities::MAX_ARGS_CHARS}
                },
                "required": ["name"]
            }),
            examples: vec![json!({"name": "act", "args": "the weekly report"})],
        }
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
            let given = args.get("args").and_then(Value::as_str).unwrap_or_default();
            let loaded = crate::agents::abilities::load(
                cx.st,
                cx.user_id,
                cx.session_id,
                name.trim(),
                given.to_owned(),
            )
            .await
            .map_err(|e| e.public_message())?;
            loaded.ok_or_else(|| format!("there is no process named {name:?}"))
        })
    }
}
