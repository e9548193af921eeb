//! Live fan-out across several instances on one PostgreSQL database: the [`hub`]'s seam to
//! the others. On SQLite there is one instance and none of this runs.
//!
//! Every event an instance's hub publishes also goes out as a [`Wire`] event on the
//! installation's notification channel (PostgreSQL's `LISTEN`/`NOTIFY`), and every other
//! instance publishes what it receives to its own subscribers ([`Hub::publish_here`]).
//!
//! - **Batched, never waiting.** Publishing puts the event on a bounded queue ([`QUEUE`]);
//!   one task sends what has gathered while the last notification went out as one
//!   notification (up to [`PLAIN_MAX`] bytes), in order. An event too large for a
//!   notification is kept in `fanout_spill` and the notification names its row. A full
//!   queue drops the event and marks the next batch `lost`.
//! - **Sealed.** A notification passes through the database server (its queue may reach
//!   its disk): its payload is sealed with a key derived from the master key, like
//!   everything else Hero stores. Only the sender's instance id is plain, so an instance
//!   skips its own notifications without opening them.
//! - **The log stays the truth.** A receiver told that events were lost (a `lost` batch,
//!   or its own listening connection lost and made again) ends its subscribers' streams
//!   ([`Hub::resync`]), and each reader comes back from its last seq, as after any
//!   reconnect.
//! - **Replies in flight elsewhere.** A reply's start and its chunks build a mirror of it
//!   ([`crate::conversation::turn::Registry::add_remote`]), so that a reader who opens the
//!   session on this instance mid-reply gets the reply so far at once; the mirror goes with
//!   the reply's frame or its `message_complete`, or when its instance stops beating.
//! - **Stop elsewhere.** Stop on one instance is a [`Wire::Stop`] to the others, each of
//!   which stops its own turns and calls on the session.
//!
//! Each instance beats every [`HEARTBEAT`] in `instances`; one silent for [`EXPIRY`] is dead.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine;
use hero_shared::feed::{ApprovalPrompt, QuestionPrompt};
use hero_shared::frame::Frame;
use hero_shared::wire::SseEvent;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::conversation::hub::{Hub, HubEvent};
use crate::conversation::in_flight::InFlight;
use crate::crypto::{self, SecretKey};
use crate::{AppState, Result, store};

/// Events waiting to go out at most; past it an event is dropped and the others told.
pub const QUEUE: usize = 64 * 1024;
/// The most plaintext in one notification: sealed and in base64 it stays under
/// PostgreSQL's 8,000-byte payload limit with the sender's id in front.
pub const PLAIN_MAX: usize = 5_600;
/// How often an instance says it is alive.
pub const HEARTBEAT: Duration = Duration::from_secs(2);
/// How long an instance may be silent before the others take it for dead.
pub const EXPIRY: Duration = Duration::from_secs(10);
/// How long a spilled event is kept for the others to read.
const SPILL_KEPT: Duration = Duration::from_secs(60);
/// The most events one batch gathers before it goes.
const BATCH: usize = 1024;

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
    AgentStatus {
        user_id: i64,
        agent_id: i64,
        status: String,
        detail: String,
    },
    /// Stop the session's turns and calls running here.
    Stop {
        session_id: i64,
    },
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
        }
    }
}

/// One notification's events, and whether events before them were lost.
#[derive(Debug, Serialize, Deserialize)]
struct Batch {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    lost: bool,
    events: Vec<Box<serde_json::value::RawValue>>,
}

/// The hub's way out to the other instances ([`Hub::publish`] hands it every event).
pub struct Outbound {
    tx: mpsc::Sender<Wire>,
    lost: AtomicBool,
}

impl Outbound {
    /// Queues `w` for the other instances; never waits. A full queue drops it, and the
    /// next batch says events were lost.
    pub fn send(&self, w: Wire) {
        if self.tx.try_send(w).is_err() {
            self.lost.store(true, Ordering::Relaxed);
        }
    }
}

