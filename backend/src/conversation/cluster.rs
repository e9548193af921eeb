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
use std::time::Duration;

use base64::Engine;
use hero_shared::wire::SseEvent;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::conversation::hub::{Hub, HubEvent, Outbound, Wire};
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
/// How long the mirrors of a dead instance's replies are kept (its work is taken over
/// within `EXPIRY` and a heartbeat or two).
const MIRRORS_OUTLIVE: Duration = Duration::from_secs(60);
/// How long a spilled event is kept for the others to read.
const SPILL_KEPT: Duration = Duration::from_secs(60);
/// The most events one batch gathers before it goes.
const BATCH: usize = 1024;

/// One notification's events, and whether events before them were lost.
#[derive(Debug, Serialize, Deserialize)]
struct Batch {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    lost: bool,
    /// When it left, in Unix microseconds (by the sender's clock).
    #[serde(default)]
    at: i64,
    events: Vec<Box<serde_json::value::RawValue>>,
}

/// This instance among the others: its id, channel and key; how its heartbeat fares; the
/// leases it holds, as it knows them.
#[derive(Clone)]
pub struct Member {
    pub id: String,
    channel: String,
    key: Arc<SecretKey>,
    health: Arc<Health>,
}

/// How this instance's heartbeat fares: an instance whose own beats have not been landing
/// may be the one that looks dead, and takes nothing over ([`Member::may_take_over`]).
#[derive(Default)]
struct Health {
    /// Since when every beat has landed (`None` after one failed).
    landing_since: std::sync::Mutex<Option<std::time::Instant>>,
    /// The instance is leaving: it beats no more.
    leaving: std::sync::atomic::AtomicBool,
    /// The names of the leases this instance holds: any other it finds under its id in
    /// the database (a release that failed, a take cut short) is let go at its next beat.
    /// Counted: a lock taken again before its last release landed is held twice.
    held: std::sync::Mutex<std::collections::HashMap<String, usize>>,
}

impl Member {
    fn new(channel: String, key: SecretKey) -> Member {
        Member {
            id: uuid::Uuid::new_v4().simple().to_string(),
            channel,
            key: Arc::new(key),
            health: Default::default(),
        }
    }

    /// The associated data of a notification from `from`: the channel and the sender.
    fn aad(&self, from: &str) -> Vec<u8> {
        format!("{}:{from}", self.channel).into_bytes()
    }

    fn seal(&self, plain: &[u8]) -> String {
        let sealed = crypto::seal(&self.key, &self.aad(&self.id), plain);
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
        let plain = crypto::open(&self.key, &self.aad(from), &sealed).ok()?;
        Some((from, plain))
    }

    /// A beat landed, or did not.
    fn beat_landed(&self, landed: bool) {
        let mut since = self
            .health
            .landing_since
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match (landed, *since) {
            (true, None) => *since = Some(std::time::Instant::now()),
            (false, _) => *since = None,
            (true, Some(_)) => {}
        }
    }

    /// Whether this instance may judge others dead: its own beats have landed for a whole
    /// `EXPIRY` (after the database was away, the others' beats land again too before
    /// anyone is taken for dead).
    pub fn may_take_over(&self) -> bool {
        let since = *self
            .health
            .landing_since
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        since.is_some_and(|t| t.elapsed() >= EXPIRY) && !self.is_leaving()
    }

