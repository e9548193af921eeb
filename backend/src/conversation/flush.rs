//! The memory flush (reference 002 §16): before a long conversation is summarised, the agent
//! gets one turn to save what should last to its memory ([`crate::memory`]), since the
//! summary will fold the details away.
//!
//! When: a turn that ends past the flush point ([`crate::agents::Thresholds::flush_at`],
//! 56,000 tokens with the defaults) with no flush since the last summary starts one; a
//! summary with none in its cycle (`/compact`, the message threshold) flushes first. "No
//! flush since the last summary" is read from the log: a flush ends with a private note
//! whose payload holds `memory_flush`, so a restart between a flush and its summary does
//! not flush twice.
//!
//! The call: the agent's own prompt, the conversation since the last summary and
//! [`crate::agents::prompt::MEMORY_FLUSH`] (where to write: today's memory/YYYY-MM-DD.md,
//! in UTC, appended; MEMORY.md for lasting facts). Only the three memory functions are
//! offered, each at the user's level (one asking for approval is not run: nobody waits for
//! a flush; Hero runs nothing else unseen); at most [`MAX_CALLS`] provider calls and the
//! `flush_timeout` in all, ending at the first reply without a call. Its replies and their
//! calls are private frames, hidden until "Show hidden messages", which no later call is
//! sent; an error, the timeout or a Stop ends it with its note, and the summary goes on
//! either way. With `memory_write` at never it does not start (its note says so).

use std::collections::BTreeSet;
use std::sync::Arc;

use hero_shared::calls::{CallOrigin, Permission};
use hero_shared::frame::AuthorType;
use serde_json::{Value, json};

use crate::accounts::auth::AuthUser;
use crate::conversation::frames::{self, NewFrame};
use crate::conversation::history::Kept;
use crate::conversation::hub::HubEvent;
use crate::crypto::SecretKey;
use crate::drive::abort::Abort;
use crate::execution::functions::{self, Ctx};
use crate::providers::{self, Call, ChatMessage, Delta, Role, ToolCall, ToolOutput};
use crate::{AppState, Result};

/// The most provider calls one flush makes.
pub const MAX_CALLS: usize = 5;
/// How long a flush may take in all, unless the installation says otherwise
/// (`--flush-timeout-secs`).
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(90);
/// The functions a flush offers.
pub const FUNCTIONS: [&str; 3] = ["memory_search", "memory_get", "memory_write"];
/// The most bytes of one flush reply read.
const MAX_REPLY_BYTES: usize = 64 << 10;

/// The flushes in progress, by session: one at a time in each, and one that waited for
/// another finds the cycle flushed and does nothing (a turn ending while a flush runs, a
/// summary that comes meanwhile). Entries go when nobody holds them. On several instances
/// each keeps its own: two instances' flushes of one session are not kept apart.
#[derive(Default)]
pub struct Flushing(std::sync::Mutex<std::collections::HashMap<i64, Arc<tokio::sync::Mutex<()>>>>);

impl Flushing {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<i64, Arc<tokio::sync::Mutex<()>>>>
    {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn of(&self, session_id: i64) -> Arc<tokio::sync::Mutex<()>> {
        self.lock().entry(session_id).or_default().clone()
    }

    /// Whether a flush of the session is in progress.
    pub fn busy(&self, session_id: i64) -> bool {
        self.lock()
            .get(&session_id)
            .is_some_and(|m| m.try_lock().is_err())
    }

    fn done(&self, session_id: i64, turn: &Arc<tokio::sync::Mutex<()>>) {
        let mut map = self.lock();
        // Ours and the map's: nobody else waits.
        if Arc::strong_count(turn) <= 2 {
            map.remove(&session_id);
        }
    }
}

/// Whether the conversation since the last summary (`kept`) holds a flush's note.
pub fn flushed(kept: &[Kept]) -> bool {
    kept.iter().any(|k| k.counts.memory_flush)
}

/// How a flush ended: the memory files it wrote, and why it ended early, if it did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flushed {
    pub files: Vec<String>,
    pub error: Option<String>,
}

impl Flushed {
    /// The note's words.
    fn said(&self) -> String {
        match (&self.error, self.files.is_empty()) {
            (None, false) => format!("Saved to memory: {}", self.files.join(", ")),
            (None, true) => "Nothing was saved to memory: the agent found nothing to keep.".into(),
            (Some(why), false) => format!(
                "Saved to memory: {}; then the flush ended: {why}",
                self.files.join(", ")
            ),
            (Some(why), true) => format!("Nothing was saved to memory: {why}"),
        }
    }
}