/// This instance among the others: its id, channel and key.
#[derive(Clone)]
pub struct Member {
    pub id: String,
    channel: String,
    key: Arc<SecretKey>,
}

impl Member {
    fn seal(&self, plain: &[u8]) -> String {
        let sealed = crypto::seal(&self.key, self.channel.as_bytes(), plain);
        format!(
            "{}:{}",
            self.id,
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(sealed)
        )
    }

    /// The sender and plaintext of a notification; `None` if it is not one of this
    /// installation's (or is damaged).
    fn open<'p>(&self, payload: &'p str) -> Option<(&'p str, Vec<u8>)> {
        let (from, body) = payload.split_once(':')?;
        let sealed = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(body)
            .ok()?;
        let plain = crypto::open(&self.key, self.channel.as_bytes(), &sealed).ok()?;
        Some((from, plain))
    }
}

const SPILL_AAD: &[u8] = b"fanout_spill.body";

/// Joins the instances on this database, when it is PostgreSQL: registers this one,
/// listens on the installation's channel (every event published elsewhere from now on
/// reaches this instance's subscribers), and starts the tasks that send this instance's
/// events, receive the others' and beat. `None` on SQLite.
pub async fn join(st: &AppState) -> Result<Option<Member>> {
    if st.db.sqlite_pool().is_some() {
        return Ok(None);
    }
    let schema = store::cluster::schema(&st.db).await?;
    let me = Member {
        id: uuid::Uuid::new_v4().simple().to_string(),
        channel: channel_of(&schema),
        key: Arc::new(st.keys.fanout_key()),
    };
    store::cluster::beat(&st.db, &me.id, now_ms()).await?;
    let listener = store::cluster::listen(&st.db, &me.channel).await?;
    let (tx, rx) = mpsc::channel(QUEUE);
    let out = Arc::new(Outbound {
        tx,
        lost: AtomicBool::new(false),
    });
    st.hub.reach_elsewhere(out.clone());
    tokio::spawn(send_out(st.clone(), me.clone(), rx, out));
    tokio::spawn(receive(st.clone(), me.clone(), listener));
    tokio::spawn(beat(st.clone(), me.clone()));
    Ok(Some(me))
}

/// Whether this instance runs the start-up recovery ([`crate::conversation::turn::recover`]):
/// always on SQLite; on PostgreSQL only when no other instance is alive (their calls are
/// theirs, not interrupted) and this one took the recovery's lease (two starting together
/// recover once).
pub async fn recovers(st: &AppState, me: Option<&Member>) -> bool {
    let Some(me) = me else {
        return true;
    };
    let now = now_ms();
    let others = match store::cluster::alive(&st.db, now - EXPIRY.as_millis() as i64).await {
        Ok(alive) => alive.into_iter().any(|id| id != me.id),
        Err(e) => {
            tracing::warn!(error = %e, "the instances alive could not be read: no recovery");
            return false;
        }
    };
    if others {
        tracing::info!("other instances are running: their work is left to them");
        return false;
    }
    let until = now + EXPIRY.as_millis() as i64;
    store::cluster::take_lease(&st.db, "startup-recovery", &me.id, until, now)
        .await
        .unwrap_or(false)
}

/// The installation's channel: named after its schema, so that two installations on one
/// PostgreSQL database (in two schemas) do not hear each other.
fn channel_of(schema: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(schema.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("hero_{hex}")
}

/// This instance leaves (at shutdown): the others take it for dead at once.
pub async fn leave(st: &AppState, me: &Member) {
    if let Err(e) = store::cluster::leave(&st.db, &me.id).await {
        tracing::warn!(error = %e, "this instance could not say it leaves");
    }
}

fn now_ms() -> i64 {
    crate::conversation::act::now_ms()
}

/// Sends the queued events, as few notifications as they fit in, in order.
async fn send_out(st: AppState, me: Member, mut rx: mpsc::Receiver<Wire>, out: Arc<Outbound>) {
    let mut events = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut events, BATCH).await > 0 {
        let lost = out.lost.swap(false, Ordering::Relaxed);
        if let Err(e) = send_batch(&st, &me, lost, &events).await {
            tracing::warn!(error = %e, "live events could not reach the other instances");
            out.lost.store(true, Ordering::Relaxed);
        }
        events.clear();
    }
}

