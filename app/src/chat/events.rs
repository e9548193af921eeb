//! `use_session_events`: a session's feed (`GET /api/sessions/{id}/events`, read as the
//! typed [`SessionEvent`](hero_shared::feed::SessionEvent)) turned into the reactive state
//! the chat renders: the compiled conversation, kept up to date frame by frame
//! (`CompiledView::apply`; the server compiles it anew only for a frame that changes earlier
//! messages), the reply in flight, and whether the stream is connected.
//!
//! The stream resumes after the last seq the page was rendered with, so nothing between
//! render and subscribe is lost. A reply seen from its start, or joined mid-way through its
//! phantom frame, is fed chunk by chunk through the shared parser ([`LiveReply`]), in
//! batches of at most one render per `FEED_EVERY`.

use hero_shared::wire::CompiledView;
use leptos::prelude::*;

#[cfg(feature = "hydrate")]
use super::live::LiveReply;
#[cfg(feature = "hydrate")]
use super::session_view;

/// What the page shows of the reply in flight (all cheap handles).
#[derive(Clone, Copy)]
pub struct LiveView {
    pub message_id: StoredValue<String>,
    pub agent_name: StoredValue<String>,
    pub blocks: RwSignal<Vec<super::live::LiveBlock>>,
    pub error: RwSignal<Option<String>>,
    pub finished: RwSignal<bool>,
}

/// The reactive state of a session's feed (all cheap handles).
#[derive(Clone, Copy)]
pub struct SessionEvents {
    pub conversation: RwSignal<CompiledView>,
    pub live: RwSignal<Option<LiveView>>,
    pub connected: RwSignal<bool>,
    /// Bumped whenever something new is shown: what the scroll follows.
    pub tick: RwSignal<u64>,
}

