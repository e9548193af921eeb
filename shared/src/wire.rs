//! What travels between server and browser: SSE events, WebSocket messages, frame DTOs.
//!
//! Names and field names are reference 000's (camelCase data fields, snake_case event
//! and message type names), so one definition serves both ends. The server writes an
//! SSE event as `event: {event_name()}` / `data: {write_data()}`; the browser reads one
//! back with [`SseEvent::from_parts`]. WebSocket messages are JSON objects tagged by
//! `type`.
//!
//! Ids: message and frame ids are strings (the server's choice of format), session ids
//! are integers, as in reference 003's frame schema.

use serde::{Deserialize, Serialize};

pub use crate::frame::{CompiledMessage, Frame, FrameStats};

/// Reads a wire JSON value, through the one decoder the browser also uses for server
/// functions' answers (`from_slice`): each type decoded from both a `&str` and bytes
/// would be in the wasm twice.
pub(crate) fn json<'a, T: serde::Deserialize<'a>>(data: &'a str) -> Result<T, WireError> {
    serde_json::from_slice(data.as_bytes()).map_err(WireError::Json)
}

pub type SessionId = i64;

/// Attributes travel as a JSON object, as reference 000's `attributes`; order is kept.
mod attrs_map {
    use serde::de::{MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(attrs: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(attrs.len()))?;
        for (k, v) in attrs {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<(String, String)>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of string attributes")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some((k, val)) = a.next_entry::<String, String>()? {
                    v.push((k, val));
                }
                Ok(v)
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageStart {
    pub message_id: String,
    pub session_id: SessionId,
    pub agent_name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextData {
    pub message_id: String,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementStart {
    pub message_id: String,
    pub id: String,
    /// The element's tag name (`bash`, `hml-prompt`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(with = "attrs_map")]
    pub attributes: Vec<(String, String)>,
    pub executable: bool,
    /// The id of the element this one is nested in (not in reference 000; lets the
    /// browser build the tree from events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementUpdate {
    pub message_id: String,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The content so far, when the server chooses to send it; the delta always comes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub delta: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementComplete {
    pub message_id: String,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub content: String,
    /// Whether the server will run it: false for display and truncated elements.
    pub executable: bool,
    /// Milliseconds from the element's start to its completion, on a monotonic clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u64>,
    /// The stream ended before the close tag, or the element outgrew [`Self::limit`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The bound an element outgrew (bytes): it ended there, truncated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementRef {
    pub message_id: String,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The call's request frame id (the WebSocket's `operationId` / `executionId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// The function the call runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// What runs, in one line ([`call_line`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// A call as `operation_start` shows it: bash's command line, or the call in one line
/// (`websearch({"query":"…"})`); at most [`COMMAND_CHARS`] characters, cut with `…`.
pub fn call_line(function: &str, args: &serde_json::Value) -> String {
    let line = match (
        function,
        args.get("command").and_then(serde_json::Value::as_str),
    ) {
        ("bash", Some(command)) => command.to_owned(),
        _ => {
            let args = match args {
                serde_json::Value::Null => String::new(),
                a => a.to_string(),
            };
            format!("{function}({args})")
        }
    };
    match line.char_indices().nth(COMMAND_CHARS - 1) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementResult {
    pub message_id: String,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The call's request frame id (the WebSocket's `operationId` / `executionId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    pub result: serde_json::Value,
}

/// `element_skipped`: a call that never ran (Hero's addition to reference 000, whose
/// `element_error` is for a call that ran and failed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementSkipped {
    pub message_id: String,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The call's request frame id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// `denied` (by the user), `never` (its level), `invalid` (no such function, bad
    /// arguments), `stopped` (Stop before it ran), `bound` (past the message's or the
    /// rounds' bound).
    pub reason: String,
    /// Why, as the agent is told.
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementErrorData {
    pub message_id: String,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The call's request frame id (the WebSocket's `operationId` / `executionId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    pub error: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUseStart {
    pub message_id: String,
    pub tool_id: String,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub message_id: String,
    pub tool_id: String,
    pub content: String,
}

/// One executed element, as reported in `message_complete`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutedElement {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `completed`, `failed`, `stopped` (while it ran), or why it never ran (the reasons of
    /// [`ElementSkipped`]).
    #[serde(default)]
    pub status: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageComplete {
    pub message_id: String,
    pub content: String,
    pub executed_elements: Vec<ExecutedElement>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    pub error: String,
}

/// Every SSE event of reference 000. As JSON (for mirroring over a WebSocket) it is
/// `{"event": name, "data": {...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum SseEvent {
    MessageStart(MessageStart),
    Text(TextData),
    ElementStart(ElementStart),
    ElementUpdate(ElementUpdate),
    ElementComplete(ElementComplete),
    ElementExecuting(ElementRef),
    ElementResult(ElementResult),
    ElementError(ElementErrorData),
    ElementSkipped(ElementSkipped),
    ToolUseStart(ToolUseStart),
    ToolResult(ToolResult),
    MessageComplete(MessageComplete),
    Error(ErrorData),
}

/// A wire message that could not be read.
#[derive(Debug)]
pub enum WireError {
    UnknownEvent(String),
    Json(serde_json::Error),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::UnknownEvent(e) => write!(f, "unknown SSE event {e:?}"),
            WireError::Json(e) => write!(f, "malformed wire JSON: {e}"),
        }
    }
}

impl std::error::Error for WireError {}

impl SseEvent {
    /// An event of a call's execution (which follows its stored message), not of the reply.
    pub fn is_execution(&self) -> bool {
        matches!(
            self,
            SseEvent::ElementExecuting(_)
                | SseEvent::ElementResult(_)
                | SseEvent::ElementError(_)
                | SseEvent::ElementSkipped(_)
                | SseEvent::ToolResult(_)
        )
    }

    pub const NAMES: [&'static str; 12] = [
        "message_start",
        "text",
        "element_start",
        "element_update",
        "element_complete",
        "element_executing",
        "element_result",
        "element_error",
        "tool_use_start",
        "tool_result",
        "message_complete",
        "error",
    ];

    /// The SSE `event:` name.
    pub fn event_name(&self) -> &'static str {
        match self {
            SseEvent::MessageStart(_) => "message_start",
            SseEvent::Text(_) => "text",
            SseEvent::ElementStart(_) => "element_start",
            SseEvent::ElementUpdate(_) => "element_update",
            SseEvent::ElementComplete(_) => "element_complete",
            SseEvent::ElementExecuting(_) => "element_executing",
            SseEvent::ElementResult(_) => "element_result",
            SseEvent::ElementError(_) => "element_error",
            SseEvent::ElementSkipped(_) => "element_skipped",
            SseEvent::ToolUseStart(_) => "tool_use_start",
            SseEvent::ToolResult(_) => "tool_result",
            SseEvent::MessageComplete(_) => "message_complete",
            SseEvent::Error(_) => "error",
        }
    }

    /// Writes the `data:` payload to `w`. JSON strings escape their newlines, so the
    /// payload is always one line.
    pub fn write_data<W: std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        let r = match self {
            SseEvent::MessageStart(d) => serde_json::to_writer(w, d),
            SseEvent::Text(d) => serde_json::to_writer(w, d),
            SseEvent::ElementStart(d) => serde_json::to_writer(w, d),
            SseEvent::ElementUpdate(d) => serde_json::to_writer(w, d),
            SseEvent::ElementComplete(d) => serde_json::to_writer(w, d),
            SseEvent::ElementExecuting(d) => serde_json::to_writer(w, d),
            SseEvent::ElementResult(d) => serde_json::to_writer(w, d),
            SseEvent::ElementError(d) => serde_json::to_writer(w, d),
            SseEvent::ElementSkipped(d) => serde_json::to_writer(w, d),
            SseEvent::ToolUseStart(d) => serde_json::to_writer(w, d),
            SseEvent::ToolResult(d) => serde_json::to_writer(w, d),
            SseEvent::MessageComplete(d) => serde_json::to_writer(w, d),
            SseEvent::Error(d) => serde_json::to_writer(w, d),
        };
        // These plain structs have string keys only: only the writer can fail.
        r.map_err(std::io::Error::from)
    }

    /// Writes the whole SSE frame, `event: ..\ndata: ..\n\n`, to `w`.
    pub fn write_sse<W: std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b"event: ")?;
        w.write_all(self.event_name().as_bytes())?;
        w.write_all(b"\ndata: ")?;
        self.write_data(w)?;
        w.write_all(b"\n\n")
    }

    /// Reads an event back from its SSE name and data.
    pub fn from_parts(event: &str, data: &str) -> Result<SseEvent, WireError> {
        use self::json as p;
        Ok(match event {
            "message_start" => SseEvent::MessageStart(p(data)?),
            "text" => SseEvent::Text(p(data)?),
            "element_start" => SseEvent::ElementStart(p(data)?),
            "element_update" => SseEvent::ElementUpdate(p(data)?),
            "element_complete" => SseEvent::ElementComplete(p(data)?),
            "element_executing" => SseEvent::ElementExecuting(p(data)?),
            "element_result" => SseEvent::ElementResult(p(data)?),
            "element_error" => SseEvent::ElementError(p(data)?),
            "element_skipped" => SseEvent::ElementSkipped(p(data)?),
            "tool_use_start" => SseEvent::ToolUseStart(p(data)?),
            "tool_result" => SseEvent::ToolResult(p(data)?),
            "message_complete" => SseEvent::MessageComplete(p(data)?),
            "error" => SseEvent::Error(p(data)?),
            other => return Err(WireError::UnknownEvent(other.to_owned())),
        })
    }

    /// The message the event belongs to (an error may belong to none).
    pub fn message_id(&self) -> Option<&str> {
        Some(match self {
            SseEvent::MessageStart(e) => &e.message_id,
            SseEvent::Text(e) => &e.message_id,
            SseEvent::ElementStart(e) => &e.message_id,
            SseEvent::ElementUpdate(e) => &e.message_id,
            SseEvent::ElementComplete(e) => &e.message_id,
            SseEvent::ElementExecuting(e) => &e.message_id,
            SseEvent::ElementResult(e) => &e.message_id,
            SseEvent::ElementError(e) => &e.message_id,
            SseEvent::ElementSkipped(e) => &e.message_id,
            SseEvent::ToolUseStart(e) => &e.message_id,
            SseEvent::ToolResult(e) => &e.message_id,
            SseEvent::MessageComplete(e) => &e.message_id,
            SseEvent::Error(e) => return e.message_id.as_deref(),
        })
    }

    /// Maps a parser event of message `message_id` to its SSE event, if it has one
    /// (diagnostics have none). `duration` is the server's measure, if any.
    pub fn from_parser_event(
        message_id: &str,
        event: &crate::hml::Event<'_>,
        duration: Option<u64>,
    ) -> Option<SseEvent> {
        use crate::hml::Event;
        let mid = message_id.to_owned();
        Some(match *event {
            Event::Text { text, .. } => SseEvent::Text(TextData {
                message_id: mid,
                text: text.to_owned(),
            }),
            Event::Start {
                id,
                kind,
                parent,
                attributes,
                ..
            } => SseEvent::ElementStart(ElementStart {
                message_id: mid,
                id: id.to_owned(),
                kind: kind.name().to_owned(),
                attributes: attributes.to_vec(),
                executable: kind.is_executable(),
                parent: parent.map(str::to_owned),
            }),
            Event::Update { id, kind, delta } => SseEvent::ElementUpdate(ElementUpdate {
                message_id: mid,
                id: id.to_owned(),
                kind: kind.name().to_owned(),
                content: None,
                delta: delta.to_owned(),
            }),
            Event::Complete {
                id,
                kind,
                content,
                truncated,
                ..
            } => SseEvent::ElementComplete(ElementComplete {
                message_id: mid,
                id: id.to_owned(),
                kind: kind.name().to_owned(),
                content: content.to_owned(),
                executable: event.is_executable_completion(),
                duration,
                truncated,
                limit: None,
            }),
            // It ends there: complete, truncated, never run.
            Event::Error { id, kind, limit } => SseEvent::ElementComplete(ElementComplete {
                message_id: mid,
                id: id.to_owned(),
                kind: kind.name().to_owned(),
                content: String::new(),
                executable: false,
                duration,
                truncated: true,
                limit: Some(limit),
            }),
            Event::Diagnostic(_) => return None,
        })
    }
}

/// Below this much of an element's body every `element_update` is sent; past it, one per
/// eighth of growth ([`ElementEvents`]).
pub const UPDATE_EACH_BELOW: usize = 1024;

/// The element events of one reply as reference 000 gives them, from its parser's events:
/// `element_start`; `element_update` with `content` (the body so far: its deltas
/// concatenated) and `delta` (what came since the last update sent); `element_complete`
/// with `duration`, ms from start to close. Below [`UPDATE_EACH_BELOW`] bytes of body every
/// update is sent; past it, one each time the body has grown by an eighth since the last,
/// and one before the element completes if a delta is pending, so the deltas sent still
/// concatenate to the body, and an element's `content` bytes in all stay under 10 × its
/// size + 512 KiB. Every `element_start` has exactly one `element_complete`: an element that
/// outgrew the parser's bound completes `truncated` with its `limit`. Prose (`text`) is not
/// made here: the reply's `text` events are the provider's chunks as they came.
#[derive(Debug, Default)]
pub struct ElementEvents {
    open: Vec<OpenElement>,
}

#[derive(Debug)]
struct OpenElement {
    id: String,
    body: String,
    /// The body's length when an update was last sent: what follows is the next delta.
    sent: usize,
    started_ms: u64,
}

impl OpenElement {
    fn update(&mut self, message_id: &str, kind: crate::hml::ElementKind) -> SseEvent {
        let delta = self.body[self.sent..].to_owned();
        self.sent = self.body.len();
        SseEvent::ElementUpdate(ElementUpdate {
            message_id: message_id.to_owned(),
            id: self.id.clone(),
            kind: kind.name().to_owned(),
            content: Some(self.body.clone()),
            delta,
        })
    }
}

impl ElementEvents {
    /// The SSE events parser event `ev` of message `message_id` makes; `now_ms` reads a
    /// monotonic clock in ms (any origin: only differences are sent), asked only when an
    /// element starts or ends.
    pub fn take(
        &mut self,
        message_id: &str,
        ev: &crate::hml::Event<'_>,
        now_ms: impl Fn() -> u64,
        mut emit: impl FnMut(SseEvent),
    ) {
        use crate::hml::Event;
        match *ev {
            Event::Text { .. } | Event::Diagnostic(_) => {}
            Event::Start { id, .. } => {
                self.open.push(OpenElement {
                    id: id.to_owned(),
                    body: String::new(),
                    sent: 0,
                    started_ms: now_ms(),
                });
                emit_some(SseEvent::from_parser_event(message_id, ev, None), emit);
            }
            Event::Update { id, kind, delta } => {
                let Some(o) = self.open.iter_mut().rev().find(|o| o.id == id) else {
                    return;
                };
                o.body.push_str(delta);
                if o.body.len() < UPDATE_EACH_BELOW || o.body.len() >= o.sent + o.sent / 8 {
                    emit(o.update(message_id, kind));
                }
            }
            Event::Complete { id, kind, .. } | Event::Error { id, kind, .. } => {
                let at = self.open.iter().rposition(|o| o.id == id);
                let mut o = at.map(|i| self.open.remove(i));
                let duration = o.as_ref().map(|o| now_ms().saturating_sub(o.started_ms));
                if let Some(o) = o.as_mut().filter(|o| o.sent < o.body.len()) {
                    emit(o.update(message_id, kind));
                }
                let Some(mut complete) = SseEvent::from_parser_event(message_id, ev, duration)
                else {
                    return;
                };
                // One that outgrew the bound ends with the body it had.
                if let (SseEvent::ElementComplete(c), Event::Error { .. }, Some(o)) =
                    (&mut complete, ev, o)
                {
                    c.content = o.body;
                }
                emit(complete);
            }
        }
    }
}

fn emit_some(ev: Option<SseEvent>, mut emit: impl FnMut(SseEvent)) {
    if let Some(ev) = ev {
        emit(ev);
    }
}

/// Client → server over the WebSocket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum WsClientMessage {
    /// Stop the session's running turn.
    Abort {
        session_id: SessionId,
    },
    /// The answer to a `question_prompt` (an `ask` element).
    QuestionResponse {
        assertion_id: String,
        answer: serde_json::Value,
    },
    /// The user's decision on an ASK-permission execution.
    AbilityApprovalResponse {
        execution_id: String,
        approved: bool,
    },
    /// Receive the session's frames after `after_seq` (omitted: only new ones); a
    /// reconnecting tab resumes from the last seq it saw.
    Subscribe {
        session_id: SessionId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_seq: Option<i64>,
    },
    Unsubscribe {
        session_id: SessionId,
    },
}

/// Server → client over the WebSocket: reference 000's messages plus frames.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum WsServerMessage {
    MessageStart {
        session_id: SessionId,
        message_id: String,
    },
    MessageChunk {
        session_id: SessionId,
        message_id: String,
        content: String,
    },
    MessageEnd {
        session_id: SessionId,
        message_id: String,
    },
    /// A call's state (reference 000; `assertionId`: its request frame): `pending`,
    /// `asking`, `running`, `completed`, `failed`, `stopped`, or why it never ran (the
    /// reasons of [`ElementSkipped`]). `sessionId` is Hero's addition.
    AssertionUpdate {
        session_id: SessionId,
        message_id: String,
        assertion_id: String,
        status: String,
        result: serde_json::Value,
    },
    /// A question of the agent's waits for the user's answer (`assertionId`: its request
    /// frame); `question_response` or the answers route answers it.
    QuestionPrompt {
        session_id: SessionId,
        message_id: String,
        assertion_id: String,
        question: String,
        /// `demand` (wait for the answer) or `timeout` (use the default after `timeout` ms).
        mode: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<u64>,
        /// Answers offered as buttons.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        options: Vec<String>,
        /// The answer when the time is up.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<String>,
    },
    /// A call began running: `command` is bash's command line, or the call in one line
    /// (`websearch({"query":"…"})`), at most [`COMMAND_CHARS`] characters.
    OperationStart {
        session_id: SessionId,
        operation_id: String,
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        function: Option<String>,
    },
    OperationComplete {
        session_id: SessionId,
        operation_id: String,
        result: serde_json::Value,
    },
    OperationError {
        session_id: SessionId,
        operation_id: String,
        error: String,
    },
    StreamText {
        session_id: SessionId,
        message_id: String,
        text: String,
    },
    /// The SSE `element_start` data, flat beside the session (its `type` as `elementType`).
    StreamElementStart {
        session_id: SessionId,
        message_id: String,
        id: String,
        element_type: String,
        #[serde(with = "attrs_map")]
        attributes: Vec<(String, String)>,
        executable: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
    },
    /// The SSE `element_complete` data, flat beside the session.
    StreamElementComplete {
        session_id: SessionId,
        message_id: String,
        id: String,
        element_type: String,
        content: String,
        executable: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration: Option<u64>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
    },
    /// An agent of the user's changed status: `summoning` (its files are being written from
    /// a description; `detail` says how far) or `active` (`detail` says whether the
    /// templates stood in, and why).
    AgentStatus {
        agent_id: i64,
        status: String,
        detail: String,
    },
    /// A notification for the user (`@user(notify, …)`), on every socket of theirs.
    Notification {
        session_id: SessionId,
        message: String,
        level: String,
    },
    /// A task of the user's was made or changed (reference 004), by them or an agent.
    TaskChanged {
        task_id: i64,
        identifier: String,
        status: String,
    },
    /// A configuration change an agent proposed (reference 004) was proposed (`pending`) or
    /// decided (`approved` with the version it wrote, `rejected`, `stale`), on every
    /// socket of the user's.
    ConfigChange {
        change_id: String,
        session_id: SessionId,
        key: String,
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<i64>,
    },
    /// An execution waits for the user's approval (answered by `ability_approval_response`).
    AbilityApprovalRequest {
        session_id: SessionId,
        execution_id: String,
        ability: String,
        summary: String,
        #[serde(default)]
        details: serde_json::Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        permissions: Option<crate::calls::FunctionPermissions>,
    },
    /// A frame: persisted (it has a seq) or phantom (live preview, never stored, replaced
    /// when the persisted frame arrives).
    Frame { frame: Frame, phantom: bool },
    /// Something went wrong; a reply's error mirrored from its SSE keeps its ids.
    Error {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<SessionId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        error: String,
    },
}