async fn send_batch(st: &AppState, me: &Member, lost: bool, events: &[Wire]) -> Result<()> {
    let mut pieces = Vec::with_capacity(events.len());
    for w in events {
        let json = to_json(w)?;
        pieces.push(if json.len() + 32 > PLAIN_MAX {
            let sealed = crypto::seal(&me.key, SPILL_AAD, json.as_bytes());
            let id = store::cluster::spill(&st.db, &sealed, now_ms()).await?;
            to_json(&Wire::Spilled { id })?
        } else {
            json
        });
    }
    for plain in batches(lost, &pieces) {
        store::cluster::notify(&st.db, &me.channel, &me.seal(plain.as_bytes())).await?;
    }
    Ok(())
}

fn to_json(w: &Wire) -> Result<String> {
    serde_json::to_string(w)
        .map_err(|e| crate::Error::Internal(format!("a live event could not be written: {e}")))
}

/// `pieces` (each an event's JSON, each under [`PLAIN_MAX`]) as batches of at most
/// [`PLAIN_MAX`] bytes, in order; the first says whether events were `lost` before it.
fn batches(lost: bool, pieces: &[String]) -> Vec<String> {
    let open = |lost: bool| {
        if lost {
            String::from(r#"{"lost":true,"events":["#)
        } else {
            String::from(r#"{"events":["#)
        }
    };
    let mut out = Vec::new();
    let mut cur = open(lost);
    let mut n = 0;
    for p in pieces {
        if n > 0 && cur.len() + p.len() + 3 > PLAIN_MAX {
            cur.push_str("]}");
            out.push(std::mem::replace(&mut cur, open(false)));
            n = 0;
        }
        if n > 0 {
            cur.push(',');
        }
        cur.push_str(p);
        n += 1;
    }
    if n > 0 || lost {
        cur.push_str("]}");
        out.push(cur);
    }
    out
}

/// Publishes here what the other instances publish, until the server shuts down.
async fn receive(st: AppState, me: Member, mut listener: store::cluster::Listener) {
    let mut broken = false;
    loop {
        let got = tokio::select! {
            got = listener.recv() => got,
            () = st.hub.closed() => return,
        };
        match got {
            Ok(Some(payload)) => {
                if broken {
                    // Listening again: what was sent meanwhile is lost.
                    broken = false;
                    resync(&st);
                }
                take_in(&st, &me, &payload).await;
            }
            Ok(None) => {
                tracing::warn!("the connection the other instances' events come on was lost");
                resync(&st);
            }
            Err(e) => {
                if !broken {
                    tracing::warn!(error = %e, "cannot listen for the other instances' events");
                }
                broken = true;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Events were lost on the way here: every reader here comes back from its last seq, and
/// the mirrors of replies elsewhere are let go.
fn resync(st: &AppState) {
    st.turns.forget_all_remote();
    st.hub.resync();
}

/// One notification, received.
async fn take_in(st: &AppState, me: &Member, payload: &str) {
    if payload
        .split_once(':')
        .is_some_and(|(from, _)| from == me.id)
    {
        return;
    }
    let Some((from, plain)) = me.open(payload) else {
        tracing::warn!("a notification on this installation's channel could not be opened");
        return;
    };
    let batch: Batch = match serde_json::from_slice(&plain) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "another instance's events could not be read");
            return;
        }
    };
    if batch.lost {
        resync(st);
    }
    for raw in batch.events {
        match serde_json::from_str::<Wire>(raw.get()) {
            Ok(Wire::Spilled { id }) => match unspill(st, me, id).await {
                Some(w) => apply(st, from, w),
                None => resync(st),
            },
            Ok(w) => apply(st, from, w),
            Err(e) => tracing::warn!(error = %e, "another instance's event could not be read"),
        }
    }
}

async fn unspill(st: &AppState, me: &Member, id: i64) -> Option<Wire> {
    let sealed = store::cluster::spilled(&st.db, id).await.ok()??;
    let plain = crypto::open(&me.key, SPILL_AAD, &sealed).ok()?;
    serde_json::from_slice(&plain).ok()
}

/// What an event from instance `from` does here.
fn apply(st: &AppState, from: &str, w: Wire) {
    let hub: &Hub = &st.hub;
    match w {
        Wire::Frame { user_id, frame } => {
            st.turns.forget_remote(frame.session_id, &frame.id);
            hub.publish_here(user_id, frame.session_id, HubEvent::Frame(frame));
        }
        Wire::Stream {
            user_id,
            session_id,
            event,
        } => {
            if let SseEvent::MessageComplete(m) = &event {
                st.turns.forget_remote(session_id, &m.message_id);
            }
            hub.publish_here(user_id, session_id, HubEvent::Stream { session_id, event });
        }
        Wire::Chunk {
            user_id,
            session_id,
            message_id,
            delta,
            offset,
        } => {
            if let Some(live) = st.turns.remote(session_id, &message_id) {
                live.push_at(offset, &delta);
            }
            let chunk = HubEvent::Chunk {
                session_id,
                message_id,
                delta,
                offset,
            };
            hub.publish_here(user_id, session_id, chunk);
        }
        Wire::Started {
            user_id,
            session_id,
            message_id,
            agent_id,
            agent_name,
            after_seq,
            timestamp,
        } => {
            let mut live = InFlight::new(&message_id, session_id, agent_id, &agent_name, after_seq);
            live.timestamp = timestamp;
            let live = Arc::new(live);
            st.turns.add_remote(from, live.clone());
            hub.publish_here(user_id, session_id, HubEvent::Started(live));
        }
        Wire::Approval { user_id, prompt } => {
            hub.publish_here(user_id, prompt.session_id, HubEvent::Approval(prompt));
        }
        Wire::Question { user_id, prompt } => {
            hub.publish_here(user_id, prompt.session_id, HubEvent::Question(prompt));
        }
        Wire::AgentStatus {
            user_id,
            agent_id,
            status,
            detail,
        } => hub.publish_user_here(
            user_id,
            HubEvent::AgentStatus {
                agent_id,
                status,
                detail,
            },
        ),
        Wire::Stop { session_id } => {
            st.turns.abort(session_id);
        }
        // Read by `take_in`; a spilled event is never spilled again.
        Wire::Spilled { .. } => {}
    }
}

/// Says this instance is alive, lets go of the mirrors of replies on instances that are
/// not, and forgets spilled events once read.
async fn beat(st: AppState, me: Member) {
    let mut every = tokio::time::interval(HEARTBEAT);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = st.hub.closed() => return,
        }
        let now = now_ms();
        if let Err(e) = store::cluster::beat(&st.db, &me.id, now).await {
            tracing::warn!(error = %e, "this instance could not say it is alive");
            continue;
        }
        match store::cluster::alive(&st.db, now - EXPIRY.as_millis() as i64).await {
            Ok(alive) => st.turns.keep_remote_of(&alive),
            Err(e) => tracing::warn!(error = %e, "the instances alive could not be read"),
        }
        let _ = store::cluster::forget_spills(&st.db, now - SPILL_KEPT.as_millis() as i64).await;
        let _ = store::cluster::forget_instances(&st.db, now - 86_400_000).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::feed::SessionFeed;
    use hero_shared::feed::SessionEvent;
    use hero_shared::wire::TextData;

    /// Two instances on one PostgreSQL database, joined (`None` on SQLite: one instance).
    async fn two() -> Option<(crate::test_support::TestState, AppState, Member, Member)> {
        let a = crate::test_support::state_with(crate::Settings::default()).await;
        if a.st.db.sqlite_pool().is_some() {
            return None;
        }
        let keys = crate::crypto::Keyring::new(SecretKey::from_bytes(*a.st.keys.master().bytes()));
        let b = AppState::new(a.st.db.restarted(), keys, (*a.st.settings).clone()).unwrap();
        let ma = join(&a.st).await.unwrap().unwrap();
        let mb = join(&b).await.unwrap().unwrap();
        Some((a, b, ma, mb))
    }

    async fn next(sub: &mut crate::conversation::hub::Subscription) -> Arc<HubEvent> {
        tokio::time::timeout(Duration::from_secs(10), sub.recv())
            .await
            .expect("the event came within 10 s")
            .expect("the channel is open")
    }

    /// A reply streaming on A reaches B's subscribers in order; a reader opening the
    /// session on B mid-reply gets the reply so far at once; an event too large for a
    /// notification arrives whole; Stop on B stops A's turn; the reply's frame ends B's
    /// mirror; two instances starting together recover once, one among others not at all.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reply_on_one_instance_is_live_on_the_other() {
        let Some((a, b, ma, mb)) = two().await else {
            return;
        };
        assert_ne!(ma.id, mb.id);
        let user = crate::test_support::signed_in(&a.st, "ann").await;
        let session = crate::test_support::session(&a.st, &user, "chat").await;
        let (uid, sid) = (user.id(), session.id);
        let mut on_b = b.hub.subscribe_session(sid);
        let mut b_user = b.hub.subscribe_user(uid);

        let live = Arc::new(InFlight::new("m1", sid, 1, "Ada", 0));
        let stop = a.st.turns.begin(live.clone(), None);
        a.st.hub.publish(uid, sid, HubEvent::Started(live.clone()));
        for word in ["Hel", "lo"] {
            let offset = live.push(word);
            let chunk = HubEvent::Chunk {
                session_id: sid,
                message_id: "m1".into(),
                delta: word.into(),
                offset,
            };
            a.st.hub.publish(uid, sid, chunk);
        }
        match &*next(&mut on_b).await {
            HubEvent::Started(l) => assert_eq!(
                (l.message_id.as_str(), l.agent_name.as_str()),
                ("m1", "Ada")
            ),
            other => panic!("{other:?}"),
        }
        for (want, at) in [("Hel", 0), ("lo", 3)] {
            match &*next(&mut on_b).await {
                HubEvent::Chunk { delta, offset, .. } => {
                    assert_eq!((delta.as_str(), *offset), (want, at))
                }
                other => panic!("{other:?}"),
            }
        }
        // The owner's user channel on B mirrors it too.
        assert!(matches!(&*next(&mut b_user).await, HubEvent::Started(_)));

        // A reader that opens the session on B now gets the reply so far, at once.
        let mut feed = SessionFeed::open(&b, &user, sid, None).await.unwrap();
        match tokio::time::timeout(Duration::from_secs(5), feed.next())
            .await
            .unwrap()
        {
            Some(SessionEvent::Phantom(f)) => {
                assert_eq!(f.id, "m1");
                assert_eq!(f.payload["content"], "Hello");
            }
            other => panic!("{other:?}"),
        }

        // Larger than a notification: through `fanout_spill`, whole.
        let big = "x".repeat(3 * PLAIN_MAX);
        let text = SseEvent::Text(TextData {
            message_id: "m1".into(),
            text: big.clone(),
        });
        a.st.hub.publish(
            uid,
            sid,
            HubEvent::Stream {
                session_id: sid,
                event: text,
            },
        );
        match &*next(&mut on_b).await {
            HubEvent::Stream {
                event: SseEvent::Text(t),
                ..
            } => assert_eq!(t.text, big),
            other => panic!("{other:?}"),
        }

        // Stop on B reaches the turn on A.
        assert!(!stop.is_aborted());
        crate::conversation::turn::stop(&b, &user, sid)
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !stop.is_aborted() {
            assert!(
                std::time::Instant::now() < deadline,
                "the stop never reached A"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        // The reply's frame: B's readers get it, and B lets its mirror go.
        let mut frame = live.snapshot().0;
        frame.seq = 2;
        a.st.hub.publish(uid, sid, HubEvent::Frame(frame));
        assert!(matches!(&*next(&mut on_b).await, HubEvent::Frame(f) if f.id == "m1"));
        assert!(b.turns.in_flight(sid).is_empty());

        // Events from B reach A the same way.
        let mut on_a = a.st.hub.subscribe_session(sid);
        let mut a_user = a.st.hub.subscribe_user(uid);
        let status = HubEvent::AgentStatus {
            agent_id: 1,
            status: "active".into(),
            detail: String::new(),
        };
        b.hub.publish_user(uid, status);
        let text = SseEvent::Text(TextData {
            message_id: "m2".into(),
            text: "hi".into(),
        });
        b.hub.publish(
            uid,
            sid,
            HubEvent::Stream {
                session_id: sid,
                event: text,
            },
        );
        assert!(matches!(&*next(&mut on_a).await, HubEvent::Stream { .. }));
        assert!(matches!(
            &*next(&mut a_user).await,
            HubEvent::AgentStatus { .. }
        ));
        assert!(matches!(&*next(&mut a_user).await, HubEvent::Stream { .. }));

        // Both alive: neither runs the start-up recovery (each other's work is its own).
        assert!(!recovers(&a.st, Some(&ma)).await);
        // B stops (its heartbeat with it) and leaves.
        b.shutdown();
        tokio::time::sleep(Duration::from_millis(200)).await;
        leave(&b, &mb).await;
        // Alone again: A recovers, under the recovery's lease.
        assert!(recovers(&a.st, Some(&ma)).await);
        assert!(!recovers(&b, Some(&mb)).await, "A is alive");
        assert!(recovers(&a.st, None).await, "on SQLite, always");
    }

    #[test]
    fn batches_stay_under_the_limit_and_keep_the_order() {
        let pieces: Vec<String> = (0..500)
            .map(|i| format!(r#"{{"k":"stop","session_id":{i}}}"#))
            .collect();
        let out = batches(true, &pieces);
        assert!(out.len() > 1);
        let mut seen = Vec::new();
        for (n, b) in out.iter().enumerate() {
            assert!(b.len() <= PLAIN_MAX, "{}", b.len());
            let batch: Batch = serde_json::from_str(b).unwrap();
            assert_eq!(batch.lost, n == 0);
            for e in batch.events {
                match serde_json::from_str::<Wire>(e.get()).unwrap() {
                    Wire::Stop { session_id } => seen.push(session_id),
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(seen, (0..500).collect::<Vec<_>>());
        // Nothing to say, nothing sent; only lost events, said alone.
        assert!(batches(false, &[]).is_empty());
        let only: Batch = serde_json::from_str(&batches(true, &[])[0]).unwrap();
        assert!(only.lost && only.events.is_empty());
    }

    #[test]
    fn a_notification_opens_only_with_the_installations_key_and_channel() {
        let me = Member {
            id: "a".into(),
            channel: channel_of("public"),
            key: Arc::new(SecretKey::random()),
        };
        let sealed = me.seal(b"{}");
        assert!(sealed.len() < 100 && sealed.starts_with("a:"));
        assert_eq!(me.open(&sealed).unwrap(), ("a", b"{}".to_vec()));
        let other_schema = Member {
            channel: channel_of("t_1"),
            ..me.clone()
        };
        assert!(other_schema.open(&sealed).is_none());
        let other_key = Member {
            key: Arc::new(SecretKey::random()),
            ..me.clone()
        };
        assert!(other_key.open(&sealed).is_none());
        // The largest batch fits PostgreSQL's payload limit once sealed.
        let big = me.seal(&vec![b'x'; PLAIN_MAX]);
        assert!(big.len() + 32 < 8000, "{}", big.len());
    }
}
