//! The command functions (reference 000 "Command Abilities", 003): one builtin function per
//! command of [`hero_shared::command::COMMANDS`], category `commands`. A command typed in the
//! composer is parsed into the same call ([`hero_shared::command::parse`]) and runs with the
//! user's authority (but `/compact`, `/stream` and `/update_usage`, which the post stage
//! answers itself: a summary driven like a reply, a note of the new mode or the bill); the
//! agent calls the functions like any other. Those that change what the user
//! owns (`command_ability`, `command_session`, `command_agent`, `command_skill`,
//! `command_update_usage`) ask every time the agent calls them, with no "Always allow" (003
//! "Ask Always"); `command_start`, `command_compact` and `command_stream` are safe and run.
//!
//! Adding a command: a line in `COMMANDS`, its reading in `hero_shared::command`, its schema
//! and its arm in [`run`] here.

use futures::future::BoxFuture;
use hero_shared::api::{
    CreateAgentRequest, CreateProcessRequest, CreateSessionRequest, ProviderKind, SessionStatus,
    UpdateAgentRequest, UpdateProcessRequest, UpdateSessionRequest,
};
use hero_shared::calls::{AutoApprove, DangerLevel, FunctionPermissions, Permission};
use hero_shared::command::{COMMANDS, Command, KEY_REFUSED, looks_like_key};
use serde_json::{Value, json};

use super::{Ctx, Function, Registry, Spec};
use crate::accounts::auth::AuthUser;

/// One command as a function.
pub struct CommandFunction(pub &'static Command);

/// Registers every command.
pub fn register(r: &mut Registry) {
    for c in COMMANDS {
        r.register(CommandFunction(c));
    }
}

fn schema(c: &Command) -> Value {
    match c.name {
        "ability" => json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "description": "what to do", "enum": ["list", "show", "create", "edit", "delete"]},
                "name": {"type": "string", "description": "the process's name", "maxLength": hero_shared::process::MAX_NAME_CHARS},
                "description": {"type": "string", "description": "a line saying what the process is for", "maxLength": crate::agents::abilities::MAX_DESCRIPTION_CHARS},
                "content": {"type": "string", "description": "the process's markdown", "maxLength": hero_shared::process::MAX_CONTENT_BYTES}
            },
            "required": ["action"]
        }),
        "session" => json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "description": "what to do", "enum": ["new", "rename", "archive", "restore"]},
                "name": {"type": "string", "description": "the session's (new) name", "minLength": 1, "maxLength": hero_shared::api::MAX_SESSION_NAME_CHARS},
                "agent": {"type": "string", "description": "the new session's agent, by name or id", "maxLength": crate::agents::MAX_NAME_CHARS},
                "session": {"type": "integer", "description": "the session (this one if not given)", "minimum": 1}
            },
            "required": ["action"]
        }),
        "agent" => json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "description": "what to do", "enum": ["create", "configure"]},
                "name": {"type": "string", "description": "the agent's name", "minLength": 1, "maxLength": crate::agents::MAX_NAME_CHARS},
                "provider": {"type": "string", "description": "whose API it calls", "enum": ["anthropic", "openai", "openai-compatible", "scripted"]},
                "model": {"type": "string", "description": "the model's name at the provider", "maxLength": 200},
                "base_url": {"type": "string", "description": "the server's URL, for an OpenAI-compatible one", "maxLength": 2000},
                "new_name": {"type": "string", "description": "a new name for the agent", "maxLength": crate::agents::MAX_NAME_CHARS}
            },
            "required": ["action", "name"]
        }),
        "skill" => json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "the process's name", "maxLength": hero_shared::process::MAX_NAME_CHARS},
                "content": {"type": "string", "description": "the process's markdown", "maxLength": hero_shared::process::MAX_CONTENT_BYTES}
            },
            "required": ["name", "content"]
        }),
        "stream" => json!({
            "type": "object",
            "properties": {"on": {"type": "boolean", "description": "true: replies stream; false: they arrive whole"}},
            "required": ["on"]
        }),
        "update_usage" => json!({
            "type": "object",
            "properties": {"cost": {"type": "number", "description": "the bill in dollars", "minimum": 0}},
            "required": ["cost"]
        }),
        _ => json!({"type": "object", "properties": {}}),
    }
}

