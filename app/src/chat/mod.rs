//! The conversation of a session, the one island of the page: `ChatView` is an
//! `AgentPicker`, a `MessageList` (stored messages compiled from frames, each drawn as HTML
//! by the shared renderer, [`hero_shared::html`], on the server and in the browser alike;
//! then the `LiveMessage` in flight; the scroll follows only a reader near the bottom) and
//! a `Composer` with its stop button, all reading the session's feed through
//! [`events::use_session_events`]. What acts inside the messages (prompts, questions, calls'
//! cards, copy buttons) is handled by one delegated listener ([`actions`]).

pub mod actions;
pub mod events;
pub mod live;

use hero_shared::api::{AgentDto, SessionDto};
use hero_shared::frame::{CompiledMessage, FrameType};
use hero_shared::wire::CompiledView;
use leptos::prelude::*;

use crate::auth::error_text;
use events::{LiveView, SessionEvents, use_session_events};
use live::LiveBlocks;

#[server(prefix = "/_fn")]
pub async fn session_view(
    session_id: i64,
    from_seq: Option<i64>,
) -> Result<CompiledView, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::frames::view(&st, &user, session_id, from_seq)
        .await
        .map_err(fail)
}

/// Starts a turn and returns its message id at once; the reply arrives on the event stream.
#[server(prefix = "/_fn")]
pub async fn post_message(
    session_id: i64,
    content: String,
    private: bool,
) -> Result<String, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::PostMessageRequest { content, private };
    let handle = hero_backend::turn::post(&st, &user, session_id, req)
        .await
        .map_err(fail)?;
    Ok(handle.message_id)
}

/// Hides a message (or shows it again): an update frame.
#[server(prefix = "/_fn")]
pub async fn set_hidden(
    session_id: i64,
    frame_id: String,
    hidden: bool,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::frames::set_hidden(&st, &user, session_id, &frame_id, hidden)
        .await
        .map_err(fail)
}

/// What the summary at `before_seq` stands for ("show earlier").
#[server(prefix = "/_fn")]
pub async fn earlier_messages(
    session_id: i64,
    before_seq: i64,
) -> Result<(i64, CompiledView), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::frames::earlier(&st, &user, session_id, before_seq)
        .await
        .map(|v| (before_seq, v))
        .map_err(fail)
}

/// Stops the session's reply in flight (what arrived is kept) and its calls.
#[server(prefix = "/_fn")]
pub async fn abort_turn(session_id: i64) -> Result<usize, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::turn::stop(&st, &user, session_id)
        .await
        .map_err(fail)
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

/// Where a summary stands in for what came before it: the summary, collapsed, and a way to
/// page in what it covers.
#[component]
fn Summarised(m: CompiledMessage) -> impl IntoView {
    let before_seq = m.seq;
    let earlier = use_context::<Earlier>();
    let shown = move || earlier.is_some_and(|e| e.has(before_seq));
    let covered = m
        .payload
        .get("messages")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    view! {
        <div class="compact-divider" data-message-id=m.frame_id.clone() data-testid="summarised">
            <div class="compact-head">
                <span class="compact-label">{format!("Summarised: {covered} earlier messages")}</span>
                {move || (!shown()).then(|| view! {
                    <button type="button" class="show-earlier" on:click=move |_| {
                        if let Some(e) = earlier {
                            e.load(before_seq);
                        }
                    }>"Show earlier"</button>
                })}
            </div>
            <details class="compact-summary">
                <summary>"The summary the agent carries on from"</summary>
                <div inner_html=hero_shared::html::markdown_html(&m.content)></div>
            </details>
        </div>
    }
}

/// Earlier pages of the conversation, paged in above the view, each by the seq it comes
/// before; and the one request that fetches them.
#[derive(Clone, Copy)]
pub struct Earlier {
    pub pages: RwSignal<Vec<(i64, CompiledView)>>,
    fetch: ServerAction<EarlierMessages>,
    session_id: i64,
}

