//! The conversation of a session: messages compiled from frames (rendered on the server,
//! hydrated), the reply in flight (fed chunk by chunk through the shared parser), the
//! composer with its stop button, and the scroll that follows only a reader near the bottom.
//!
//! Live data comes from one `EventSource` on `/api/sessions/{id}/events`, resumed after
//! the last seq the page was rendered with, so nothing between render and subscribe is lost.
//! A persisted `message` frame joins the view as the message compiling the log would add
//! (`CompiledView::apply`, the same shared rules), so a long session costs one message per
//! new frame; a frame that changes earlier messages has the server compile the view anew.

pub mod elements;
pub mod live;
pub mod markdown;

use hero_shared::api::{AgentDto, SessionDto};
use hero_shared::frame::{CompiledMessage, Role};
use hero_shared::wire::CompiledView;
use leptos::prelude::*;

use crate::auth::error_text;
use elements::nodes_view;
use live::LiveBlocks;
#[cfg(feature = "hydrate")]
use live::LiveReply;

#[server(prefix = "/_fn")]
pub async fn session_view(session_id: i64) -> Result<CompiledView, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::frames::view(&st, &user, session_id)
        .await
        .map_err(fail)
}

/// Starts a turn and returns its message id at once; the reply arrives on the event stream.
#[server(prefix = "/_fn")]
pub async fn post_message(session_id: i64, content: String) -> Result<String, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let handle = hero_backend::turn::post(&st, &user, session_id, content)
        .await
        .map_err(fail)?;
    Ok(handle.message_id)
}

/// Stops the session's reply in flight; what arrived is kept.
#[server(prefix = "/_fn")]
pub async fn abort_turn(session_id: i64) -> Result<usize, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::sessions::get(&st.db, &user, session_id)
        .await
        .map_err(fail)?;
    Ok(st.turns.abort(session_id))
}

#[server(prefix = "/_fn")]
pub async fn list_agents() -> Result<Vec<AgentDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::list(&st.db, &st.keys, &user)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn set_session_agent(
    session_id: i64,
    agent_id: i64,
) -> Result<SessionDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::UpdateSessionRequest {
        agent_id: Some(Some(agent_id)),
        ..Default::default()
    };
    hero_backend::sessions::update(&st.db, &user, session_id, req)
        .await
        .map_err(fail)
}

/// What the page shows of the reply in flight (all cheap handles).
#[derive(Clone, Copy)]
struct LiveView {
    message_id: StoredValue<String>,
    agent_name: StoredValue<String>,
    blocks: RwSignal<Vec<live::LiveBlock>>,
    error: RwSignal<Option<String>>,
    finished: RwSignal<bool>,
}

/// One stored message.
#[component]
fn MessageView(m: CompiledMessage) -> impl IntoView {
    let id = m.frame_id.clone();
    match m.role {
        Role::User => view! {
            <div class="msg msg-user" data-message-id=id>
                <div class="msg-who">"You"</div>
                <div class="msg-body plain">{m.content}</div>
            </div>
        }
        .into_any(),
        Role::System => view! {
            <div class="msg msg-system" data-message-id=id>{m.content}</div>
        }
        .into_any(),
        Role::Agent => {
            let name = m
                .payload
                .get("agent_name")
                .and_then(|v| v.as_str())
                .unwrap_or("Agent")
                .to_owned();
            let error = m
                .payload
                .get("error")
                .and_then(|v| v.as_str())
                .map(str::to_owned);
            let aborted = m
                .payload
                .get("aborted")
                .and_then(|v| v.as_bool())
                .unwrap_or(false)
                // A reply the server's shutdown cut says so in its error instead.
                && m.payload.get("aborted_by").is_none();
            let doc = hero_shared::hml::parse(&m.content);
            view! {
                <div class="msg msg-agent" data-message-id=id>
                    <div class="msg-who" data-testid="agent-name">{name}</div>
                    <div class="msg-body">{nodes_view(doc.nodes, false)}</div>
                    {aborted.then(|| view! { <div class="msg-note">"Stopped: the reply was cut short at your request."</div> })}
                    {error.map(|e| view! { <div class="msg-error" role="alert">{e}</div> })}
                </div>
            }
            .into_any()
        }
    }
}

