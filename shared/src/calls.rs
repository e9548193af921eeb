//! Calls: what an agent (or the user, in their own message) asked the system to run, as the
//! log records it (reference 003, "Interaction Flow Example"): a `request` frame per call
//! whose parent is the message that asked, the user's decision as an `update` of that
//! request, and a `result` frame whose parent is the request. The payload shapes live here
//! so that the server writes them and the page reads them with one definition.
//!
//! A request's `sender_id` is set by the server alone, from the signed-in user whose own
//! message held the call: it is never read from model or client text.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::frame::{CompiledMessage, FrameType};

/// How a function may run (reference 000, "Permission Levels").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Runs without asking.
    Always,
    /// Waits for the user's approval.
    Ask,
    /// Never runs; the agent is told it was denied.
    Never,
}

impl Permission {
    pub const fn as_str(self) -> &'static str {
        match self {
            Permission::Always => "always",
            Permission::Ask => "ask",
            Permission::Never => "never",
        }
    }

    pub fn parse(s: &str) -> Option<Permission> {
        match s {
            "always" => Some(Permission::Always),
            "ask" => Some(Permission::Ask),
            "never" => Some(Permission::Never),
            _ => None,
        }
    }
}

/// Where in a message a call was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "form", rename_all = "snake_case")]
pub enum CallOrigin {
    /// An executable element (`<websearch>`, `<interaction>`), by its element id.
    Element { element_id: String, kind: String },
    /// An `@system(...)` call in prose, at this byte offset of the message.
    Prose { offset: u64 },
    /// A native tool call of the provider, by the provider's id for it.
    Tool { tool_use_id: String },
}

impl CallOrigin {
    /// The element id, prose id or tool id the reply's events name the call by.
    pub fn element_id(&self) -> String {
        match self {
            CallOrigin::Element { element_id, .. } => element_id.clone(),
            CallOrigin::Prose { offset } => format!("call@{offset}"),
            CallOrigin::Tool { tool_use_id } => tool_use_id.clone(),
        }
    }
}

/// Where a call stands before its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// Waits for the user's approval.
    Pending,
    /// May run: approved by the user, by an `always` level, or asked by the user themself.
    Approved,
    /// Denied by the user or by a `never` level.
    Denied,
    /// Not a valid call (unknown function, arguments against its schema).
    Invalid,
    /// The user pressed Stop while it waited.
    Stopped,
    /// A question (`ask`) waiting for the user's answer: the answer is its result.
    Asking,
}

/// A `request` frame's payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallRequest {
    pub function: String,
    /// The arguments as the caller gave them, `sender_id` stripped.
    pub args: Value,
    pub origin: CallOrigin,
    pub status: CallStatus,
    /// Who or what decided the status: `always`, `never`, `user` (a decision), `sender`
    /// (the user's own message), `schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The user whose own message asked for the call: set by the server only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_id: Option<i64>,
    /// Why it is not valid (`invalid` only): what the agent is told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// One line for people reading the log.
    pub content: String,
    /// When a timed question takes its default (Unix milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

impl CallRequest {
    /// A text argument.
    pub fn arg(&self, key: &str) -> Option<&str> {
        self.args.get(key).and_then(Value::as_str)
    }

    /// A list-of-text argument (a question's `options`): its text items.
    pub fn arg_list(&self, key: &str) -> Vec<String> {
        self.args
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    }
}

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// The function ran and failed.
    Error,
    Denied,
    Invalid,
    Stopped,
}

/// A `result` frame's payload: `content` is what the agent is told (reference 000's
/// "formatted feedback").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallResult {
    pub function: String,
    pub outcome: Outcome,
    pub content: String,
    /// The function's own output (`ok`) or error (`error`), without the framing line.
    #[serde(default)]
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
}

/// A call as the page shows it: its request, as last decided, and its result if any.
#[derive(Clone, Debug, PartialEq)]
pub struct CallView {
    pub request_id: String,
    /// The message that asked for the call.
    pub message_id: String,
    pub request: CallRequest,
    pub result: Option<CallResult>,
}