impl Earlier {
    fn new(session_id: i64) -> Earlier {
        let pages = RwSignal::new(Vec::<(i64, CompiledView)>::new());
        let fetch = ServerAction::<EarlierMessages>::new();
        Effect::new(move |_| {
            if let Some(Ok((before, v))) = fetch.value().get() {
                pages.update(|p| {
                    if !p.iter().any(|(seq, _)| *seq == before) {
                        p.push((before, v));
                    }
                });
            }
        });
        Earlier {
            pages,
            fetch,
            session_id,
        }
    }

    /// Whether the page before `seq` is in.
    fn has(&self, seq: i64) -> bool {
        self.pages.with(|p| p.iter().any(|(s, _)| *s == seq))
    }

    /// Fetches the page before `seq` (once at a time).
    fn load(&self, before_seq: i64) {
        if self.has(before_seq) || self.fetch.pending().get_untracked() {
            return;
        }
        self.fetch.dispatch(EarlierMessages {
            session_id: self.session_id,
            before_seq,
        });
    }

    fn loading(&self) -> bool {
        self.fetch.pending().get()
    }
}

/// Whether hidden messages are shown.
#[derive(Clone, Copy)]
pub struct ShowHidden(pub RwSignal<bool>);

/// The conversation. Its data is loaded by the page (`initial`, `agents`): resources created
/// inside a suspended part of the page would be created anew on each server render pass and
/// no longer line up with the browser's when it hydrates.
#[island]
pub fn ChatView(
    session: SessionDto,
    initial: CompiledView,
    agents: Vec<AgentDto>,
) -> impl IntoView {
    let session_id = session.id;
    let feed = use_session_events(session_id, initial);
    let show_hidden = RwSignal::new(false);
    provide_context(ShowHidden(show_hidden));
    provide_context(Earlier::new(session_id));
    // Whether the view follows new content: only while the reader is near the bottom.
    let near_bottom = RwSignal::new(true);
    let connected = feed.connected;
    view! {
        <div class="chat" data-connected=move || connected.get().to_string()>
            <AgentPicker session_id current=session.agent_id agents streaming=session.streaming/>
            <label class="show-hidden"><input type="checkbox" on:change=move |ev| show_hidden.set(event_target_checked(&ev))/>"Show hidden messages"</label>
            <MessageList feed session_id streaming=session.streaming near_bottom/>
            <Composer session_id feed near_bottom/>
        </div>
    }
}

/// What the session's next call would send as its system prompt.
#[server(prefix = "/_fn")]
pub async fn system_prompt(session_id: i64) -> Result<String, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::persona::for_session(&st, &user, session_id)
        .await
        .map_err(fail)
}

/// "View system prompt": what the agent is told, fetched when asked for.
#[component]
fn SystemPromptView(session_id: i64) -> impl IntoView {
    let fetch = ServerAction::<SystemPrompt>::new();
    let open = RwSignal::new(false);
    let toggle = move |_| {
        let now = !open.get_untracked();
        open.set(now);
        if now {
            fetch.dispatch(SystemPrompt { session_id });
        }
    };
    view! {
        <button type="button" class="view-prompt" on:click=toggle>
            {move || if open.get() { "Hide system prompt" } else { "View system prompt" }}
        </button>
        {move || open.get().then(|| view! {
            <section class="system-prompt" aria-label="System prompt">
                {move || match fetch.value().get() {
                    None => view! { <p class="muted">"Loading…"</p> }.into_any(),
                    Some(Ok(p)) => view! { <pre data-testid="system-prompt">{p}</pre> }.into_any(),
                    Some(Err(e)) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
                }}
            </section>
        })}
    }
}