fn examples(c: &Command) -> Vec<Value> {
    vec![match c.name {
        "ability" => json!({"action": "create", "name": "tidy", "content": "Tidy {{args}}."}),
        "session" => json!({"action": "new", "name": "Research"}),
        "agent" => json!({"action": "configure", "name": "Ada", "model": "claude-sonnet-4-5"}),
        "skill" => json!({"name": "greet", "content": "Greet {{user.name}}."}),
        "stream" => json!({"on": false}),
        "update_usage" => json!({"cost": 12.34}),
        _ => json!({}),
    }]
}

impl Function for CommandFunction {
    fn spec(&self) -> Spec {
        let c = self.0;
        let (default, permissions) = if c.ask_always {
            (
                Permission::Ask,
                FunctionPermissions {
                    auto_approve: AutoApprove::Never,
                    danger_level: DangerLevel::Moderate,
                },
            )
        } else {
            (
                Permission::Always,
                FunctionPermissions::allowed(DangerLevel::Safe),
            )
        };
        Spec {
            name: c.function.into(),
            description: c.help.into(),
            plugin: None,
            default,
            permissions,
            answered_by_user: false,
            schema: schema(c),
            examples: examples(c),
        }
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move { run(cx, self.0, args).await.map_err(|e| e.public_message()) })
    }
}

fn text<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str).map(str::trim)
}

fn needed<'a>(args: &'a Value, key: &str) -> crate::Result<&'a str> {
    text(args, key)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| crate::Error::Invalid(format!("`{key}` is needed")))
}

async fn run(cx: &Ctx<'_>, c: &Command, args: &Value) -> crate::Result<String> {
    let user = AuthUser::on_behalf_of(cx.user_id);
    let st = cx.st;
    match c.name {
        "ability" => ability(cx, &user, args).await,
        "session" => session(cx, &user, args).await,
        "agent" => agent(cx, &user, args).await,
        "skill" => {
            let name = needed(args, "name")?;
            let content = needed(args, "content")?.to_owned();
            let done = save_process(cx, &user, name, None, Some(content)).await?;
            Ok(format!("{done} the process {name:?}."))
        }
        "start" => {
            let names = crate::conversation::startup::again(st, &user, cx.session_id).await?;
            Ok(format!(
                "The startup processes were sent again: {}.",
                names.join(", ")
            ))
        }
        "compact" => {
            compact_after(st, user, cx.session_id);
            Ok(
                "The conversation will be summarised once this reply and its calls are done."
                    .into(),
            )
        }
        "stream" => {
            let on = args
                .get("on")
                .and_then(Value::as_bool)
                .ok_or_else(|| crate::Error::Invalid("`on` is true or false".into()))?;
            switch_streaming(st, &user, cx.session_id, on).await?;
            Ok(if on {
                "Streaming is on for this session."
            } else {
                "Streaming is off: replies arrive whole."
            }
            .into())
        }
        "update_usage" => {
            let cost = args.get("cost").and_then(Value::as_f64);
            let micros = cost
                .and_then(crate::agents::spend::micros_of)
                .ok_or_else(|| crate::Error::Invalid("`cost` is the bill in dollars".into()))?;
            let agent = cx.agent_id.ok_or_else(|| {
                crate::Error::Invalid("this session has no agent, so no key to match".into())
            })?;
            let delta = crate::agents::spend::correct(st, &user, agent, micros).await?;
            Ok(format!(
                "Spend matched to the bill: {} (a correction of {}).",
                hero_shared::api::format_cost(micros),
                hero_shared::api::format_cost(delta)
            ))
        }
        other => Err(crate::Error::Internal(format!("no command {other}"))),
    }
}

