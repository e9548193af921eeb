//! The reply stage: one call to the provider, its stream through the HML parser to the
//! poster and the readers ([`reply`]), what arrived kept in an [`Accumulated`] that bounds
//! each part, then the reply stored (with its usage) whatever ended it.

use std::sync::Arc;

use hero_shared::api::ProviderKind;
use hero_shared::frame::AuthorType;
use hero_shared::hml::StreamParser;
use hero_shared::wire::{ElementEvents, ErrorData, MessageStart, SseEvent, TextData, ToolUseStart};
use serde_json::{Value, json};

use super::early::Early;
use super::out::Out;
use super::store::{Usage, store_reply};
use super::{MAX_REPLY_BYTES, MAX_THINKING_BYTES, MAX_TOOL_INPUT_BYTES};
use crate::agents::AgentRuntime;
use crate::conversation::act;
use crate::conversation::frames::NewFrame;
use crate::conversation::hub::HubEvent;
use crate::conversation::in_flight::InFlight;
use crate::crypto::SecretKey;
use crate::drive::abort::{Abort, AbortReason, AbortWatch};
use crate::drive::events;
use crate::providers::{self, Delta, DeltaStream, ProviderError};

/// What one reply came to.
pub(super) struct Replied {
    pub(super) message_id: String,
    pub(super) text: String,
    pub(super) tool_calls: Vec<providers::ToolCall>,
    /// Stored, and ended as the model meant: no error, no Stop.
    pub(super) clean: bool,
}

/// A reply as it arrives, but its text (which [`InFlight`] holds): what its frame will say
/// of it, each part bounded.
#[derive(Default)]
pub(super) struct Accumulated {
    len: usize,
    thinking: String,
    tool_input: usize,
    /// Native tool calls as they stream: id, name, arguments so far.
    tool_calls: Vec<(String, String, String)>,
    input_tokens: u64,
    output_tokens: u64,
    cache_read_tokens: u64,
    cache_write_tokens: u64,
    stop_reason: Option<String>,
    /// When the reply's first text, thinking or tool call came (the operator's time to
    /// first token).
    first_at: Option<std::time::Instant>,
}

/// What a delta asks of the reply.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    /// Text to parse, keep and send.
    Text(String),
    /// A native tool call begins: the poster is told.
    ToolStart { id: String, name: String },
    /// Kept, nothing to send.
    Quiet,
    /// The reply ends here, for this reason.
    Fail(String),
}

impl Accumulated {
    /// Takes one delta (or the stream's error).
    pub(super) fn take(&mut self, d: Result<Delta, ProviderError>) -> Step {
        // The first of the reply itself (a provider's opening usage event is not).
        if matches!(
            d,
            Ok(Delta::Text(_)
                | Delta::Thinking(_)
                | Delta::ToolUseStart { .. }
                | Delta::ToolInput { .. })
        ) {
            self.first_at.get_or_insert_with(std::time::Instant::now);
        }
        match d {
            Ok(Delta::Text(t)) if self.len + t.len() > MAX_REPLY_BYTES => Step::Fail(format!(
                "the reply grew past {} MiB and was ended",
                MAX_REPLY_BYTES >> 20
            )),
            Ok(Delta::Text(t)) => {
                self.len += t.len();
                Step::Text(t)
            }
            Ok(Delta::Thinking(t)) if self.thinking.len() + t.len() > MAX_THINKING_BYTES => {
                Step::Fail(format!(
                    "the model's thinking grew past {} MiB and the reply was ended",
                    MAX_THINKING_BYTES >> 20
                ))
            }
            Ok(Delta::Thinking(t)) => {
                self.thinking.push_str(&t);
                Step::Quiet
            }
            // A repeated id continues its call; past the calls a message may make, more are
            // not kept (the last kept one says so when it is gated).
            Ok(Delta::ToolUseStart { id, .. })
                if self.tool_calls.iter().any(|c| c.0 == id)
                    || self.tool_calls.len() > act::MAX_CALLS_PER_MESSAGE =>
            {
                Step::Quiet
            }
            Ok(Delta::ToolUseStart { id, name }) => {
                self.tool_input += id.len() + name.len();
                self.tool_calls
                    .push((id.clone(), name.clone(), String::new()));
                Step::ToolStart { id, name }
            }
            Ok(Delta::ToolInput { id, json }) => {
                if let Some(c) = self.tool_calls.iter_mut().rev().find(|c| c.0 == id) {
                    c.2.push_str(&json);
                }
                self.tool_input += json.len();
                if self.tool_input > MAX_TOOL_INPUT_BYTES {
                    return Step::Fail(format!(
                        "the model's tool-call arguments grew past {} MiB and the reply was ended",
                        MAX_TOOL_INPUT_BYTES >> 20
                    ));
                }
                Step::Quiet
            }
            Ok(Delta::Usage(t)) => {
                self.input_tokens = t.input.unwrap_or(self.input_tokens);
                self.output_tokens = t.output.unwrap_or(self.output_tokens);
                self.cache_read_tokens = t.cache_read.unwrap_or(self.cache_read_tokens);
                self.cache_write_tokens = t.cache_write.unwrap_or(self.cache_write_tokens);
                Step::Quiet
            }
            Ok(Delta::Done { stop_reason }) => {
                self.stop_reason = stop_reason.or(self.stop_reason.take());
                Step::Quiet
            }
            Err(e) => Step::Fail(e.to_string()),
        }
    }

