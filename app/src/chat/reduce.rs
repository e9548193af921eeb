//! The feed's effect on the chat, as plain Rust (tested natively, without a browser): each
//! event of the session's feed ([`SessionEvent`]) taken into the state the page shows (the
//! compiled conversation, the reply in flight, the session's mode), and what the page must
//! do about it ([`Do`]). `events::use_session_events` holds the state in signals and
//! carries the steps out; nothing here touches the DOM or a signal.

use hero_shared::feed::SessionEvent;
use hero_shared::frame::Frame;
use hero_shared::wire::{Applied, CompiledView, SseEvent};

/// What the page does about an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Do {
    /// Asks the server for the view compiled anew (a frame changed what came before, or a
    /// gap), then takes it with [`Feed::refreshed`].
    Refresh,
    /// A reply is shown from here: its id, its agent, and what it said so far.
    Begin {
        message_id: String,
        agent_name: String,
        so_far: String,
    },
    /// More of the reply in flight's text.
    Text(String),
    /// The reply in flight failed with this error (shown under it).
    Error(String),
    /// The reply in flight ended (what is pending of its text is shown first).
    Finish,
    /// The reply in flight is now a stored message: its bubble goes.
    Stored,
    /// The session's replies now stream (or arrive whole).
    Streaming(bool),
}

/// The state the feed moves, but the conversation (which the caller keeps and passes in).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Feed {
    /// The reply in flight this page shows, by message id.
    pub live: Option<String>,
}

/// What an event did: whether the conversation changed (its readers redraw), and the steps.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Steps {
    pub changed: bool,
    pub todo: Vec<Do>,
}

impl Feed {
    /// Takes one event into `view` and the feed's state.
    pub fn take(&mut self, view: &mut CompiledView, event: SessionEvent) -> Steps {
        let mut s = Steps::default();
        match event {
            SessionEvent::Frame(f) => {
                // A `/stream on|off` note carries the mode it switched to.
                if let Some(on) = f.payload.get("streaming").and_then(|v| v.as_bool()) {
                    s.todo.push(Do::Streaming(on));
                }
                match view.apply(&f) {
                    Applied::AlreadyIn => {}
                    Applied::Added => s.changed = true,
                    Applied::Recompile => s.todo.push(Do::Refresh),
                }
            }
            // A reply in flight this page has not seen start: shown so far, at once, unless
            // it is stored already.
            SessionEvent::Phantom(f) if !self.is_live(&f.id) && !stored(view, &f.id) => {
                s.todo.push(self.begin(&f.id, agent_of(&f), text_of(&f)));
            }
            SessionEvent::Phantom(_) => {}
            SessionEvent::Reply(SseEvent::MessageStart(m)) => {
                s.todo
                    .push(self.begin(&m.message_id, &m.agent_name, String::new()));
            }
            SessionEvent::Chunk(c) if self.is_live(&c.message_id) => {
                s.todo.push(Do::Text(c.content));
            }
            SessionEvent::Chunk(_) => {}
            SessionEvent::Error(e)
            | SessionEvent::Reply(SseEvent::Error(hero_shared::wire::ErrorData {
                error: e, ..
            })) => {
                if self.live.is_some() {
                    s.todo.push(Do::Error(e));
                }
            }
            SessionEvent::Reply(SseEvent::MessageComplete(m)) => {
                if self.is_live(&m.message_id) {
                    s.todo.push(Do::Finish);
                }
                // Its frame comes before this; if it did not (it could not be stored, or the
                // stream was cut), the view is asked for.
                if !stored(view, &m.message_id) {
                    s.todo.push(Do::Refresh);
                }
            }
            // The request frame that came with it shows the card.
            SessionEvent::Approval(_) | SessionEvent::Question(_) | SessionEvent::Assertion(_) => {}
            SessionEvent::Reply(_) | SessionEvent::Shutdown => {}
        }
        s.todo.extend(self.gone(view));
        s
    }

