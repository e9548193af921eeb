//! The loop of a turn's rounds, and its one owner ([`converse`]): the user's own calls
//! first; then each round is a reply (the reply stage), its calls (the act stage), and, while
//! they all settle at once and the rounds allow, the follow-up stage that gives the agent
//! their results. A reply whose calls wait for the user ends the turn; what settles the last
//! of them starts the next reply ([`follow_up`], from [`super::decisions`]).

use std::sync::{Arc, Mutex};

use hero_shared::api::ProviderKind;
use hero_shared::frame::{AuthorType, FrameType};
use hero_shared::wire::{ErrorData, ExecutedElement, SseEvent};
use serde_json::Value;

use super::decisions;
use super::early::{Begun, Early};
use super::out::{Out, complete};
use super::reply::{Replied, reply};
use crate::accounts::auth::AuthUser;
use crate::agents::AgentRuntime;
use crate::conversation::history::Kept;
use crate::conversation::in_flight::InFlight;
use crate::conversation::{act, context, frames};
use crate::crypto::SecretKey;
use crate::drive::abort::Abort;
use crate::drive::events::{TurnEvents, TurnFuture};
use crate::providers::{self, ChatMessage};
use crate::{AppState, Result};

/// A turn across its rounds: whose it is, its agent, and the reply in flight.
pub(super) struct Turn {
    pub(super) user: AuthUser,
    pub(super) agent: AgentRuntime,
    /// The user's chain of tools, as the round's prompt was built with.
    pub(super) tools: Arc<crate::execution::functions::Registry>,
    pub(super) dk: SecretKey,
    /// The skills the user's message limited its turn to, over the agent's allow list.
    pub(super) skill_filter: Option<Vec<String>>,
    /// The calls in the user's own message (its frame's id), run before the first reply.
    pub(super) user_calls: Option<(String, Vec<act::Asked>)>,
    pub(super) live: Arc<InFlight>,
    pub(super) cancel: Abort,
    /// The round the next reply is: the loop is bounded per user message.
    pub(super) round: usize,
    /// In batch mode, the session's queue: the next message waits until this turn ends.
    pub(super) _queued: Option<tokio::sync::OwnedMutexGuard<()>>,
}

/// How many replies the agent has given since the user's last message: the round the
/// next reply is (the loop of calls and follow-ups is bounded per user message).
pub(super) fn rounds_since_user(frames: &[Kept]) -> usize {
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
            // A memory flush's exchange is no reply of this message's.
            AuthorType::Agent if f.payload.get("flush").is_some() => {}
            AuthorType::Agent => n += 1,
            // A message another agent queued is an input the agent answers, as the user's.
            AuthorType::System if f.payload.get("queued").is_some() => break,
            AuthorType::System => {}
        }
    }
    n
}

