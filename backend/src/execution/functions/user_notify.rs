//! `user_notify`: the agent tells the user something at once, wherever they are (reference
//! 000's `@user(notify, {message, level?})`): a `notification` on every WebSocket of the
//! user (each of their tabs shows a toast), and a notice line in the chat, which the agent
//! is not sent back. Safe, so it runs without asking.

use futures::future::BoxFuture;
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use serde_json::{Value, json};

use super::{Ctx, Function, Spec};

/// The levels a notification may have.
pub const LEVELS: [&str; 4] = ["info", "success", "warning", "error"];

pub struct UserNotify;

impl Function for UserNotify {
    fn spec(&self) -> Spec {
        Spec {
            name: "user_notify".into(),
            description: "Shows the user a notification at once, in every tab they have open, and a notice line in this chat. Call it as @user(notify, {\"message\": \"Done!\"}).".into(),
            plugin: None,
            default: Permission::Always,
            permissions: FunctionPermissions::allowed(DangerLevel::Safe),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "what to tell the user", "minLength": 1, "maxLength": 500},
                    "level": {"type": "string", "description": "how it is shown", "enum": LEVELS}
                },
                "required": ["message"]
            }),
            examples: vec![json!({"message": "The report is ready.", "level": "success"})],
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
            let level = args
                .get("level")
                .and_then(Value::as_str)
                .unwrap_or("info")
                .to_owned();
            // The notice line, for this chat and its log (the agent is not sent it back).
            let dk = crate::accounts::users::data_key(&cx.st.db, &cx.st.keys, cx.user_id)
                .await
                .map_err(|e| e.public_message())?;
            let text = format!("Notification: {message}");
            crate::conversation::frames::append_notice(
                cx.st,
                &dk,
                cx.user_id,
                cx.session_id,
                text,
                &level,
            )
            .await
            .map_err(|e| e.public_message())?;
            cx.st.hub.publish_user(
                cx.user_id,
                crate::conversation::hub::HubEvent::Notification {
                    session_id: cx.session_id,
                    message: message.clone(),
                    level,
                },
            );
            Ok(format!("the user was notified: {message}"))
        })
    }
}