/// The session's agent, chosen from the user's agents, and the batch-mode badge.
#[component]
fn AgentPicker(
    session_id: i64,
    current: Option<i64>,
    agents: Vec<AgentDto>,
    streaming: bool,
) -> impl IntoView {
    let choose = ServerAction::<SetSessionAgent>::new();
    let mut options: Vec<(String, String, bool)> = Vec::new();
    if current.is_none() {
        options.push((String::new(), "(choose an agent)".into(), true));
    }
    options.extend(
        agents
            .into_iter()
            .map(|a| (a.id.to_string(), a.name, current == Some(a.id))),
    );
    let shown = options
        .iter()
        .find(|o| o.2)
        .map(|o| o.1.clone())
        .unwrap_or_default();
    view! {
        <div class="chat-agent">
            <span>"Agent"</span>
            <ClientOnly fallback=move || view! { <span class="agent-name">{shown.clone()}</span> }>
                <select aria-label="Agent" on:change=move |ev| {
                    if let Ok(id) = event_target_value(&ev).parse::<i64>() {
                        choose.dispatch(SetSessionAgent { session_id, agent_id: id });
                    }
                }>
                    {options.clone().into_iter().map(|(value, name, selected)| view! {
                        <option value=value selected=selected>{name}</option>
                    }).collect_view()}
                </select>
            </ClientOnly>
            <a href="/agents" class="manage-agents">"Manage agents"</a>
            <a href="/permissions" class="manage-permissions">"Permissions"</a>
            {current.map(|a| view! { <a href=format!("/agents/{a}/files") class="agent-files">"Files"</a> })}
            {(!streaming).then(|| view! { <span class="badge">"batch mode"</span> })}
            <SystemPromptView session_id/>
        </div>
    }
}

/// Stored messages, each with the cards of its calls; hidden ones only when asked for. Each
/// is the shared renderer's HTML in a `msg-slot`: a message drawn again with the same HTML
/// keeps its DOM, one that changed gets its new HTML (what was typed in it is carried over by
/// [`MessageList`]).
fn messages_view(messages: Vec<CompiledMessage>, show_hidden: bool) -> Vec<AnyView> {
    let mut all = hero_shared::calls::calls(&messages);
    messages
        .into_iter()
        .filter(|m| show_hidden || !m.hidden)
        // A call's request and result show as a card under its message.
        .filter(|m| !matches!(m.frame_type, FrameType::Request | FrameType::Result))
        .map(|m| {
            if m.frame_type == FrameType::Compact {
                return view! { <Summarised m/> }.into_any();
            }
            let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut all)
                .into_iter()
                .partition(|c| c.message_id == m.frame_id);
            all = rest;
            let html = hero_shared::html::message_html(&m, &mine);
            view! { <div class="msg-slot" inner_html=html></div> }.into_any()
        })
        .collect()
}