/// The turn as the poster (or a task) drives it: whatever happens inside, it ends with
/// `message_complete` and leaves the registry; the turn slot is held until then.
pub(super) fn guarded(
    out: Out,
    message_id: String,
    slot: crate::limits::Permit,
    turn: Turn,
    messages: Vec<Arc<ChatMessage>>,
) -> TurnFuture {
    let guard = out.clone();
    // The reply in flight, which a failure must end (the turn may be rounds further on).
    let current = Arc::new(Mutex::new(message_id));
    let now = current.clone();
    Box::pin(async move {
        use futures::FutureExt;
        let _slot = slot;
        let turn = std::panic::AssertUnwindSafe(converse(out, turn, messages, now));
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

/// The loop's one owner: the user's calls, then reply, act and follow-up, round after round.
async fn converse(
    out: Out,
    mut t: Turn,
    mut messages: Vec<Arc<ChatMessage>>,
    current: Arc<Mutex<String>>,
) {
    let tools = offered(&out.st, &t).await;
    if let Some((message_id, asked)) = t.user_calls.take()
        && let Some(now) = run_user_calls(&out, &t, message_id, asked).await
    {
        messages = now;
    }
    loop {
        // The images attached to the conversation, read from their rows for this call.
        messages = crate::conversation::attachments::with_images(
            &out.st,
            t.user.id(),
            &t.dk,
            t.agent.endpoint.provider,
            messages,
        )
        .await;
        // Boxed: the reply's future is what every token polls, and stays as small as it
        // was before the loop around it; the loop's own state is not walked per token.
        let (agent, live, cancel) = (&t.agent, t.live.clone(), t.cancel.clone());
        let call = providers::Call {
            endpoint: &agent.endpoint,
            system: agent.system.clone(),
            messages,
            tools: tools.clone(),
            whole: agent.batch,
        };
        let mut early = Early::new(
            &out,
            reply_scene(&out, &t),
            t.by(),
            t.over(&out),
            cancel.clone(),
        );
        let r = Box::pin(reply(&out, agent, call, &t.dk, live, cancel, &mut early)).await;
        let begun = early.finish().await;
        let (executed, follow) = act_on_reply(&out, &t, &r, begun).await;
        out.emit(complete(&r.message_id, &r.text, executed));
        let kept = match follow {
            true => context::load(&out.st, &t.dk, out.session_id)
                .await
                .inspect_err(|e| tracing::error!(error = %e, "the conversation could not be read for a follow-up"))
                .ok(),
            false => None,
        };
        let Some(kept) = kept else {
            return wind_down(&out, &t, &r.message_id).await;
        };
        messages = next_round(&out, &mut t, &kept, &r.message_id, &current).await;
    }
}

/// What the agent is offered as native tools. Official APIs take them; a compatible server
/// may refuse the whole request for them (Ollama for a model without a tool template,
/// llama.cpp without --jinja), so there the agent calls in text only.
async fn offered(st: &AppState, t: &Turn) -> Vec<Arc<providers::Tool>> {
    match t.agent.endpoint.provider {
        ProviderKind::OpenAiCompatible | ProviderKind::Scripted => Vec::new(),
        _ => crate::execution::permissions::offered(st, &t.tools, t.user.id())
            .await
            .unwrap_or_default(),
    }
}

impl Turn {
    /// Whose authority the agent's calls carry.
    fn by(&self) -> act::Authority {
        act::Authority::Agent(self.agent.id)
    }

    /// Set when this round's calls are past the rounds a user message allows.
    fn over(&self, out: &Out) -> Option<usize> {
        let max = out.st.settings.limits.rounds_per_message;
        (self.round >= max).then_some(max)
    }
}

/// What the calls of the reply in flight act for.
fn reply_scene(out: &Out, t: &Turn) -> act::Scene {
    scene(out, t, t.live.message_id.clone())
}

/// What a message's calls act for.
fn scene(out: &Out, t: &Turn, message_id: String) -> act::Scene {
    act::Scene {
        user_id: t.user.id(),
        session_id: out.session_id,
        dk: t.dk.clone(),
        message_id,
        agent_id: Some(t.agent.id),
        tools: t.tools.clone(),
    }
}

/// The calls in the user's own message, run with their authority before the agent
/// replies; the conversation as it then is (none if they could not be run).
async fn run_user_calls(
    out: &Out,
    t: &Turn,
    message_id: String,
    asked: Vec<act::Asked>,
) -> Option<Vec<Arc<ChatMessage>>> {
    let (st, emit) = (&out.st, |ev: SseEvent| out.emit(ev));
    let sc = scene(out, t, message_id);
    let acted = async {
        let by = act::Authority::User(t.user.id());
        let settled =
            act::open_and_settle(st, &sc, by, asked, None, &emit, Some(&t.cancel)).await?;
        decisions::arm(st, settled.timed);
        context::load(st, &t.dk, out.session_id).await
    };
    match acted.await {
        Ok(kept) => Some(context::messages(&kept)),
        Err(e) => {
            tracing::error!(error = %e, "the calls in a user's message could not be run");
            None
        }
    }
}

/// The act stage at the end of a reply: the calls found only now (those begun while it
/// streamed are not found again) found, gated and settled, and the reply closed. What ran,
/// and whether the agent is given the results now (every call of the reply settled, the
/// reply whole, rounds left, no Stop).
async fn act_on_reply(
    out: &Out,
    t: &Turn,
    r: &Replied,
    begun: Begun,
) -> (Vec<ExecutedElement>, bool) {
    let st = &out.st;
    let asked = match r.clean {
        true => later_calls(act::find(&t.tools, &r.text, &r.tool_calls), &begun.ids),
        false => Vec::new(),
    };
    let mut executed = begun.executed;
    if asked.is_empty() && begun.ids.is_empty() {
        return (executed, false);
    }
    let (sc, over) = (scene(out, t, r.message_id.clone()), t.over(out));
    let emit = |ev: SseEvent| out.emit(ev);
    match act::close(st, &sc, t.by(), asked, over, &emit, Some(&t.cancel)).await {
        Ok(settled) => {
            decisions::arm(st, settled.timed);
            let follow = settled.done && r.clean && over.is_none() && !t.cancel.is_aborted();
            executed.extend(settled.executed);
            (executed, follow)
        }
        Err(e) => {
            tracing::error!(error = %e, "a reply's calls could not be run");
            out.emit(SseEvent::Error(ErrorData {
                message_id: Some(r.message_id.clone()),
                error: format!("the reply's calls could not be run: {}", e.public_message()),
            }));
            (executed, false)
        }
    }
}

/// The calls of a whole reply less those begun while it streamed (by element id), within
/// the calls a message may make: past them, the last kept says the rest were not run.
fn later_calls(found: Vec<act::Asked>, begun: &[String]) -> Vec<act::Asked> {
    use hero_shared::calls::CallOrigin;
    let mut asked: Vec<act::Asked> = found
        .into_iter()
        .filter(|a| !matches!(&a.origin, CallOrigin::Element { element_id, .. } if begun.contains(element_id)))
        .collect();
    act::bound(
        &mut asked,
        act::MAX_CALLS_PER_MESSAGE.saturating_sub(begun.len()),
    );
    asked
}

/// The follow-up stage: the agent is given the results, the conversation as it now is, in a
/// new reply registered before the last one leaves (a Stop in between reaches one of
/// them). Its calls may have changed its context files: the prompt is built again.
async fn next_round(
    out: &Out,
    t: &mut Turn,
    kept: &[Kept],
    last: &str,
    current: &Mutex<String>,
) -> Vec<Arc<ChatMessage>> {
    let (st, session_id) = (&out.st, out.session_id);
    t.round += 1;
    let messages = context::messages(kept);
    let user = &t.user;
    if let Err(e) = crate::skills::grants::ready(st).await {
        tracing::warn!(error = %e, "who may see the administrator's skills could not be read");
    }
    let filter = t.skill_filter.as_deref();
    let fresh = st.db.read_with(async |c| {
        crate::agents::persona::prepared(c, st, user, session_id, false, filter).await
    });
    match fresh.await {
        Ok((fresh, _, tools)) => {
            t.agent.system = fresh.system;
            t.tools = tools;
        }
        Err(e) => tracing::warn!(error = %e, "the system prompt could not be built again"),
    }
    let after_seq = kept.last().map_or(0, |k| k.frame.seq);
    let id = frames::new_id();
    let (live, next) = out.begin_reply(&id, &t.agent, after_seq, None);
    t.live = live;
    st.turns.end(session_id, last);
    if t.cancel.is_aborted() {
        next.abort();
    }
    t.cancel = next;
    *current.lock().unwrap_or_else(|p| p.into_inner()) = id;
    messages
}

/// The turn's end: it leaves the registry, and past its agent's threshold the conversation
/// is summarised, judged on the conversation kept in memory (nothing read or decrypted
/// again).
async fn wind_down(out: &Out, t: &Turn, last: &str) {
    let (st, session_id) = (&out.st, out.session_id);
    // Held until the summary (if one is due) has registered its own: the session is never
    // idle in between, so a queued message cannot slip in before it.
    let winding = st.turns.acting(session_id);
    st.turns.end(session_id, last);
    let last = st
        .db
        .read_with(async |c| frames::current_seq(c, session_id).await);
    let compact = t.agent.compact;
    let due = match last.await {
        Ok(seq) => st.history.look(session_id, seq, |kept| {
            (
                crate::conversation::compact::due(kept, compact),
                crate::conversation::compact::flush_due(kept, compact),
            )
        }),
        Err(_) => None,
    };
    match due {
        // The summary flushes first if this cycle has not.
        Some((true, _)) => crate::conversation::compact::maybe(st, &t.user, session_id),
        Some((false, true)) if !st.flushing.busy(session_id) => {
            crate::conversation::flush::maybe(st, &t.user, session_id)
        }
        _ => {}
    }
    drop(winding);
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
    again(st, user, session_id, prior, None).await.map(drop)
}

/// A new version of the agent's reply `at` (`of`: its first version's frame id, which the
/// caller checked): the agent answers again from the conversation before it, in a task of
/// its own, seen through the session's feed. The new reply's id.
pub async fn regenerate(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    of: String,
    at: &str,
) -> Result<String> {
    if st.hub.is_closing() {
        return Err(crate::Error::Unavailable(
            "the server is shutting down; ask for another answer in a moment",
        ));
    }
    again(st, user, session_id, None, Some((of, at))).await
}

/// A reply nobody posted: the next one after calls settled, or a regeneration (the version
/// it is of, and the message it answers again). The reply's id.
async fn again(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    prior: Option<&Abort>,
    regenerating: Option<(String, &str)>,
) -> Result<String> {
    let slot = crate::conversation::cluster::turn_slot(st, user.id()).await?;
    crate::skills::grants::ready(st).await?;
    // The conversation first: the message it answers may have limited its turn's skills,
    // and so its follow-ups' (the prompt is built once, with them).
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let kept = context::load(st, &dk, session_id).await?;
    // What the input answered asked, read from the versions shown (for a regeneration,
    // those before the reply it replaces).
    let shown = context::shown(&kept);
    let before = match &regenerating {
        Some((_, at)) => {
            let end = shown
                .iter()
                .position(|k| k.frame.id == *at)
                .unwrap_or(shown.len());
            &shown[..end]
        }
        None => &shown[..],
    };
    let skill_filter = context::skill_filter(before);
    let filter = skill_filter.as_deref();
    let (agent, dk, tools) = st
        .db
        .read_with(async |c| {
            crate::agents::persona::prepared(c, st, user, session_id, false, filter).await
        })
        .await?;
    let (round, messages, version_of) = match regenerating {
        Some((of, at)) => (0, context::messages_before(&kept, at), Some(of)),
        None => (rounds_since_user(before), context::messages(&kept), None),
    };
    let after_seq = kept.last().map_or(0, |k| k.frame.seq);
    let mut events = TurnEvents::new();
    let message_id = frames::new_id();
    let out = Out::new(st, user.id(), session_id, events.sink());
    let (live, cancel) = out.begin_reply(&message_id, &agent, after_seq, version_of);
    if prior.is_some_and(Abort::is_aborted) {
        cancel.abort();
    }
    let user = user.clone();
    let turn = Turn {
        user,
        agent,
        tools,
        dk,
        skill_filter,
        user_calls: None,
        live,
        cancel,
        round,
        _queued: None,
    };
    let turn = guarded(out, message_id.clone(), slot, turn, messages);
    events.start(turn, &st.turns.watch);
    // Nobody reads these events: dropping them hands the turn to a task of its own.
    drop(events);
    Ok(message_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kept(seq: i64, author: AuthorType, frame_type: FrameType, payload: Value) -> Kept {
        Kept::new(
            crate::test_support::frame(seq, frame_type, author, payload),
            0,
        )
    }

    /// The calls found in the whole reply leave out those begun while it streamed, and the
    /// calls a message may make count both: past the bound, the last kept says so.
    #[test]
    fn the_calls_left_for_the_end_skip_those_begun_and_keep_the_bound() {
        use hero_shared::calls::CallOrigin;
        let element = |id: &str| act::Asked {
            function: "help".into(),
            args: json!({}),
            origin: CallOrigin::Element {
                element_id: id.into(),
                kind: "interaction".into(),
            },
            problem: None,
            bound: false,
        };
        let prose = |offset: u64| act::Asked {
            function: "help".into(),
            args: json!({}),
            origin: CallOrigin::Prose { offset },
            problem: None,
            bound: false,
        };
        let found = vec![element("e1"), prose(10), element("e2"), prose(20)];
        let left = later_calls(found.clone(), &["e1".into(), "e2".into()]);
        assert_eq!(left, [prose(10), prose(20)]);
        // 15 begun while streaming: one more fits, and it says the rest did not run.
        let begun: Vec<String> = (0..act::MAX_CALLS_PER_MESSAGE - 1)
            .map(|i| format!("s{i}"))
            .collect();
        let left = later_calls(found, &begun);
        assert_eq!(left.len(), 1);
        let said = left[0].problem.as_deref().unwrap();
        assert!(
            said.contains("at most 16 calls") && said.contains("the 3 after it"),
            "{said}"
        );
        // Once the bound is reached while streaming, a call found at the end is told so.
        let all: Vec<String> = (0..act::MAX_CALLS_PER_MESSAGE)
            .map(|i| format!("s{i}"))
            .collect();
        let left = later_calls(vec![prose(1)], &all);
        assert_eq!(left.len(), 1);
        let said = left[0].problem.as_deref().unwrap();
        assert!(said.ends_with("this one was not run"), "{said}");
    }

    #[test]
    fn the_round_counts_replies_since_the_users_last_message() {
        let msg = FrameType::Message;
        let mut log = vec![kept(1, AuthorType::User, msg, json!({"content": "hi"}))];
        assert_eq!(rounds_since_user(&log), 0);
        log.push(kept(2, AuthorType::Agent, msg, json!({"content": "a"})));
        log.push(kept(3, AuthorType::System, FrameType::Request, json!({})));
        log.push(kept(4, AuthorType::System, FrameType::Result, json!({})));
        log.push(kept(5, AuthorType::Agent, msg, json!({"content": "b"})));
        assert_eq!(rounds_since_user(&log), 2);
        // A private note of the user's is no input the agent answers; a system note neither.
        log.push(kept(
            6,
            AuthorType::User,
            msg,
            json!({"content": "n", "private": true}),
        ));
        log.push(kept(7, AuthorType::System, msg, json!({"content": "s"})));
        log.push(kept(8, AuthorType::Agent, msg, json!({"content": "c"})));
        assert_eq!(rounds_since_user(&log), 3);
        // The user writes: the count starts again.
        log.push(kept(9, AuthorType::User, msg, json!({"content": "go on"})));
        assert_eq!(rounds_since_user(&log), 0);
    }
}