    fn is_leaving(&self) -> bool {
        self.health
            .leaving
            .load(std::sync::atomic::Ordering::Acquire)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, usize>> {
        self.health.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This instance is taking (or holds) the lease `name`.
    fn hold_name(&self, name: &str) {
        *self.held().entry(name.to_owned()).or_default() += 1;
    }

    /// This instance let go of (or did not get) the lease `name`.
    fn unhold_name(&self, name: &str) {
        let mut held = self.held();
        if let Some(n) = held.get_mut(name) {
            *n -= 1;
            if *n == 0 {
                held.remove(name);
            }
        }
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
    let me = Member::new(channel_of(&schema), st.keys.fanout_key());
    store::cluster::beat(&st.db, &me.id, now_ms()).await?;
    me.beat_landed(true);
    let listener = store::cluster::listen(&st.db, &me.channel).await?;
    let (tx, rx) = mpsc::channel(QUEUE);
    let out = Arc::new(Outbound::new(tx));
    st.hub.reach_elsewhere(out.clone());
    let since = now_ms() - EXPIRY.as_millis() as i64;
    let alive = store::cluster::alive(&st.db, since).await?;
    st.hub.set_peers(alive.iter().any(|id| *id != me.id));
    // The others start sending to this one as soon as they hear it (before the heartbeat
    // would tell them): sent before this instance serves anyone.
    send_batch(st, &me, false, &[Wire::Hello]).await?;
    let _ = st.instance.set(me.clone());
    tokio::spawn(send_out(st.clone(), me.clone(), rx, out));
    tokio::spawn(receive(st.clone(), me.clone(), listener));
    tokio::spawn(beat(st.clone(), me.clone()));
    Ok(Some(me))
}

/// Whether this instance runs the start-up recovery ([`crate::conversation::turn::recover`]),
/// which leaves alone what an instance alive is working on: always on SQLite; on
/// PostgreSQL when it takes the recovery's lease (two starting together recover once; one
/// that finds the lease taken leaves the recovery to its holder).
pub async fn recovers(st: &AppState, me: Option<&Member>) -> bool {
    let Some(me) = me else {
        return true;
    };
    let now = now_ms();
    // Long enough for a recovery of a whole database; given back as soon as it is done.
    let until = now + RECOVERY_LEASE.as_millis() as i64;
    match store::cluster::take_lease(&st.db, RECOVERY, &me.id, until, now).await {
        Ok(took) => took,
        Err(e) => {
            tracing::warn!(error = %e, "the recovery's lease could not be taken: no recovery now");
            false
        }
    }
}

/// How long the recovery's lease holds if its holder dies before giving it back.
const RECOVERY_LEASE: Duration = Duration::from_secs(300);

/// The start-up recovery [`recovers`] allowed is done: the lease goes back.
pub async fn recovered(st: &AppState, me: Option<&Member>) {
    if let Some(me) = me {
        let _ = store::cluster::release_lease(&st.db, RECOVERY, &me.id).await;
    }
}

/// The lease of whoever recovers (at start-up, or a dead instance's work).
const RECOVERY: &str = "recovery";

/// Records that this instance does the work `name` ("streaming:…", "reply:…"), until
/// [`disown`]: if it dies meanwhile, another takes the work over. Nothing on SQLite.
pub async fn own(st: &AppState, name: &str) {
    let Some(me) = st.instance.get() else {
        return;
    };
    // Known here first: the heartbeat never lets go of a lease this instance is taking.
    me.hold_name(name);
    if let Err(e) = store::cluster::own(&st.db, name, &me.id).await {
        tracing::warn!(error = %e, work = name, "work could not be recorded as this instance's");
    }
}

/// The work `name` is done. Nothing on SQLite. A release the database does not take now
/// is made by the next heartbeat.
pub async fn disown(st: &AppState, name: &str) {
    let Some(me) = st.instance.get() else {
        return;
    };
    if let Err(e) = store::cluster::disown(&st.db, name).await {
        tracing::warn!(error = %e, work = name, "finished work could not be recorded as done");
    }
    me.unhold_name(name);
}

/// [`disown`] from where nothing can wait (a guard's drop).
pub fn disown_later(st: &AppState, name: String) {
    if st.instance.get().is_some() {
        let st = st.clone();
        tokio::spawn(async move { disown(&st, &name).await });
    }
}

/// Work (or a lock) this instance holds until the guard is dropped ([`hold_work`],
/// [`lock`]).
pub struct Owned {
    st: AppState,
    name: String,
    /// A lock's token: its release deletes the row only while it is this taking's (taken
    /// again meanwhile, it is the next holder's).
    token: Option<i64>,
}

impl Drop for Owned {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.name);
        match self.token {
            None => disown_later(&self.st, name),
            Some(token) => {
                let (st, Some(me)) = (self.st.clone(), self.st.instance.get().cloned()) else {
                    return;
                };
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        if let Err(e) = store::cluster::release_lock(&st.db, &name, &me.id, token).await {
                            tracing::warn!(error = %e, "a lock among the instances was not given back now");
                        }
                        me.unhold_name(&name);
                    });
                }
            }
        }
    }
}