/// The most of a call `operation_start.command` shows (characters).
pub const COMMAND_CHARS: usize = 200;

impl WsServerMessage {
    /// An error of the connection's, no reply's.
    pub fn error(error: impl Into<String>) -> WsServerMessage {
        WsServerMessage::Error {
            session_id: None,
            message_id: None,
            error: error.into(),
        }
    }
}

/// `GET /api/sessions/{id}/frames`: persisted frames from the last compact on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct FramesPage {
    pub session_id: SessionId,
    pub frames: Vec<Frame>,
    /// The highest seq in the session, to subscribe from.
    pub last_seq: Option<i64>,
}

/// `GET /api/sessions/{id}/frames/stats`.
pub type FrameStatsDto = FrameStats;

/// A session's compiled view, as the page renders it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct CompiledView {
    pub session_id: SessionId,
    pub messages: Vec<CompiledMessage>,
    pub stats: FrameStats,
    /// More of this part of the conversation comes before the view: ask for the page
    /// before this seq (`…/view/earlier?before_seq=`). A summary's earlier part is asked
    /// for by the summary's own seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier_before: Option<i64>,
}

/// What [`CompiledView::apply`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The frame is in the view now.
    Added,
    /// The view already had it.
    AlreadyIn,
    /// The view cannot take it by itself (a gap before it, or a frame that changes earlier
    /// messages or starts over): compile the view anew.
    Recompile,
}

