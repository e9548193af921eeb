//! `context_file`: the agent reads or writes one of its context files ([`crate::agents::context_files`])
//! from chat — USER.md when it learns about its user, an empty BOOTSTRAP.md to end its
//! first-run ritual. Only this agent's files for this user, by name (no paths); a predefined
//! agent's own files are not writable from chat; a virtual file answers that it is already
//! loaded.

use futures::future::BoxFuture;
use hero_shared::api::AgentKind;
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use serde_json::{Value, json};

use super::{Ctx, Function, Spec};
use crate::agents::context_files::{self, Writer};
use crate::{Error, store};

pub struct ContextFile;

impl Function for ContextFile {
    fn spec(&self) -> Spec {
        Spec {
            name: "context_file".into(),
            description: "Reads one of your context files (AGENTS.md, SOUL.md, TOOLS.md, IDENTITY.md, USER.md, BOOTSTRAP.md); with `content` it replaces USER.md, TOOLS.md or BOOTSTRAP.md (the others are your owner's to change); empty content deletes the file (an empty BOOTSTRAP.md ends your first-run ritual).".into(),
            plugin: None,
            default: Permission::Always,
            permissions: FunctionPermissions::allowed(DangerLevel::Moderate),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "the file's name, such as USER.md", "minLength": 1, "maxLength": 64},
                    "content": {"type": "string", "description": "the file's new content (omit it to read the file)", "maxLength": context_files::MAX_FILE_BYTES}
                },
                "required": ["name"]
            }),
            examples: vec![
                json!({"name": "USER.md"}),
                json!({"name": "USER.md", "content": "# User\n\n- Name: Ada\n- Timezone: Europe/London\n"}),
                json!({"name": "BOOTSTRAP.md", "content": ""}),
            ],
        }
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let name = args
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim();
            let content = args.get("content").and_then(Value::as_str);
            run(cx, name, content).await.map_err(|e| e.public_message())
        })
    }
}

async fn run(cx: &Ctx<'_>, name: &str, content: Option<&str>) -> crate::Result<String> {
    let st = cx.st;
    let (user_id, session_id) = (cx.user_id, cx.session_id);
    let agent_id = st
        .db
        .read_with(async |c| store::sessions::agent_of(c, user_id, session_id).await)
        .await?
        .ok_or(Error::Invalid("this session has no agent".into()))?;
    let kind = store::agents::get(&mut st.db.conn().await?, user_id, agent_id)
        .await?
        .and_then(|a| AgentKind::parse(&a.kind))
        .ok_or(Error::NotFound("agent"))?;
    if context_files::VIRTUAL.contains(&name) && content.is_none() {
        return Ok(format!("{name} is already loaded in your system prompt"));
    }
    let known = || context_files::NAMES.join(", ");
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user_id).await?;
    match content {
        None => {
            if context_files::level(kind, name).is_none() {
                return Err(Error::Invalid(format!(
                    "there is no context file {name}; the files are {}",
                    known()
                )));
            }
            let files = st
                .db
                .read_with(async |c| context_files::merged(c, &dk, agent_id, user_id).await)
                .await?;
            Ok(match files.into_iter().find(|f| f.name == name) {
                Some(f) => f.content,
                None => format!("{name} is empty (it does not exist)"),
            })
        }
        Some(text) => {
            let level = st
                .db
                .write_with(async |tx| {
                    context_files::write(
                        tx,
                        &dk,
                        context_files::Of {
                            agent_id,
                            user_id,
                            kind,
                        },
                        name,
                        text,
                        Writer::Chat,
                    )
                    .await
                })
                .await
                .map_err(|e| match e {
                    Error::NotFound(_) => Error::Invalid(format!(
                        "there is no context file {name}; the files are {}",
                        known()
                    )),
                    e => e,
                })?;
            Ok(if text.trim().is_empty() {
                format!("{name} is deleted")
            } else {
                format!(
                    "{name} is written ({} characters, {})",
                    text.chars().count(),
                    match level {
                        context_files::Level::User => "the user's own copy",
                        context_files::Level::Agent => "the agent's own file",
                    }
                )
            })
        }
    }
}