/// The stored messages, then the reply in flight; follows new content while the reader is
/// near the bottom, and offers a way down when they are not.
#[component]
fn MessageList(
    feed: SessionEvents,
    session_id: i64,
    streaming: bool,
    near_bottom: RwSignal<bool>,
) -> impl IntoView {
    let SessionEvents {
        conversation,
        live,
        tick,
        ..
    } = feed;
    let scroller = NodeRef::<leptos::html::Div>::new();
    let show_hidden = use_context::<ShowHidden>().map_or(RwSignal::new(false), |s| s.0);
    let earlier = use_context::<Earlier>();
    // Where the next page up ends: before the topmost page shown, if that has one before it.
    let next_earlier = move || {
        let top = earlier.and_then(|e| {
            e.pages.with(|p| {
                p.iter()
                    .min_by_key(|(seq, _)| *seq)
                    .map(|(_, v)| v.earlier_before)
            })
        });
        match top {
            Some(before) => before,
            None => conversation.with(|c| c.earlier_before),
        }
        .filter(|seq| !earlier.is_some_and(|e| e.has(*seq)))
    };
    // Paging in above the reader keeps what they read where it was.
    let height_before = StoredValue::new(None::<i32>);
    let load_from = move |seq: i64| {
        if let (Some(e), Some(el)) = (earlier, scroller.get_untracked()) {
            height_before.set_value(Some(el.scroll_height()));
            e.load(seq);
        }
    };
    Effect::new(move |_| {
        let n = earlier.map_or(0, |e| e.pages.with(Vec::len));
        if n == 0 {
            return;
        }
        if let (Some(h), Some(el)) = (height_before.get_value(), scroller.get_untracked()) {
            height_before.set_value(None);
            request_animation_frame(move || {
                el.set_scroll_top(el.scroll_top() + el.scroll_height() - h);
            });
        }
    });
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
    // A timed question's countdown, in whatever message it is.
    #[cfg(feature = "hydrate")]
    if let Ok(h) = set_interval_with_handle(
        move || {
            if let Some(el) = scroller.get_untracked() {
                actions::countdowns(&el.into());
            }
        },
        std::time::Duration::from_millis(250),
    ) {
        on_cleanup(move || h.clear());
    }
    // Only the reader moving up stops the following, and reaching the bottom resumes it: a
    // scroll event caused by our own scrolling, while more text keeps arriving, must not
    // look like the reader leaving.
    let last_top = StoredValue::new(0i32);
    let on_scroll = move |_| {
        if let Some(el) = scroller.get_untracked() {
            let top = el.scroll_top();
            // Near the top: the page before comes in.
            if top < 40
                && let Some(seq) = next_earlier()
            {
                load_from(seq);
            }
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
    view! {
        <div class="messages" node_ref=scroller on:scroll=on_scroll data-testid="messages"
            on:click=move |ev| {
                #[cfg(feature = "hydrate")]
                actions::on_click(session_id, ev);
                #[cfg(not(feature = "hydrate"))]
                let _ = (ev, session_id);
            }
            on:keydown=move |ev| {
                #[cfg(feature = "hydrate")]
                actions::on_keydown(session_id, ev);
                #[cfg(not(feature = "hydrate"))]
                let _ = ev;
            }>
            // The way further up, then the earlier pages paged in, oldest first.
            {move || next_earlier().map(|seq| view! {
                <button type="button" class="show-earlier top" data-testid="show-earlier" disabled=move || earlier.is_some_and(|e| e.loading())
                    on:click=move |_| load_from(seq)>"Show earlier messages"</button>
            })}
            {move || {
                let show = show_hidden.get();
                let mut pages = earlier.map(|e| e.pages.get()).unwrap_or_default();
                pages.sort_by_key(|(seq, _)| *seq);
                pages
                    .into_iter()
                    .map(|(_, v)| view! { <div class="earlier">{messages_view(v.messages, show)}</div> })
                    .collect_view()
            }}
            {move || {
                let v = conversation.get();
                // What was typed in a message about to be drawn again is put back after, as
                // soon as the list is rebuilt (a microtask: before any input can come).
                #[cfg(feature = "hydrate")]
                if let Some(el) = scroller.get_untracked() {
                    let el: web_sys::Element = el.into();
                    let kept = actions::keep(&el);
                    queue_microtask(move || {
                        actions::restore(&el, &kept);
                        actions::countdowns(&el);
                    });
                }
                if v.messages.is_empty() {
                    view! { <p class="empty">"No messages yet. Say hello below."</p> }.into_any()
                } else {
                    messages_view(v.messages, show_hidden.get()).into_any()
                }
            }}
            {move || live.get().map(|l| view! { <LiveMessage l streaming/> })}
        </div>
        <button type="button" class="jump-down" aria-label="Jump to the newest message" hidden=move || near_bottom.get() on:click=jump>"↓"</button>
    }
}

/// The reply in flight: its blocks as they stream (or a note, in batch mode) and its error.
#[component]
fn LiveMessage(l: LiveView, streaming: bool) -> impl IntoView {
    view! {
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
    }
}

/// The message box: Enter sends, Shift+Enter adds a line; Stop while a reply is in flight.
#[component]
fn Composer(session_id: i64, feed: SessionEvents, near_bottom: RwSignal<bool>) -> impl IntoView {
    let SessionEvents {
        live,
        connected,
        conversation,
        ..
    } = feed;
    let draft = RwSignal::new(String::new());
    // A private message is stored and shown, never sent to the agent.
    let private = RwSignal::new(false);
    let send = ServerAction::<PostMessage>::new();
    let reply = ServerAction::<actions::AnswerPrompt>::new();
    let stop = ServerAction::<AbortTurn>::new();
    // A question of the agent's that waits for as long as it takes: the box answers it.
    let question = Memo::new(move |_| {
        conversation.with(|v| {
            hero_shared::calls::calls(&v.messages)
                .into_iter()
                .rev()
                .find(|c| c.is_question() && c.request.expires_at.is_none())
        })
    });
    let busy = move || {
        send.pending().get()
            || reply.pending().get()
            || live.get().is_some_and(|l| !l.finished.get())
    };
    let submit = move || {
        let content = draft.get_untracked();
        if content.trim().is_empty() || busy() {
            return;
        }
        near_bottom.set(true);
        match question.get_untracked() {
            Some(q) => {
                reply.dispatch(actions::AnswerPrompt {
                    session_id,
                    message_id: q.message_id.clone(),
                    element_id: q.request.origin.element_id(),
                    answer: serde_json::Value::String(content).to_string(),
                });
            }
            None => {
                send.dispatch(PostMessage {
                    session_id,
                    content,
                    private: private.get_untracked(),
                });
            }
        }
        draft.set(String::new());
    };
    let asked = move || {
        question.get().map(|q| {
            let text = q.request.arg("question").unwrap_or_default().to_owned();
            view! {
                <div class="composer-answering" data-testid="answering">
                    <span>"Answering the agent's question: "</span>
                    <q>{text}</q>
                    <button type="button" class="dismiss" on:click=move |_| { stop.dispatch(AbortTurn { session_id }); }>"Dismiss"</button>
                </div>
            }
        })
    };
    let placeholder = move || {
        if question.with(Option::is_some) {
            "Your answer to the agent's question (Enter answers)"
        } else {
            "Write a message (Enter sends, Shift+Enter adds a line)"
        }
    };
    view! {
        {move || match (send.value().get(), reply.value().get()) {
            (Some(Err(e)), _) | (_, Some(Err(e))) => Some(view! { <p class="form-error" role="alert">{error_text(&e)}</p> }),
            _ => None,
        }}
        {asked}
        <form class="composer" on:submit=move |ev| { ev.prevent_default(); submit(); }>
            <textarea
                aria-label="Message"
                placeholder=placeholder
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
            <label class="private-toggle" title="Stored and shown, never sent to the agent">
                <input type="checkbox" prop:checked=move || private.get() on:change=move |ev| private.set(event_target_checked(&ev))/>"Private"
            </label>
            {move || if busy() {
                view! { <button type="button" class="stop" on:click=move |_| { stop.dispatch(AbortTurn { session_id }); }>"Stop"</button> }.into_any()
            } else {
                view! { <button type="submit" disabled=move || !connected.get()>"Send"</button> }.into_any()
            }}
        </form>
    }
}

/// Renders `fallback` on the server and while hydrating, then `children` in the browser.
///
/// For `<select>`: Chromium's parser (customizable select) moves the comment markers Leptos
/// leaves in server-rendered markup out of a `<select>`, so hydrating one fails; a select
/// made in the browser has no such problem.
#[component]
pub fn ClientOnly<F, FV>(fallback: F, children: ChildrenFn) -> impl IntoView
where
    F: Fn() -> FV + Send + Sync + 'static,
    FV: IntoView + 'static,
{
    let mounted = RwSignal::new(false);
    Effect::new(move |_| mounted.set(true));
    move || {
        if mounted.get() {
            children().into_any()
        } else {
            fallback().into_any()
        }
    }
}
