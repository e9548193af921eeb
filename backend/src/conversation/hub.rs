//! Live fan-out, and nothing else: one broadcast channel per session (for `GET
//! /api/sessions/{id}/events`) and one per user (for the WebSocket, which mirrors every
//! session of the user), and the shutdown signal that ends every live stream
//! ([`Hub::close`]). The turns in flight are [`crate::conversation::turn::Registry`]'s. On
//! PostgreSQL every event also goes to the other instances ([`crate::conversation::cluster`]),
//! which publish it to their own subscribers ([`Hub::publish_here`]).
//!
//! Backpressure: channels are bounded ([`CHANNEL_CAPACITY`]); publishing never waits. A
//! subscriber that falls more than that many events behind gets `Lagged` from its receiver
//! and is dropped and told so by the endpoint that serves it — it never holds up the reply
//! or the other subscribers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hero_shared::feed::{ApprovalPrompt, QuestionPrompt};
use hero_shared::frame::Frame;
use hero_shared::wire::SseEvent;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::conversation::in_flight::InFlight;

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
    /// A call waits for the user's approval (`ability_approval_request`).
    Approval(hero_shared::feed::ApprovalPrompt),
    /// A question of the agent's waits for the user's answer.
    Question(hero_shared::feed::QuestionPrompt),
    /// A call's state changed (`assertion_update`).
    Assertion(hero_shared::feed::AssertionUpdate),
    /// A notification for the user (`@user(notify, …)`): for every socket of theirs.
    Notification {
        session_id: i64,
        message: String,
        level: String,
    },
    /// An agent's status changed (summoning): for the user's sockets, not a session's.
    AgentStatus {
        agent_id: i64,
        status: String,
        detail: String,
    },
    /// A configuration change was proposed or decided: for the user's sockets.
    ConfigChange(ConfigChanged),
    /// A task was made or changed: for the user's sockets.
    TaskChanged {
        task_id: i64,
        identifier: String,
        status: String,
    },
}

/// A configuration change as the user's sockets hear of it (`config_change`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigChanged {
    pub change_id: String,
    pub session_id: i64,
    pub key: String,
    pub status: String,
    pub version: Option<i64>,
}

/// An event as it travels between instances: a [`HubEvent`] with its user, or a request
/// to the other instances.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum Wire {
    Frame {
        user_id: i64,
        frame: Frame,
    },
    Stream {
        user_id: i64,
        session_id: i64,
        event: SseEvent,
    },
    Chunk {
        user_id: i64,
        session_id: i64,
        message_id: String,
        delta: String,
        offset: usize,
    },
    Started {
        user_id: i64,
        session_id: i64,
        message_id: String,
        agent_id: i64,
        agent_name: String,
        after_seq: i64,
        timestamp: String,
    },
    Approval {
        user_id: i64,
        prompt: ApprovalPrompt,
    },
    Question {
        user_id: i64,
        prompt: QuestionPrompt,
    },
    Assertion {
        user_id: i64,
        update: hero_shared::feed::AssertionUpdate,
    },
    Notification {
        user_id: i64,
        session_id: i64,
        message: String,
        level: String,
    },
    AgentStatus {
        user_id: i64,
        agent_id: i64,
        status: String,
        detail: String,
    },
    ConfigChange {
        user_id: i64,
        change: ConfigChanged,
    },
    TaskChanged {
        user_id: i64,
        task_id: i64,
        identifier: String,
        status: String,
    },
    /// Stop the session's turns and calls running here.
    Stop {
        session_id: i64,
    },
    /// An instance joined: the others send it their events from now on.
    Hello,
    /// An event kept in `fanout_spill`, too large for a notification.
    Spilled {
        id: i64,
    },
}

