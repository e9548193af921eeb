//! `use_session_events`: a session's feed (`GET /api/sessions/{id}/events`, read as the
//! typed [`SessionEvent`](hero_shared::feed::SessionEvent)) turned into the reactive state
//! the chat renders: the compiled conversation, kept up to date frame by frame
//! (`CompiledView::apply`; the server compiles it anew only for a frame that changes earlier
//! messages), the reply in flight, and whether the stream is connected. What each event
//! does is decided in plain Rust ([`super::reduce`]); here it is carried out on signals.
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
use super::reduce::{Do, Feed};

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

    // Whatever the conversation shows anew, the scroll follows.
    Effect::new(move |_| {
        conversation.track();
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
        // What the events did so far (`reduce`): the reply in flight.
        let feed = StoredValue::new(Feed::default());
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
                    let fetched = crate::rpc::call(crate::chat::SessionView {
                        session_id,
                        from_seq: from,
                    })
                    .await;
                    // The chat stopped meanwhile (a move to another session): nothing to do.
                    if fetching.is_disposed() {
                        return;
                    }
                    if let Ok(v) = fetched {
                        let steps = conversation
                            .try_maybe_update(|c| {
                                let s = feed.try_update_value(|f| f.refreshed(c, v));
                                let s = s.unwrap_or_default();
                                (s.changed, s)
                            })
                            .unwrap_or_default();
                        // The view holds the reply in flight: its bubble goes.
                        if steps.todo.iter().any(|d| matches!(d, Do::Stored)) {
                            live.set(None);
                        }
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
            let text = move |t: &str| {
                pending.write_value().push_str(t);
                if !scheduled.get_value() {
                    scheduled.set_value(true);
                    set_timeout(flush, FEED_EVERY);
                }
            };
            // What an event asks of the page (`reduce::Feed::take`), carried out.
            let carry_out = move |todo: Vec<Do>| {
                for d in todo {
                    match d {
                        Do::Refresh => refresh(),
                        Do::Begin {
                            message_id,
                            agent_name,
                            so_far,
                        } => {
                            begin_reply(message_id, agent_name);
                            pending.write_value().push_str(&so_far);
                            flush();
                        }
                        Do::Text(t) => text(&t),
                        Do::Error(e) => {
                            if let Some(l) = live.get_untracked() {
                                l.error.set(Some(e));
                            }
                        }
                        Do::Finish => {
                            flush();
                            state.update_value(|s| {
                                if let Some(r) = s.as_mut() {
                                    r.finish();
                                }
                            });
                        }
                        Do::Stored => live.set(None),
                        Do::Streaming(on) => streaming.set(on),
                    }
                }
            };
            let on_event = move |name: &str, data: &str| {
                // The feed's events are one closed type; anything else is ignored.
                let Ok(event) = hero_shared::feed::SessionEvent::from_page_sse(name, data) else {
                    return;
                };
                // Its readers hear of the conversation only when it changed.
                let steps = conversation
                    .try_maybe_update(|c| {
                        let s = feed.try_update_value(|f| f.take(c, event));
                        let s = s.unwrap_or_default();
                        (s.changed, s)
                    })
                    .unwrap_or_default();
                carry_out(steps.todo);
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
        let es = web_sys::EventSource::new(&crate::base::href(&format!(
            "/api/sessions/{session_id}/events?after={after}"
        )))
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
