//! Live fan-out: one broadcast channel per session (for `GET /api/sessions/{id}/events`)
//! and one per user (for the WebSocket, which mirrors every session of the user), plus the
//! cancel handles of the turns in flight (for `abort`), and the shutdown signal
//! ([`Hub::close`]): live streams end, turns in flight stop and keep what they have.
//!
//! Backpressure: channels are bounded ([`CHANNEL_CAPACITY`]); publishing never waits. A
//! subscriber that falls more than that many events behind gets `Lagged` from its receiver
//! and is dropped and told so by the endpoint that serves it — it never holds up the reply
//! or the other subscribers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use hero_shared::frame::Frame;
use hero_shared::wire::SseEvent;
use tokio::sync::broadcast;

pub const CHANNEL_CAPACITY: usize = 4096;

/// What subscribers receive.
#[derive(Debug, Clone)]
pub enum HubEvent {
    /// A persisted frame.
    Frame(Frame),
    /// A live event of a reply in flight (a phantom frame): never stored.
    Stream { session_id: i64, event: SseEvent },
    /// The raw text the provider just sent for a reply in flight (reference 000's
    /// `message_chunk`), so a browser can run the shared parser on it itself. `offset` is
    /// the length of the reply before it: a reader that took a snapshot of the reply
    /// ([`InFlight::snapshot`]) skips the chunks the snapshot holds.
    Chunk {
        session_id: i64,
        message_id: String,
        delta: String,
        offset: usize,
    },
    /// A reply began: readers send it as a phantom frame (reference 003).
    Started(Arc<InFlight>),
}

/// A reply in flight, as far as it has come: what a reader that joins mid-reply is sent
/// first, as a phantom frame.
#[derive(Debug)]
pub struct InFlight {
    pub message_id: String,
    pub session_id: i64,
    pub agent_id: i64,
    pub agent_name: String,
    /// The seq of the user's message the reply answers: the one the reply's frame follows.
    pub after_seq: i64,
    pub timestamp: String,
    /// The reply's text so far. Pushed once per token by the turn's own task, read only
    /// when a reader joins: an uncontended lock.
    text: Mutex<String>,
}

impl InFlight {
    pub fn new(
        message_id: &str,
        session_id: i64,
        agent_id: i64,
        agent_name: &str,
        after_seq: i64,
    ) -> Self {
        InFlight {
            message_id: message_id.to_owned(),
            session_id,
            agent_id,
            agent_name: agent_name.to_owned(),
            after_seq,
            timestamp: crate::now_text(),
            text: Mutex::new(String::new()),
        }
    }

    /// Appends a delta; answers the reply's length before it (the chunk's offset).
    pub fn push(&self, delta: &str) -> usize {
        let mut text = lock(&self.text);
        let offset = text.len();
        text.push_str(delta);
        offset
    }

    /// The reply so far as a phantom frame, and its length in bytes.
    pub fn snapshot(&self) -> (Frame, usize) {
        let text = lock(&self.text).clone();
        let len = text.len();
        let frame = Frame {
            id: self.message_id.clone(),
            session_id: self.session_id,
            seq: self.after_seq,
            parent_id: None,
            target_ids: Vec::new(),
            timestamp: self.timestamp.clone(),
            frame_type: hero_shared::frame::FrameType::Message,
            author_type: hero_shared::frame::AuthorType::Agent,
            author_id: Some(self.agent_id),
            payload: serde_json::json!({
                "role": "agent",
                "content": text,
                "agent_id": self.agent_id,
                "agent_name": self.agent_name,
            }),
        };
        (frame, len)
    }
}

/// A turn in flight: its stop signal and how far it has come.
struct Turn {
    abort: Abort,
    live: Arc<InFlight>,
}

pub struct Hub {
    sessions: Mutex<HashMap<i64, broadcast::Sender<Arc<HubEvent>>>>,
    users: Mutex<HashMap<i64, broadcast::Sender<Arc<HubEvent>>>>,
    turns: Mutex<HashMap<i64, HashMap<String, Turn>>>,
    /// Bumped whenever a channel gains a subscriber or is forgotten: a turn remembers
    /// whether anyone listens until this changes ([`Hub::has_listeners_cached`]), instead of
    /// taking the two maps' locks, which every turn shares, for every token.
    version: AtomicU64,
    /// Turns driven by their posters, watched for posters that stop reading.
    pub(crate) watch: Arc<crate::turn::Watch>,
    /// True once the server shuts down ([`Hub::close`]).
    closing: tokio::sync::watch::Sender<bool>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            sessions: Default::default(),
            users: Default::default(),
            turns: Default::default(),
            version: Default::default(),
            watch: Default::default(),
            closing: tokio::sync::watch::Sender::new(false),
        }
    }
}