    /// A view compiled anew by the server: taken unless it is older than the one shown
    /// (answers that arrive out of order never roll it back).
    pub fn refreshed(&mut self, view: &mut CompiledView, fresh: CompiledView) -> Steps {
        if fresh.stats.last_seq < view.stats.last_seq {
            return Steps::default();
        }
        *view = fresh;
        Steps {
            changed: true,
            todo: self.gone(view).into_iter().collect(),
        }
    }

    fn is_live(&self, message_id: &str) -> bool {
        self.live.as_deref() == Some(message_id)
    }

    fn begin(&mut self, message_id: &str, agent_name: &str, so_far: String) -> Do {
        self.live = Some(message_id.to_owned());
        Do::Begin {
            message_id: message_id.to_owned(),
            agent_name: agent_name.to_owned(),
            so_far,
        }
    }

    /// The reply in flight, once the view holds its stored message, is that message.
    fn gone(&mut self, view: &CompiledView) -> Option<Do> {
        let id = self.live.as_deref()?;
        stored(view, id).then(|| {
            self.live = None;
            Do::Stored
        })
    }
}

fn stored(view: &CompiledView, message_id: &str) -> bool {
    view.messages.iter().any(|m| m.frame_id == message_id)
}

fn agent_of(f: &Frame) -> &str {
    f.payload["agent_name"].as_str().unwrap_or("Agent")
}