/// Subscribes to the session's feed (in the browser; on the server it only holds `initial`)
/// for as long as the calling component lives.
/// `streaming` follows the session's mode as `/stream on|off` notes arrive.
pub fn use_session_events(
    session_id: i64,
    initial: CompiledView,
    streaming: RwSignal<bool>,
) -> SessionEvents {
    let conversation = RwSignal::new(initial);
    let live: RwSignal<Option<LiveView>> = RwSignal::new(None);
    let connected = RwSignal::new(false);
    let tick = RwSignal::new(0u64);

    // A stored message replaces the live one once the view that holds it has loaded.
    Effect::new(move |_| {
        let v = conversation.read();
        if let Some(l) = live.get_untracked() {
            let id = l.message_id.get_value();
            if v.messages.iter().any(|m| m.frame_id == id) {
                live.set(None);
            }
        }
        tick.update(|t| *t += 1);
    });

    #[cfg(feature = "hydrate")]
    {
        let state = StoredValue::new_local(None::<LiveReply>);
        // The reply before the current one, disposed when the next one begins.
        let retired = StoredValue::new_local(None::<LiveReply>);
        // Chunks are fed in batches, at most one render per FEED_EVERY: a fast stream costs
        // one parse-and-render of the newest text per batch, not one per token.
        let pending = StoredValue::new(String::new());
        let scheduled = StoredValue::new(false);
        let flush = move || {
            // A batch due after the chat stopped (a move to another session) is dropped.
            if pending.is_disposed() {
                return;
            }
            let text = std::mem::take(&mut *pending.write_value());
            scheduled.set_value(false);
            if !text.is_empty() {
                state.update_value(|s| {
                    if let Some(r) = s.as_mut() {
                        r.feed(&text);
                    }
                });
                tick.update(|t| *t += 1);
            }
        };
        // Owned by the component, not by the effect below: an effect's cleanups run each time
        // it re-runs, which would close the stream on the first refresh of the view.
        // The stream and its listeners' closures, freed with it.
        let source = StoredValue::new_local(None::<browser::Source>);
        on_cleanup(move || {
            if let Some(s) = source.try_update_value(Option::take).flatten() {
                s.es.close();
            }
            // The replies' signals live under roots of their own.
            for r in [state, retired] {
                if let Some(r) = r.try_update_value(Option::take).flatten() {
                    r.dispose();
                }
            }
        });
        // Has the server compile the view anew; answers that arrive out of order never roll
        // it back. One request at a time: asks made meanwhile become one more request after.
        let fetching = StoredValue::new((false, false));
        let refresh = move || {
            let (busy, _) = fetching.get_value();
            fetching.set_value((true, busy));
            if busy {
                return;
            }
            leptos::task::spawn_local(async move {
                loop {
                    // The part shown stays: the view starts where it started.
                    let from = conversation.with_untracked(|c| c.messages.first().map(|m| m.seq));
                    let fetched = session_view(session_id, from).await;
                    // The chat stopped meanwhile (a move to another session): nothing to do.
                    if fetching.is_disposed() {
                        return;
                    }
                    if let Ok(v) = fetched
                        && v.stats.last_seq >= conversation.get_untracked().stats.last_seq
                    {
                        conversation.set(v);
                    }
                    let (_, again) = fetching.get_value();
                    fetching.set_value((again, false));
                    if !again {
                        break;
                    }
                }
            });
        };
        Effect::new(move |_| {
            // Subscribe after the frames the page was rendered with: nothing in between is lost.
            let after = conversation.get_untracked().stats.last_seq.unwrap_or(0);
            // A reply seen for the first time: the live bubble starts here (at its start, or
            // from a phantom frame with the text so far when this tab came mid-reply).
            let begin_reply = move |mid: String, agent: String| {
                flush();
                let reply = LiveReply::new(mid.clone(), agent.clone());
                // The reply before the one being replaced has long left the page: its
                // signals go now. (The one replaced may still be on its way out.)
                if let Some(old) = state.try_update_value(|s| s.take()).flatten()
                    && let Some(older) = retired.try_update_value(|r| r.replace(old)).flatten()
                {
                    older.dispose();
                }
                live.set(Some(LiveView {
                    message_id: reply.own(mid),
                    agent_name: reply.own(agent),
                    blocks: reply.blocks,
                    error: reply.error,
                    finished: reply.finished,
                }));
                state.set_value(Some(reply));
            };
            let is_current = move |mid: &str| {
                state.with_value(|s| s.as_ref().is_some_and(|r| r.message_id == mid))
            };
            let on_event = move |name: &str, data: &str| {
                use hero_shared::feed::SessionEvent;
                use hero_shared::wire::{Applied, SseEvent};
                // The feed's events are one closed type; anything else is ignored.
                let Ok(event) = SessionEvent::from_page_sse(name, data) else {
                    return;
                };
                match event {
                    SessionEvent::Frame(f) => {
                        // A `/stream on|off` note carries the mode it switched to.
                        if let Some(on) = f.payload.get("streaming").and_then(|v| v.as_bool()) {
                            streaming.set(on);
                        }
                        let known = conversation
                            .with_untracked(|c| c.stats.last_seq.is_some_and(|l| f.seq <= l));
                        let applied = if known {
                            Applied::AlreadyIn
                        } else {
                            // Subscribers hear of it only when a message was added.
                            conversation
                                .try_maybe_update(|c| {
                                    let a = c.apply(&f);
                                    (a == Applied::Added, a)
                                })
                                .unwrap_or(Applied::Recompile)
                        };
                        if applied == Applied::Recompile {
                            refresh();
                        }
                    }
                    // A reply in flight this tab has not seen start: show it so far at once.
                    SessionEvent::Phantom(f) if !is_current(&f.id) => {
                        let stored = conversation
                            .with_untracked(|c| c.messages.iter().any(|m| m.frame_id == f.id));
                        if !stored {
                            let agent = f.payload["agent_name"]
                                .as_str()
                                .unwrap_or("Agent")
                                .to_owned();
                            begin_reply(f.id.clone(), agent);
                            let so_far = f.payload["content"].as_str().unwrap_or_default();
                            pending.write_value().push_str(so_far);
                            flush();
                        }
                    }
                    SessionEvent::Phantom(_) => {}
                    // The request frame that came with it shows the card.
                    SessionEvent::Approval(_) | SessionEvent::Question(_) => {}
                    SessionEvent::Reply(SseEvent::MessageStart(m)) => {
                        begin_reply(m.message_id, m.agent_name)
                    }
                    SessionEvent::Chunk(c) => {
                        if is_current(&c.message_id) {
                            pending.write_value().push_str(&c.content);
                            if !scheduled.get_value() {
                                scheduled.set_value(true);
                                set_timeout(flush, FEED_EVERY);
                            }
                        }
                    }
                    SessionEvent::Error(e)
                    | SessionEvent::Reply(SseEvent::Error(hero_shared::wire::ErrorData {
                        error: e,
                        ..
                    })) => {
                        if let Some(l) = live.get_untracked() {
                            l.error.set(Some(e));
                        }
                    }
                    SessionEvent::Reply(SseEvent::MessageComplete(m)) => {
                        let mid = m.message_id;
                        flush();
                        state.update_value(|s| {
                            if let Some(r) = s.as_mut().filter(|r| r.message_id == mid) {
                                r.finish();
                            }
                        });
                        // The reply's frame comes before this; if it did not (it could not be
                        // stored, or the stream was cut), ask for the view.
                        if !conversation
                            .with_untracked(|c| c.messages.iter().any(|m| m.frame_id == mid))
                        {
                            refresh();
                        }
                    }
                    SessionEvent::Reply(_) | SessionEvent::Shutdown => {}
                }
            };
            source.set_value(browser::subscribe(session_id, after, on_event, connected));
        });
    }

    #[cfg(not(feature = "hydrate"))]
    let _ = (session_id, streaming);
    SessionEvents {
        conversation,
        live,
        connected,
        tick,
    }
}

#[cfg(feature = "hydrate")]
const FEED_EVERY: std::time::Duration = std::time::Duration::from_millis(40);

#[cfg(feature = "hydrate")]
mod browser {
    use leptos::prelude::*;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;

    /// A session's event stream and the closures its listeners call (kept as long as it).
    pub struct Source {
        pub es: web_sys::EventSource,
        _listeners: Vec<Closure<dyn FnMut(web_sys::Event)>>,
    }

    /// Opens the session's event stream and hands each event to `on_event`.
    pub fn subscribe(
        session_id: i64,
        after: i64,
        on_event: impl Fn(&str, &str) + 'static,
        connected: RwSignal<bool>,
    ) -> Option<Source> {
        let es =
            web_sys::EventSource::new(&format!("/api/sessions/{session_id}/events?after={after}"))
                .ok()?;
        let on_event = std::rc::Rc::new(on_event);
        let mut listeners = Vec::new();
        for name in hero_shared::feed::PAGE_EVENTS {
            let on_event = on_event.clone();
            let cb = Closure::<dyn FnMut(web_sys::Event)>::new(move |e: web_sys::Event| {
                // The stream's own `error` (a dropped connection) is not a MessageEvent.
                if let Some(m) = e.dyn_ref::<web_sys::MessageEvent>() {
                    on_event(name, &m.data().as_string().unwrap_or_default());
                }
            });
            let _ = es.add_event_listener_with_callback(name, cb.as_ref().unchecked_ref());
            listeners.push(cb);
        }
        let open = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| connected.set(true));
        es.set_onopen(Some(open.as_ref().unchecked_ref()));
        listeners.push(open);
        Some(Source {
            es,
            _listeners: listeners,
        })
    }
}