/// Why a turn was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortReason {
    /// The user pressed Stop (the WebSocket's `abort`).
    User,
    /// The server is shutting down.
    Shutdown,
}

/// The stop signal of one turn in flight. A turn looks at it between every two pieces of
/// its reply, so it is a flag and a waker, not a lock.
#[derive(Clone, Default)]
pub struct Abort(Arc<AbortInner>);

#[derive(Default)]
struct AbortInner {
    set: AtomicBool,
    /// Set before `set` when the stop is the server's shutdown.
    shutdown: AtomicBool,
    waker: AtomicWaker,
    /// Raised with `set`, where the turn looks on every poll anyway ([`crate::wake::Signals`]).
    flag: Option<crate::wake::Flag>,
}

impl Abort {
    pub fn abort(&self) {
        self.abort_for(AbortReason::User)
    }

    /// Stops the turn; the first reason given is the one it keeps.
    pub fn abort_for(&self, reason: AbortReason) {
        if self.is_aborted() {
            return;
        }
        if reason == AbortReason::Shutdown {
            self.0.shutdown.store(true, Ordering::Release);
        }
        self.0.set.store(true, Ordering::Release);
        if let Some(f) = &self.0.flag {
            f.raise();
        }
        self.0.waker.wake();
    }

    pub fn is_aborted(&self) -> bool {
        self.0.set.load(Ordering::Acquire)
    }

    /// Why the turn was stopped, if it was.
    pub fn reason(&self) -> Option<AbortReason> {
        self.is_aborted().then(|| {
            if self.0.shutdown.load(Ordering::Acquire) {
                AbortReason::Shutdown
            } else {
                AbortReason::User
            }
        })
    }

    /// Ready once aborted; otherwise wakes the polling task when it is.
    pub fn poll_aborted(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_aborted() {
            return Poll::Ready(());
        }
        self.0.waker.register(cx.waker());
        if self.is_aborted() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Resolves once aborted.
    pub async fn aborted(&self) {
        std::future::poll_fn(|cx| self.poll_aborted(cx)).await
    }
}

/// An [`Abort`] waited on again and again: registers its waker only when it changes.
pub struct AbortWatch {
    abort: Abort,
    /// The abort's flag, kept here: reading it through the abort would touch the abort's own
    /// memory on every poll, which the flag is there to spare.
    flag: Option<crate::wake::Flag>,
    armed: crate::wake::Armed,
}

impl AbortWatch {
    pub fn new(abort: Abort) -> Self {
        AbortWatch {
            flag: abort.0.flag.clone(),
            abort,
            armed: Default::default(),
        }
    }

    pub fn is_aborted(&self) -> bool {
        match &self.flag {
            // The abort's own flag only once the turn's word says it was raised.
            Some(f) => f.is_up() && self.abort.is_aborted(),
            None => self.abort.is_aborted(),
        }
    }

    pub fn poll_aborted(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.armed.holds(cx) {
            return if self.is_aborted() {
                Poll::Ready(())
            } else {
                Poll::Pending
            };
        }
        let p = self.abort.poll_aborted(cx);
        self.armed.set(cx);
        p
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

type Channels = Mutex<HashMap<i64, broadcast::Sender<Arc<HubEvent>>>>;

fn subscribe_in(
    map: &Channels,
    version: &AtomicU64,
    key: i64,
) -> broadcast::Receiver<Arc<HubEvent>> {
    let mut m = lock(map);
    let rx = m
        .entry(key)
        .or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0)
        .subscribe();
    // After the subscriber is in: whoever sees the new version sees it.
    version.fetch_add(1, Ordering::AcqRel);
    rx
}

fn send_in(map: &Channels, version: &AtomicU64, key: i64, ev: &Arc<HubEvent>) {
    let mut m = lock(map);
    if let Some(tx) = m.get(&key)
        && tx.send(ev.clone()).is_err()
    {
        // Nobody listens any more: forget the channel so idle sessions cost nothing.
        m.remove(&key);
        version.fetch_add(1, Ordering::AcqRel);
    }
}

/// What a turn last learnt of its listeners ([`Hub::has_listeners_cached`]).
#[derive(Debug)]
pub struct Listening {
    version: AtomicU64,
    any: AtomicBool,
}

impl Default for Listening {
    fn default() -> Self {
        Listening {
            version: AtomicU64::new(u64::MAX),
            any: AtomicBool::new(false),
        }
    }
}

impl Hub {
    pub fn subscribe_session(&self, session_id: i64) -> broadcast::Receiver<Arc<HubEvent>> {
        subscribe_in(&self.sessions, &self.version, session_id)
    }