/// The conversation. Its data is loaded by the page (`initial`, `agents`): resources created
/// inside a suspended part of the page would be created anew on each server render pass and
/// no longer line up with the browser's when it hydrates.
#[component]
pub fn ChatView(
    session: SessionDto,
    initial: CompiledView,
    agents: Vec<AgentDto>,
) -> impl IntoView {
    let session_id = session.id;
    let conversation = RwSignal::new(initial);
    let live: RwSignal<Option<LiveView>> = RwSignal::new(None);
    let connected = RwSignal::new(false);
    let near_bottom = RwSignal::new(true);
    let tick = RwSignal::new(0u64);
    let draft = RwSignal::new(String::new());
    let send = ServerAction::<PostMessage>::new();
    let stop = ServerAction::<AbortTurn>::new();
    let choose = ServerAction::<SetSessionAgent>::new();
    let scroller = NodeRef::<leptos::html::Div>::new();
    let streaming = session.streaming;

    let busy = move || send.pending().get() || live.get().is_some_and(|l| !l.finished.get());

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

    // Follow new content only while the reader is near the bottom.
    Effect::new(move |_| {
        tick.get();
        if near_bottom.get_untracked()
            && let Some(el) = scroller.get_untracked()
        {
            // Checked again when the frame comes: the reader may have scrolled up since.
            request_animation_frame(move || {
                if near_bottom.get_untracked() {
                    el.set_scroll_top(el.scroll_height());
                }
            });
        }
    });
    // Only the reader moving up stops the following, and reaching the bottom resumes it: a
    // scroll event caused by our own scrolling, while more text keeps arriving, must not
    // look like the reader leaving.
    let last_top = StoredValue::new(0i32);
    let on_scroll = move |_| {
        if let Some(el) = scroller.get_untracked() {
            let top = el.scroll_top();
            if el.scroll_height() - top - el.client_height() < 80 {
                near_bottom.set(true);
            } else if top < last_top.get_value() - 2 {
                near_bottom.set(false);
            }
            last_top.set_value(top);
        }
    };
    let jump = move |_| {
        if let Some(el) = scroller.get_untracked() {
            el.set_scroll_top(el.scroll_height());
            near_bottom.set(true);
        }
    };

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
        let source = StoredValue::new_local(None::<web_sys::EventSource>);
        on_cleanup(move || {
            source.with_value(|s| {
                if let Some(es) = s {
                    es.close()
                }
            })
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
                    if let Ok(v) = session_view(session_id).await
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
                    message_id: StoredValue::new(mid),
                    agent_name: StoredValue::new(agent),
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
                let Ok(event) = SessionEvent::from_sse(name, data) else {
                    return;
                };
                match event {
                    SessionEvent::Frame(f) => {
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

    let submit = move || {
        let content = draft.get_untracked();
        if content.trim().is_empty() || busy() {
            return;
        }
        near_bottom.set(true);
        send.dispatch(PostMessage {
            session_id,
            content,
        });
        draft.set(String::new());
    };

    view! {
        <div class="chat" data-connected=move || connected.get().to_string()>
            <div class="chat-agent">
                <span>"Agent"</span>
                {
                            let list = agents;
                            let current = session.agent_id;
                            let mut options: Vec<(String, String, bool)> = Vec::new();
                            if current.is_none() {
                                options.push((String::new(), "(choose an agent)".into(), true));
                            }
                            options.extend(list.into_iter().map(|a| (a.id.to_string(), a.name, current == Some(a.id))));
                            let shown = options.iter().find(|o| o.2).map(|o| o.1.clone()).unwrap_or_default();
                            view! {
                                <elements::ClientOnly fallback=move || view! { <span class="agent-name">{shown.clone()}</span> }>
                                    <select aria-label="Agent" on:change=move |ev| {
                                        if let Ok(id) = event_target_value(&ev).parse::<i64>() {
                                            choose.dispatch(SetSessionAgent { session_id, agent_id: id });
                                        }
                                    }>
                                        {options.clone().into_iter().map(|(value, name, selected)| view! {
                                            <option value=value selected=selected>{name}</option>
                                        }).collect_view()}
                                    </select>
                                </elements::ClientOnly>
                            }
                }
                <a href="/agents" class="manage-agents">"Manage agents"</a>
                {(!streaming).then(|| view! { <span class="badge">"batch mode"</span> })}
            </div>
            <div class="messages" node_ref=scroller on:scroll=on_scroll data-testid="messages">
                {move || {
                    let v = conversation.get();
                    if v.messages.is_empty() {
                        view! { <p class="empty">"No messages yet. Say hello below."</p> }.into_any()
                    } else {
                        v.messages.into_iter().filter(|m| !m.hidden).map(|m| view! { <MessageView m/> }).collect_view().into_any()
                    }
                }}
                {move || live.get().map(|l| view! {
                    <div class="msg msg-agent live" data-message-id=l.message_id.get_value()>
                        <div class="msg-who">{l.agent_name.get_value()}</div>
                        <div class="msg-body">
                            {if streaming {
                                view! { <LiveBlocks blocks=l.blocks/> }.into_any()
                            } else {
                                view! { <p class="typing">"Writing the whole reply…"</p> }.into_any()
                            }}
                        </div>
                        {move || l.error.get().map(|e| view! { <div class="msg-error" role="alert">{e}</div> })}
                    </div>
                })}
            </div>
            <button type="button" class="jump-down" aria-label="Jump to the newest message" hidden=move || near_bottom.get() on:click=jump>"↓"</button>
            {move || match send.value().get() {
                Some(Err(e)) => Some(view! { <p class="form-error" role="alert">{error_text(&e)}</p> }),
                _ => None,
            }}
            <form class="composer" on:submit=move |ev| { ev.prevent_default(); submit(); }>
                <textarea
                    aria-label="Message"
                    placeholder="Write a message (Enter sends, Shift+Enter adds a line)"
                    rows="3"
                    prop:value=move || draft.get()
                    on:input=move |ev| draft.set(event_target_value(&ev))
                    on:keydown=move |ev| {
                        if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
                            ev.prevent_default();
                            submit();
                        }
                    }
                    disabled=move || busy() || !connected.get()
                ></textarea>
                {move || if busy() {
                    view! { <button type="button" class="stop" on:click=move |_| { stop.dispatch(AbortTurn { session_id }); }>"Stop"</button> }.into_any()
                } else {
                    view! { <button type="submit" disabled=move || !connected.get()>"Send"</button> }.into_any()
                }}
            </form>
        </div>
    }
}

#[cfg(feature = "hydrate")]
const FEED_EVERY: std::time::Duration = std::time::Duration::from_millis(40);

#[cfg(feature = "hydrate")]
mod browser {
    use leptos::prelude::*;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;

    /// Opens the session's event stream and hands each event to `on_event`.
    pub fn subscribe(
        session_id: i64,
        after: i64,
        on_event: impl Fn(&str, &str) + 'static,
        connected: RwSignal<bool>,
    ) -> Option<web_sys::EventSource> {
        let es =
            web_sys::EventSource::new(&format!("/api/sessions/{session_id}/events?after={after}"))
                .ok()?;
        let on_event = std::rc::Rc::new(on_event);
        for name in [
            "frame",
            "message_start",
            "message_chunk",
            "message_complete",
            "error",
        ] {
            let on_event = on_event.clone();
            let cb = Closure::<dyn FnMut(web_sys::Event)>::new(move |e: web_sys::Event| {
                // The stream's own `error` (a dropped connection) is not a MessageEvent.
                if let Some(m) = e.dyn_ref::<web_sys::MessageEvent>() {
                    on_event(name, &m.data().as_string().unwrap_or_default());
                }
            });
            let _ = es.add_event_listener_with_callback(name, cb.as_ref().unchecked_ref());
            cb.forget();
        }
        let open = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| connected.set(true));
        es.set_onopen(Some(open.as_ref().unchecked_ref()));
        open.forget();
        Some(es)
    }
}