impl CompiledView {
    /// Takes the next frame of the log into the view without compiling it all again: a
    /// `message`, `request` or `result` frame right after the last one adds exactly the
    /// message that compiling every frame would add, so a long session costs one message
    /// per new frame (a call's cards included).
    pub fn apply(&mut self, f: &Frame) -> Applied {
        let last = self.stats.last_seq.unwrap_or(0);
        if f.seq <= last {
            return Applied::AlreadyIn;
        }
        use crate::frame::FrameType;
        // A message, a call's request and its result each add a message of their own; an
        // update, a compact, a prompt's answer or a new version changes what came before.
        let own = match f.frame_type {
            // A new version of a message changes which messages are in view.
            FrameType::Message => f.parent_id.is_none(),
            FrameType::Request => true,
            FrameType::Result => f.payload.get("answer").is_none(),
            FrameType::Update | FrameType::Compact => false,
        };
        if f.seq != last + 1 || !own {
            return Applied::Recompile;
        }
        // A reply whose calls began while it streamed comes after them: it compiles before
        // them, so the view is compiled again.
        let children_before = self
            .messages
            .iter()
            .any(|m| m.parent_id.as_deref() == Some(f.id.as_str()));
        if children_before {
            return Applied::Recompile;
        }
        // In a conversation with versions, a frame whose parent is not in view may hang
        // from a version not shown.
        if let Some(parent) = f.parent_id.as_deref()
            && self.messages.iter().any(|m| m.versions.is_some())
            && !self.messages.iter().any(|m| m.frame_id == parent)
        {
            return Applied::Recompile;
        }
        let added = crate::frame::compile_frames(std::slice::from_ref(f));
        // Answers go to the newest message holding their prompt: one that holds prompts can
        // take answers given before it, from older messages too.
        if added.iter().any(|m| m.content.contains("hml-prompt")) {
            return Applied::Recompile;
        }
        self.messages.extend(added);
        self.stats.count(f);
        Applied::Added
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::{Expect, expect};
    use serde_json::json;

    fn check_sse(e: SseEvent, expect: Expect) {
        let mut data = Vec::new();
        e.write_data(&mut data).unwrap();
        let data = String::from_utf8(data).unwrap();
        let line = format!("{} {data}", e.event_name());
        let back = SseEvent::from_parts(e.event_name(), &data).expect("round trip");
        assert_eq!(back, e);
        let tagged: SseEvent = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(tagged, e);
        expect.assert_eq(&line);
    }

    #[test]
    fn sse_events_have_reference_names_and_fields() {
        let m = || "m1".to_owned();
        check_sse(
            SseEvent::MessageStart(MessageStart {
                message_id: m(),
                session_id: 7,
                agent_name: "Ada".into(),
            }),
            expect![[r#"message_start {"messageId":"m1","sessionId":7,"agentName":"Ada"}"#]],
        );
        check_sse(
            SseEvent::Text(TextData {
                message_id: m(),
                text: "hi".into(),
            }),
            expect![[r#"text {"messageId":"m1","text":"hi"}"#]],
        );
        check_sse(
            SseEvent::ElementStart(ElementStart {
                message_id: m(),
                id: "e1".into(),
                kind: "bash".into(),
                attributes: vec![
                    ("timeout".into(), "5".into()),
                    ("cwd".into(), "/tmp".into()),
                ],
                executable: true,
                parent: None,
            }),
            expect![[
                r#"element_start {"messageId":"m1","id":"e1","type":"bash","attributes":{"timeout":"5","cwd":"/tmp"},"executable":true}"#
            ]],
        );
        check_sse(
            SseEvent::ElementUpdate(ElementUpdate {
                message_id: m(),
                id: "e1".into(),
                kind: "bash".into(),
                content: Some("ls -".into()),
                delta: "-".into(),
            }),
            expect![[
                r#"element_update {"messageId":"m1","id":"e1","type":"bash","content":"ls -","delta":"-"}"#
            ]],
        );
        check_sse(
            SseEvent::ElementComplete(ElementComplete {
                message_id: m(),
                id: "e1".into(),
                kind: "bash".into(),
                content: "ls".into(),
                executable: true,
                duration: Some(12),
                truncated: false,
                limit: None,
            }),
            expect![[
                r#"element_complete {"messageId":"m1","id":"e1","type":"bash","content":"ls","executable":true,"duration":12}"#
            ]],
        );
        check_sse(
            SseEvent::ElementExecuting(ElementRef {
                message_id: m(),
                id: "e1".into(),
                kind: "bash".into(),
                execution_id: Some("r1".into()),
                function: Some("bash".into()),
                command: Some(call_line("bash", &json!({"command": "ls -la"}))),
            }),
            expect![[
                r#"element_executing {"messageId":"m1","id":"e1","type":"bash","executionId":"r1","function":"bash","command":"ls -la"}"#
            ]],
        );
        assert_eq!(
            call_line("websearch", &json!({"query": "rust"})),
            r#"websearch({"query":"rust"})"#
        );
        assert_eq!(call_line("help", &serde_json::Value::Null), "help()");
        let long = call_line("bash", &json!({"command": "é".repeat(300)}));
        assert_eq!(long.chars().count(), COMMAND_CHARS);
        assert!(long.ends_with('…'));
        check_sse(
            SseEvent::ElementResult(ElementResult {
                message_id: m(),
                id: "e1".into(),
                kind: "bash".into(),
                result: json!({"exitCode": 0}),
                execution_id: None,
            }),
            expect![[
                r#"element_result {"messageId":"m1","id":"e1","type":"bash","result":{"exitCode":0}}"#
            ]],
        );
        check_sse(
            SseEvent::ElementError(ElementErrorData {
                message_id: m(),
                id: "e1".into(),
                kind: "bash".into(),
                error: "denied".into(),
                execution_id: Some("r1".into()),
            }),
            expect![[
                r#"element_error {"messageId":"m1","id":"e1","type":"bash","executionId":"r1","error":"denied"}"#
            ]],
        );
        check_sse(
            SseEvent::ToolUseStart(ToolUseStart {
                message_id: m(),
                tool_id: "t1".into(),
                name: "search".into(),
            }),
            expect![[r#"tool_use_start {"messageId":"m1","toolId":"t1","name":"search"}"#]],
        );
        check_sse(
            SseEvent::ToolResult(ToolResult {
                message_id: m(),
                tool_id: "t1".into(),
                content: "ok".into(),
            }),
            expect![[r#"tool_result {"messageId":"m1","toolId":"t1","content":"ok"}"#]],
        );
        check_sse(
            SseEvent::MessageComplete(MessageComplete {
                message_id: m(),
                content: "done".into(),
                executed_elements: vec![ExecutedElement {
                    id: "e1".into(),
                    kind: "bash".into(),
                    result: Some(json!("ok")),
                    error: None,
                    status: "completed".into(),
                }],
            }),
            expect![[
                r#"message_complete {"messageId":"m1","content":"done","executedElements":[{"id":"e1","type":"bash","result":"ok","status":"completed"}]}"#
            ]],
        );
        check_sse(
            SseEvent::ElementSkipped(ElementSkipped {
                message_id: m(),
                id: "e2".into(),
                kind: "websearch".into(),
                execution_id: Some("r2".into()),
                reason: "denied".into(),
                message: "the user denied it".into(),
            }),
            expect![[
                r#"element_skipped {"messageId":"m1","id":"e2","type":"websearch","executionId":"r2","reason":"denied","message":"the user denied it"}"#
            ]],
        );
        check_sse(
            SseEvent::Error(ErrorData {
                message_id: Some(m()),
                error: "boom".into(),
            }),
            expect![[r#"error {"messageId":"m1","error":"boom"}"#]],
        );
        assert!(matches!(
            SseEvent::from_parts("nope", "{}"),
            Err(WireError::UnknownEvent(_))
        ));
        assert!(matches!(
            SseEvent::from_parts("text", "{"),
            Err(WireError::Json(_))
        ));
    }

    #[test]
    fn parser_events_map_to_sse() {
        let mut lines = Vec::new();
        let mut p = crate::hml::StreamParser::new();
        let mut sink = |e: crate::hml::Event<'_>| {
            if let Some(s) = SseEvent::from_parser_event("m", &e, None) {
                let mut frame = Vec::new();
                s.write_sse(&mut frame).unwrap();
                lines.push(String::from_utf8(frame).unwrap());
            }
        };
        p.feed_with(b"a<bash cwd=/>ls</bash><ask>q", &mut sink);
        p.finish_with(&mut sink);
        expect![[r#"
            event: text
            data: {"messageId":"m","text":"a"}

            event: element_start
            data: {"messageId":"m","id":"e1","type":"bash","attributes":{"cwd":"/"},"executable":true}

            event: element_update
            data: {"messageId":"m","id":"e1","type":"bash","delta":"ls"}

            event: element_complete
            data: {"messageId":"m","id":"e1","type":"bash","content":"ls","executable":true}

            event: element_start
            data: {"messageId":"m","id":"e2","type":"ask","attributes":{},"executable":true}

            event: element_update
            data: {"messageId":"m","id":"e2","type":"ask","delta":"q"}

            event: element_complete
            data: {"messageId":"m","id":"e2","type":"ask","content":"q","executable":false,"truncated":true}

        "#]]
        .assert_eq(&lines.concat());
    }

    fn check_ws<T: Serialize + for<'de> Deserialize<'de> + PartialEq + std::fmt::Debug>(
        m: T,
        expect: Expect,
    ) {
        let s = serde_json::to_string(&m).unwrap();
        let back: T = serde_json::from_str(&s).unwrap();
        assert_eq!(back, m);
        expect.assert_eq(&s);
    }

    #[test]
    fn websocket_messages() {
        check_ws(
            WsClientMessage::Abort { session_id: 3 },
            expect![[r#"{"type":"abort","sessionId":3}"#]],
        );
        check_ws(
            WsClientMessage::QuestionResponse {
                assertion_id: "a1".into(),
                answer: json!("yes"),
            },
            expect![[r#"{"type":"question_response","assertionId":"a1","answer":"yes"}"#]],
        );
        check_ws(
            WsClientMessage::AbilityApprovalResponse {
                execution_id: "x1".into(),
                approved: true,
            },
            expect![[r#"{"type":"ability_approval_response","executionId":"x1","approved":true}"#]],
        );
        check_ws(
            WsClientMessage::Subscribe {
                session_id: 3,
                after_seq: Some(41),
            },
            expect![[r#"{"type":"subscribe","sessionId":3,"afterSeq":41}"#]],
        );
        check_ws(
            WsServerMessage::QuestionPrompt {
                session_id: 3,
                message_id: "m".into(),
                assertion_id: "a".into(),
                question: "Go?".into(),
                mode: "timeout".into(),
                timeout: Some(30000),
                options: vec!["yes".into(), "no".into()],
                default: Some("no".into()),
            },
            expect![[
                r#"{"type":"question_prompt","sessionId":3,"messageId":"m","assertionId":"a","question":"Go?","mode":"timeout","timeout":30000,"options":["yes","no"],"default":"no"}"#
            ]],
        );
        check_ws(
            WsServerMessage::StreamElementStart {
                session_id: 3,
                message_id: "m".into(),
                id: "e1".into(),
                element_type: "todo".into(),
                attributes: vec![("title".into(), "Plan".into())],
                executable: false,
                parent: None,
            },
            expect![[
                r#"{"type":"stream_element_start","sessionId":3,"messageId":"m","id":"e1","elementType":"todo","attributes":{"title":"Plan"},"executable":false}"#
            ]],
        );
        check_ws(
            WsServerMessage::StreamElementComplete {
                session_id: 3,
                message_id: "m".into(),
                id: "e1".into(),
                element_type: "bash".into(),
                content: "ls".into(),
                executable: true,
                duration: Some(40),
                truncated: false,
                limit: None,
            },
            expect![[
                r#"{"type":"stream_element_complete","sessionId":3,"messageId":"m","id":"e1","elementType":"bash","content":"ls","executable":true,"duration":40}"#
            ]],
        );
        check_ws(
            WsServerMessage::AssertionUpdate {
                session_id: 3,
                message_id: "m".into(),
                assertion_id: "r1".into(),
                status: "running".into(),
                result: serde_json::Value::Null,
            },
            expect![[
                r#"{"type":"assertion_update","sessionId":3,"messageId":"m","assertionId":"r1","status":"running","result":null}"#
            ]],
        );
        let frame: Frame = serde_json::from_value(json!({
            "id": "f1", "session_id": 3, "seq": 1, "parent_id": null, "target_ids": ["agent:1"],
            "timestamp": "2026-01-01T00:00:00.000001Z", "type": "message", "author_type": "user",
            "author_id": 9, "payload": {"role": "user", "content": "hi"}
        }))
        .unwrap();
        check_ws(
            WsServerMessage::Frame {
                frame,
                phantom: false,
            },
            expect![[
                r#"{"type":"frame","frame":{"id":"f1","session_id":3,"seq":1,"parent_id":null,"target_ids":["agent:1"],"timestamp":"2026-01-01T00:00:00.000001Z","type":"message","author_type":"user","author_id":9,"payload":{"content":"hi","role":"user"}},"phantom":false}"#
            ]],
        );
    }
}