/// The user's level of each offered function.
async fn levels(st: &AppState, user_id: i64) -> Result<Vec<(&'static str, Permission)>> {
    let own = st
        .db
        .read_with(async |c| crate::store::permissions::list_hot(c, user_id).await)
        .await?;
    Ok(FUNCTIONS
        .iter()
        .map(|&name| {
            let default = st
                .functions
                .get(name)
                .map_or(Permission::Never, |(s, _)| s.default);
            let level = own
                .iter()
                .find(|(f, _)| f == name)
                .and_then(|(_, l)| Permission::parse(l))
                .unwrap_or(default);
            (name, level)
        })
        .collect())
}

/// The level of `name` among the offered functions' (never for another).
fn level_in(levels: &[(&'static str, Permission)], name: &str) -> Permission {
    levels
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(Permission::Never, |(_, l)| *l)
}

/// Flushes the session's memory (see the module): its frames and note stored, told to the
/// session's readers. `Err` only when the session or its agent cannot be read; how the
/// flush itself went is in the answer (and the note).
pub async fn flush(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    abort: Option<&Abort>,
) -> Result<Flushed> {
    let turn = st.flushing.of(session_id);
    let flushed = {
        let _one = turn.lock().await;
        flush_alone(st, user, session_id, abort).await
    };
    st.flushing.done(session_id, &turn);
    flushed
}

/// [`flush`], the session's flush lock held.
async fn flush_alone(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    abort: Option<&Abort>,
) -> Result<Flushed> {
    crate::skills::grants::ready(st).await?;
    let (agent, dk, _) = st
        .db
        .read_with(async |c| {
            crate::agents::persona::prepared(c, st, user, session_id, false, None).await
        })
        .await?;
    let kept = crate::conversation::context::load(st, &dk, session_id).await?;
    // Another flush (waited for) did this cycle's.
    if flushed(&kept) {
        return Ok(Flushed::default());
    }
    let levels = levels(st, user.id()).await?;
    let flushed = if level_in(&levels, "memory_write") == Permission::Never {
        Flushed {
            files: Vec::new(),
            error: Some("memory_write is set to never, so the agent cannot save memory".into()),
        }
    } else {
        let run = Run {
            st,
            user_id: user.id(),
            session_id,
            agent: &agent,
            dk: &dk,
            levels: &levels,
            written: Default::default(),
        };
        let timeout = st.settings.flush_timeout;
        let within = tokio::time::timeout(timeout, run.rounds(&kept));
        let ended = match abort {
            Some(a) => tokio::select! {
                r = within => r.ok(),
                () = a.aborted() => Some(Err("stopped by the user".to_owned())),
            },
            None => within.await.ok(),
        };
        let error = match ended {
            Some(Ok(())) => None,
            Some(Err(why)) => Some(why),
            None => Some(format!("it took more than {} s", timeout.as_secs())),
        };
        // What the rounds wrote before any end, a timeout's too.
        let files = run
            .written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect();
        Flushed { files, error }
    };
    // Stopped by a shutdown, it did not happen: after the restart the cycle flushes again.
    if st.hub.is_closing() {
        return Ok(flushed);
    }
    note(st, &dk, user.id(), session_id, &flushed).await?;
    Ok(flushed)
}

/// One flush's work.
struct Run<'a> {
    st: &'a AppState,
    user_id: i64,
    session_id: i64,
    agent: &'a crate::agents::AgentRuntime,
    dk: &'a SecretKey,
    levels: &'a [(&'static str, Permission)],
    /// The memory files written so far (read after a timeout too).
    written: std::sync::Mutex<BTreeSet<String>>,
}