    pub fn subscribe_user(&self, user_id: i64) -> broadcast::Receiver<Arc<HubEvent>> {
        subscribe_in(&self.users, &self.version, user_id)
    }

    /// Whether anyone listens to the session or its owner: lets the hot path skip building
    /// an event nobody would read.
    pub fn has_listeners(&self, user_id: i64, session_id: i64) -> bool {
        lock(&self.sessions).contains_key(&session_id) || lock(&self.users).contains_key(&user_id)
    }

    /// [`Hub::has_listeners`], looked up again only when a channel has come or gone since
    /// `seen` last looked. A listener that has left may still count until the next publish
    /// finds its channel empty and forgets it.
    pub fn has_listeners_cached(&self, user_id: i64, session_id: i64, seen: &Listening) -> bool {
        let version = self.version.load(Ordering::Acquire);
        if seen.version.load(Ordering::Relaxed) == version {
            return seen.any.load(Ordering::Relaxed);
        }
        let any = self.has_listeners(user_id, session_id);
        seen.any.store(any, Ordering::Relaxed);
        seen.version.store(version, Ordering::Relaxed);
        any
    }

    /// Sends to the session's and the owner's subscribers. Never waits.
    pub fn publish(&self, user_id: i64, session_id: i64, ev: HubEvent) {
        let ev = Arc::new(ev);
        send_in(&self.sessions, &self.version, session_id, &ev);
        send_in(&self.users, &self.version, user_id, &ev);
    }

    /// Registers a turn in flight; its signal is set by [`Hub::abort`], and raises `flag` too.
    pub fn begin_turn(&self, live: Arc<InFlight>, flag: Option<crate::wake::Flag>) -> Abort {
        let signal = Abort(Arc::new(AbortInner {
            flag,
            ..AbortInner::default()
        }));
        lock(&self.turns)
            .entry(live.session_id)
            .or_default()
            .insert(
                live.message_id.clone(),
                Turn {
                    abort: signal.clone(),
                    live,
                },
            );
        // A turn that begins while the server closes (after `close` stopped the others) stops
        // at once; checked after it is registered, so no turn slips between the two.
        if self.is_closing() {
            signal.abort_for(AbortReason::Shutdown);
        }
        signal
    }

    pub fn end_turn(&self, session_id: i64, message_id: &str) {
        let mut turns = lock(&self.turns);
        if let Some(m) = turns.get_mut(&session_id) {
            m.remove(message_id);
            if m.is_empty() {
                turns.remove(&session_id);
            }
        }
    }

    /// Stops every turn in flight on the session; returns how many.
    pub fn abort(&self, session_id: i64) -> usize {
        lock(&self.turns).get(&session_id).map_or(0, |m| {
            m.values().for_each(|t| t.abort.abort());
            m.len()
        })
    }

    /// The session's replies in flight.
    pub fn in_flight(&self, session_id: i64) -> Vec<Arc<InFlight>> {
        lock(&self.turns)
            .get(&session_id)
            .map_or_else(Vec::new, |m| m.values().map(|t| t.live.clone()).collect())
    }

    pub fn turns_in_flight(&self, session_id: i64) -> usize {
        lock(&self.turns).get(&session_id).map_or(0, HashMap::len)
    }

    /// Every turn in flight, on every session.
    pub fn all_turns_in_flight(&self) -> usize {
        lock(&self.turns).values().map(HashMap::len).sum()
    }

    /// The server is shutting down: live streams see [`Hub::closed`] and end, and every turn
    /// in flight stops, stores what it has (marked aborted by shutdown) and completes.
    pub fn close(&self) {
        self.closing.send_replace(true);
        for turns in lock(&self.turns).values() {
            turns
                .values()
                .for_each(|t| t.abort.abort_for(AbortReason::Shutdown));
        }
    }

    pub fn is_closing(&self) -> bool {
        *self.closing.borrow()
    }

