//! The session event feed: everything a subscriber of one session receives, as one closed
//! type with its two encodings, SSE (`GET /api/sessions/{id}/events`) and WebSocket
//! (`/ws`, after `subscribe`). The server writes it, the browser reads it back with
//! [`SessionEvent::from_sse`]; neither handles untyped JSON.
//!
//! Two protocols travel side by side (ARCHITECTURE.md says why): reference 003's frames,
//! persisted ([`SessionEvent::Frame`]) and phantom ([`SessionEvent::Phantom`]: a reply in
//! flight, never stored, replaced by the persisted frame of the same id), and reference
//! 000's live reply events ([`SessionEvent::Reply`], [`SessionEvent::Chunk`]) for clients
//! that render a reply as it streams.

use serde::{Deserialize, Serialize};

use crate::frame::Frame;
use crate::wire::{ErrorData, SessionId, SseEvent, WireError, WsServerMessage, json};

/// The events a page listens to: a live reply reaches it as frames and raw chunks, so the
/// reply's other events (`text`, `element_*`, ...) are for other clients.
pub const PAGE_EVENTS: [&str; 5] = [
    "frame",
    "message_start",
    "message_chunk",
    "message_complete",
    "error",
];

/// How long a browser waits before reconnecting after [`SessionEvent::Shutdown`], in ms.
pub const SHUTDOWN_RETRY_MS: u64 = 1000;

/// One event of a session's feed.
#[derive(Clone, Debug, PartialEq)]
pub enum SessionEvent {
    /// A persisted frame; its seq is where a reconnecting reader resumes.
    Frame(Frame),
    /// A reply in flight as a frame with the content so far (at its start, and for a reader
    /// that joins while it streams); never stored.
    Phantom(Frame),
    /// A live event of a reply in flight (reference 000's SSE events).
    Reply(SseEvent),
    /// The raw text the provider just sent for a reply in flight (reference 000's
    /// `message_chunk`): a reader runs the shared parser on it.
    Chunk(MessageChunk),
    /// A call waits for the user's approval (reference 000's `ability_approval_request`;
    /// the request frame holds the same, for readers that come later).
    Approval(ApprovalPrompt),
    /// A question of the agent's waits for the user's answer (reference 000's
    /// `question_prompt`; its request frame holds the same, for readers that come later).
    Question(QuestionPrompt),
    /// A call's state changed (reference 000's `assertion_update`).
    Assertion(AssertionUpdate),
    /// The feed ends with this error (a reader too far behind, a sign-in that ended).
    Error(String),
    /// The feed ends because the server shuts down: reconnect after [`SHUTDOWN_RETRY_MS`].
    Shutdown,
}

/// `message_chunk`'s data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageChunk {
    pub session_id: SessionId,
    pub message_id: String,
    pub content: String,
}

/// `ability_approval_request`'s data: the call waiting, by its request frame id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalPrompt {
    pub session_id: SessionId,
    pub execution_id: String,
    pub ability: String,
    pub summary: String,
    #[serde(default)]
    pub details: serde_json::Value,
    /// Reference 000's `permissions` of the function waiting: `{autoApprove, dangerLevel}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<crate::calls::FunctionPermissions>,
}

/// `question_prompt`'s data: the question waiting, by its request frame id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionPrompt {
    pub session_id: SessionId,
    pub message_id: String,
    pub assertion_id: String,
    pub question: String,
    /// `demand` or `timeout`.
    pub mode: String,
    /// Milliseconds until the default is the answer (`timeout` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// `assertion_update`'s data: a call's state (reference 000), by its request frame id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssertionUpdate {
    pub session_id: SessionId,
    pub message_id: String,
    pub assertion_id: String,
    /// `pending`, `asking`, `running`, `completed`, `failed`, `stopped`, or why it never
    /// ran (`denied`, `never`, `invalid`, `bound`).
    pub status: String,
    /// What it returned (`completed`), why it failed or never ran; null before it ends.
    #[serde(default)]
    pub result: serde_json::Value,
}

/// A frame as the feed writes it: phantom ones say so.
#[derive(Serialize)]
struct FeedFrame<F> {
    #[serde(flatten)]
    frame: F,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    phantom: bool,
}

/// The mark of a phantom frame, read beside the frame (which ignores it) rather than through
/// `flatten`, whose buffering decoder is the dearest code serde puts in the wasm.
#[derive(Deserialize)]
struct PhantomMark {
    #[serde(default)]
    phantom: bool,
}