    /// The reply's frame payload (its text is `text`) and its native tool calls, their
    /// arguments read (none: `{}`; not a JSON object: `null`, which the gate refuses).
    pub(super) fn payload(
        self,
        text: &str,
        agent: &AgentRuntime,
    ) -> (Value, Vec<providers::ToolCall>) {
        let mut payload = json!({
            "role": "agent",
            "content": text,
            "agent_id": agent.id,
            "agent_name": agent.name,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
        });
        for (key, n) in [
            ("cache_read_tokens", self.cache_read_tokens),
            ("cache_write_tokens", self.cache_write_tokens),
        ] {
            if n > 0 {
                payload["usage"][key] = json!(n);
            }
        }
        if !self.thinking.is_empty() {
            payload["thinking"] = json!(self.thinking);
        }
        if let Some(r) = &self.stop_reason {
            payload["stop_reason"] = json!(r);
        }
        let tool_calls: Vec<providers::ToolCall> = self
            .tool_calls
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
        (payload, tool_calls)
    }
}

/// How a reply's stream ended.
struct Ended {
    error: Option<String>,
    aborted: bool,
}

/// One reply: the provider's stream through the parser to the poster and the readers, then
/// stored (with its usage). Everything but `message_complete`, which waits for the reply's
/// calls.
pub(super) async fn reply(
    out: &Out,
    agent: &AgentRuntime,
    call: providers::Call<'_>,
    dk: &SecretKey,
    live: Arc<InFlight>,
    cancel: Abort,
    early: &mut Early,
) -> Replied {
    let message_id = live.message_id.clone();
    // Held until the reply is stored, while other instances are alive: if this one dies
    // first, another stores it (alone, there is no other to take it over).
    let _owned = match out.st.hub.has_peers() {
        true => {
            let mark =
                crate::conversation::cluster::reply_mark(out.user_id, out.session_id, &message_id);
            crate::conversation::cluster::hold_work(&out.st, mark).await
        }
        false => None,
    };
    // Asked after the turn, when `cancel` itself went into the loop's watch.
    let stop = cancel.clone();
    out.emit(SseEvent::MessageStart(MessageStart {
        message_id: message_id.clone(),
        session_id: out.session_id,
        agent_name: agent.name.clone(),
    }));
    if out.has_listeners() {
        let started = HubEvent::Started(live.clone());
        out.st.hub.publish(out.user_id, out.session_id, started);
    }
    let mut acc = Accumulated::default();
    let mut parser = ReplyParser::new(agent.batch);
    let called_at = std::time::Instant::now();
    let mut opened = false;
    let mut ended = match open(out, call, &cancel).await {
        Ok(stream) => {
            opened = true;
            let parsing = Parsing {
                parser: &mut parser,
                early,
            };
            read(out, stream, &live, cancel, &mut acc, parsing).await
        }
        Err(ended) => ended,
    };
    // Elements still open complete as truncated: never offered for execution.
    parser.finish(out, &message_id);
    let text = live.text();
    live.finish();
    let by_shutdown = ended.aborted && stop.reason() == Some(AbortReason::Shutdown);
    if by_shutdown {
        ended.error.get_or_insert_with(|| {
            "the server is shutting down: the reply so far is kept; ask again once it is back"
                .into()
        });
    }
    let counts = crate::agents::spend::Counts {
        input: acc.input_tokens,
        output: acc.output_tokens,
        cache_read: acc.cache_read_tokens,
        cache_write: acc.cache_write_tokens,
    };
    let (input, output) = (counts.input, counts.output);
    let provider = agent.endpoint.provider.as_str();
    // A call that never opened (refused, unreachable) is no reply's time.
    if opened {
        let first_token = acc.first_at.map(|t| t.duration_since(called_at));
        let whole = called_at.elapsed();
        out.st.metrics.reply(provider, first_token, whole);
    }
    out.st.metrics.tokens(provider, input, output);
    let (mut payload, tool_calls) = acc.payload(&text, agent);
    if ended.aborted {
        payload["aborted"] = json!(true);
    }
    if by_shutdown {
        payload["aborted_by"] = json!("shutdown");
    }
    if let Some(e) = &ended.error {
        payload["error"] = json!(e);
    }
    // The calls begun while it streamed come before it in the log.
    early.requests_recorded().await;
    let version_of = live.version_of.clone();
    let stored = keep(out, agent, dk, (&message_id, version_of), payload, counts).await;
    let error = ended.error.or(stored.err());
    if let Some(e) = &error {
        out.emit(SseEvent::Error(ErrorData {
            message_id: Some(message_id.clone()),
            error: e.clone(),
        }));
    }
    Replied {
        clean: error.is_none() && !ended.aborted,
        message_id,
        text,
        tool_calls,
    }
}

