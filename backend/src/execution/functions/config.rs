//! The `config` capability (reference 004, "Config"): the agent lists its configuration
//! keys, reads one, and proposes a change to one for the user to approve
//! ([`crate::agents::config`] keeps keys, versions and changes).
//!
//! `propose_config_change` waits for the user as any call at `ask` does, and may never be
//! allowed always: its change is kept with its request when the call is stored
//! (`agents::config::propose_in`, from the gate), decided with the user's decision, and the
//! handler, run once the call is decided, tells the agent what came of it.

use futures::future::BoxFuture;
use hero_shared::calls::{AutoApprove, DangerLevel, FunctionPermissions, Permission};
use serde_json::{Value, json};

use super::{Capability, Ctx, Spec, ToolResult};
use crate::agents::config::{self, Key};

pub struct Config;

/// The capability's shipped instructions (the first version of `capability:config`).
pub const PROMPT: &str = "Your behaviour is read from configuration keys the user can change: `soul` and `agents` \
(your SOUL.md and AGENTS.md), `system_prompt` (the user's standing instructions) and `capability:<name>` \
(each capability's instructions, this one included). list_configs lists them. When the user tells you to \
always or never do something, read the key that governs it with read_config, then propose its whole new \
content with propose_config_change and a one-line reason. The user approves or rejects the change; an \
approved change holds from your next reply. Never say a change is made before you are told it was approved.";

fn spec(
    name: &'static str,
    description: &'static str,
    schema: Value,
    examples: Vec<Value>,
) -> Spec {
    Spec {
        name: name.into(),
        description: description.into(),
        plugin: None,
        default: Permission::Always,
        permissions: FunctionPermissions::allowed(DangerLevel::Safe),
        answered_by_user: false,
        schema,
        examples,
    }
}

impl Capability for Config {
    fn name(&self) -> &str {
        "config"
    }

    fn tools(&self) -> Vec<Spec> {
        vec![
            spec(
                "list_configs",
                "Lists your configuration keys, what each holds, and its current version.",
                json!({"type": "object", "properties": {}}),
                vec![json!({})],
            ),
            spec(
                "read_config",
                "Reads the current content of a configuration key (the user sees it beside the chat).",
                json!({
                    "type": "object",
                    "properties": {"key": {"type": "string", "description": "the key, as list_configs names it", "minLength": 1, "maxLength": 100}},
                    "required": ["key"]
                }),
                vec![json!({"key": "capability:config"})],
            ),
            Spec {
                default: Permission::Ask,
                permissions: FunctionPermissions {
                    auto_approve: AutoApprove::Never,
                    danger_level: DangerLevel::Moderate,
                },
                ..spec(
                    config::PROPOSE,
                    "Proposes new content for a configuration key, whole, with the reason for the change; the user approves or rejects it, and you are told which.",
                    json!({
                        "type": "object",
                        "properties": {
                            "key": {"type": "string", "description": "the key, as list_configs names it", "minLength": 1, "maxLength": 100},
                            "content": {"type": "string", "description": "the key's whole new content"},
                            "reason": {"type": "string", "description": "why, in one line", "minLength": 1, "maxLength": config::MAX_REASON_CHARS}
                        },
                        "required": ["key", "content", "reason"]
                    }),
                    vec![
                        json!({"key": "capability:config", "content": "…", "reason": "the user asked me to always …"}),
                    ],
                )
            },
        ]
    }

    fn prompt(&self) -> &str {
        PROMPT
    }

    fn handle<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        tool: &'a str,
        input: &'a Value,
    ) -> BoxFuture<'a, Option<Result<ToolResult, String>>> {
        Box::pin(async move {
            let answer = match tool {
                "list_configs" => list(cx).await,
                "read_config" => read(cx, input).await,
                config::PROPOSE => decided(cx, input).await,
                _ => return None,
            };
            // A proposal's change is named by its call's request (004's `pendingChangeId`).
            let change = (tool == config::PROPOSE).then(|| cx.request_id.to_owned());
            Some(answer.map(|result| ToolResult {
                result,
                pending_change_id: change,
            }))
        })
    }
}

/// An error of the domain's as the agent reads it.
fn told(e: crate::Error) -> String {
    e.public_message()
}

async fn list(cx: &Ctx<'_>) -> Result<String, String> {
    let st = cx.st;
    let heads = st
        .db
        .read_with(async |c| {
            crate::store::configs::heads(c, cx.user_id, cx.agent_id.unwrap_or(0)).await
        })
        .await
        .map_err(told)?;
    let mut out = String::new();
    for key in config::keys(cx.registry) {
        let name = key.name();
        let version = heads
            .iter()
            .find(|h| h.key == name)
            .map_or(0, |h| h.version);
        out.push_str(&format!("- {name} (v{version}): {}\n", key.description()));
    }
    Ok(out)
}

async fn read(cx: &Ctx<'_>, input: &Value) -> Result<String, String> {
    let key = input.get("key").and_then(Value::as_str).unwrap_or_default();
    let key = config::parse(cx.registry, key).map_err(told)?;
    let now = current(cx, &key).await.map_err(told)?;
    Ok(format!(
        "{} (v{}):\n{}",
        key.name(),
        now.version,
        now.content
    ))
}

async fn current(cx: &Ctx<'_>, key: &Key) -> crate::Result<config::Current> {
    let st = cx.st;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, cx.user_id).await?;
    st.db
        .write_with(async |tx| {
            let s = config::scope(tx, cx.user_id, key, cx.agent_id).await?;
            config::current(tx, cx.registry, &dk, s, key).await
        })
        .await
}

/// Run once the call is decided: what came of its change. A call of the user's own (their
/// message, at `ask`: they asked) proposed nothing at the gate, so it is proposed and
/// approved here at once.
async fn decided(cx: &Ctx<'_>, input: &Value) -> Result<String, String> {
    let st = cx.st;
    let id = cx.request_id;
    let proposed = st
        .db
        .read_with(async |c| crate::store::configs::change(c, cx.user_id, id).await)
        .await
        .map_err(told)?
        .is_some();
    if !proposed {
        let dk = crate::accounts::users::data_key(&st.db, &st.keys, cx.user_id)
            .await
            .map_err(told)?;
        st.db
            .write_with(async |tx| {
                let kept = config::propose_in(
                    tx,
                    cx.registry,
                    &dk,
                    cx.user_id,
                    cx.session_id,
                    cx.agent_id,
                    id,
                    input,
                )
                .await?;
                if kept.is_ok() {
                    config::decide_in(tx, cx.registry, &dk, cx.user_id, id, true).await?;
                }
                Ok(kept.map(|_| ()))
            })
            .await
            .map_err(told)??;
    }
    st.db
        .read_with(async |c| config::outcome(c, cx.user_id, id).await)
        .await
        .map_err(told)?
}
