//! `agent_queue`: the agent queues a message for an agent to answer (reference 000's
//! `@agent(queue, {message, session?, agent?})`): into another session of the user's
//! (`session`), into a new sub-session of this one with another agent (`agent`, its id or
//! name), or into this session once the round is over (neither). What queuing does, and
//! its bounds, is [`crate::conversation::queue`]'s; this is the call's spec and arguments.
//! Moderate, and asked by default: it makes an agent work without the user writing.

use futures::future::BoxFuture;
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use serde_json::{Value, json};

use super::{Ctx, Function, Spec};
use crate::conversation::queue::{self, AgentRef, Target};

/// The longest message one may queue (characters).
pub const MAX_QUEUED_CHARS: usize = 20_000;

pub struct AgentQueue;

impl Function for AgentQueue {
    fn spec(&self) -> Spec {
        Spec {
            name: "agent_queue".into(),
            description: "Queues a message for an agent to answer: in another session of the user's (`session`, its id), in a new sub-session of this one with another agent (`agent`, its id or name), or, with neither, in this session once this round is over. The message is sent when no reply is in flight there; it is yours, not the user's. Call it as @agent(queue, {\"message\": \"…\", \"session\": 12}).".into(),
            plugin: None,
            default: Permission::Ask,
            permissions: FunctionPermissions::allowed(DangerLevel::Moderate),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "what the agent is asked", "minLength": 1, "maxLength": MAX_QUEUED_CHARS},
                    "session": {"type": "integer", "description": "the id of the session to queue it in", "minimum": 1},
                    "agent": {"description": "the agent of a new sub-session: its id or its name"}
                },
                "required": ["message"]
            }),
            examples: vec![
                json!({"message": "Summarise what we found.", "session": 12}),
                json!({"message": "Check these figures.", "agent": "Analyst"}),
            ],
        }
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let message = args
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim()
                .to_owned();
            if message.is_empty() {
                return Err("agent_queue needs a message that is not blank".into());
            }
            let target = target(args)?;
            let from = queue::From {
                user_id: cx.user_id,
                session_id: cx.session_id,
                agent_id: cx.agent_id,
            };
            queue::enqueue(cx.st, from, target, message).await
        })
    }
}

/// Where the arguments send the message.
fn target(args: &Value) -> Result<Target, String> {
    let session = args.get("session").filter(|v| !v.is_null());
    let agent = args.get("agent").filter(|v| !v.is_null());
    match (session, agent) {
        (Some(_), Some(_)) => Err(
            "agent_queue takes `session` (an existing session) or `agent` (a new sub-session), not both"
                .into(),
        ),
        (Some(s), None) => s
            .as_i64()
            .map(Target::Session)
            .ok_or_else(|| "agent_queue's `session` is a session's id (a number)".into()),
        (None, Some(Value::Number(n))) => n
            .as_i64()
            .map(|id| Target::NewWith(AgentRef::Id(id)))
            .ok_or_else(|| "agent_queue's `agent` is an agent's id or name".into()),
        (None, Some(Value::String(name))) if !name.trim().is_empty() => {
            Ok(Target::NewWith(AgentRef::Name(name.clone())))
        }
        (None, Some(_)) => Err("agent_queue's `agent` is an agent's id or name".into()),
        (None, None) => Ok(Target::This),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_name_one_target() {
        let t = |v: Value| target(&v);
        assert_eq!(t(json!({"message": "m"})), Ok(Target::This));
        assert_eq!(t(json!({"session": 4})), Ok(Target::Session(4)));
        assert_eq!(t(json!({"agent": 7})), Ok(Target::NewWith(AgentRef::Id(7))));
        assert_eq!(
            t(json!({"agent": "Analyst"})),
            Ok(Target::NewWith(AgentRef::Name("Analyst".into())))
        );
        assert!(
            t(json!({"session": 4, "agent": 7}))
                .unwrap_err()
                .contains("not both")
        );
        assert!(t(json!({"agent": " "})).is_err());
        assert!(t(json!({"agent": [1]})).is_err());
    }
}
