//! One turn (DESIGN.md "One turn"): the user's message becomes a frame; the agent's context
//! is compiled from the frames; the provider's stream goes through the shared HML parser;
//! its events go to the poster (SSE) and, as phantom frames, to every subscriber of the
//! session; the agent's answer becomes a frame; `message_complete` fires on every path —
//! success, provider error and abort alike.
//!
//! The poster's event stream drives the turn ([`TurnEvents`]); a poster that goes away or
//! stops reading does not stop it: the turn finishes in a task of its own (other tabs are
//! still watching). An `abort` does stop it, through its [`Abort`] in the [`Registry`]
//! signal, which drops the provider request. What streamed before an abort or a failure is
//! kept in the frame.

use hero_shared::api::ProviderKind;
use hero_shared::frame::{AuthorType, FrameType};
use hero_shared::hml::StreamParser;
use hero_shared::wire::{
    ErrorData, ExecutedElement, MessageComplete, MessageStart, SseEvent, ToolUseStart,
};
use serde_json::{Value, json};

use crate::accounts::auth::AuthUser;
use crate::agents::{self, AgentRuntime};
use crate::conversation::frames::{self, NewFrame};
use crate::conversation::history::Kept;
use crate::conversation::hub::HubEvent;
use crate::conversation::{act, context, sessions};
use crate::crypto::SecretKey;
use crate::providers::{self, ChatMessage, Delta};
use crate::{AppState, Error, Result};

pub const MAX_MESSAGE_CHARS: usize = 100_000;
/// A reply longer than this is ended: a provider that never stops must not fill memory.
pub const MAX_REPLY_BYTES: usize = 4 << 20;
/// The most of a model's thinking one reply keeps; past it the reply is ended (the thinking
/// is stored with the reply, and nothing else bounds it).
pub const MAX_THINKING_BYTES: usize = 1 << 20;
/// The most tool-call arguments one reply may stream (they are not kept yet; bounded all
/// the same, so a model cannot stream them for the whole turn deadline).
pub const MAX_TOOL_INPUT_BYTES: usize = 1 << 20;

pub mod decisions;
pub mod registry;

use crate::drive::abort::{Abort, AbortReason, AbortWatch};
use crate::drive::events::{self, Sink};
pub use crate::drive::events::{STALL_CHECK, TurnEvents, Watch};
pub use decisions::{answer_question, decide, recover};
pub use registry::{Acting, Registry};

/// A started turn: its id (the agent frame's id) and the events for the poster. Reading the
/// events drives the turn; dropping them leaves it to finish on its own.
pub struct TurnHandle {
    pub message_id: String,
    pub events: TurnEvents,
}

/// What a posted message asks for.
enum Posted {
    Message(String),
    /// Stored and shown, never sent to the agent.
    Private(String),
    Streaming(bool),
    /// `/compact`: summarise the conversation now.
    Compact,
}

fn read_post(content: &str, private: bool) -> Result<Posted> {
    if content.trim().is_empty() {
        return Err(Error::Invalid("the message is empty".into()));
    }
    if content.chars().count() > MAX_MESSAGE_CHARS {
        return Err(Error::Invalid(format!(
            "the message is too long (at most {MAX_MESSAGE_CHARS} characters)"
        )));
    }
    if private {
        return Ok(Posted::Private(content.to_owned()));
    }
    Ok(match content.trim() {
        "/stream on" => Posted::Streaming(true),
        "/stream off" => Posted::Streaming(false),
        "/compact" => Posted::Compact,
        _ => Posted::Message(content.to_owned()),
    })
}