/// The reply's parser, and the element events it makes ([`ElementEvents`]), timed from
/// the reply's start on the monotonic clock; a reply that came whole (batch mode) has no
/// time between its elements' starts and ends (`duration` 0, as reference 000 says).
pub(super) struct ReplyParser {
    parser: StreamParser,
    events: ElementEvents,
    /// `None`: batch mode, every duration 0.
    began: Option<std::time::Instant>,
}

impl ReplyParser {
    pub(super) fn new(batch: bool) -> ReplyParser {
        ReplyParser {
            parser: StreamParser::new(),
            events: ElementEvents::default(),
            began: (!batch).then(std::time::Instant::now),
        }
    }

    /// A provider chunk: its `text` event (the chunk as it came, markup included), then
    /// the element events it makes; `also` sees each parser event.
    fn feed(
        &mut self,
        out: &Out,
        message_id: &str,
        chunk: &str,
        mut also: impl FnMut(&hero_shared::hml::Event<'_>),
    ) {
        out.emit(SseEvent::Text(TextData {
            message_id: message_id.to_owned(),
            text: chunk.to_owned(),
        }));
        let (events, began) = (&mut self.events, self.began);
        let now = || ms_since(began);
        self.parser.feed_str_with(chunk, |ev| {
            events.take(message_id, &ev, now, |e| out.emit(e));
            also(&ev);
        });
    }

    /// The stream ended: elements still open complete as truncated.
    fn finish(&mut self, out: &Out, message_id: &str) {
        let (events, began) = (&mut self.events, self.began);
        let now = || ms_since(began);
        self.parser
            .finish_with(|ev| events.take(message_id, &ev, now, |e| out.emit(e)));
    }
}

fn ms_since(began: Option<std::time::Instant>) -> u64 {
    began.map_or(0, |b| {
        u64::try_from(b.elapsed().as_millis()).unwrap_or(u64::MAX)
    })
}

/// The provider's stream, unless it cannot start or a Stop comes first.
async fn open(out: &Out, call: providers::Call<'_>, cancel: &Abort) -> Result<DeltaStream, Ended> {
    let st = &out.st;
    // Boxed: large, and alive once, it would otherwise widen the turn's future that every
    // token walks.
    let started = Box::pin(providers::stream(&st.http, &st.call_options, call));
    tokio::select! {
        r = started => r.map_err(|e| Ended { error: Some(e.to_string()), aborted: false }),
        _ = cancel.aborted() => Err(Ended { error: None, aborted: true }),
    }
}

/// Reads the stream to its end, a Stop, a bound, its deadline or its silence. Once per
/// token: the stream first, and the abort and the timers only registered while it waits.
async fn read(
    out: &Out,
    mut stream: DeltaStream,
    live: &InFlight,
    cancel: Abort,
    acc: &mut Accumulated,
    mut parsing: Parsing<'_>,
) -> Ended {
    use futures::StreamExt;
    use std::task::Poll;
    let st = &out.st;
    // However the provider paces it, a reply ends by this time (what arrived is kept).
    let deadline = tokio::time::Instant::now() + st.call_options.turn_deadline;
    let idle_timeout = st.call_options.idle_timeout;
    let mut idle = crate::drive::wake::Silence::flagged(idle_timeout, out.sink.flag(events::IDLE));
    let mut cancel = AbortWatch::new(cancel);
    let mut over = std::pin::pin!(tokio::time::sleep_until(deadline));
    loop {
        let item = std::future::poll_fn(|cx| {
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
                let secs = st.call_options.turn_deadline.as_secs().max(1);
                return Poll::Ready(Some(Some(Err(ProviderError::Overtime(secs)))));
            }
            idle.poll(cx).map(|()| {
                Some(Some(Err(ProviderError::Stalled(
                    idle_timeout.as_secs().max(1),
                ))))
            })
        })
        .await;
        let Some(item) = item else {
            return Ended {
                error: None,
                aborted: true,
            };
        };
        idle.heard();
        let Some(delta) = item else {
            return Ended {
                error: None,
                aborted: false,
            };
        };
        match acc.take(delta) {
            Step::Text(t) => text(out, live, &mut parsing, t),
            Step::ToolStart { id, name } => out.emit(SseEvent::ToolUseStart(ToolUseStart {
                message_id: live.message_id.clone(),
                tool_id: id,
                name,
            })),
            Step::Quiet => {}
            Step::Fail(e) => {
                return Ended {
                    error: Some(e),
                    aborted: false,
                };
            }
        }
    }
}

