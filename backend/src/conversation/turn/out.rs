//! Where a turn's events go ([`Out`]): the poster, if still there, and the session's
//! subscribers through the hub; and the event every turn ends with ([`complete`]).

use hero_shared::wire::{ExecutedElement, MessageComplete, SseEvent};

use crate::AppState;
use crate::conversation::hub::HubEvent;
use crate::conversation::in_flight::InFlight;
use crate::drive::abort::Abort;
use crate::drive::events::{self, Sink};

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
    /// A new reply in flight, by `agent`, after the frame `after_seq`: registered (so a
    /// Stop reaches it), its stop signal raising this poster's flag too.
    pub(super) fn begin_reply(
        &self,
        message_id: &str,
        agent: &crate::agents::AgentRuntime,
        after_seq: i64,
        version_of: Option<String>,
    ) -> (std::sync::Arc<InFlight>, Abort) {
        let mut live = InFlight::new(
            message_id,
            self.session_id,
            agent.id,
            &agent.name,
            after_seq,
        );
        live.version_of = version_of;
        let live = std::sync::Arc::new(live);
        let cancel = self
            .st
            .turns
            .begin(live.clone(), Some(self.sink.flag(events::ABORTED)));
        (live, cancel)
    }

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
