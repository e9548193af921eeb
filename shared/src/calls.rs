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
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
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

/// How much harm a function can do (reference 000's `dangerLevel`): shown on its approval
/// card and the Permissions page; letting a dangerous one run without asking is confirmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum DangerLevel {
    Safe,
    Moderate,
    Dangerous,
}

impl DangerLevel {
    pub const fn as_str(self) -> &'static str {
        match self {
            DangerLevel::Safe => "safe",
            DangerLevel::Moderate => "moderate",
            DangerLevel::Dangerous => "dangerous",
        }
    }
}

/// Whether the user may let a function run without asking (reference 000's `autoApprove`;
/// `never` is reference 003's "Ask Always": its card has no "Always allow", and its level
/// cannot be `always`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum AutoApprove {
    Always,
    Never,
}

/// A function's permission metadata (reference 000's ability `permissions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FunctionPermissions {
    pub auto_approve: AutoApprove,
    pub danger_level: DangerLevel,
}

impl FunctionPermissions {
    /// May be allowed always, at the danger given.
    pub const fn allowed(danger_level: DangerLevel) -> FunctionPermissions {
        FunctionPermissions {
            auto_approve: AutoApprove::Always,
            danger_level,
        }
    }

    /// Whether the user may set it to `always`.
    pub fn may_be_always(self) -> bool {
        self.auto_approve == AutoApprove::Always
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
    /// A legacy assertion (reference 000), the message's `index`th ([`crate::legacy`]).
    Assertion { index: usize },
}

impl CallOrigin {
    /// The element id, prose id or tool id the reply's events name the call by.
    pub fn element_id(&self) -> String {
        match self {
            CallOrigin::Element { element_id, .. } => element_id.clone(),
            CallOrigin::Prose { offset } => format!("call@{offset}"),
            CallOrigin::Tool { tool_use_id } => tool_use_id.clone(),
            CallOrigin::Assertion { index } => format!("assertion-{index}"),
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
    /// The function's permission metadata when the call was asked for (none in requests
    /// stored before it was kept, or for a function that does not exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<FunctionPermissions>,
    /// The configuration change it proposes (`propose_config_change`), as its card shows
    /// it for the user's decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<ProposedChange>,
}

/// A configuration change a call proposes (reference 004): the key, the version it was
/// made against, why, and the lines it changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposedChange {
    /// 004's `pendingChangeId`: the change's id, which is its call's request frame's
    /// (`/api/configs/changes/{id}`). Empty in requests stored before it was kept here.
    #[serde(rename = "pendingChangeId", default)]
    pub pending_change_id: String,
    pub key: String,
    pub base_version: i64,
    pub reason: String,
    pub diff: Vec<DiffOp>,
}

/// One run of lines of a diff, by line: kept, added or removed. Joining the texts of the
/// `equal` and `insert` runs gives the new text; of `equal` and `delete`, the old.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct DiffOp {
    /// `equal`, `insert` or `delete`.
    pub op: String,
    pub text: String,
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

/// What a call does, in words, as its card says it: a verb, what it acts on, and whether
/// that is code (a command). `None` for a function without words here (its card shows its
/// arguments).
pub fn call_words(function: &str, args: &Value) -> Option<(&'static str, String, bool)> {
    let arg = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_owned);
    let words = match function {
        "bash" => ("Runs", arg("command")?, true),
        "websearch" => match (arg("query"), arg("url")) {
            (Some(q), _) => ("Searches the web for", q, false),
            (None, Some(u)) => ("Reads the page", u, false),
            (None, None) => return None,
        },
        "ask" => ("Asks", arg("question")?, false),
        "help" => (
            "Looks up help on",
            arg("function").unwrap_or_else(|| "every function".into()),
            false,
        ),
        "memory_search" => ("Searches memory for", arg("query")?, false),
        "memory_get" => ("Reads from memory", arg("path")?, false),
        "memory_write" => ("Writes to memory", arg("path")?, false),
        "skill_search" => ("Searches the skills for", arg("query")?, false),
        "skill_get" => ("Reads the skill", arg("name")?, false),
        "context_file" if args.get("content").is_some() => ("Writes", arg("name")?, false),
        "context_file" => ("Reads", arg("name")?, false),
        "user_notify" => ("Tells you", arg("message")?, false),
        "agent_queue" => ("Queues the message", arg("message")?, false),
        "list_configs" => ("Lists", "its configuration".into(), false),
        "read_config" => ("Reads its configuration", arg("key")?, true),
        "propose_config_change" => ("Proposes a change to", arg("key")?, true),
        _ => return None,
    };
    Some(words)
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

/// Reads a timeout as reference 000 writes it, in milliseconds (`30000`), or in the older
/// form with a unit (`30s`, `2m`, `1h`, `500ms`). A bare number under 1,000 is refused with a
/// hint: it is almost surely seconds written the old way, and taken as milliseconds it
/// would end the wait before anyone could answer.
pub fn timeout_ms(value: &serde_json::Value) -> Result<u64, String> {
    use serde_json::Value;
    let bare = |n: u64| {
        if n < 1000 {
            Err(format!(
                "is in milliseconds: for {n} seconds write {}",
                n.saturating_mul(1000)
            ))
        } else {
            Ok(n)
        }
    };
    let text = match value {
        Value::Number(n) => {
            return match n.as_u64() {
                Some(n) => bare(n),
                None => Err("must be a whole number of milliseconds".into()),
            };
        }
        Value::String(s) => s.trim().to_ascii_lowercase(),
        _ => return Err("must be a whole number of milliseconds".into()),
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let Ok(n) = digits.parse::<u64>() else {
        return Err(format!(
            "must be a whole number of milliseconds (30000), not `{text}`"
        ));
    };
    let scale = match unit.trim() {
        "" => return bare(n),
        "ms" => 1,
        "s" | "sec" | "secs" | "seconds" => 1000,
        "m" | "min" | "mins" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        other => {
            return Err(format!(
                "has the unit `{other}`; write milliseconds (30000), or 30s, 2m"
            ));
        }
    };
    Ok(n.saturating_mul(scale))
}

/// A timeout as a request stored before timeouts were milliseconds holds it: under 1,000
/// it was seconds (a request holds only what [`timeout_ms`] let through since).
pub fn stored_timeout_ms(stored: u64) -> u64 {
    if stored < 1000 {
        stored.saturating_mul(1000)
    } else {
        stored
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

    #[test]
    fn a_call_is_said_in_words() {
        use serde_json::json;
        let w = |f: &str, a: Value| call_words(f, &a);
        assert_eq!(
            w("bash", json!({"command": "ls -la"})),
            Some(("Runs", "ls -la".into(), true))
        );
        assert_eq!(
            w("websearch", json!({"query": "rust"})),
            Some(("Searches the web for", "rust".into(), false))
        );
        assert_eq!(
            w("websearch", json!({"url": "https://example.com"})).map(|w| w.0),
            Some("Reads the page")
        );
        assert_eq!(
            w("ask", json!({"question": "Why?"})).map(|w| w.1),
            Some("Why?".into())
        );
        assert_eq!(
            w("help", json!({})).map(|w| w.1),
            Some("every function".into())
        );
        assert_eq!(
            w("context_file", json!({"name": "USER.md", "content": ""})).map(|w| w.0),
            Some("Writes")
        );
        assert_eq!(
            w("bash", json!({})),
            None,
            "without its argument, the arguments show"
        );
        assert_eq!(w("a_plugin_tool", json!({"x": 1})), None);
    }

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
            permissions: None,
            change: None,
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

    #[test]
    fn timeouts_are_milliseconds_and_the_old_form_is_read() {
        let read = |v: serde_json::Value| timeout_ms(&v);
        assert_eq!(read(json!(30000)), Ok(30000));
        assert_eq!(read(json!("30000")), Ok(30000));
        assert_eq!(read(json!("30s")), Ok(30000));
        assert_eq!(read(json!(" 2m ")), Ok(120_000));
        assert_eq!(read(json!("1h")), Ok(3_600_000));
        assert_eq!(read(json!("1500ms")), Ok(1500));
        assert_eq!(
            read(json!(30)),
            Err("is in milliseconds: for 30 seconds write 30000".into())
        );
        assert_eq!(
            read(json!("30")),
            Err("is in milliseconds: for 30 seconds write 30000".into())
        );
        assert!(read(json!("soon")).unwrap_err().contains("`soon`"));
        assert!(read(json!("5d")).unwrap_err().contains("unit `d`"));
        assert!(
            read(json!(1.5)).is_err() && read(json!(-3)).is_err() && read(json!(null)).is_err()
        );
        assert_eq!(stored_timeout_ms(30), 30_000);
        assert_eq!(stored_timeout_ms(30_000), 30_000);
    }
}