/// [`own`] until the guard is dropped; `None` on SQLite.
pub async fn hold_work(st: &AppState, name: String) -> Option<Owned> {
    st.instance.get()?;
    own(st, &name).await;
    Some(Owned {
        st: st.clone(),
        name,
        token: None,
    })
}

/// A lock among the instances, while others are alive ([`Owned`] until dropped; `None`
/// alone or on SQLite, where this process's own lock is the whole lock): a lease taken when
/// free, or when its holder is no longer alive, waited for otherwise. No connection is
/// held while it is: it is a row.
pub async fn lock(st: &AppState, name: String) -> Result<Option<Owned>> {
    let mut wait = Duration::from_millis(5);
    loop {
        match try_lock(st, name.clone()).await? {
            Some(owned) => return Ok(owned),
            None => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_millis(200));
            }
        }
    }
}

/// [`lock`] if it is free now: `Some(None)` alone or on SQLite, `None` if another
/// instance alive holds it.
pub async fn try_lock(st: &AppState, name: String) -> Result<Option<Option<Owned>>> {
    let Some(me) = st.instance.get() else {
        return Ok(Some(None));
    };
    if !st.hub.has_peers() {
        return Ok(Some(None));
    }
    me.hold_name(&name);
    let since = now_ms() - EXPIRY.as_millis() as i64;
    let token = rand::random::<i64>().abs();
    match store::cluster::try_lock(&st.db, &name, &me.id, since, token).await {
        Ok(true) => Ok(Some(Some(Owned {
            st: st.clone(),
            name,
            token: Some(token),
        }))),
        Ok(false) => {
            me.unhold_name(&name);
            Ok(None)
        }
        Err(e) => {
            me.unhold_name(&name);
            Err(e)
        }
    }
}

/// The name of a reply in flight as its instance holds it: whoever takes over a dead
/// instance's work stores the reply as interrupted ([`crate::conversation::takeover`]).
pub fn reply_mark(user_id: i64, session_id: i64, message_id: &str) -> String {
    format!("reply:{user_id}:{session_id}:{message_id}")
}

pub(crate) fn parse_reply_mark(name: &str) -> Option<(i64, i64, &str)> {
    let mut parts = name.strip_prefix("reply:")?.splitn(3, ':');
    let user_id = parts.next()?.parse().ok()?;
    let session_id = parts.next()?.parse().ok()?;
    Some((user_id, session_id, parts.next()?))
}

/// The name of a timed question's timer as the instance that armed it holds it.
pub fn timer_mark(request_id: &str) -> String {
    format!("timer:{request_id}")
}

/// The name of a summoning as the instance that runs it holds it.
pub fn summon_mark(agent_id: i64) -> String {
    format!("summon:{agent_id}")
}

/// Agents left summoning by a run that stopped are active again (with the files they
/// have), but for those an instance alive summons; answers how many. At start-up and when
/// a dead instance's work is taken over.
pub async fn end_summonings(st: &AppState) -> Result<u64> {
    if st.instance.get().is_none() {
        return store::agents::end_all_summoning(&st.db).await;
    }
    let mut n = 0;
    for agent_id in store::agents::summoning(&st.db).await? {
        if owned_alive(st, &summon_mark(agent_id)).await? {
            continue;
        }
        st.db
            .write_with(async |tx| store::agents::end_summoning(tx, agent_id).await)
            .await?;
        n += 1;
    }
    Ok(n)
}

/// Whether an instance that is alive does the work `name`; always false on SQLite (this
/// process's own work is in its memory).
pub async fn owned_alive(st: &AppState, name: &str) -> Result<bool> {
    if st.instance.get().is_none() {
        return Ok(false);
    }
    let since = now_ms() - EXPIRY.as_millis() as i64;
    store::cluster::owned_alive(&st.db, name, since).await
}