#[derive(Serialize, Deserialize)]
struct StreamError {
    error: String,
}

impl SessionEvent {
    /// The SSE `event:` name (none for [`SessionEvent::Shutdown`], which is a `retry:`).
    pub fn event_name(&self) -> &'static str {
        match self {
            SessionEvent::Frame(_) | SessionEvent::Phantom(_) => "frame",
            SessionEvent::Reply(e) => e.event_name(),
            SessionEvent::Chunk(_) => "message_chunk",
            SessionEvent::Approval(_) => "ability_approval_request",
            SessionEvent::Question(_) => "question_prompt",
            SessionEvent::Assertion(_) => "assertion_update",
            SessionEvent::Error(_) => "error",
            SessionEvent::Shutdown => "",
        }
    }

    /// Appends the whole SSE frame. A persisted frame carries `id:` (its seq), so that
    /// `Last-Event-ID` resumes after it; the shutdown is a comment and a `retry:`.
    pub fn write_sse(&self, out: &mut Vec<u8>) {
        fn json<T: Serialize>(out: &mut Vec<u8>, v: &T) {
            // Into memory, with string keys only: this cannot fail.
            let _ = serde_json::to_writer(out, v);
        }
        if let SessionEvent::Shutdown = self {
            out.extend_from_slice(
                format!(": the server is shutting down; reconnect to resume\nretry: {SHUTDOWN_RETRY_MS}\n\n").as_bytes(),
            );
            return;
        }
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(self.event_name().as_bytes());
        if let SessionEvent::Frame(f) = self {
            out.extend_from_slice(format!("\nid: {}", f.seq).as_bytes());
        }
        out.extend_from_slice(b"\ndata: ");
        match self {
            SessionEvent::Frame(f) => json(out, f),
            SessionEvent::Phantom(f) => json(
                out,
                &FeedFrame {
                    frame: f,
                    phantom: true,
                },
            ),
            SessionEvent::Reply(e) => {
                let _ = e.write_data(out);
            }
            SessionEvent::Chunk(c) => json(out, c),
            SessionEvent::Approval(a) => json(out, a),
            SessionEvent::Question(q) => json(out, q),
            SessionEvent::Assertion(a) => json(out, a),
            SessionEvent::Error(e) => json(out, &StreamError { error: e.clone() }),
            SessionEvent::Shutdown => {}
        }
        out.extend_from_slice(b"\n\n");
    }

    /// Reads an event back from its SSE name and data.
    pub fn from_sse(event: &str, data: &str) -> Result<SessionEvent, WireError> {
        if event == "ability_approval_request" {
            return Ok(SessionEvent::Approval(json(data)?));
        }
        if event == "question_prompt" {
            return Ok(SessionEvent::Question(json(data)?));
        }
        if event == "assertion_update" {
            return Ok(SessionEvent::Assertion(json(data)?));
        }
        if PAGE_EVENTS.contains(&event) {
            SessionEvent::from_page_sse(event, data)
        } else {
            Ok(SessionEvent::Reply(SseEvent::from_parts(event, data)?))
        }
    }

    /// Reads back one of the [`PAGE_EVENTS`] (the browser's side), anything else is
    /// [`WireError::UnknownEvent`]: the page's wasm holds the decoders of these events
    /// only, not those of every reply event.
    pub fn from_page_sse(event: &str, data: &str) -> Result<SessionEvent, WireError> {
        use crate::wire::{MessageComplete, MessageStart};
        Ok(match event {
            "frame" => {
                let frame: Frame = json(data)?;
                if json::<PhantomMark>(data)?.phantom {
                    SessionEvent::Phantom(frame)
                } else {
                    SessionEvent::Frame(frame)
                }
            }
            "message_chunk" => SessionEvent::Chunk(json(data)?),
            // A reply's error names its message; the feed's own does not.
            "error" => {
                let e: ErrorData = json(data)?;
                match e.message_id {
                    Some(_) => SessionEvent::Reply(SseEvent::Error(e)),
                    None => SessionEvent::Error(e.error),
                }
            }
            "message_start" => {
                SessionEvent::Reply(SseEvent::MessageStart(json::<MessageStart>(data)?))
            }
            "message_complete" => {
                SessionEvent::Reply(SseEvent::MessageComplete(json::<MessageComplete>(data)?))
            }
            other => return Err(WireError::UnknownEvent(other.to_owned())),
        })
    }

    /// The WebSocket message for this event of session `session_id`, if it has one (the
    /// shutdown is a close frame, 1012).
    pub fn to_ws(&self, session_id: SessionId) -> Option<WsServerMessage> {
        Some(match self {
            SessionEvent::Frame(f) => WsServerMessage::Frame {
                frame: f.clone(),
                phantom: false,
            },
            SessionEvent::Phantom(f) => WsServerMessage::Frame {
                frame: f.clone(),
                phantom: true,
            },
            SessionEvent::Chunk(c) => WsServerMessage::MessageChunk {
                session_id: c.session_id,
                message_id: c.message_id.clone(),
                content: c.content.clone(),
            },
            SessionEvent::Approval(a) => WsServerMessage::AbilityApprovalRequest {
                session_id: a.session_id,
                execution_id: a.execution_id.clone(),
                ability: a.ability.clone(),
                summary: a.summary.clone(),
                details: a.details.clone(),
                permissions: a.permissions,
            },
            SessionEvent::Question(q) => WsServerMessage::QuestionPrompt {
                session_id: q.session_id,
                message_id: q.message_id.clone(),
                assertion_id: q.assertion_id.clone(),
                question: q.question.clone(),
                mode: q.mode.clone(),
                timeout: q.timeout,
                options: q.options.clone(),
                default: q.default.clone(),
            },
            SessionEvent::Assertion(a) => WsServerMessage::AssertionUpdate {
                session_id: a.session_id,
                message_id: a.message_id.clone(),
                assertion_id: a.assertion_id.clone(),
                status: a.status.clone(),
                result: a.result.clone(),
            },
            SessionEvent::Error(e) => WsServerMessage::error(e.clone()),
            SessionEvent::Shutdown => return None,
            SessionEvent::Reply(event) => match event {
                SseEvent::MessageStart(m) => WsServerMessage::MessageStart {
                    session_id,
                    message_id: m.message_id.clone(),
                },
                SseEvent::Text(t) => WsServerMessage::StreamText {
                    session_id,
                    message_id: t.message_id.clone(),
                    text: t.text.clone(),
                },
                SseEvent::ElementStart(e) => WsServerMessage::StreamElementStart {
                    session_id,
                    message_id: e.message_id.clone(),
                    id: e.id.clone(),
                    element_type: e.kind.clone(),
                    attributes: e.attributes.clone(),
                    executable: e.executable,
                    parent: e.parent.clone(),
                },
                SseEvent::ElementComplete(e) => WsServerMessage::StreamElementComplete {
                    session_id,
                    message_id: e.message_id.clone(),
                    id: e.id.clone(),
                    element_type: e.kind.clone(),
                    content: e.content.clone(),
                    executable: e.executable,
                    duration: e.duration,
                    truncated: e.truncated,
                    limit: e.limit,
                },
                SseEvent::MessageComplete(m) => WsServerMessage::MessageEnd {
                    session_id,
                    message_id: m.message_id.clone(),
                },
                SseEvent::Error(e) => WsServerMessage::Error {
                    session_id: Some(session_id),
                    message_id: e.message_id.clone(),
                    error: e.error.clone(),
                },
                SseEvent::ElementExecuting(e) => WsServerMessage::OperationStart {
                    session_id,
                    operation_id: e.execution_id.clone().unwrap_or_else(|| e.id.clone()),
                    command: e.command.clone().unwrap_or_else(|| e.kind.clone()),
                    function: e.function.clone(),
                },
                SseEvent::ElementResult(e) => WsServerMessage::OperationComplete {
                    session_id,
                    operation_id: e.execution_id.clone().unwrap_or_else(|| e.id.clone()),
                    result: e.result.clone(),
                },
                SseEvent::ElementError(e) => WsServerMessage::OperationError {
                    session_id,
                    operation_id: e.execution_id.clone().unwrap_or_else(|| e.id.clone()),
                    error: e.error.clone(),
                },
                _ => return None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{AuthorType, FrameType};
    use crate::wire::{MessageComplete, TextData};

    fn frame(seq: i64, content: &str) -> Frame {
        Frame {
            id: format!("m{seq}"),
            session_id: 3,
            seq,
            parent_id: None,
            target_ids: vec![],
            timestamp: "2026-11-23T00:00:00Z".into(),
            frame_type: FrameType::Message,
            author_type: AuthorType::Agent,
            author_id: Some(1),
            payload: serde_json::json!({"role": "agent", "content": content}),
        }
    }

    /// Writes each event as SSE, reads it back as the browser does: the same event.
    #[test]
    fn every_event_survives_sse() {
        let events = [
            SessionEvent::Frame(frame(7, "stored")),
            SessionEvent::Phantom(frame(8, "so far")),
            SessionEvent::Reply(SseEvent::Text(TextData {
                message_id: "m8".into(),
                text: "a".into(),
            })),
            SessionEvent::Reply(SseEvent::Error(ErrorData {
                message_id: Some("m8".into()),
                error: "cut".into(),
            })),
            SessionEvent::Reply(SseEvent::MessageComplete(MessageComplete {
                message_id: "m8".into(),
                content: "so far".into(),
                executed_elements: vec![],
            })),
            SessionEvent::Chunk(MessageChunk {
                session_id: 3,
                message_id: "m8".into(),
                content: "x\ny".into(),
            }),
            SessionEvent::Error("this sign-in has ended".into()),
        ];
        for ev in events {
            let mut out = Vec::new();
            ev.write_sse(&mut out);
            let text = String::from_utf8(out).unwrap();
            let name = text
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap();
            let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            assert_eq!(
                text.matches("data: ").count(),
                1,
                "one line of data: {text}"
            );
            assert_eq!(SessionEvent::from_sse(name, data).unwrap(), ev, "{text}");
        }
    }

    #[test]
    fn frames_carry_their_seq_and_phantoms_do_not() {
        let mut out = Vec::new();
        SessionEvent::Frame(frame(7, "x")).write_sse(&mut out);
        assert!(String::from_utf8_lossy(&out).starts_with("event: frame\nid: 7\ndata: {"));
        out.clear();
        SessionEvent::Phantom(frame(8, "x")).write_sse(&mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(
            !text.contains("\nid:") && text.contains("\"phantom\":true"),
            "{text}"
        );
        out.clear();
        SessionEvent::Shutdown.write_sse(&mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            ": the server is shutting down; reconnect to resume\nretry: 1000\n\n"
        );
    }

    #[test]
    fn websocket_messages() {
        let ws = |ev: SessionEvent| ev.to_ws(3).map(|m| serde_json::to_value(m).unwrap());
        let phantom = ws(SessionEvent::Phantom(frame(8, "so far"))).unwrap();
        assert_eq!(
            (phantom["type"].as_str(), phantom["phantom"].as_bool()),
            (Some("frame"), Some(true))
        );
        assert_eq!(phantom["frame"]["payload"]["content"], "so far");
        let chunk = ws(SessionEvent::Chunk(MessageChunk {
            session_id: 3,
            message_id: "m".into(),
            content: "c".into(),
        }));
        assert_eq!(chunk.unwrap()["type"], "message_chunk");
        assert_eq!(ws(SessionEvent::Shutdown), None);
        assert_eq!(
            ws(SessionEvent::Error("e".into())).unwrap(),
            serde_json::json!({"type": "error", "error": "e"})
        );
        // A reply's error keeps its ids.
        let reply_error = ws(SessionEvent::Reply(SseEvent::Error(ErrorData {
            message_id: Some("m".into()),
            error: "boom".into(),
        })));
        assert_eq!(
            reply_error.unwrap(),
            serde_json::json!({"type": "error", "sessionId": 3, "messageId": "m", "error": "boom"})
        );
        let update = SessionEvent::Assertion(AssertionUpdate {
            session_id: 3,
            message_id: "m".into(),
            assertion_id: "r".into(),
            status: "denied".into(),
            result: serde_json::json!({"reason": "denied", "message": "no"}),
        });
        let mut sse = Vec::new();
        update.write_sse(&mut sse);
        let sse = String::from_utf8(sse).unwrap();
        let data = sse.lines().nth(1).unwrap().strip_prefix("data: ").unwrap();
        assert_eq!(
            SessionEvent::from_sse("assertion_update", data).unwrap(),
            update
        );
        assert_eq!(ws(update).unwrap()["type"], "assertion_update");
    }

    #[test]
    fn unknown_and_broken_events_are_errors() {
        assert!(SessionEvent::from_sse("nonsense", "{}").is_err());
        assert!(SessionEvent::from_sse("frame", "{\"id\": 1}").is_err());
    }
}