impl Wire {
    /// The hub event `ev` of `user_id`'s, for the other instances.
    pub fn of(user_id: i64, ev: &HubEvent) -> Wire {
        match ev {
            HubEvent::Frame(frame) => Wire::Frame {
                user_id,
                frame: frame.clone(),
            },
            HubEvent::Stream { session_id, event } => Wire::Stream {
                user_id,
                session_id: *session_id,
                event: event.clone(),
            },
            HubEvent::Chunk {
                session_id,
                message_id,
                delta,
                offset,
            } => Wire::Chunk {
                user_id,
                session_id: *session_id,
                message_id: message_id.clone(),
                delta: delta.clone(),
                offset: *offset,
            },
            HubEvent::Started(live) => Wire::Started {
                user_id,
                session_id: live.session_id,
                message_id: live.message_id.clone(),
                agent_id: live.agent_id,
                agent_name: live.agent_name.clone(),
                after_seq: live.after_seq,
                timestamp: live.timestamp.clone(),
            },
            HubEvent::Approval(prompt) => Wire::Approval {
                user_id,
                prompt: prompt.clone(),
            },
            HubEvent::Question(prompt) => Wire::Question {
                user_id,
                prompt: prompt.clone(),
            },
            HubEvent::Assertion(update) => Wire::Assertion {
                user_id,
                update: update.clone(),
            },
            HubEvent::Notification {
                session_id,
                message,
                level,
            } => Wire::Notification {
                user_id,
                session_id: *session_id,
                message: message.clone(),
                level: level.clone(),
            },
            HubEvent::AgentStatus {
                agent_id,
                status,
                detail,
            } => Wire::AgentStatus {
                user_id,
                agent_id: *agent_id,
                status: status.clone(),
                detail: detail.clone(),
            },
            HubEvent::ConfigChange(change) => Wire::ConfigChange {
                user_id,
                change: change.clone(),
            },
            HubEvent::TaskChanged {
                task_id,
                identifier,
                status,
            } => Wire::TaskChanged {
                user_id,
                task_id: *task_id,
                identifier: identifier.clone(),
                status: status.clone(),
            },
        }
    }
}

/// The hub's way out to the other instances ([`Hub::publish`] hands it every event while
/// any is alive).
pub struct Outbound {
    tx: tokio::sync::mpsc::Sender<Wire>,
    lost: AtomicBool,
    peers: AtomicBool,
}

impl Outbound {
    /// The way out through `tx` (its receiver sends what comes, in order), with no other
    /// instance known yet.
    pub fn new(tx: tokio::sync::mpsc::Sender<Wire>) -> Outbound {
        Outbound {
            tx,
            lost: AtomicBool::new(false),
            peers: AtomicBool::new(false),
        }
    }

    /// Whether events were lost since this was last asked (and forgets it).
    pub fn take_lost(&self) -> bool {
        self.lost.swap(false, Ordering::Relaxed)
    }

    /// Events were lost on their way out (the next batch says so).
    pub fn mark_lost(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }

    /// Whether another instance is alive.
    pub fn has_peers(&self) -> bool {
        self.peers.load(Ordering::Acquire)
    }

    /// Records whether another instance is alive; answers whether that changed.
    pub fn set_peers(&self, any: bool) -> bool {
        self.peers.swap(any, Ordering::AcqRel) != any
    }

    /// Queues `w` for the other instances; never waits. A full queue drops it, and the
    /// next batch says events were lost.
    pub fn send(&self, w: Wire) {
        if self.tx.try_send(w).is_err() {
            self.lost.store(true, Ordering::Relaxed);
        }
    }
}