fn text_of(f: &Frame) -> String {
    f.payload["content"].as_str().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hero_shared::feed::MessageChunk;
    use hero_shared::frame::{AuthorType, FrameType, compile_frames, frame_stats};
    use hero_shared::wire::{ErrorData, MessageComplete, MessageStart};
    use serde_json::{Value, json};

    fn frame(seq: i64, id: &str, author: AuthorType, payload: Value) -> Frame {
        Frame {
            id: id.into(),
            session_id: 1,
            seq,
            parent_id: None,
            target_ids: Vec::new(),
            frame_type: FrameType::Message,
            author_type: author,
            author_id: None,
            payload,
            timestamp: String::new(),
        }
    }

    fn view_of(frames: &[Frame]) -> CompiledView {
        CompiledView {
            session_id: 1,
            messages: compile_frames(frames),
            stats: frame_stats(frames),
            earlier_before: None,
        }
    }

    fn start(id: &str) -> SessionEvent {
        SessionEvent::Reply(SseEvent::MessageStart(MessageStart {
            message_id: id.into(),
            session_id: 1,
            agent_name: "Ada".into(),
        }))
    }

    fn chunk(id: &str, text: &str) -> SessionEvent {
        SessionEvent::Chunk(MessageChunk {
            session_id: 1,
            message_id: id.into(),
            content: text.into(),
        })
    }

    fn complete(id: &str) -> SessionEvent {
        SessionEvent::Reply(SseEvent::MessageComplete(MessageComplete {
            message_id: id.into(),
            content: String::new(),
            executed_elements: Vec::new(),
        }))
    }

    #[test]
    fn a_reply_streams_then_becomes_its_stored_message() {
        let user = frame(1, "u", AuthorType::User, json!({"content": "hi"}));
        let mut view = view_of(std::slice::from_ref(&user));
        let mut feed = Feed::default();
        let begun = feed.take(&mut view, start("r"));
        assert_eq!(
            begun.todo,
            [Do::Begin {
                message_id: "r".into(),
                agent_name: "Ada".into(),
                so_far: String::new()
            }]
        );
        assert_eq!(
            feed.take(&mut view, chunk("r", "Hel")).todo,
            [Do::Text("Hel".into())]
        );
        // Another reply's text is not this one's.
        assert_eq!(feed.take(&mut view, chunk("other", "x")).todo, []);
        // Its frame: the conversation grows, and the bubble is the stored message now.
        let reply = frame(2, "r", AuthorType::Agent, json!({"content": "Hello"}));
        let s = feed.take(&mut view, SessionEvent::Frame(reply));
        assert!(s.changed);
        assert_eq!(s.todo, [Do::Stored]);
        assert_eq!(feed.live, None);
        assert_eq!(view.messages.len(), 2);
        // Its completion after its frame asks for nothing more.
        assert_eq!(feed.take(&mut view, complete("r")).todo, []);
    }

    #[test]
    fn a_completion_whose_frame_never_came_asks_for_the_view() {
        let mut view = view_of(&[]);
        let mut feed = Feed::default();
        feed.take(&mut view, start("r"));
        let err = SessionEvent::Reply(SseEvent::Error(ErrorData {
            message_id: Some("r".into()),
            error: "the provider failed".into(),
        }));
        assert_eq!(
            feed.take(&mut view, err).todo,
            [Do::Error("the provider failed".into())]
        );
        assert_eq!(
            feed.take(&mut view, complete("r")).todo,
            [Do::Finish, Do::Refresh]
        );
        // The view compiled anew holds it: the bubble goes.
        let stored = view_of(&[frame(
            1,
            "r",
            AuthorType::Agent,
            json!({"content": "so far"}),
        )]);
        let s = feed.refreshed(&mut view, stored);
        assert!(s.changed);
        assert_eq!(s.todo, [Do::Stored]);
    }

    #[test]
    fn frames_are_added_once_and_a_gap_or_a_change_asks_for_the_view() {
        let frames = [
            frame(1, "a", AuthorType::User, json!({"content": "1"})),
            frame(2, "b", AuthorType::Agent, json!({"content": "2"})),
        ];
        let mut view = view_of(&frames[..1]);
        let mut feed = Feed::default();
        assert!(
            feed.take(&mut view, SessionEvent::Frame(frames[1].clone()))
                .changed
        );
        let again = feed.take(&mut view, SessionEvent::Frame(frames[1].clone()));
        assert_eq!(again, Steps::default());
        let gap = frame(5, "e", AuthorType::User, json!({"content": "5"}));
        assert_eq!(
            feed.take(&mut view, SessionEvent::Frame(gap)).todo,
            [Do::Refresh]
        );
        // An older view never replaces a newer one.
        let old = view_of(&frames[..1]);
        assert_eq!(feed.refreshed(&mut view, old), Steps::default());
        assert_eq!(view.messages.len(), 2);
    }

    #[test]
    fn a_phantom_shows_a_reply_joined_midway_once() {
        let mut view = view_of(&[]);
        let mut feed = Feed::default();
        let phantom = frame(
            0,
            "r",
            AuthorType::Agent,
            json!({"content": "so far", "agent_name": "Ada"}),
        );
        assert_eq!(
            feed.take(&mut view, SessionEvent::Phantom(phantom.clone()))
                .todo,
            [Do::Begin {
                message_id: "r".into(),
                agent_name: "Ada".into(),
                so_far: "so far".into()
            }]
        );
        // The same reply again (a reconnect) is not begun twice.
        assert_eq!(
            feed.take(&mut view, SessionEvent::Phantom(phantom)).todo,
            []
        );
        // A phantom of a reply already stored is not shown.
        let mut view = view_of(&[frame(1, "s", AuthorType::Agent, json!({"content": "done"}))]);
        let stale = frame(0, "s", AuthorType::Agent, json!({"content": "do"}));
        assert_eq!(
            Feed::default()
                .take(&mut view, SessionEvent::Phantom(stale))
                .todo,
            []
        );
    }

    #[test]
    fn a_stream_note_switches_the_mode() {
        let mut view = view_of(&[]);
        let note = frame(
            1,
            "n",
            AuthorType::User,
            json!({"content": "/stream off", "private": true, "streaming": false}),
        );
        let s = Feed::default().take(&mut view, SessionEvent::Frame(note));
        assert!(s.changed);
        assert_eq!(s.todo, [Do::Streaming(false)]);
    }
}