/// Validates, stores the user's message and starts the agent's reply (a private message is
/// stored only; `/compact` summarises the conversation; `/stream on|off` switches modes).
pub async fn post(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    req: hero_shared::api::PostMessageRequest,
) -> Result<TurnHandle> {
    let posted = read_post(&req.content, req.private)?;
    if st.hub.is_closing() {
        return Err(Error::Unavailable(
            "the server is shutting down; send the message again in a moment",
        ));
    }
    let mut events = TurnEvents::new();
    let message_id = frames::new_id();
    let out = Out {
        st: st.clone(),
        user_id: user.id(),
        session_id,
        sink: events.sink(),
        listening: Default::default(),
    };
    let content = match posted {
        Posted::Streaming(on) => {
            let note = if on {
                "Streaming is on for this session."
            } else {
                "Streaming is off: replies arrive whole."
            };
            // The switch and its note (private: for the user, not the agent) commit together.
            let mut f = NewFrame::message(
                session_id,
                AuthorType::System,
                None,
                // `streaming`: the mode it switched to, for every reader of the log.
                json!({"role": "system", "content": note, "private": true, "streaming": on}),
            );
            f.id = message_id.clone();
            let frame = store_now(st, user, f, |tx| {
                sessions::set_streaming(tx, user, session_id, on)
            })
            .await?;
            out.emit(SseEvent::MessageStart(MessageStart {
                message_id: message_id.clone(),
                session_id,
                agent_name: "Hero".into(),
            }));
            out.emit(SseEvent::Text(hero_shared::wire::TextData {
                message_id: message_id.clone(),
                text: note.into(),
            }));
            // The frame after the events that show it, before the reply's end.
            st.hub
                .publish(user.id(), session_id, HubEvent::Frame(frame));
            out.emit(complete(&message_id, note, Vec::new()));
            return Ok(TurnHandle { message_id, events });
        }
        Posted::Private(text) => {
            let mut f = NewFrame::message(
                session_id,
                AuthorType::User,
                Some(user.id()),
                json!({"role": "user", "content": text, "private": true}),
            );
            f.id = message_id.clone();
            let frame = store_now(st, user, f, |_| Ok(())).await?;
            st.hub
                .publish(user.id(), session_id, HubEvent::Frame(frame));
            // No reply: the message ends where it began.
            out.emit(complete(&message_id, "", Vec::new()));
            return Ok(TurnHandle { message_id, events });
        }
        Posted::Compact => {
            // Checked now: a session of someone else's is a 404 here, not a failed summary.
            sessions::get(&st.db, user, session_id).await?;
            // A summary counts as a reply in flight (a provider call, the context in memory).
            let slot = st.turn_slots.acquire(
                user.id(),
                st.settings.limits.turns_per_user,
                "replies in flight",
            )?;
            let (st2, user2, id) = (st.clone(), user.clone(), message_id.clone());
            let summary = async move {
                out.emit(SseEvent::MessageStart(MessageStart {
                    message_id: id.clone(),
                    session_id,
                    agent_name: "Hero".into(),
                }));
                let acting = st2.turns.acting(session_id);
                match crate::conversation::compact::compact(
                    &st2,
                    &user2,
                    session_id,
                    Some(acting.abort()),
                )
                .await
                {
                    Ok(frame) => {
                        let text = frame.payload["content"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned();
                        out.emit(complete(&id, &text, Vec::new()));
                    }
                    Err(e) => {
                        out.emit(SseEvent::Error(ErrorData {
                            message_id: Some(id.clone()),
                            error: e.public_message(),
                        }));
                        out.emit(complete(&id, "", Vec::new()));
                    }
                }
                drop(acting);
                drop(slot);
            };
            events.start(Box::pin(summary), &st.turns.watch);
            return Ok(TurnHandle { message_id, events });
        }
        Posted::Message(c) => c,
    };

    // Taken before anything is stored, given back when the turn ends, however it ends.
    let slot = st.turn_slots.acquire(
        user.id(),
        st.settings.limits.turns_per_user,
        "replies in flight",
    )?;
    let Started {
        agent,
        dk,
        history,
        user_frame,
    } = start(st, user, session_id, &content).await?;
    let messages = context::messages(&history);
    let user_frame_seq = user_frame.seq;
    let user_frame_id = user_frame.id.clone();
    st.hub
        .publish(user.id(), session_id, HubEvent::Frame(user_frame));

    let live = std::sync::Arc::new(crate::conversation::in_flight::InFlight::new(
        &message_id,
        session_id,
        agent.id,
        &agent.name,
        user_frame_seq,
    ));
    let cancel = st
        .turns
        .begin(live.clone(), Some(out.sink.flag(events::ABORTED)));
    // Calls in the user's own message run with their authority, before the agent replies.
    let asked = act::find(&st.functions, &content, &[]);
    let user_calls = (!asked.is_empty()).then_some((user_frame_id, asked));
    let turn = guarded(
        out,
        message_id.clone(),
        slot,
        converse_args(
            user.clone(),
            agent,
            dk,
            messages,
            user_calls,
            live,
            cancel,
            0,
        ),
    );
    events.start(turn, &st.turns.watch);
    Ok(TurnHandle { message_id, events })
}

/// Stores a frame of the poster's own (a note, a private message) with `also` in one
/// transaction; the caller hands it to the session's readers.
async fn store_now(
    st: &AppState,
    user: &AuthUser,
    f: NewFrame,
    also: impl Fn(&rusqlite::Connection) -> Result<()> + Send,
) -> Result<hero_shared::frame::Frame> {
    let session_id = f.session_id;
    let kept = st
        .hot_db
        .write(&st.db, |tx| {
            let setup = agents::turn_setup(tx, &st.keys, user, session_id)?;
            also(tx)?;
            let sealed = frames::seal(&setup.dk, f.clone())?;
            let seq = sealed.insert(tx)?;
            frames::full_session(st, seq)?;
            Ok(sealed.kept(seq))
        })
        .await?;
    let frame = (*kept.frame).clone();
    st.history.append(kept);
    Ok(frame)
}

/// Stop: the session's replies in flight end (keeping what they have), calls running for
/// it end as stopped, and calls waiting for approval are recorded as stopped too.
pub async fn stop(st: &AppState, user: &AuthUser, session_id: i64) -> Result<usize> {
    sessions::get(&st.db, user, session_id).await?;
    let n = st.turns.abort(session_id);
    Ok(n + act::stop_open(st, user, session_id).await?)
}

/// What a turn starts from.
struct Started {
    agent: AgentRuntime,
    dk: SecretKey,
    /// The conversation since the last compact, the user's message last.
    history: Vec<Kept>,
    user_frame: hero_shared::frame::Frame,
}

/// Reads what the turn needs and appends the user's message: one transaction, so that no
/// message is stored for a session without an agent. The conversation before the message is
/// the one the session's last turn left in memory ([`crate::conversation::history`]) if nothing was
/// appended since; otherwise it is read in the same transaction, and decrypted once the
/// connection is let go. A history too long to read on the hot connection is read through
/// the pool afterwards: the frames before the message, which are what they were.
async fn start(st: &AppState, user: &AuthUser, session_id: i64, content: &str) -> Result<Started> {
    let (agent, dk, kept, rows, user_frame) = st
        .hot_db
        .write(&st.db, |tx| {
            // The agent's files, seeded on its first use, make its system prompt.
            let (agent, dk) = crate::agents::persona::prepared(tx, st, user, session_id, true)?;
            let message = NewFrame::message(
                session_id,
                AuthorType::User,
                Some(user.id()),
                json!({"role": "user", "content": content}),
            );
            let sealed = frames::seal(&dk, message)?;
            let seq = sealed.insert(tx)?;
            // The insert is rolled back with the refusal: a full session takes nothing more.
            // A message needs room for its reply too.
            frames::full_session(st, seq + 1)?;
            let kept = st.history.get(session_id, seq - 1);
            let rows = match kept {
                Some(_) => None,
                None => Some(frames::since_last_compact(tx, session_id, seq)?),
            };
            Ok((agent, dk, kept, rows, sealed.kept(seq)))
        })
        .await?;
    let seq = user_frame.frame.seq;
    let history = match (kept, rows) {
        (Some(mut kept), _) => {
            st.history.append(user_frame.clone());
            kept.push(user_frame.clone());
            kept
        }
        (None, rows) => {
            let mut read = match rows.flatten() {
                Some(rows) => rows.open(&dk)?,
                None => frames::before(&st.db, &dk, session_id, seq).await?,
            };
            read.push(user_frame.clone());
            st.history.put(session_id, read.clone());
            read
        }
    };
    Ok(Started {
        agent,
        dk,
        history,
        user_frame: (*user_frame.frame).clone(),
    })
}

/// Where a turn's events go: the poster (if still there) and the session's subscribers.
struct Out {
    st: AppState,
    user_id: i64,
    session_id: i64,
    sink: Sink,
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
    /// Whether anyone but the poster listens to this turn.
    fn has_listeners(&self) -> bool {
        self.st
            .hub
            .has_listeners_cached(self.user_id, self.session_id, &self.listening)
    }

    fn emit(&self, ev: SseEvent) {
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

fn complete(message_id: &str, content: &str, executed: Vec<ExecutedElement>) -> SseEvent {
    SseEvent::MessageComplete(MessageComplete {
        message_id: message_id.to_owned(),
        content: content.to_owned(),
        executed_elements: executed,
    })
}

/// How many replies the agent has given since the user's last message: the round the
/// next reply is (the loop of calls and follow-ups is bounded per user message).
fn rounds_since_user(frames: &[Kept]) -> usize {
    let mut n = 0;
    for f in frames.iter().rev() {
        let f: &hero_shared::frame::Frame = &f.frame;
        if f.frame_type != FrameType::Message {
            continue;
        }
        match f.author_type {
            // A private note is not an input the agent answers.
            AuthorType::User if f.payload.get("private") == Some(&Value::Bool(true)) => {}
            AuthorType::User => break,
            AuthorType::Agent => n += 1,
            AuthorType::System => {}
        }
    }
    n
}

/// What one reply came to.
struct Replied {
    message_id: String,
    text: String,
    tool_calls: Vec<providers::ToolCall>,
    /// Stored, and ended as the model meant: no error, no Stop.
    clean: bool,
}

/// A turn's replies: the user's own calls first, then the agent's reply; while a reply's
/// calls all settle at once (no approval to wait for) and the rounds allow, the agent is
/// given their results and replies again. A reply whose calls wait for the user ends the
/// turn; the decision that settles the last of them starts the next reply ([`follow_up`]).
#[allow(clippy::too_many_arguments)]
async fn converse(
    out: Out,
    user: AuthUser,
    mut agent: AgentRuntime,
    dk: SecretKey,
    mut messages: Vec<ChatMessage>,
    user_calls: Option<(String, Vec<act::Asked>)>,
    mut live: std::sync::Arc<crate::conversation::in_flight::InFlight>,
    mut cancel: Abort,
    mut round: usize,
    current: std::sync::Arc<std::sync::Mutex<String>>,
) {
    let st = out.st.clone();
    let session_id = out.session_id;
    // Official APIs take native tools; a compatible server may refuse the whole request
    // for them (Ollama for a model without a tool template, llama.cpp without --jinja), so
    // there the agent calls in text only.
    let tools = match agent.endpoint.provider {
        ProviderKind::OpenAiCompatible | ProviderKind::Scripted => Vec::new(),
        _ => crate::execution::permissions::offered(&st, user.id())
            .await
            .unwrap_or_default(),
    };
    let emit = |ev: SseEvent| out.emit(ev);
    if let Some((message_id, asked)) = user_calls {
        let sc = act::Scene {
            user_id: user.id(),
            session_id,
            dk: dk.clone(),
            message_id,
            agent_id: Some(agent.id),
        };
        let acted = async {
            let user_id = act::Authority::User(user.id());
            let settled =
                act::open_and_settle(&st, &sc, user_id, asked, None, &emit, Some(&cancel)).await?;
            decisions::arm(&st, settled.timed);
            context::load(&st, &dk, session_id).await
        };
        match acted.await {
            Ok(kept) => messages = context::messages(&kept),
            Err(e) => tracing::error!(error = %e, "the calls in a user's message could not be run"),
        }
    }
    loop {
        // Boxed: the reply's future is what every token polls, and stays as small as it
        // was before the loop around it; the loop's own state is not walked per token.
        let r = Box::pin(reply(
            &out,
            &agent,
            messages,
            &tools,
            &dk,
            live.clone(),
            cancel.clone(),
        ))
        .await;
        let mut executed = Vec::new();
        let mut follow = false;
        if r.clean {
            let asked = act::find(&st.functions, &r.text, &r.tool_calls);
            if !asked.is_empty() {
                let max = st.settings.limits.rounds_per_message;
                let over = (round >= max).then_some(max);
                let sc = act::Scene {
                    user_id: user.id(),
                    session_id,
                    dk: dk.clone(),
                    message_id: r.message_id.clone(),
                    agent_id: Some(agent.id),
                };
                let by = act::Authority::Agent(agent.id);
                match act::open_and_settle(&st, &sc, by, asked, over, &emit, Some(&cancel)).await {
                    Ok(settled) => {
                        decisions::arm(&st, settled.timed);
                        executed = settled.executed;
                        follow = settled.done && over.is_none() && !cancel.is_aborted();
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "a reply's calls could not be run");
                        out.emit(SseEvent::Error(ErrorData {
                            message_id: Some(r.message_id.clone()),
                            error: format!(
                                "the reply's calls could not be run: {}",
                                e.public_message()
                            ),
                        }));
                    }
                }
            }
        }
        out.emit(complete(&r.message_id, &r.text, executed));
        let kept = if follow {
            context::load(&st, &dk, session_id)
                .await
                .inspect_err(|e| tracing::error!(error = %e, "the conversation could not be read for a follow-up"))
                .ok()
        } else {
            None
        };
        let Some(kept) = kept else {
            st.turns.end(session_id, &r.message_id);
            // Past its agent's threshold, the conversation is summarised: judged on the
            // conversation kept in memory (nothing read or decrypted again).
            if let Ok(last) = frames::last_seq(&st.db, session_id).await
                && let Some(kept) = st.history.peek(session_id, last)
            {
                crate::conversation::compact::maybe(&st, &user, session_id, agent.compact, &kept);
            }
            return;
        };
        // The agent is given the results: the conversation as it now is, a new reply. It
        // is registered before the last one leaves, so a Stop in between reaches one of them.
        round += 1;
        messages = context::messages(&kept);
        // Its calls may have changed its context files: the prompt is built again.
        match st
            .hot_db
            .read(&st.db, |c| {
                crate::agents::persona::prepared(c, &st, &user, session_id, false)
            })
            .await
        {
            Ok((fresh, _)) => agent.system = fresh.system,
            Err(e) => tracing::warn!(error = %e, "the system prompt could not be built again"),
        }
        let after_seq = kept.last().map_or(0, |k| k.frame.seq);
        live = std::sync::Arc::new(crate::conversation::in_flight::InFlight::new(
            &frames::new_id(),
            session_id,
            agent.id,
            &agent.name,
            after_seq,
        ));
        let next = st
            .turns
            .begin(live.clone(), Some(out.sink.flag(events::ABORTED)));
        st.turns.end(session_id, &r.message_id);
        if cancel.is_aborted() {
            next.abort();
        }
        cancel = next;
        *current.lock().unwrap_or_else(|p| p.into_inner()) = live.message_id.clone();
    }
}

/// The agent's next reply after a decision settled the last open call of its message:
/// started in a task of its own (nobody posted it), seen through the session's feed. A
/// Stop that reached `prior` (the calls' own signal) before the reply registered stops it.
pub async fn follow_up(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    prior: Option<&Abort>,
) -> Result<()> {
    if st.hub.is_closing() {
        return Ok(());
    }
    let slot = st.turn_slots.acquire(
        user.id(),
        st.settings.limits.turns_per_user,
        "replies in flight",
    )?;
    let (agent, dk) = st
        .hot_db
        .read(&st.db, |c| {
            crate::agents::persona::prepared(c, st, user, session_id, false)
        })
        .await?;
    let kept = context::load(st, &dk, session_id).await?;
    let round = rounds_since_user(&kept);
    let after_seq = kept.last().map_or(0, |k| k.frame.seq);
    let messages = context::messages(&kept);
    let mut events = TurnEvents::new();
    let message_id = frames::new_id();
    let out = Out {
        st: st.clone(),
        user_id: user.id(),
        session_id,
        sink: events.sink(),
        listening: Default::default(),
    };
    let live = std::sync::Arc::new(crate::conversation::in_flight::InFlight::new(
        &message_id,
        session_id,
        agent.id,
        &agent.name,
        after_seq,
    ));
    let cancel = st
        .turns
        .begin(live.clone(), Some(out.sink.flag(events::ABORTED)));
    if prior.is_some_and(Abort::is_aborted) {
        cancel.abort();
    }
    let turn = guarded(
        out,
        message_id,
        slot,
        converse_args(user.clone(), agent, dk, messages, None, live, cancel, round),
    );
    events.start(turn, &st.turns.watch);
    // Nobody reads these events: dropping them hands the turn to a task of its own.
    drop(events);
    Ok(())
}

/// What [`converse`] is given, past its `Out`.
struct ConverseArgs {
    user: AuthUser,
    agent: AgentRuntime,
    dk: SecretKey,
    messages: Vec<ChatMessage>,
    user_calls: Option<(String, Vec<act::Asked>)>,
    live: std::sync::Arc<crate::conversation::in_flight::InFlight>,
    cancel: Abort,
    round: usize,
}

#[allow(clippy::too_many_arguments)]
fn converse_args(
    user: AuthUser,
    agent: AgentRuntime,
    dk: SecretKey,
    messages: Vec<ChatMessage>,
    user_calls: Option<(String, Vec<act::Asked>)>,
    live: std::sync::Arc<crate::conversation::in_flight::InFlight>,
    cancel: Abort,
    round: usize,
) -> ConverseArgs {
    ConverseArgs {
        user,
        agent,
        dk,
        messages,
        user_calls,
        live,
        cancel,
        round,
    }
}

/// The turn as the poster (or a task) drives it: whatever happens inside, it ends with
/// `message_complete` and leaves the registry; the turn slot is held until then.
fn guarded(
    out: Out,
    message_id: String,
    slot: crate::limits::Permit,
    a: ConverseArgs,
) -> crate::drive::events::TurnFuture {
    let guard = out.clone();
    // The reply in flight, which a failure must end (the turn may be rounds further on).
    let current = std::sync::Arc::new(std::sync::Mutex::new(message_id));
    let now = current.clone();
    Box::pin(async move {
        use futures::FutureExt;
        let _slot = slot;
        let turn = std::panic::AssertUnwindSafe(converse(
            out,
            a.user,
            a.agent,
            a.dk,
            a.messages,
            a.user_calls,
            a.live,
            a.cancel,
            a.round,
            now,
        ));
        if turn.catch_unwind().await.is_err() {
            let message_id = current.lock().unwrap_or_else(|p| p.into_inner()).clone();
            tracing::error!("a turn failed unexpectedly");
            guard.emit(SseEvent::Error(ErrorData {
                message_id: Some(message_id.clone()),
                error: "the reply failed unexpectedly; the server log has the details".into(),
            }));
            guard.emit(complete(&message_id, "", Vec::new()));
            guard.st.turns.end(guard.session_id, &message_id);
        }
    })
}

/// One reply: the provider's stream through the parser to the poster and the readers,
/// then stored (with its usage). Everything but `message_complete`, which waits for the
/// reply's calls.
async fn reply(
    out: &Out,
    agent: &AgentRuntime,
    messages: Vec<ChatMessage>,
    tools: &[providers::Tool],
    dk: &SecretKey,
    live: std::sync::Arc<crate::conversation::in_flight::InFlight>,
    cancel: Abort,
) -> Replied {
    use futures::StreamExt;
    let st = out.st.clone();
    let session_id = out.session_id;
    let message_id = live.message_id.clone();
    // Asked after the turn, when `cancel` itself went into the loop's watch.
    let stop = cancel.clone();
    out.emit(SseEvent::MessageStart(MessageStart {
        message_id: message_id.clone(),
        session_id,
        agent_name: agent.name.clone(),
    }));
    if out.has_listeners() {
        st.hub
            .publish(out.user_id, session_id, HubEvent::Started(live.clone()));
    }

    // The reply's text lives in `live` alone (a reader joining mid-reply is sent it); its
    // length is kept here, where every token looks anyway.
    let mut len = 0usize;
    let mut thinking = String::new();
    let mut tool_input = 0usize;
    // Native tool calls as they stream: id, name, arguments so far.
    let mut tool_calls: Vec<(String, String, String)> = Vec::new();
    let mut error: Option<String> = None;
    let mut aborted = false;
    let (mut input_tokens, mut output_tokens) = (0u64, 0u64);
    let mut stop_reason: Option<String> = None;
    let mut parser = StreamParser::new();
    let emit_parsed = |out: &Out, ev: hero_shared::hml::Event<'_>| {
        if let Some(sse) = SseEvent::from_parser_event(&message_id, &ev, None) {
            out.emit(sse);
        }
    };

    let call = providers::Call {
        endpoint: &agent.endpoint,
        system: agent.system.clone(),
        messages,
        tools: tools.to_vec(),
    };
    // The call's future, and the store's below, are boxed: large, each alive once, they
    // would otherwise widen the turn's future that every token walks (2.4 KB against 1.5).
    // However the provider paces it, a reply ends by this time (what arrived is kept).
    let deadline = tokio::time::Instant::now() + st.call_options.turn_deadline;
    let started = tokio::select! {
        r = Box::pin(providers::stream(&st.http, &st.call_options, call)) => r.map_err(|e| e.to_string()),
        _ = cancel.aborted() => { aborted = true; Err(String::new()) }
    };
    match started {
        Err(e) if !aborted => error = Some(e),
        Err(_) => {}
        Ok(mut stream) => {
            let idle_timeout = st.call_options.idle_timeout;
            let mut idle =
                crate::drive::wake::Silence::flagged(idle_timeout, out.sink.flag(events::IDLE));
            let mut cancel = AbortWatch::new(cancel);
            let mut over = std::pin::pin!(tokio::time::sleep_until(deadline));
            loop {
                // Once per token: the stream first, and the abort and the silence timer
                // only registered while it waits. An abort wins over tokens still coming.
                let item = std::future::poll_fn(|cx| {
                    use std::task::Poll;
                    if cancel.is_aborted() {
                        return Poll::Ready(None);
                    }
                    if let Poll::Ready(item) = stream.poll_next_unpin(cx) {
                        return Poll::Ready(Some(item));
                    }
                    if cancel.poll_aborted(cx).is_ready() {
                        return Poll::Ready(None);
                    }
                    if over.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Some(Some(Err(providers::ProviderError::Overtime(
                            st.call_options.turn_deadline.as_secs().max(1),
                        )))));
                    }
                    idle.poll(cx).map(|()| {
                        Some(Some(Err(providers::ProviderError::Stalled(
                            idle_timeout.as_secs().max(1),
                        ))))
                    })
                })
                .await;
                let Some(item) = item else {
                    aborted = true;
                    break;
                };
                idle.heard();
                match item {
                    None => break,
                    Some(Ok(Delta::Text(t))) if len + t.len() > MAX_REPLY_BYTES => {
                        error = Some(format!(
                            "the reply grew past {} MiB and was ended",
                            MAX_REPLY_BYTES >> 20
                        ));
                        break;
                    }
                    Some(Ok(Delta::Text(t))) => {
                        parser.feed_str_with(&t, |ev| emit_parsed(out, ev));
                        let offset = live.push(&t);
                        len += t.len();
                        if out.has_listeners() {
                            st.hub.publish(
                                out.user_id,
                                session_id,
                                HubEvent::Chunk {
                                    session_id,
                                    message_id: message_id.clone(),
                                    delta: t.clone(),
                                    offset,
                                },
                            );
                        }
                    }
                    Some(Ok(Delta::Thinking(t)))
                        if thinking.len() + t.len() > MAX_THINKING_BYTES =>
                    {
                        error = Some(format!(
                            "the model's thinking grew past {} MiB and the reply was ended",
                            MAX_THINKING_BYTES >> 20
                        ));
                        break;
                    }
                    Some(Ok(Delta::Thinking(t))) => thinking.push_str(&t),
                    // A repeated id continues its call; past the calls a message may make,
                    // more are not kept (the last kept one says so when it is gated).
                    Some(Ok(Delta::ToolUseStart { id, .. }))
                        if tool_calls.iter().any(|c| c.0 == id)
                            || tool_calls.len() > act::MAX_CALLS_PER_MESSAGE => {}
                    Some(Ok(Delta::ToolUseStart { id, name })) => {
                        tool_input += id.len() + name.len();
                        tool_calls.push((id.clone(), name.clone(), String::new()));
                        out.emit(SseEvent::ToolUseStart(ToolUseStart {
                            message_id: message_id.clone(),
                            tool_id: id,
                            name,
                        }))
                    }
                    Some(Ok(Delta::ToolInput { id, json })) => {
                        if let Some(c) = tool_calls.iter_mut().rev().find(|c| c.0 == id) {
                            c.2.push_str(&json);
                        }
                        tool_input += json.len();
                        if tool_input > MAX_TOOL_INPUT_BYTES {
                            error = Some(format!(
                                "the model's tool-call arguments grew past {} MiB and the reply was ended",
                                MAX_TOOL_INPUT_BYTES >> 20
                            ));
                            break;
                        }
                    }
                    Some(Ok(Delta::Usage { input, output })) => {
                        input_tokens = input.unwrap_or(input_tokens);
                        output_tokens = output.unwrap_or(output_tokens);
                    }
                    Some(Ok(Delta::Done { stop_reason: r })) => stop_reason = r.or(stop_reason),
                    Some(Err(e)) => {
                        error = Some(e.to_string());
                        break;
                    }
                }
            }
        }
    }
    // Elements still open complete as truncated: never offered for execution.
    parser.finish_with(|ev| emit_parsed(out, ev));
    let text = live.text();
    live.finish();

    let mut payload = json!({
        "role": "agent",
        "content": text,
        "agent_id": agent.id,
        "agent_name": agent.name,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    });
    if !thinking.is_empty() {
        payload["thinking"] = json!(thinking);
    }
    if let Some(r) = &stop_reason {
        payload["stop_reason"] = json!(r);
    }
    let tool_calls: Vec<providers::ToolCall> = tool_calls
        .into_iter()
        .map(|(id, name, args)| {
            let input = if args.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str::<Value>(&args)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or(Value::Null)
            };
            providers::ToolCall { id, name, input }
        })
        .collect();
    if !tool_calls.is_empty() {
        payload["tool_calls"] = json!(
            tool_calls
                .iter()
                .map(|c| json!({"id": c.id, "name": c.name, "input": c.input}))
                .collect::<Vec<_>>()
        );
    }
    let by_shutdown = aborted && stop.reason() == Some(AbortReason::Shutdown);
    if aborted {
        payload["aborted"] = json!(true);
    }
    if by_shutdown {
        payload["aborted_by"] = json!("shutdown");
        error.get_or_insert_with(|| {
            "the server is shutting down: the reply so far is kept; ask again once it is back"
                .into()
        });
    }
    if let Some(e) = &error {
        payload["error"] = json!(e);
    }
    let mut f = NewFrame::message(session_id, AuthorType::Agent, Some(agent.id), payload);
    f.id = message_id.clone();
    let usage = Usage {
        user_id: out.user_id,
        agent_id: agent.id,
        provider: agent.endpoint.provider,
        model: &agent.endpoint.model,
        session_id,
        frame_id: &message_id,
    };
    let charge =
        agent.endpoint.provider != ProviderKind::Scripted || input_tokens + output_tokens > 0;
    let stored = Box::pin(store_reply(
        &st,
        dk,
        f,
        charge.then_some((&usage, input_tokens, output_tokens)),
    ))
    .await;
    let was_stored = stored.is_ok();
    match stored {
        Ok(kept) => {
            st.hub.publish(
                out.user_id,
                session_id,
                HubEvent::Frame((*kept.frame).clone()),
            );
            // The next turn starts from the conversation as it now is.
            st.history.append(kept);
        }
        Err(e) => {
            tracing::error!(error = %e, "could not store the agent's reply");
            error.get_or_insert_with(|| "the reply could not be stored".into());
        }
    }
    if let Some(e) = &error {
        out.emit(SseEvent::Error(ErrorData {
            message_id: Some(message_id.clone()),
            error: e.clone(),
        }));
    }
    Replied {
        clean: was_stored && error.is_none() && !aborted,
        message_id,
        text,
        tool_calls,
    }
}