pub struct Hub {
    sessions: Arc<Channels>,
    users: Arc<Channels>,
    /// Bumped whenever a channel gains a subscriber or is forgotten: a turn remembers
    /// whether anyone listens until this changes ([`Hub::has_listeners_cached`]), instead of
    /// taking the two maps' locks, which every turn shares, for every token.
    version: Arc<AtomicU64>,
    /// True once the server shuts down ([`Hub::close`]).
    closing: tokio::sync::watch::Sender<bool>,
    /// How many live streams (event streams, WebSockets) each user holds open.
    streams: crate::limits::PerUser,
    /// The way to the other instances, when there are any (PostgreSQL).
    elsewhere: std::sync::OnceLock<Arc<Outbound>>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            sessions: Default::default(),
            users: Default::default(),
            version: Default::default(),
            closing: tokio::sync::watch::Sender::new(false),
            streams: Default::default(),
            elsewhere: Default::default(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Each channel by its key, with a number of its own: a subscription forgets only its own
/// channel, never one made after a [`Hub::resync`] under the same key.
type Channels = Mutex<HashMap<i64, (u64, broadcast::Sender<Arc<HubEvent>>)>>;

/// The number of the next channel made.
static NEXT_CHANNEL: AtomicU64 = AtomicU64::new(0);

fn subscribe_in(map: &Arc<Channels>, version: &Arc<AtomicU64>, key: i64) -> Subscription {
    let mut m = lock(map);
    let (channel, tx) = m.entry(key).or_insert_with(|| {
        (
            NEXT_CHANNEL.fetch_add(1, Ordering::Relaxed),
            broadcast::channel(CHANNEL_CAPACITY).0,
        )
    });
    let (rx, channel) = (tx.subscribe(), *channel);
    // After the subscriber is in: whoever sees the new version sees it.
    version.fetch_add(1, Ordering::AcqRel);
    Subscription {
        rx,
        map: map.clone(),
        version: version.clone(),
        key,
        channel,
    }
}

/// A subscriber's end of a channel. When the last subscriber of a channel leaves, the
/// channel is forgotten at once (its buffer is [`CHANNEL_CAPACITY`] slots): a session or
/// user nobody watches costs nothing, however many streams were opened and abandoned.
pub struct Subscription {
    rx: broadcast::Receiver<Arc<HubEvent>>,
    map: Arc<Channels>,
    version: Arc<AtomicU64>,
    key: i64,
    channel: u64,
}

impl std::ops::Deref for Subscription {
    type Target = broadcast::Receiver<Arc<HubEvent>>;

    fn deref(&self) -> &Self::Target {
        &self.rx
    }
}

impl std::ops::DerefMut for Subscription {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.rx
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // `rx` is still alive here, so the last subscriber sees a count of one. Subscribing
        // takes the same lock: no one joins between the count and the removal.
        let mut m = lock(&self.map);
        if m.get(&self.key)
            .is_some_and(|(channel, tx)| *channel == self.channel && tx.receiver_count() <= 1)
        {
            m.remove(&self.key);
            self.version.fetch_add(1, Ordering::AcqRel);
        }
    }
}

fn send_in(map: &Channels, version: &AtomicU64, key: i64, ev: &Arc<HubEvent>) {
    let mut m = lock(map);
    if let Some((_, tx)) = m.get(&key)
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
    pub fn subscribe_session(&self, session_id: i64) -> Subscription {
        subscribe_in(&self.sessions, &self.version, session_id)
    }

    pub fn subscribe_user(&self, user_id: i64) -> Subscription {
        subscribe_in(&self.users, &self.version, user_id)
    }

    /// Whether anyone listens to the session or its owner: lets the hot path skip building
    /// an event nobody would read. With other instances, someone may listen there.
    pub fn has_listeners(&self, user_id: i64, session_id: i64) -> bool {
        self.peers().is_some()
            || lock(&self.sessions).contains_key(&session_id)
            || lock(&self.users).contains_key(&user_id)
    }

    /// [`Hub::has_listeners`], looked up again only when a channel has come or gone since
    /// `seen` last looked.
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

    /// Sends to the session's and the owner's subscribers, here and on the other
    /// instances. Never waits.
    pub fn publish(&self, user_id: i64, session_id: i64, ev: HubEvent) {
        if let Some(out) = self.peers() {
            out.send(Wire::of(user_id, &ev));
        }
        self.publish_here(user_id, session_id, ev);
    }

    /// [`Hub::publish`] to this instance's subscribers only (an event from another).
    pub fn publish_here(&self, user_id: i64, session_id: i64, ev: HubEvent) {
        let ev = Arc::new(ev);
        send_in(&self.sessions, &self.version, session_id, &ev);
        send_in(&self.users, &self.version, user_id, &ev);
    }

    /// An event of the user's that belongs to no session (an agent's status).
    pub fn publish_user(&self, user_id: i64, ev: HubEvent) {
        if let Some(out) = self.peers() {
            out.send(Wire::of(user_id, &ev));
        }
        self.publish_user_here(user_id, ev);
    }

    /// [`Hub::publish_user`] to this instance's subscribers only.
    pub fn publish_user_here(&self, user_id: i64, ev: HubEvent) {
        send_in(&self.users, &self.version, user_id, &Arc::new(ev));
    }

    /// Asks the other instances for something (a Stop); nothing when there are none.
    pub fn tell_elsewhere(&self, w: Wire) {
        if let Some(out) = self.peers() {
            out.send(w);
        }
    }

    /// From now on every event also goes to the other instances through `out`, while
    /// there are any ([`Hub::set_peers`]).
    pub fn reach_elsewhere(&self, out: Arc<Outbound>) {
        let _ = self.elsewhere.set(out);
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether other instances are alive (PostgreSQL): what is shared with them is kept in
    /// the database only while they are.
    pub fn has_peers(&self) -> bool {
        self.peers().is_some()
    }

    /// The way to the other instances, while any is alive: an instance alone on its
    /// database (the usual case) builds and sends nothing for them.
    fn peers(&self) -> Option<&Outbound> {
        self.elsewhere.get().map(|o| &**o).filter(|o| o.has_peers())
    }

    /// Whether other instances are alive (a notification came from one, or the heartbeat
    /// saw one): events go out to them while they are.
    pub fn set_peers(&self, any: bool) {
        if let Some(out) = self.elsewhere.get()
            && out.set_peers(any)
        {
            // A turn that cached "nobody listens" looks again.
            self.version.fetch_add(1, Ordering::AcqRel);
            if !any {
                // What is not sent while no one seems alive is lost to one that was (a
                // heartbeat that looked stale): the next batch tells it to resync.
                out.mark_lost();
            }
        }
    }

    /// Events meant for this instance's subscribers were lost: every channel ends (its
    /// subscribers' receivers close), and each reader comes back from its last seq.
    pub fn resync(&self) {
        lock(&self.sessions).clear();
        lock(&self.users).clear();
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// A live stream (an event stream or a WebSocket) for `user_id`, while they hold fewer
    /// than `at_most`; held until the permit is dropped with the stream.
    pub fn open_stream(
        &self,
        user_id: i64,
        at_most: usize,
    ) -> crate::Result<crate::limits::Permit> {
        self.streams
            .acquire(user_id, at_most, "open tabs and connections")
    }

    /// How many live streams `user_id` holds open now.
    pub fn streams_held(&self, user_id: i64) -> usize {
        self.streams.held(user_id)
    }

    /// How many live streams are open now, everyone's.
    pub fn streams_open(&self) -> usize {
        self.streams.total()
    }

    /// The server is shutting down: every live stream sees [`Hub::closed`] and ends.
    pub fn close(&self) {
        self.closing.send_replace(true);
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
    async fn close_wakes_every_stream_now_and_later() {
        let hub = Hub::default();
        let closed = hub.closed();
        assert!(!hub.is_closing());
        hub.close();
        closed.await;
        // A stream that starts waiting afterwards does not wait.
        hub.closed().await;
        assert!(hub.is_closing());
    }

    #[test]
    fn cached_listening_sees_subscribers_come_and_go() {
        let hub = Hub::default();
        let seen = Listening::default();
        assert!(!hub.has_listeners_cached(7, 1, &seen));
        let rx = hub.subscribe_session(1);
        assert!(hub.has_listeners_cached(7, 1, &seen));
        drop(rx);
        assert!(!hub.has_listeners_cached(7, 1, &seen));
        let _user = hub.subscribe_user(7);
        assert!(hub.has_listeners_cached(7, 1, &seen));
        assert!(!hub.has_listeners_cached(8, 2, &Listening::default()));
    }

    #[test]
    fn a_channel_is_forgotten_when_its_last_subscriber_leaves() {
        let hub = Hub::default();
        let subs: Vec<_> = (0..1000).map(|s| hub.subscribe_session(s)).collect();
        let a = hub.subscribe_session(5);
        assert_eq!(lock(&hub.sessions).len(), 1000);
        drop(subs);
        // Session 5 still has `a`; every other channel is gone, never published to.
        assert_eq!(lock(&hub.sessions).keys().collect::<Vec<_>>(), [&5]);
        drop(a);
        assert!(lock(&hub.sessions).is_empty());
        let u = hub.subscribe_user(7);
        drop(u);
        assert!(lock(&hub.users).is_empty());
    }

    #[tokio::test]
    async fn resync_ends_every_subscription_and_new_ones_live_on() {
        let hub = Hub::default();
        let mut old = hub.subscribe_session(1);
        let mut old_user = hub.subscribe_user(7);
        hub.publish(7, 1, text(1, 1));
        hub.resync();
        // What was sent before is still read, then the channel has ended.
        assert!(old.recv().await.is_ok());
        assert!(matches!(
            old.recv().await,
            Err(broadcast::error::RecvError::Closed)
        ));
        assert!(old_user.recv().await.is_ok());
        assert!(matches!(
            old_user.recv().await,
            Err(broadcast::error::RecvError::Closed)
        ));
        // A reader that comes back gets a channel of its own, which the old subscription
        // leaving does not take away.
        let mut new = hub.subscribe_session(1);
        drop(old);
        hub.publish(7, 1, text(1, 2));
        assert!(new.recv().await.is_ok());
        assert!(hub.has_listeners(0, 1));
    }

    #[tokio::test]
    async fn user_channels_mirror_every_session() {
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
    }
}
