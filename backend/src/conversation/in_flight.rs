//! A reply in flight, as far as it has come ([`InFlight`]): the turn pushes its text to it,
//! the hub carries it to readers when the reply starts, and a reader that joins mid-reply
//! is sent its snapshot first, as a phantom frame (reference 003). A leaf.

use std::sync::Mutex;

use hero_shared::frame::Frame;

/// A reply in flight, as far as it has come: what a reader that joins mid-reply is sent
/// first, as a phantom frame.
#[derive(Debug)]
pub struct InFlight {
    pub message_id: String,
    pub session_id: i64,
    pub agent_id: i64,
    pub agent_name: String,
    /// The seq of the user's message the reply answers: the one the reply's frame follows.
    pub after_seq: i64,
    pub timestamp: String,
    /// A regeneration's: the agent message the reply is a new version of (its frame's
    /// parent, `hero_shared::frame`'s "Versions").
    pub version_of: Option<String>,
    /// The reply's text so far. Pushed once per token by the turn's own task, read only
    /// when a reader joins: an uncontended lock.
    text: Mutex<String>,
    /// Set just before the reply's frame is stored: a reader that joins from then on reads
    /// the frame (from the log or live) and is sent no phantom of it.
    finished: std::sync::atomic::AtomicBool,
}

impl InFlight {
    pub fn new(
        message_id: &str,
        session_id: i64,
        agent_id: i64,
        agent_name: &str,
        after_seq: i64,
    ) -> Self {
        InFlight {
            message_id: message_id.to_owned(),
            session_id,
            agent_id,
            agent_name: agent_name.to_owned(),
            after_seq,
            timestamp: crate::now_text(),
            version_of: None,
            text: Mutex::new(String::new()),
            finished: Default::default(),
        }
    }

    /// Appends a delta; answers the reply's length before it (the chunk's offset).
    pub fn push(&self, delta: &str) -> usize {
        let mut text = self.text.lock().unwrap_or_else(|p| p.into_inner());
        let offset = text.len();
        text.push_str(delta);
        offset
    }

    /// Appends a delta that begins at `offset`, if the text so far ends there (a mirror of
    /// a reply on another instance, which may have missed the reply's start).
    pub fn push_at(&self, offset: usize, delta: &str) {
        let mut text = self.text.lock().unwrap_or_else(|p| p.into_inner());
        if text.len() == offset {
            text.push_str(delta);
        }
    }

    /// The reply is complete and its frame about to be stored.
    pub fn finish(&self) {
        self.finished
            .store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn is_finished(&self) -> bool {
        self.finished.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The reply's text so far.
    pub fn text(&self) -> String {
        self.text.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The reply so far as a phantom frame, and its length in bytes.
    pub fn snapshot(&self) -> (Frame, usize) {
        let text = self.text();
        let len = text.len();
        (self.frame(text), len)
    }

    /// The reply as it starts, with no text: what its start is to a reader that takes it
    /// from the hub, where every chunk of its text comes after it.
    pub fn started(&self) -> Frame {
        self.frame(String::new())
    }

    fn frame(&self, text: String) -> Frame {
        Frame {
            id: self.message_id.clone(),
            session_id: self.session_id,
            seq: self.after_seq,
            parent_id: self.version_of.clone(),
            target_ids: Vec::new(),
            timestamp: self.timestamp.clone(),
            frame_type: hero_shared::frame::FrameType::Message,
            author_type: hero_shared::frame::AuthorType::Agent,
            author_id: Some(self.agent_id),
            payload: serde_json::json!({
                "role": "agent",
                "content": text,
                "agent_id": self.agent_id,
                "agent_name": self.agent_name,
            }),
        }
    }
}