/// `command_stream` called by the agent: the switch and its private note (which carries the
/// mode, so every reader of the log learns it) commit together, and the readers are told.
/// A reply in flight keeps its mode; the next one takes the new.
async fn switch_streaming(
    st: &crate::AppState,
    user: &AuthUser,
    id: i64,
    on: bool,
) -> crate::Result<()> {
    use crate::conversation::frames::{self, NewFrame};
    let note = if on {
        "Streaming is on for this session."
    } else {
        "Streaming is off: replies arrive whole."
    };
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let f = NewFrame::message(
        id,
        hero_shared::frame::AuthorType::System,
        None,
        serde_json::json!({"role": "system", "content": note, "private": true, "streaming": on}),
    );
    let sealed = frames::seal(&dk, f)?;
    let kept = st
        .db
        .write_with(async |tx| {
            crate::conversation::sessions::set_streaming(tx, user, id, on).await?;
            let seq = sealed.insert(tx).await?;
            frames::full_session(st, seq)?;
            Ok(seq)
        })
        .await?;
    let kept = sealed.kept(kept);
    st.hub.publish(
        user.id(),
        id,
        crate::conversation::hub::HubEvent::Frame((*kept.frame).clone()),
    );
    st.history.append(kept);
    Ok(())
}

/// The agent's `command_compact`: a summary once the session is idle (this reply, its
/// calls and its follow-ups over: the call is part of them, so it cannot wait itself), in a
/// task of its own, holding a turn slot as a typed `/compact` does; why it failed is a
/// notice in the session.
fn compact_after(st: &crate::AppState, user: AuthUser, session_id: i64) {
    let st = st.clone();
    tokio::spawn(async move {
        st.turns.idle(session_id).await;
        let done = async {
            let _slot = crate::conversation::cluster::turn_slot(&st, user.id()).await?;
            crate::conversation::compact::compact(&st, &user, session_id, None).await
        };
        if let Err(e) = done.await {
            let note = format!(
                "The summary the agent asked for was not made: {}",
                e.public_message()
            );
            let told = async {
                let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
                crate::conversation::frames::append_notice(
                    &st,
                    &dk,
                    user.id(),
                    session_id,
                    note,
                    "warning",
                )
                .await
            };
            if let Err(e) = told.await {
                tracing::error!(error = %e, "a failed summary could not be told");
            }
        }
    });
}

/// Creates the process `name`, or changes it when the user has one.
async fn save_process(
    cx: &Ctx<'_>,
    user: &AuthUser,
    name: &str,
    description: Option<String>,
    content: Option<String>,
) -> crate::Result<&'static str> {
    use crate::agents::abilities;
    match abilities::own_id(cx.st, user.id(), name).await? {
        Some(id) => {
            abilities::update(
                cx.st,
                user,
                &id,
                UpdateProcessRequest {
                    name: None,
                    description,
                    content,
                },
            )
            .await?;
            Ok("Changed")
        }
        None => {
            let content = content.ok_or_else(|| {
                crate::Error::Invalid(format!("there is no process named {name:?}"))
            })?;
            abilities::create(
                cx.st,
                user,
                CreateProcessRequest {
                    name: name.to_owned(),
                    description: description.unwrap_or_default(),
                    content,
                },
            )
            .await?;
            Ok("Created")
        }
    }
}

async fn ability(cx: &Ctx<'_>, user: &AuthUser, args: &Value) -> crate::Result<String> {
    use crate::agents::abilities;
    let st = cx.st;
    let action = needed(args, "action")?;
    if action == "list" {
        let all = abilities::list(st, user, &abilities::Filter::default()).await?;
        let lines: Vec<String> = all
            .iter()
            .filter(|a| a.kind == hero_shared::api::AbilityType::Process)
            .map(|a| format!("- {} ({}): {}", a.name, a.id, a.description))
            .collect();
        return Ok(format!("Processes:\n{}", lines.join("\n")));
    }
    let name = needed(args, "name")?;
    match action {
        "show" => {
            let id = abilities::id_of(st, user.id(), name)
                .await?
                .ok_or(crate::Error::NotFound("ability"))?;
            let a = abilities::get(st, user, &id).await?;
            Ok(a.content.unwrap_or(a.description))
        }
        "create" | "edit" => {
            let exists = abilities::own_id(st, user.id(), name).await?.is_some();
            if action == "create" && exists {
                return Err(crate::Error::Conflict(format!(
                    "an ability is already named {name:?}"
                )));
            }
            if action == "edit" && !exists {
                return Err(crate::Error::NotFound("ability"));
            }
            let description = text(args, "description").map(str::to_owned);
            let content = args
                .get("content")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let done = save_process(cx, user, name, description, content).await?;
            Ok(format!("{done} the process {name:?}."))
        }
        "delete" => {
            let id = abilities::own_id(st, user.id(), name)
                .await?
                .ok_or(crate::Error::NotFound("ability"))?;
            abilities::delete(st, user, &id).await?;
            Ok(format!("Deleted the process {name:?}."))
        }
        other => Err(crate::Error::Invalid(format!("no action {other:?}"))),
    }
}