impl CallView {
    /// What the card says of the call.
    pub fn state(&self) -> &'static str {
        match (&self.result, self.request.status) {
            (Some(r), _) => match r.outcome {
                Outcome::Ok => "done",
                Outcome::Error => "failed",
                Outcome::Denied => "denied",
                Outcome::Invalid => "not valid: not run",
                Outcome::Stopped => "stopped",
            },
            (None, CallStatus::Pending) => "waiting for your approval",
            (None, CallStatus::Approved) => "running",
            (None, CallStatus::Denied) => "denied",
            (None, CallStatus::Invalid) => "not valid: not run",
            (None, CallStatus::Stopped) => "stopped",
            (None, CallStatus::Asking) => "waiting for your answer",
        }
    }

    pub fn is_pending(&self) -> bool {
        self.result.is_none() && self.request.status == CallStatus::Pending
    }

    /// A question of the agent's still waiting for the user's answer.
    pub fn is_question(&self) -> bool {
        self.result.is_none() && self.request.status == CallStatus::Asking
    }
}

/// Every call in a compiled conversation, in the order they were asked for.
pub fn calls(messages: &[CompiledMessage]) -> Vec<CallView> {
    let mut out: Vec<CallView> = messages
        .iter()
        .filter(|m| m.frame_type == FrameType::Request)
        .filter_map(|m| {
            Some(CallView {
                request_id: m.frame_id.clone(),
                message_id: m.parent_id.clone()?,
                request: serde_json::from_value(m.payload.clone()).ok()?,
                result: None,
            })
        })
        .collect();
    for m in messages
        .iter()
        .filter(|m| m.frame_type == FrameType::Result)
    {
        let Some(parent) = &m.parent_id else { continue };
        if let Some(c) = out.iter_mut().find(|c| &c.request_id == parent) {
            c.result = serde_json::from_value(m.payload.clone()).ok();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{AuthorType, Frame, TargetId, compile_frames};
    use serde_json::json;

    fn frame(seq: i64, id: &str, t: FrameType, parent: Option<&str>, payload: Value) -> Frame {
        Frame {
            id: id.into(),
            session_id: 1,
            seq,
            parent_id: parent.map(str::to_owned),
            target_ids: if t == FrameType::Update {
                vec![TargetId::Frame(parent.unwrap_or_default().into())]
            } else {
                Vec::new()
            },
            timestamp: String::new(),
            frame_type: t,
            author_type: AuthorType::System,
            author_id: None,
            payload,
        }
    }

    #[test]
    fn a_call_reads_its_decision_and_its_result_from_the_log() {
        let mut req = CallRequest {
            function: "websearch".into(),
            args: json!({"query": "rust"}),
            origin: CallOrigin::Element {
                element_id: "e1".into(),
                kind: "websearch".into(),
            },
            status: CallStatus::Pending,
            decided_by: None,
            sender_id: None,
            problem: None,
            content: "websearch".into(),
            expires_at: None,
        };
        let mut frames = vec![
            frame(
                1,
                "a",
                FrameType::Message,
                None,
                json!({"role": "agent", "content": "<websearch>rust</websearch>"}),
            ),
            frame(
                2,
                "r",
                FrameType::Request,
                Some("a"),
                serde_json::to_value(&req).unwrap(),
            ),
        ];
        let view = calls(&compile_frames(&frames));
        assert_eq!(view.len(), 1);
        assert!(view[0].is_pending());
        assert_eq!(view[0].state(), "waiting for your approval");

        req.status = CallStatus::Approved;
        req.decided_by = Some("user".into());
        frames.push(frame(
            3,
            "d",
            FrameType::Update,
            Some("r"),
            serde_json::to_value(&req).unwrap(),
        ));
        let view = calls(&compile_frames(&frames));
        assert_eq!(view[0].state(), "running");
        assert_eq!(view[0].message_id, "a");

        let res = CallResult {
            function: "websearch".into(),
            outcome: Outcome::Ok,
            content: "[websearch] found".into(),
            output: "found".into(),
            tool_use_id: None,
        };
        frames.push(frame(
            4,
            "x",
            FrameType::Result,
            Some("r"),
            serde_json::to_value(&res).unwrap(),
        ));
        let view = calls(&compile_frames(&frames));
        assert_eq!(view[0].state(), "done");
        assert_eq!(view[0].result.as_ref().unwrap().output, "found");
    }

    #[test]
    fn levels_read_and_write_as_the_api_names_them() {
        for p in [Permission::Always, Permission::Ask, Permission::Never] {
            assert_eq!(Permission::parse(p.as_str()), Some(p));
            assert_eq!(serde_json::to_value(p).unwrap(), json!(p.as_str()));
        }
        assert_eq!(Permission::parse("sometimes"), None);
    }
}