/// Runs `work` for `session_id` in a task of its own, as a reply would: holding one of the
/// user's reply slots (here and across instances), registered as acting in the session so
/// that a Stop reaches it (`work` is given that abort). With no slot to spare, or the
/// server closing, it does not run: the next turn tries again. A summary and a memory flush
/// a turn sets going run so.
pub fn spawn_as_reply<F, Fut>(
    st: &AppState,
    user: &crate::accounts::auth::AuthUser,
    session_id: i64,
    work: F,
) where
    F: FnOnce(AppState, crate::accounts::auth::AuthUser, crate::drive::abort::Abort) -> Fut
        + Send
        + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    if st.hub.is_closing() {
        return;
    }
    let at_most = st.settings.limits.turns_per_user;
    let what = "replies in flight";
    let Ok(slot) = st.turn_slots.acquire(user.id(), at_most, what) else {
        return;
    };
    let (st, user) = (st.clone(), user.clone());
    let acting = st.turns.acting(session_id);
    tokio::spawn(async move {
        let Ok(_slot) = across(&st, slot, "turn", at_most, what).await else {
            return;
        };
        let abort = acting.abort().clone();
        work(st, user, abort).await;
        drop(acting);
    });
}

/// `permit` (one of `kind` its user holds on this instance) held among the instances too:
/// refused as the local bound is ([`crate::limits::refused`]) when instances that are alive
/// hold `at_most` of them already. Given back with the permit. Unchanged on SQLite, and
/// while this instance is alone (what it held before another joined is not counted there
/// until it ends: for that long a user may hold up to twice the bound).
pub async fn across(
    st: &AppState,
    permit: crate::limits::Permit,
    kind: &str,
    at_most: usize,
    what: &str,
) -> Result<crate::limits::Permit> {
    let Some(me) = st.instance.get() else {
        return Ok(permit);
    };
    // Alone, this instance's own count is the whole count.
    if !st.hub.has_peers() {
        return Ok(permit);
    }
    let since = now_ms() - EXPIRY.as_millis() as i64;
    let user_id = permit.user_id();
    let prefix = format!("{kind}:{user_id}:");
    let name = format!("{prefix}{}", uuid::Uuid::new_v4().simple());
    // Known here before it is taken; forgotten if the take fails or is cut short (the
    // heartbeat then lets go of a row it left), else with the permit.
    let taking = Taking {
        me: me.clone(),
        name: Some(name.clone()),
    };
    taking.me.hold_name(&name);
    let taken = store::cluster::take_hold(&st.db, &prefix, &name, at_most, &me.id, since).await?;
    if !taken {
        return Err(crate::limits::refused(what, at_most));
    }
    let mut taking = taking;
    taking.name = None;
    let st = st.clone();
    Ok(permit.then_release(move || {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { disown(&st, &name).await });
        }
    }))
}

/// A hold being taken ([`across`]): forgotten here when dropped before it is taken.
struct Taking {
    me: Member,
    name: Option<String>,
}

impl Drop for Taking {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            self.me.unhold_name(&name);
        }
    }
}

/// One of the user's replies in flight (`turns_per_user`), here and among the instances.
pub async fn turn_slot(st: &AppState, user_id: i64) -> Result<crate::limits::Permit> {
    let at_most = st.settings.limits.turns_per_user;
    let what = "replies in flight";
    let permit = st.turn_slots.acquire(user_id, at_most, what)?;
    across(st, permit, "turn", at_most, what).await
}

/// One of the user's live streams (`live_streams_per_user`: event streams and WebSockets),
/// here and among the instances.
pub async fn stream_slot(st: &AppState, user_id: i64) -> Result<crate::limits::Permit> {
    let at_most = st.settings.limits.live_streams_per_user;
    let permit = st.hub.open_stream(user_id, at_most)?;
    across(st, permit, "stream", at_most, "open tabs and connections").await
}

