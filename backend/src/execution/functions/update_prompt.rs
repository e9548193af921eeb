//! `update_prompt`: the agent marks one of its `<hml-prompt>`s answered with what the user
//! said in chat instead of in the prompt (reference 000, "If User Answers in Chat Instead
//! of Prompt"). The conditional ability `prompt_response_handler` ([`crate::agents::conditional`])
//! tells the agent when this may be so. Runs without asking: it writes only an answer to a
//! prompt of this conversation that has none, exactly as the page would.

use futures::future::BoxFuture;
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use hero_shared::frame::AuthorType;
use serde_json::{Value, json};

use super::{Ctx, Function, Spec};
use crate::Error;

pub struct UpdatePrompt;

impl Function for UpdatePrompt {
    fn spec(&self) -> Spec {
        Spec {
            name: "update_prompt".into(),
            description: "Marks one of your <hml-prompt>s answered with the answer the user gave in chat instead: the prompt shows it, as if they had answered there.".into(),
            plugin: None,
            default: Permission::Always,
            permissions: FunctionPermissions::allowed(DangerLevel::Safe),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "message_id": {"type": "string", "description": "the message holding the prompt", "minLength": 1, "maxLength": 100},
                    "prompt_id": {"type": "string", "description": "the prompt's id", "minLength": 1, "maxLength": 100},
                    "answer": {"description": "the user's answer"}
                },
                "required": ["message_id", "prompt_id", "answer"]
            }),
            examples: vec![json!({"message_id": "…", "prompt_id": "fav-color", "answer": "Blue"})],
        }
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let field = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or_default();
            let (message_id, prompt_id) = (field("message_id"), field("prompt_id"));
            let answer = args.get("answer").cloned().unwrap_or(Value::Null);
            let shown = super::ask::answer_text(&answer);
            crate::conversation::answers::check_size(&answer).map_err(|e| e.public_message())?;
            let dk = crate::accounts::users::data_key(&cx.st.db, &cx.st.keys, cx.user_id)
                .await
                .map_err(|e| e.public_message())?;
            crate::conversation::answers::answer_prompt(
                cx.st,
                crate::conversation::answers::Answerer {
                    user_id: cx.user_id,
                    author_type: AuthorType::Agent,
                    author_id: cx.agent_id,
                },
                &dk,
                cx.session_id,
                message_id,
                prompt_id,
                answer,
            )
            .await
            .map_err(|e| match e {
                Error::NotFound(_) => format!(
                    "there is no prompt `{prompt_id}` in message `{message_id}` of this conversation"
                ),
                Error::Conflict(_) => format!("the prompt `{prompt_id}` was already answered"),
                e => e.public_message(),
            })?;
            Ok(format!(
                "the prompt `{prompt_id}` is marked answered: {shown}"
            ))
        })
    }
}