impl Run<'_> {
    fn level(&self, name: &str) -> Permission {
        level_in(self.levels, name)
    }

    /// Up to [`MAX_CALLS`] provider calls, each reply's calls run, until a reply makes
    /// none; `Err` says why it ended early.
    async fn rounds(&self, kept: &[Kept]) -> std::result::Result<(), String> {
        let st = self.st;
        let tools: Vec<Arc<providers::Tool>> = st
            .functions
            .tools()
            .filter(|(s, _)| {
                FUNCTIONS.iter().any(|f| *f == s.name) && self.level(&s.name) != Permission::Never
            })
            .map(|(_, t)| t.clone())
            .collect();
        let mut messages = crate::conversation::context::messages(kept);
        messages.push(Arc::new(ChatMessage::text(
            Role::User,
            crate::agents::prompt::memory_flush(&today()),
        )));
        for _ in 0..MAX_CALLS {
            let call = Call {
                endpoint: &self.agent.endpoint,
                system: self.agent.system.clone(),
                messages: messages.clone(),
                tools: tools.clone(),
                whole: false,
            };
            let (text, tool_calls) = reply(st, call).await?;
            let asked = crate::conversation::act::find(&st.functions, &text, &tool_calls);
            let mut results = Vec::new();
            for a in &asked {
                let out = self.run(a).await;
                results.push((a, out));
            }
            self.record(&text, &results)
                .await
                .map_err(|e| e.public_message())?;
            if asked.is_empty() {
                return Ok(());
            }
            // The next call reads what this one's calls answered.
            let mut told = ChatMessage::text(Role::User, String::new());
            let mut prose = Vec::new();
            for (a, out) in &results {
                let (content, is_error) = match out {
                    Ok(o) => (o.clone(), false),
                    Err(e) => (e.clone(), true),
                };
                match &a.origin {
                    CallOrigin::Tool { tool_use_id } => told.tool_results.push(ToolOutput {
                        tool_use_id: tool_use_id.clone(),
                        content,
                        is_error,
                    }),
                    _ => prose.push(format!("{}: {content}", a.function)),
                }
            }
            if !prose.is_empty() {
                told.content = format!("[System] Results of your calls:\n{}", prose.join("\n"));
            }
            messages.push(Arc::new(ChatMessage {
                role: Role::Assistant,
                content: text,
                tool_calls,
                ..ChatMessage::default()
            }));
            messages.push(Arc::new(told));
        }
        Err(format!(
            "the agent was still calling after {MAX_CALLS} calls, the most a flush makes"
        ))
    }

    /// Runs one call the reply made, if the flush may: a memory function at the user's
    /// level `always`, through the registry's bus as every call.
    async fn run(
        &self,
        a: &crate::conversation::act::Asked,
    ) -> std::result::Result<String, String> {
        if let Some(problem) = &a.problem {
            return Err(problem.clone());
        }
        if !FUNCTIONS.contains(&a.function.as_str()) {
            return Err(format!(
                "{} is not offered while memory is saved: only memory_search, memory_get and memory_write are",
                a.function
            ));
        }
        match self.level(&a.function) {
            Permission::Always => {}
            Permission::Ask => {
                return Err(format!(
                    "{} waits for the user's approval, which a memory flush does not ask for; it was not run",
                    a.function
                ));
            }
            Permission::Never => return Err(format!("{} is set to never", a.function)),
        }
        let st = self.st;
        let Some((_, f)) = st.functions.get(&a.function) else {
            return Err(format!("there is no function `{}`", a.function));
        };
        let id = frames::new_id();
        let cx = Ctx {
            st,
            user_id: self.user_id,
            session_id: self.session_id,
            agent_id: Some(self.agent.id),
            registry: &st.functions,
            request_id: &id,
        };
        // As a turn's calls are run (`act::settle`): past the bus, whose handlers may change
        // the arguments (checked again) or answer; a panic is a failed call.
        let routed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            st.functions.bus.route(&cx, &a.function, &a.args, &id)
        }));
        let args = match routed {
            Ok(functions::bus::Routing::Run(std::borrow::Cow::Owned(changed))) => {
                let Some((spec, _)) = st.functions.get(&a.function) else {
                    return Err(format!("there is no function `{}`", a.function));
                };
                functions::schema::validate(&spec.name, &spec.schema, &changed).map_err(|e| {
                    format!("a handler changed the call's arguments, and they no longer fit: {e}")
                })?;
                std::borrow::Cow::Owned(changed)
            }
            Ok(functions::bus::Routing::Run(args)) => args,
            Ok(functions::bus::Routing::Answered(_, answer)) => return answer,
            Err(_) => {
                tracing::error!(function = %a.function, "a handler of the bus failed unexpectedly");
                return Err("the call could not be routed; the server log has the details".into());
            }
        };
        let out = {
            use futures::FutureExt;
            std::panic::AssertUnwindSafe(f.run(&cx, &args))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| {
                    tracing::error!(function = %a.function, "a function failed unexpectedly");
                    Err("the function failed unexpectedly; the server log has the details".into())
                })
        }
        .map(functions::cut)
        .map_err(functions::cut);
        // A write that deleted a file, or changed nothing, saved nothing.
        let saved = out
            .as_deref()
            .is_ok_and(|o| o.starts_with("Saved to memory"));
        if a.function == "memory_write"
            && saved
            && let Some(path) = args.get("path").and_then(Value::as_str)
        {
            self.written
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(path.trim().to_owned());
        }
        out
    }

    /// Stores one round: the reply and what its calls answered, one private frame hidden
    /// from the page until "Show hidden messages".
    async fn record(
        &self,
        text: &str,
        results: &[(
            &crate::conversation::act::Asked,
            std::result::Result<String, String>,
        )],
    ) -> Result<()> {
        let mut content = text.trim().to_owned();
        for (a, out) in results {
            let (mark, said) = match out {
                Ok(o) => ("", o.as_str()),
                Err(e) => (" (not done)", e.as_str()),
            };
            content.push_str(&format!(
                "\n\n{}{mark}: {said}",
                hero_shared::wire::call_line(&a.function, &a.args)
            ));
        }
        let f = NewFrame::message(
            self.session_id,
            AuthorType::Agent,
            Some(self.agent.id),
            json!({
                "role": "assistant",
                "content": content.trim(),
                "agent_name": self.agent.name,
                "private": true,
                "hidden": true,
                "flush": true,
            }),
        );
        let frame = frames::append(self.st, self.dk, f).await?;
        self.st
            .hub
            .publish(self.user_id, self.session_id, HubEvent::Frame(frame));
        Ok(())
    }
}