/// The installation's channel: named after its schema, so that two installations on one
/// PostgreSQL database (in two schemas) do not hear each other.
fn channel_of(schema: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(schema.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("hero_{hex}")
}

/// This instance leaves (at shutdown, after its drain): it beats no more and is dead at
/// once to the others, and what it still held (a timer armed, a reply the drain cut off)
/// is taken over by one of them at its next heartbeat.
pub async fn leave(st: &AppState, me: &Member) {
    me.health
        .leaving
        .store(true, std::sync::atomic::Ordering::Release);
    if let Err(e) = store::cluster::beat(&st.db, &me.id, 0).await {
        tracing::warn!(error = %e, "this instance could not say it leaves");
    }
}

pub(crate) use crate::now_ms;

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Sends the queued events, as few notifications as they fit in, in order.
async fn send_out(st: AppState, me: Member, mut rx: mpsc::Receiver<Wire>, out: Arc<Outbound>) {
    let mut events = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut events, BATCH).await > 0 {
        let lost = out.take_lost();
        if let Err(e) = send_batch(&st, &me, lost, &events).await {
            tracing::warn!(error = %e, "live events could not reach the other instances");
            out.mark_lost();
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
    for plain in batches(lost, now_us(), &pieces) {
        store::cluster::notify(&st.db, &me.channel, &me.seal(plain.as_bytes())).await?;
    }
    st.metrics.sent_between(events.len());
    Ok(())
}

fn to_json(w: &Wire) -> Result<String> {
    serde_json::to_string(w)
        .map_err(|e| crate::Error::Internal(format!("a live event could not be written: {e}")))
}

/// `pieces` (each an event's JSON, each under [`PLAIN_MAX`]) as batches of at most
/// [`PLAIN_MAX`] bytes, in order; the first says whether events were `lost` before it.
fn batches(lost: bool, at: i64, pieces: &[String]) -> Vec<String> {
    let open = |lost: bool| {
        if lost {
            format!(r#"{{"lost":true,"at":{at},"events":["#)
        } else {
            format!(r#"{{"at":{at},"events":["#)
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
                    // What is sent meanwhile is lost: readers come back from their seq.
                    resync(&st);
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
    st.metrics.lost_between();
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
    // Another instance is alive: this one's events go to it from now on.
    st.hub.set_peers(true);
    let batch: Batch = match serde_json::from_slice(&plain) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "another instance's events could not be read");
            return;
        }
    };
    let delay = u64::try_from(now_us() - batch.at)
        .ok()
        .map(std::time::Duration::from_micros);
    st.metrics.received_between(batch.events.len(), delay);
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
        Wire::Assertion { user_id, update } => {
            hub.publish_here(user_id, update.session_id, HubEvent::Assertion(update));
        }
        Wire::Notification {
            user_id,
            session_id,
            message,
            level,
        } => hub.publish_user_here(
            user_id,
            HubEvent::Notification {
                session_id,
                message,
                level,
            },
        ),
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
        Wire::ConfigChange { user_id, change } => {
            hub.publish_user_here(user_id, HubEvent::ConfigChange(change))
        }
        Wire::TaskChanged {
            user_id,
            task_id,
            identifier,
            status,
        } => hub.publish_user_here(
            user_id,
            HubEvent::TaskChanged {
                task_id,
                identifier,
                status,
            },
        ),
        Wire::Stop { session_id } => {
            st.turns.abort(session_id);
        }
        Wire::Hello => {}
        // Read by `take_in`; a spilled event is never spilled again.
        Wire::Spilled { .. } => {}
    }
}

/// Says this instance is alive (until it leaves: the drain of a shutdown beats on, so
/// that no one takes over work it is finishing), lets go of the mirrors of replies on
/// instances long dead and of leases it no longer holds, and forgets spilled events once
/// read.
async fn beat(st: AppState, me: Member) {
    let mut every = tokio::time::interval(HEARTBEAT);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if me.is_leaving() {
            return;
        }
        let now = now_ms();
        let landed = store::cluster::beat(&st.db, &me.id, now).await;
        me.beat_landed(landed.is_ok());
        if let Err(e) = landed {
            tracing::warn!(error = %e, "this instance could not say it is alive");
            continue;
        }
        match store::cluster::alive(&st.db, now - EXPIRY.as_millis() as i64).await {
            Ok(alive) => st.hub.set_peers(alive.iter().any(|id| *id != me.id)),
            Err(e) => tracing::warn!(error = %e, "the instances alive could not be read"),
        }
        // The mirrors of a dead instance's replies outlive it long enough for the one that
        // takes its work over to store them ([`crate::conversation::takeover`]).
        let since = now - MIRRORS_OUTLIVE.as_millis() as i64;
        if let Ok(recent) = store::cluster::alive(&st.db, since).await {
            st.turns.keep_remote_of(&recent);
        }
        let_go_of_stray_leases(&st, &me).await;
        let _ = store::cluster::forget_spills(&st.db, now - SPILL_KEPT.as_millis() as i64).await;
        let _ = store::cluster::forget_instances(&st.db, now - 86_400_000).await;
    }
}

/// Deletes the leases the database holds under this instance's id that it no longer holds
/// (a release that failed while the database was away, a take cut short): a user's slots
/// and a message's marks do not stay taken for as long as the instance lives.
async fn let_go_of_stray_leases(st: &AppState, me: &Member) {
    let Ok(in_db) = store::cluster::leases_of(&st.db, &me.id).await else {
        return;
    };
    let stray: Vec<String> = {
        let held = me.held();
        in_db
            .into_iter()
            .filter(|n| !held.contains_key(n))
            .collect()
    };
    for name in stray {
        if !me.held().contains_key(&name) {
            let _ = store::cluster::release_lease(&st.db, &name, &me.id).await;
        }
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
        let b = a.st.restarted();
        let ma = join(&a.st).await.unwrap().unwrap();
        let mb = join(&b).await.unwrap().unwrap();
        // B knew of A when it joined; A hears B's hello.
        assert!(b.hub.has_listeners(0, 0));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !a.st.hub.has_listeners(0, 0) {
            assert!(std::time::Instant::now() < deadline, "A never heard B");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Some((a, b, ma, mb))
    }

    /// An instance alone on its database sends nothing for others; once one is alive,
    /// every event goes out, in order.
    #[tokio::test]
    async fn alone_nothing_goes_out() {
        let hub = Hub::default();
        let (tx, mut rx) = mpsc::channel(QUEUE);
        hub.reach_elsewhere(Arc::new(Outbound::new(tx)));
        let stop = || Wire::Stop { session_id: 1 };
        let text = |n: usize| HubEvent::Stream {
            session_id: 1,
            event: SseEvent::Text(TextData {
                message_id: "m".into(),
                text: n.to_string(),
            }),
        };
        assert!(!hub.has_listeners(7, 1), "nobody here, nobody elsewhere");
        hub.publish(7, 1, text(0));
        hub.tell_elsewhere(stop());
        assert!(rx.try_recv().is_err());
        hub.set_peers(true);
        assert!(hub.has_listeners(7, 1));
        hub.publish(7, 1, text(1));
        hub.tell_elsewhere(stop());
        assert!(matches!(rx.try_recv(), Ok(Wire::Stream { user_id: 7, .. })));
        assert!(matches!(rx.try_recv(), Ok(Wire::Stop { session_id: 1 })));
        hub.set_peers(false);
        hub.publish(7, 1, text(2));
        assert!(rx.try_recv().is_err());
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

        // What went between them is counted, and how long it took.
        let now = || crate::metrics::Now {
            turns: 0,
            streams: 0,
            pool_size: 0,
            pool_idle: 0,
        };
        let text = b.metrics.render(now());
        for want in [
            "hero_fanout_between_instances_events_total{direction=\"received\"}",
            "hero_fanout_between_instances_events_total{direction=\"sent\"}",
            "hero_fanout_between_instances_seconds_count",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        // Two starting together: one recovers, the other leaves it to it.
        assert!(recovers(&a.st, Some(&ma)).await);
        assert!(!recovers(&b, Some(&mb)).await);
        recovered(&a.st, Some(&ma)).await;
        assert!(recovers(&b, Some(&mb)).await);
        assert!(recovers(&a.st, None).await, "on SQLite, always");
    }

    /// A lease the database holds in an instance's name that it no longer holds (a release
    /// that failed) is let go at its next beat; an instance that leaves is dead at once, and
    /// what it still held is taken over.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stray_leases_are_let_go_and_leaving_hands_the_rest_over() {
        let Some((a, b, ma, mb)) = two().await else {
            return;
        };
        store::cluster::own(&b.db, "stream:7:x", &mb.id)
            .await
            .unwrap();
        std::mem::forget(hold_work(&b, "timer:q".into()).await);
        let_go_of_stray_leases(&b, &mb).await;
        assert_eq!(
            store::cluster::leases_of(&b.db, &mb.id).await.unwrap(),
            ["timer:q"]
        );
        leave(&b, &mb).await;
        let since = now_ms() - EXPIRY.as_millis() as i64;
        assert!(
            store::cluster::dead(&a.st.db, since)
                .await
                .unwrap()
                .contains(&mb.id)
        );
        assert_eq!(
            store::cluster::leases_of(&a.st.db, &mb.id).await.unwrap(),
            ["timer:q"]
        );
        *ma.health.landing_since.lock().unwrap() = Some(std::time::Instant::now() - EXPIRY);
        let taken = crate::conversation::takeover::take_over(&a.st, &ma).await;
        assert_eq!(taken.unwrap(), 1);
        assert!(
            store::cluster::leases_of(&a.st.db, &mb.id)
                .await
                .unwrap()
                .is_empty()
        );
    }

    /// A user's bounds hold across the instances: a reply slot or a live stream taken on
    /// one counts on the other, and is given back with its permit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_users_limits_hold_across_instances() {
        let Some((a, b, _, _)) = two().await else {
            return;
        };
        let user = crate::test_support::signed_in(&a.st, "ann").await;
        let bob = crate::test_support::signed_in(&a.st, "bob").await;
        let turns = a.st.settings.limits.turns_per_user;
        let held: Vec<_> =
            futures::future::join_all((0..turns).map(|_| turn_slot(&a.st, user.id())))
                .await
                .into_iter()
                .map(|r| r.unwrap())
                .collect();
        let refused = turn_slot(&b, user.id()).await.unwrap_err();
        assert!(matches!(refused, crate::Error::Limit(_)), "{refused:?}");
        assert!(
            refused.to_string().contains("replies in flight"),
            "{refused}"
        );
        // Another user's are theirs.
        assert!(turn_slot(&b, bob.id()).await.is_ok());
        drop(held);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while turn_slot(&b, user.id()).await.is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the slots were never given back"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let streams = a.st.settings.limits.live_streams_per_user;
        let mut open = Vec::new();
        for n in 0..streams {
            let on = if n % 2 == 0 { &a.st } else { &b };
            open.push(stream_slot(on, user.id()).await.unwrap());
        }
        assert!(stream_slot(&a.st, user.id()).await.is_err());
        assert!(stream_slot(&b, user.id()).await.is_err());

        // A lock among the instances: one taking at a time; the next after the release.
        let first = lock(&a.st, "lock:message:m".into()).await.unwrap();
        assert!(first.is_some(), "a row, with another instance alive");
        assert!(
            try_lock(&b, "lock:message:m".into())
                .await
                .unwrap()
                .is_none()
        );
        let waiting = tokio::spawn({
            let b = b.clone();
            async move { lock(&b, "lock:message:m".into()).await.unwrap() }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "B waits while A holds it");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("B takes it once A lets go")
            .unwrap();
        assert!(second.is_some());
    }

    /// An instance that dies mid-reply: another stores the reply as interrupted within the
    /// heartbeat's expiry, keeping the text its mirror holds, tells its readers the reply is
    /// complete, and forgets the dead instance and what it held.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_instances_reply_is_stored_by_another_with_its_text_so_far() {
        let Some((a, b, ma, mb)) = two().await else {
            return;
        };
        let user = crate::test_support::signed_in(&a.st, "ann").await;
        let session = crate::test_support::session(&a.st, &user, "chat").await;
        let (uid, sid) = (user.id(), session.id);
        let live = Arc::new(InFlight::new("m9", sid, 1, "Ada", 0));
        let _stop = b.turns.begin(live.clone(), None);
        // Held as a reply in flight would hold it; never given back (B dies).
        std::mem::forget(hold_work(&b, reply_mark(uid, sid, "m9")).await);
        b.hub.publish(uid, sid, HubEvent::Started(live.clone()));
        let offset = live.push("partial answer");
        let chunk = HubEvent::Chunk {
            session_id: sid,
            message_id: "m9".into(),
            delta: "partial answer".into(),
            offset,
        };
        b.hub.publish(uid, sid, chunk);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while a.st.turns.remote(sid, "m9").map(|l| l.text()).as_deref() != Some("partial answer") {
            assert!(
                std::time::Instant::now() < deadline,
                "A never mirrored the reply"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // B dies: it stops beating; its last beat is older than the expiry.
        mb.health
            .leaving
            .store(true, std::sync::atomic::Ordering::Release);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let long_ago = now_ms() - 2 * EXPIRY.as_millis() as i64;
        store::cluster::beat(&a.st.db, &mb.id, long_ago)
            .await
            .unwrap();
        let mut readers = a.st.hub.subscribe_session(sid);
        // A joined moments ago: it judges no one until its own beats have landed a while.
        assert_eq!(
            crate::conversation::takeover::take_over(&a.st, &ma)
                .await
                .unwrap(),
            0
        );
        *ma.health.landing_since.lock().unwrap() = Some(std::time::Instant::now() - EXPIRY);
        assert_eq!(
            crate::conversation::takeover::take_over(&a.st, &ma)
                .await
                .unwrap(),
            1
        );
        let stored =
            a.st.db
                .read_with(async |c| store::frames::get_hot(c, sid, "m9").await)
                .await
                .unwrap()
                .expect("the reply is stored");
        let dk = crate::conversation::frames::session_key(&a.st, &user, sid)
            .await
            .unwrap();
        let payload = stored.open(&dk).unwrap().payload;
        let content = payload["content"].as_str().unwrap();
        assert!(content.starts_with("partial answer"), "{content}");
        assert!(content.contains("server stopped"), "{content}");
        assert_eq!(payload["aborted"], true);
        let first = next(&mut readers).await;
        assert!(
            matches!(&*first, HubEvent::Frame(f) if f.id == "m9"),
            "{first:?}"
        );
        assert!(matches!(
            &*next(&mut readers).await,
            HubEvent::Stream {
                event: SseEvent::MessageComplete(_),
                ..
            }
        ));
        assert!(a.st.turns.remote(sid, "m9").is_none());
        assert!(
            store::cluster::leases_of(&a.st.db, &mb.id)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            !store::cluster::alive(&a.st.db, 0)
                .await
                .unwrap()
                .contains(&mb.id)
        );
        // Nothing more to take over.
        assert_eq!(
            crate::conversation::takeover::take_over(&a.st, &ma)
                .await
                .unwrap(),
            0
        );
    }

    #[test]
    fn batches_stay_under_the_limit_and_keep_the_order() {
        let pieces: Vec<String> = (0..500)
            .map(|i| format!(r#"{{"k":"stop","session_id":{i}}}"#))
            .collect();
        let out = batches(true, 7, &pieces);
        assert!(out.len() > 1);
        let mut seen = Vec::new();
        for (n, b) in out.iter().enumerate() {
            assert!(b.len() <= PLAIN_MAX, "{}", b.len());
            let batch: Batch = serde_json::from_str(b).unwrap();
            assert_eq!((batch.lost, batch.at), (n == 0, 7));
            for e in batch.events {
                match serde_json::from_str::<Wire>(e.get()).unwrap() {
                    Wire::Stop { session_id } => seen.push(session_id),
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(seen, (0..500).collect::<Vec<_>>());
        // Nothing to say, nothing sent; only lost events, said alone.
        assert!(batches(false, 7, &[]).is_empty());
        let only: Batch = serde_json::from_str(&batches(true, 7, &[])[0]).unwrap();
        assert!(only.lost && only.events.is_empty());
    }

    #[test]
    fn a_notification_opens_only_with_the_installations_key_and_channel() {
        let me = Member {
            id: "a".into(),
            ..Member::new(channel_of("public"), SecretKey::random())
        };
        let sealed = me.seal(b"{}");
        assert!(sealed.len() < 100 && sealed.starts_with("a:"));
        assert_eq!(me.open(&sealed).unwrap(), ("a", b"{}".to_vec()));
        // The sender is sealed in: another id in front does not open.
        let forged = format!("b{}", &sealed[1..]);
        assert!(me.open(&forged).is_none());
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
        // The largest batch fits PostgreSQL's payload limit once sealed, a real id in front.
        let real = Member::new(channel_of("public"), SecretKey::random());
        let big = real.seal(&vec![b'x'; PLAIN_MAX]);
        assert!(big.len() < 8000, "{}", big.len());
    }
}
