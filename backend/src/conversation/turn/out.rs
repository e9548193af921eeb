//! Where a turn's events go ([`Out`]): the poster, if still there, and the session's
//! subscribers through the hub; and the event every turn ends with ([`complete`]).

use hero_shared::wire::{ExecutedElement, MessageComplete, SseEvent};

use crate::AppState;
use crate::conversation::hub::HubEvent;
use crate::drive::events::Sink;

/// Where a turn's events go: the poster (if still there) and the session's subscribers.
pub(super) struct Out {
    pub(super) st: AppState,
    pub(super) user_id: i64,
    pub(super) session_id: i64,
    pub(super) sink: Sink,
    listening: crate::conversation::hub::Listening,
}

impl Clone for Out {
    fn clone(&self) -> Self {
        Out {
            st: self.st.clone(),
            user_id: self.user_id,
            session_id: self.session_id,
            sink: self.sink.clone(),
            listening: Default::default(),
        }
    }
}

impl Out {
    pub(super) fn new(st: &AppState, user_id: i64, session_id: i64, sink: Sink) -> Out {
        Out {
            st: st.clone(),
            user_id,
            session_id,
            sink,
            listening: Default::default(),
        }
    }

    /// Whether anyone but the poster listens to this turn.
    pub(super) fn has_listeners(&self) -> bool {
        self.st
            .hub
            .has_listeners_cached(self.user_id, self.session_id, &self.listening)
    }

    pub(super) fn emit(&self, ev: SseEvent) {
        if self.has_listeners() {
            self.st.hub.publish(
                self.user_id,
                self.session_id,
                HubEvent::Stream {
                    session_id: self.session_id,
                    event: ev.clone(),
                },
            );
        }
        self.sink.push(ev);
    }
}

pub(super) fn complete(
    message_id: &str,
    content: &str,
    executed: Vec<ExecutedElement>,
) -> SseEvent {
    SseEvent::MessageComplete(MessageComplete {
        message_id: message_id.to_owned(),
        content: content.to_owned(),
        executed_elements: executed,
    })
}