async fn session(cx: &Ctx<'_>, user: &AuthUser, args: &Value) -> crate::Result<String> {
    use crate::conversation::sessions;
    let st = cx.st;
    let target = args
        .get("session")
        .and_then(Value::as_i64)
        .unwrap_or(cx.session_id);
    let update = |req: UpdateSessionRequest| sessions::update(&st.db, user, target, req);
    let s = match needed(args, "action")? {
        "new" => {
            let agent_id = match text(args, "agent") {
                Some(a) => Some(agent_named(cx, user, a).await?.id),
                None => None,
            };
            let s = sessions::create(
                st,
                user,
                CreateSessionRequest {
                    name: needed(args, "name")?.to_owned(),
                    parent_session_id: None,
                    status: None,
                    agent_id,
                },
            )
            .await?;
            return Ok(format!("Started session {} \"{}\".", s.id, s.name));
        }
        "rename" => {
            update(UpdateSessionRequest {
                name: Some(needed(args, "name")?.to_owned()),
                ..Default::default()
            })
            .await?
        }
        "archive" => {
            update(UpdateSessionRequest {
                status: Some(SessionStatus::Archived),
                ..Default::default()
            })
            .await?
        }
        "restore" => {
            update(UpdateSessionRequest {
                status: Some(SessionStatus::Active),
                ..Default::default()
            })
            .await?
        }
        other => return Err(crate::Error::Invalid(format!("no action {other:?}"))),
    };
    Ok(format!(
        "Session {} \"{}\" is {}.",
        s.id,
        s.name,
        s.status.as_str()
    ))
}

/// The user's agent named (or numbered) `name`.
async fn agent_named(
    cx: &Ctx<'_>,
    user: &AuthUser,
    name: &str,
) -> crate::Result<hero_shared::api::AgentDto> {
    let all = crate::agents::list(&cx.st.db, &cx.st.keys, user).await?;
    all.into_iter()
        .find(|a| a.name == name || a.id.to_string() == name)
        .ok_or(crate::Error::NotFound("agent"))
}

async fn agent(cx: &Ctx<'_>, user: &AuthUser, args: &Value) -> crate::Result<String> {
    let st = cx.st;
    // Never a key: whatever was given is refused before anything is stored.
    if looks_like_key(&args.to_string()) {
        return Err(crate::Error::Invalid(KEY_REFUSED.into()));
    }
    let provider = |s: &str| -> crate::Result<ProviderKind> {
        serde_json::from_value(json!(s))
            .map_err(|_| crate::Error::Invalid(format!("no provider {s:?}")))
    };
    let name = needed(args, "name")?;
    let a = match needed(args, "action")? {
        "create" => {
            crate::agents::create(
                &st.db,
                &st.keys,
                &st.settings.egress,
                user,
                CreateAgentRequest {
                    name: name.to_owned(),
                    provider: provider(needed(args, "provider")?)?,
                    model: needed(args, "model")?.to_owned(),
                    base_url: text(args, "base_url").map(str::to_owned),
                    api_key: None,
                    config: None,
                    kind: Default::default(),
                    compact_after_messages: None,
                    compact_after_tokens: None,
                    context_window: None,
                },
            )
            .await?
        }
        "configure" => {
            let id = agent_named(cx, user, name).await?.id;
            crate::agents::update(
                &st.db,
                &st.keys,
                &st.settings.egress,
                user,
                id,
                UpdateAgentRequest {
                    name: text(args, "new_name").map(str::to_owned),
                    provider: text(args, "provider").map(provider).transpose()?,
                    model: text(args, "model").map(str::to_owned),
                    base_url: text(args, "base_url").map(|u| Some(u.to_owned())),
                    ..Default::default()
                },
            )
            .await?
        }
        other => return Err(crate::Error::Invalid(format!("no action {other:?}"))),
    };
    Ok(format!(
        "Agent {} \"{}\": {} {}.",
        a.id,
        a.name,
        a.provider.as_str(),
        a.model
    ))
}