/// Stores the agent's frame and what the call cost, in one transaction. If that fails, each
/// is tried on its own: the provider charged for the call whether or not the reply can be
/// stored, and a reply is not lost for want of its usage row.
async fn store_reply(
    st: &AppState,
    dk: &SecretKey,
    f: NewFrame,
    usage: Option<(&Usage<'_>, u64, u64)>,
) -> Result<Kept> {
    let sealed = frames::seal(dk, f)?;
    let record = |tx: &rusqlite::Connection| {
        usage.map_or(Ok(()), |(u, input, output)| {
            record_usage(tx, u, input, output)
        })
    };
    let both = st.hot_db.write(&st.db, |tx| {
        record(tx)?;
        sealed.insert(tx)
    });
    let seq = match both.await {
        Ok(seq) => seq,
        Err(e) => {
            tracing::warn!(error = %e, "could not store a reply with its usage; storing each alone");
            if let Some((_, input_tokens, output_tokens)) = usage
                && let Err(e) = st.hot_db.write(&st.db, |tx| record(tx)).await
            {
                tracing::error!(error = %e, input_tokens, output_tokens, "could not record a reply's usage");
            }
            st.hot_db.write(&st.db, |tx| sealed.insert(tx)).await?
        }
    };
    Ok(sealed.kept(seq))
}

/// Whose call a usage row records.
struct Usage<'a> {
    user_id: i64,
    agent_id: i64,
    provider: ProviderKind,
    model: &'a str,
    session_id: i64,
    frame_id: &'a str,
}

fn record_usage(c: &rusqlite::Connection, u: &Usage<'_>, input: u64, output: u64) -> Result<()> {
    crate::store::usage::insert(
        c,
        &crate::store::usage::UsageRow {
            user_id: u.user_id,
            agent_id: u.agent_id,
            session_id: u.session_id,
            frame_id: u.frame_id,
            provider: u.provider.as_str(),
            model: u.model,
            input_tokens: input as i64,
            output_tokens: output as i64,
            created_at: &crate::now_text(),
        },
    )
}