    /// Resolves once the server shuts down (at once if it already does).
    pub fn closed(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.closing.subscribe();
        async move {
            // An error means the hub is gone, which is a shutdown too.
            let _ = rx.wait_for(|&closing| closing).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hero_shared::wire::TextData;

    fn text(session_id: i64, i: usize) -> HubEvent {
        HubEvent::Stream {
            session_id,
            event: SseEvent::Text(TextData {
                message_id: "m".into(),
                text: i.to_string(),
            }),
        }
    }

    #[tokio::test]
    async fn a_slow_subscriber_is_dropped_without_holding_up_anyone() {
        let hub = Hub::default();
        let mut slow = hub.subscribe_session(1);
        let mut fast = hub.subscribe_session(1);
        for i in 0..CHANNEL_CAPACITY + 10 {
            hub.publish(7, 1, text(1, i));
            // The fast one keeps up; publishing never waited for the slow one.
            assert!(fast.recv().await.is_ok());
        }
        assert!(matches!(
            slow.recv().await,
            Err(broadcast::error::RecvError::Lagged(10))
        ));
    }

    #[tokio::test]
    async fn close_stops_every_turn_for_shutdown_and_wakes_streams() {
        let hub = Hub::default();
        let turn = |session: i64, id: &str| Arc::new(InFlight::new(id, session, 9, "agent", 0));
        let user_stop = hub.begin_turn(turn(1, "m1"), None);
        let running = hub.begin_turn(turn(2, "m2"), None);
        user_stop.abort();
        let closed = hub.closed();
        assert!(!hub.is_closing());
        hub.close();
        closed.await;
        assert_eq!(user_stop.reason(), Some(AbortReason::User));
        assert_eq!(running.reason(), Some(AbortReason::Shutdown));
        assert_eq!(hub.all_turns_in_flight(), 2);
        // A turn that begins while the server closes is stopped at once.
        let late = hub.begin_turn(turn(3, "m3"), None);
        assert_eq!(late.reason(), Some(AbortReason::Shutdown));
        // And a stream that starts waiting afterwards does not wait.
        hub.closed().await;
        hub.end_turn(1, "m1");
        hub.end_turn(2, "m2");
        hub.end_turn(3, "m3");
        assert_eq!(hub.all_turns_in_flight(), 0);
    }

    #[test]
    fn cached_listening_sees_subscribers_come_and_go() {
        let hub = Hub::default();
        let seen = Listening::default();
        assert!(!hub.has_listeners_cached(7, 1, &seen));
        let rx = hub.subscribe_session(1);
        assert!(hub.has_listeners_cached(7, 1, &seen));
        drop(rx);
        // Still counted until a publish finds nobody there and forgets the channel.
        assert!(hub.has_listeners_cached(7, 1, &seen));
        hub.publish(7, 1, text(1, 0));
        assert!(!hub.has_listeners_cached(7, 1, &seen));
        let _user = hub.subscribe_user(7);
        assert!(hub.has_listeners_cached(7, 1, &seen));
        assert!(!hub.has_listeners_cached(8, 2, &Listening::default()));
    }

    #[tokio::test]
    async fn user_channels_mirror_every_session_and_abort_cancels_turns() {
        let hub = Hub::default();
        let mut user = hub.subscribe_user(7);
        hub.publish(7, 1, text(1, 1));
        hub.publish(7, 2, text(2, 2));
        hub.publish(8, 3, text(3, 3));
        for want in [1, 2] {
            match &*user.recv().await.unwrap() {
                HubEvent::Stream { session_id, .. } => assert_eq!(*session_id, want),
                other => panic!("{other:?}"),
            }
        }
        assert!(user.try_recv().is_err());
        let t = hub.begin_turn(Arc::new(InFlight::new("a", 1, 9, "agent", 0)), None);
        assert_eq!((hub.turns_in_flight(1), hub.abort(2)), (1, 0));
        assert_eq!(hub.abort(1), 1);
        assert!(t.is_aborted());
        hub.end_turn(1, "a");
        assert_eq!(hub.turns_in_flight(1), 0);
    }

    /// A turn looks at its abort through a bit of a word it reads anyway; the abort raises it.
    #[test]
    fn an_abort_raises_its_flag() {
        #[derive(Default)]
        struct Word(std::sync::atomic::AtomicU8);
        impl crate::wake::Signals for Word {
            fn signals(&self) -> &std::sync::atomic::AtomicU8 {
                &self.0
            }
        }
        let hub = Hub::default();
        let word = Arc::new(Word::default());
        let watch = AbortWatch::new(hub.begin_turn(
            Arc::new(InFlight::new("a", 1, 9, "agent", 0)),
            Some(crate::wake::Flag::new(word.clone(), 4)),
        ));
        assert!(!watch.is_aborted());
        assert_eq!(hub.abort(1), 1);
        assert_eq!(word.0.load(Ordering::SeqCst), 4);
        assert!(watch.is_aborted());
    }
}