/// A flush reply's text and native tool calls, read whole (bounded in bytes and in calls).
async fn reply(
    st: &AppState,
    call: Call<'_>,
) -> std::result::Result<(String, Vec<ToolCall>), String> {
    use futures::StreamExt;
    let mut stream = providers::stream(&st.http, &st.call_options, call)
        .await
        .map_err(|e| format!("the provider refused: {e}"))?;
    let mut text = String::new();
    // Each call's name and its arguments' JSON as it came.
    let mut calls: Vec<(String, String, String)> = Vec::new();
    while let Some(d) = stream.next().await {
        match d {
            Ok(Delta::Text(t)) => text.push_str(&t),
            Ok(Delta::ToolUseStart { id, name }) => {
                if !calls.iter().any(|(i, _, _)| *i == id)
                    && calls.len() <= crate::conversation::act::MAX_CALLS_PER_MESSAGE
                {
                    calls.push((id, name, String::new()));
                }
            }
            Ok(Delta::ToolInput { id, json }) => {
                if let Some((_, _, args)) = calls.iter_mut().find(|(i, _, _)| *i == id) {
                    args.push_str(&json);
                }
            }
            Ok(Delta::Done { .. }) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("the reply was cut: {e}")),
        }
        let args: usize = calls.iter().map(|(_, _, a)| a.len()).sum();
        if text.len() + args > MAX_REPLY_BYTES {
            return Err(format!(
                "a reply was longer than {} KiB",
                MAX_REPLY_BYTES >> 10
            ));
        }
    }
    let calls = calls
        .into_iter()
        .map(|(id, name, args)| ToolCall {
            id,
            name,
            input: if args.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str::<Value>(&args)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or(Value::Null)
            },
        })
        .collect();
    Ok((text, calls))
}

/// Today, in UTC, as memory files are named.
fn today() -> String {
    time::OffsetDateTime::now_utc().date().to_string()
}

/// Closes a flush: a private note (the page shows it; the agent is not sent it) whose
/// payload's `memory_flush` marks this summary cycle as flushed.
async fn note(
    st: &AppState,
    dk: &SecretKey,
    user_id: i64,
    session_id: i64,
    flushed: &Flushed,
) -> Result<()> {
    let mut record = json!({ "files": flushed.files });
    if let Some(why) = &flushed.error {
        record["error"] = json!(why);
    }
    let f = NewFrame::message(
        session_id,
        AuthorType::System,
        None,
        json!({
            "role": "system",
            "content": flushed.said(),
            "private": true,
            "notice": if flushed.error.is_some() && flushed.files.is_empty() { "warning" } else { "info" },
            "memory_flush": record,
        }),
    );
    let frame = frames::append(st, dk, f).await?;
    st.hub.publish(user_id, session_id, HubEvent::Frame(frame));
    Ok(())
}

/// After a turn that ended past the flush point with none this cycle
/// ([`crate::conversation::compact::flush_due`]): flushes, as a reply would
/// ([`crate::conversation::cluster::spawn_as_reply`]).
pub fn maybe(st: &AppState, user: &AuthUser, session_id: i64) {
    crate::conversation::cluster::spawn_as_reply(
        st,
        user,
        session_id,
        move |st, user, abort| async move {
            match flush(&st, &user, session_id, Some(&abort)).await {
                Ok(f) => tracing::info!(
                    session = session_id,
                    files = f.files.len(),
                    "memory was flushed"
                ),
                Err(e) => {
                    tracing::warn!(session = session_id, error = %e, "memory could not be flushed")
                }
            }
        },
    );
}