/// The reply's parser, and the calls its elements begin as they close.
struct Parsing<'a> {
    parser: &'a mut ReplyParser,
    early: &'a mut Early,
}

/// A piece of the reply's text: parsed (its events to the poster and the readers, an
/// executable element that closes beginning its call), kept in the reply in flight, and
/// sent to the readers as a chunk.
fn text(out: &Out, live: &InFlight, p: &mut Parsing<'_>, t: String) {
    let message_id = &live.message_id;
    let early = &mut *p.early;
    p.parser.feed(out, message_id, &t, |ev| early.on_event(ev));
    let offset = live.push(&t);
    if out.has_listeners() {
        let chunk = HubEvent::Chunk {
            session_id: out.session_id,
            message_id: message_id.clone(),
            delta: t,
            offset,
        };
        out.st.hub.publish(out.user_id, out.session_id, chunk);
    }
}

/// The reply's frame stored with its usage, then handed to the readers and the
/// conversation in memory; `Err` says why it could not be stored.
async fn keep(
    out: &Out,
    agent: &AgentRuntime,
    dk: &SecretKey,
    (message_id, version_of): (&str, Option<String>),
    payload: Value,
    counts: crate::agents::spend::Counts,
) -> Result<(), String> {
    let st = &out.st;
    let mut f = NewFrame::message(out.session_id, AuthorType::Agent, Some(agent.id), payload);
    f.id = message_id.to_owned();
    f.parent_id = version_of;
    let usage = Usage {
        user_id: out.user_id,
        agent_id: agent.id,
        provider: agent.endpoint.provider,
        model: &agent.endpoint.model,
        session_id: out.session_id,
        frame_id: message_id,
        price: agent.price,
        key_fp: agent
            .endpoint
            .api_key
            .as_deref()
            .map(|k| st.keys.key_fingerprint(k)),
    };
    let charge =
        agent.endpoint.provider != ProviderKind::Scripted || counts.input + counts.output > 0;
    // Boxed, as the call's future is.
    let stored = Box::pin(store_reply(st, dk, f, charge.then_some((&usage, counts))));
    match stored.await {
        Ok(kept) => {
            let frame = HubEvent::Frame((*kept.frame).clone());
            st.hub.publish(out.user_id, out.session_id, frame);
            // The next turn starts from the conversation as it now is.
            st.history.append(kept);
            Ok(())
        }
        Err(e) => {
            tracing::error!(error = %e, "could not store the agent's reply");
            Err("the reply could not be stored".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::Thresholds;
    use hero_shared::api::AgentKind;

    fn agent() -> AgentRuntime {
        AgentRuntime {
            id: 7,
            name: "Ada".into(),
            endpoint: providers::Endpoint {
                provider: ProviderKind::Anthropic,
                model: "m".into(),
                base_url: None,
                api_key: None,
                config: Default::default(),
            },
            kind: AgentKind::Open,
            system: crate::providers::SystemPrompt::default(),
            compact: Thresholds::default(),
            batch: false,
            price: None,
            default_processes: Vec::new(),
            skill_allow_list: None,
        }
    }

    fn text(t: &str) -> Result<Delta, ProviderError> {
        Ok(Delta::Text(t.into()))
    }

    #[test]
    fn text_passes_until_the_reply_bound() {
        let mut acc = Accumulated::default();
        assert_eq!(acc.take(text("hello")), Step::Text("hello".into()));
        let rest = "x".repeat(MAX_REPLY_BYTES - 5);
        assert_eq!(acc.take(Ok(Delta::Text(rest.clone()))), Step::Text(rest));
        let Step::Fail(why) = acc.take(text("!")) else {
            panic!("one byte past the bound was taken");
        };
        assert!(why.contains("4 MiB"), "{why}");
    }

    #[test]
    fn the_first_token_is_the_replys_own_not_the_providers_opening() {
        let mut acc = Accumulated::default();
        let usage = Delta::Usage(providers::Tokens::input(12));
        acc.take(Ok(usage));
        acc.take(Err(ProviderError::Stalled(1)));
        assert!(acc.first_at.is_none(), "usage and errors are no token");
        acc.take(Ok(Delta::Thinking("hmm".into())));
        let first = acc.first_at.expect("thinking is the reply's");
        acc.take(text("later"));
        assert_eq!(acc.first_at, Some(first), "the first stays the first");
    }

    #[test]
    fn thinking_and_tool_arguments_are_bounded_and_kept() {
        let mut acc = Accumulated::default();
        assert_eq!(acc.take(Ok(Delta::Thinking("hmm".into()))), Step::Quiet);
        let big = "t".repeat(MAX_THINKING_BYTES);
        assert!(matches!(acc.take(Ok(Delta::Thinking(big))), Step::Fail(_)));
        let start = |id: &str| {
            Ok(Delta::ToolUseStart {
                id: id.into(),
                name: "help".into(),
            })
        };
        assert_eq!(
            acc.take(start("a")),
            Step::ToolStart {
                id: "a".into(),
                name: "help".into()
            }
        );
        // The same id again continues that call.
        assert_eq!(acc.take(start("a")), Step::Quiet);
        let input = |json: &str| {
            Ok(Delta::ToolInput {
                id: "a".into(),
                json: json.into(),
            })
        };
        assert_eq!(acc.take(input("{\"topic\":")), Step::Quiet);
        assert_eq!(acc.take(input("\"bash\"}")), Step::Quiet);
        let huge = "x".repeat(MAX_TOOL_INPUT_BYTES);
        assert!(matches!(acc.take(input(&huge)), Step::Fail(_)));
    }

    #[test]
    fn calls_past_the_message_bound_are_not_kept() {
        let mut acc = Accumulated::default();
        let mut started = 0;
        for i in 0..act::MAX_CALLS_PER_MESSAGE + 5 {
            let d = Ok(Delta::ToolUseStart {
                id: format!("c{i}"),
                name: "help".into(),
            });
            if matches!(acc.take(d), Step::ToolStart { .. }) {
                started += 1;
            }
        }
        // One past the bound is kept, for the gate to say the rest were not run.
        assert_eq!(started, act::MAX_CALLS_PER_MESSAGE + 1);
    }

    #[test]
    fn the_payload_says_what_arrived() {
        let mut acc = Accumulated::default();
        acc.take(Ok(Delta::Thinking("first, ".into())));
        acc.take(Ok(Delta::Usage(providers::Tokens::input(12))));
        acc.take(Ok(Delta::Usage(providers::Tokens::output(34))));
        for (id, args) in [("a", "{\"topic\":\"bash\"}"), ("b", ""), ("c", "[1]")] {
            acc.take(Ok(Delta::ToolUseStart {
                id: id.into(),
                name: "help".into(),
            }));
            acc.take(Ok(Delta::ToolInput {
                id: id.into(),
                json: args.into(),
            }));
        }
        acc.take(Ok(Delta::Done {
            stop_reason: Some("tool_use".into()),
        }));
        acc.take(Ok(Delta::Done { stop_reason: None }));
        let (payload, calls) = acc.payload("the text", &agent());
        assert_eq!(payload["content"], "the text");
        assert_eq!(payload["agent_name"], "Ada");
        assert_eq!(payload["thinking"], "first, ");
        assert_eq!(
            payload["usage"],
            json!({"input_tokens": 12, "output_tokens": 34})
        );
        assert_eq!(payload["stop_reason"], "tool_use");
        let inputs: Vec<&Value> = calls.iter().map(|c| &c.input).collect();
        assert_eq!(
            inputs,
            [&json!({"topic": "bash"}), &json!({}), &Value::Null]
        );
        assert_eq!(payload["tool_calls"].as_array().map(Vec::len), Some(3));
        // A stream's error ends the reply with the provider's words.
        let mut acc = Accumulated::default();
        let cut = acc.take(Err(ProviderError::Stalled(90)));
        assert!(matches!(cut, Step::Fail(e) if e.contains("90")));
    }
}
