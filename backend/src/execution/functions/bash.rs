//! `bash`: a shell command in the user's sandboxed workspace ([`crate::execution::sandbox`]). Dangerous
//! (reference 000's `dangerLevel`), so it asks by default; the result is its output, exit
//! status and time.

use std::time::Duration;

use futures::future::BoxFuture;
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use hero_shared::hml::{Element, ElementKind};
use serde_json::{Value, json};

use super::{Ctx, Function, Spec};

pub struct Bash;

impl Function for Bash {
    fn spec(&self) -> Spec {
        Spec {
            name: "bash".into(),
            description: "Runs a shell command in your sandboxed workspace (/workspace: no network, nothing of the server visible) and returns its output and exit status.".into(),
            plugin: None,
            default: Permission::Ask,
            permissions: FunctionPermissions::allowed(DangerLevel::Dangerous),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "the command, as bash -c reads it", "maxLength": 100000, "minLength": 1},
                    "cwd": {"type": "string", "description": "where it runs: a path under /workspace (the default) or /tmp", "maxLength": 1024},
                    "timeout": {"type": "integer", "unit": "ms", "description": "milliseconds before the whole command is killed (default 30000)", "minimum": 1000, "maximum": 3_600_000}
                },
                "required": ["command"]
            }),
            examples: vec![
                json!({"command": "ls -la"}),
                json!({"command": "make test", "cwd": "project", "timeout": 120_000}),
            ],
        }
    }

    fn args_of_element(&self, e: &Element) -> Option<Value> {
        if e.kind != ElementKind::Bash {
            return None;
        }
        let mut args = json!({"command": e.content});
        if let Some(c) = e.attr("cwd") {
            args["cwd"] = json!(c);
        }
        if let Some(t) = e.attr("timeout") {
            // As written: reading it ([`super::schema::read_durations`]) says what is wrong.
            args["timeout"] = json!(t);
        }
        Some(args)
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let command = args
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let cwd = args.get("cwd").and_then(Value::as_str);
            let timeout = args
                .get("timeout")
                .and_then(Value::as_u64)
                .map(|t| Duration::from_millis(hero_shared::calls::stored_timeout_ms(t)));
            let ran = cx
                .st
                .sandbox
                .run(cx.user_id, command, cwd, timeout, None)
                .await?;
            let report = ran.report();
            match ran.ended {
                crate::execution::sandbox::Ended::Exited(0) => Ok(report),
                _ => Err(report),
            }
        })
    }
}

/// What the user's workspace holds, against its quota.
pub async fn workspace(
    st: &crate::AppState,
    user: &crate::accounts::auth::AuthUser,
) -> crate::Result<hero_shared::api::WorkspaceDto> {
    let (used_bytes, quota_bytes) =
        st.sandbox.usage(user.id()).await.map_err(|e| {
            crate::Error::Internal(format!("the workspace could not be measured: {e}"))
        })?;
    Ok(hero_shared::api::WorkspaceDto {
        used_bytes,
        quota_bytes,
    })
}

/// Removes everything in the user's workspace: how a workspace at its quota, where no
/// command runs, is made usable again.
pub async fn empty_workspace(
    st: &crate::AppState,
    user: &crate::accounts::auth::AuthUser,
) -> crate::Result<hero_shared::api::WorkspaceDto> {
    st.sandbox
        .empty(user.id())
        .await
        .map_err(|e| crate::Error::Internal(format!("the workspace could not be emptied: {e}")))?;
    workspace(st, user).await
}
