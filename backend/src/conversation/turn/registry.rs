//! The turns in flight ([`Registry`]): each one's stop signal ([`Abort`], raised by the
//! WebSocket's `abort` or the server's shutdown), how far its reply has come
//! ([`InFlight`]), and the watch over turns whose posters stopped reading ([`Watch`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::Watch;
use crate::conversation::in_flight::InFlight;
use crate::drive::abort::{Abort, AbortReason};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Calls running outside a turn, by session: each with the id its guard removes it by.
type ActingMap = Arc<Mutex<HashMap<i64, Vec<(u64, Abort)>>>>;

/// Every turn in flight, by session and message id.
#[derive(Default)]
pub struct Registry {
    turns: Mutex<HashMap<i64, HashMap<String, Turn>>>,
    /// Calls running outside a turn (after a decision), by session: Stop ends them too.
    acting: ActingMap,
    next_act: std::sync::atomic::AtomicU64,
    /// Turns driven by their posters, watched for posters that stop reading.
    pub(crate) watch: Arc<Watch>,
    /// Set by [`Registry::stop_all`] for shutdown: a turn that begins afterwards stops at once.
    closing: AtomicBool,
    /// Mirrors of replies in flight on other instances, by session: each with the id of the
    /// instance it runs on ([`crate::conversation::cluster`]).
    remote: Mutex<HashMap<i64, Vec<Mirror>>>,
    /// The queue of each session in batch mode: its messages are answered one at a time,
    /// in the order they are stored ([`Registry::batch_queue`]).
    batch: Mutex<HashMap<i64, BatchQueue>>,
    /// Raised whenever a session may have become idle (a turn, calls outside one or a
    /// mirror ended): what [`Registry::idle`] waits on.
    ended: Arc<tokio::sync::Notify>,
    /// Messages agents queued that wait to be sent ([`Registry::waiting`]): Stop in the
    /// session they go to, or come from, ends them.
    waiting: WaitingMap,
    next_waiting: std::sync::atomic::AtomicU64,
    /// One sender at a time into each session ([`Registry::sender`]).
    senders: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>,
}

/// Queued messages waiting, by id: (the session they go to, the one they come from, their
/// stop signal).
type WaitingMap = Arc<Mutex<HashMap<u64, (i64, i64, Abort)>>>;

/// A queued message waiting to be sent ([`Registry::waiting`]); forgotten when dropped.
pub struct Waiting {
    map: WaitingMap,
    id: u64,
    abort: Abort,
}

impl Waiting {
    pub fn abort(&self) -> &Abort {
        &self.abort
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        lock(&self.map).remove(&self.id);
    }
}

/// A session's batch queue: held by the turn answering its message, waited for (in order:
/// tokio's mutex is fair) by the messages posted meanwhile.
pub type BatchQueue = Arc<tokio::sync::Mutex<()>>;

/// A reply in flight on another instance: that instance's id, and the reply so far.
type Mirror = (String, Arc<InFlight>);

/// A turn in flight: its stop signal and how far it has come.
struct Turn {
    abort: Abort,
    live: Arc<InFlight>,
}

/// Calls running for a session outside a turn ([`Registry::acting`]).
pub struct Acting {
    map: ActingMap,
    ended: Arc<tokio::sync::Notify>,
    session_id: i64,
    id: u64,
    abort: Abort,
}

impl Acting {
    pub fn abort(&self) -> &Abort {
        &self.abort
    }
}

impl Drop for Acting {
    fn drop(&mut self) {
        let mut m = lock(&self.map);
        if let Some(v) = m.get_mut(&self.session_id) {
            v.retain(|(id, _)| *id != self.id);
            if v.is_empty() {
                m.remove(&self.session_id);
            }
        }
        drop(m);
        self.ended.notify_waiters();
    }
}

impl Registry {
    /// The batch queue of `session_id`. Queues no turn holds or waits for are forgotten
    /// here: the map holds the sessions in batch use, no more.
    pub fn batch_queue(&self, session_id: i64) -> BatchQueue {
        let mut queues = lock(&self.batch);
        queues.retain(|_, q| Arc::strong_count(q) > 1);
        queues.entry(session_id).or_default().clone()
    }

    /// Registers a turn in flight; its signal is set by [`Registry::abort`], and raises `flag` too.
    pub fn begin(&self, live: Arc<InFlight>, flag: Option<crate::drive::wake::Flag>) -> Abort {
        let signal = Abort::with_flag(flag);
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
        if self.closing.load(Ordering::Acquire) {
            signal.abort_for(AbortReason::Shutdown);
        }
        signal
    }

    pub fn end(&self, session_id: i64, message_id: &str) {
        let mut turns = lock(&self.turns);
        if let Some(m) = turns.get_mut(&session_id) {
            m.remove(message_id);
            if m.is_empty() {
                turns.remove(&session_id);
            }
        }
        drop(turns);
        self.ended.notify_waiters();
    }

    /// Whether nothing runs for the session: no reply in flight (here or on another
    /// instance) and no calls outside one (a decision's, with the follow-up it starts).
    /// Calls outside a turn are looked at first: a decision registers its follow-up before
    /// it lets its calls go, so work moving from one to the other is seen in one of them.
    pub fn is_idle(&self, session_id: i64) -> bool {
        !lock(&self.acting).contains_key(&session_id)
            && !lock(&self.turns).contains_key(&session_id)
            && !lock(&self.remote).contains_key(&session_id)
    }

    /// Registers a queued message waiting to go from session `from` to session `to`: a Stop
    /// in either reaches it through the guard's [`Abort`] until it is dropped.
    pub fn waiting(&self, to: i64, from: i64) -> Waiting {
        let abort = Abort::default();
        let id = self.next_waiting.fetch_add(1, Ordering::Relaxed);
        lock(&self.waiting).insert(id, (to, from, abort.clone()));
        Waiting {
            map: self.waiting.clone(),
            id,
            abort,
        }
    }

    /// The lock a queued message's sender holds from waiting for the session to be idle
    /// until its reply is registered, so that two queued messages never start at once.
    /// Locks nobody holds or waits for are forgotten here.
    pub fn sender(&self, session_id: i64) -> Arc<tokio::sync::Mutex<()>> {
        let mut senders = lock(&self.senders);
        senders.retain(|_, l| Arc::strong_count(l) > 1);
        senders.entry(session_id).or_default().clone()
    }

    /// Resolves once nothing runs for the session ([`Registry::is_idle`]).
    pub async fn idle(&self, session_id: i64) {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            // Registered before the look: an end between the two still wakes it.
            ended.as_mut().enable();
            if self.is_idle(session_id) {
                return;
            }
            ended.await;
        }
    }

    /// Stops every turn in flight on the session, the calls running for it, and the queued
    /// messages waiting to go to it or from it; returns how many.
    pub fn abort(&self, session_id: i64) -> usize {
        let waiting = lock(&self.waiting)
            .values()
            .filter(|(to, from, _)| *to == session_id || *from == session_id)
            .inspect(|(_, _, a)| a.abort())
            .count();
        let acts = lock(&self.acting).get(&session_id).map_or(0, |v| {
            v.iter().for_each(|(_, a)| a.abort());
            v.len()
        });
        waiting
            + acts
            + lock(&self.turns).get(&session_id).map_or(0, |m| {
                m.values().for_each(|t| t.abort.abort());
                m.len()
            })
    }

    /// Registers calls running for the session outside a turn; Stop (and shutdown) reach
    /// them through the guard's [`Abort`] until it is dropped.
    pub fn acting(&self, session_id: i64) -> Acting {
        let abort = Abort::default();
        if self.closing.load(Ordering::Acquire) {
            abort.abort_for(AbortReason::Shutdown);
        }
        let id = self.next_act.fetch_add(1, Ordering::Relaxed);
        lock(&self.acting)
            .entry(session_id)
            .or_default()
            .push((id, abort.clone()));
        Acting {
            map: self.acting.clone(),
            ended: self.ended.clone(),
            session_id,
            id,
            abort,
        }
    }

    /// The session's replies in flight, here and on other instances.
    pub fn in_flight(&self, session_id: i64) -> Vec<Arc<InFlight>> {
        let mut all: Vec<_> = lock(&self.turns)
            .get(&session_id)
            .map_or_else(Vec::new, |m| m.values().map(|t| t.live.clone()).collect());
        if let Some(v) = lock(&self.remote).get(&session_id) {
            all.extend(v.iter().map(|(_, live)| live.clone()));
        }
        all
    }

    /// A reply in flight on instance `owner` began: its mirror here is what a reader who
    /// joins mid-reply is sent.
    pub fn add_remote(&self, owner: &str, live: Arc<InFlight>) {
        lock(&self.remote)
            .entry(live.session_id)
            .or_default()
            .push((owner.to_owned(), live));
    }

    /// The mirror of reply `message_id` on another instance, if it is in flight.
    pub fn remote(&self, session_id: i64, message_id: &str) -> Option<Arc<InFlight>> {
        lock(&self.remote)
            .get(&session_id)?
            .iter()
            .find(|(_, live)| live.message_id == message_id)
            .map(|(_, live)| live.clone())
    }

    /// The reply `message_id` on another instance has ended (or been stored).
    pub fn forget_remote(&self, session_id: i64, message_id: &str) {
        let mut remote = lock(&self.remote);
        if let Some(v) = remote.get_mut(&session_id) {
            v.retain(|(_, live)| live.message_id != message_id);
            if v.is_empty() {
                remote.remove(&session_id);
            }
        }
        drop(remote);
        self.ended.notify_waiters();
    }

    /// Keeps only the mirrors of replies on the instances `alive`.
    pub fn keep_remote_of(&self, alive: &[String]) {
        let mut remote = lock(&self.remote);
        remote.retain(|_, v| {
            v.retain(|(owner, _)| alive.contains(owner));
            !v.is_empty()
        });
        drop(remote);
        self.ended.notify_waiters();
    }

    /// Lets go of every mirror (the events that would end them may have been lost).
    pub fn forget_all_remote(&self) {
        lock(&self.remote).clear();
        self.ended.notify_waiters();
    }

    pub fn count(&self, session_id: i64) -> usize {
        lock(&self.turns).get(&session_id).map_or(0, HashMap::len)
    }

    /// Every turn in flight, on every session.
    /// Turns in flight and calls running outside them (what shutdown waits for).
    pub fn count_all(&self) -> usize {
        lock(&self.turns).values().map(HashMap::len).sum::<usize>()
            + lock(&self.acting).values().map(Vec::len).sum::<usize>()
    }

    /// Stops every turn in flight, and every turn that begins from now on, for shutdown:
    /// each stores what it has (marked aborted by shutdown) and completes.
    pub fn stop_all(&self) {
        self.closing.store(true, Ordering::Release);
        for turns in lock(&self.turns).values() {
            turns
                .values()
                .for_each(|t| t.abort.abort_for(AbortReason::Shutdown));
        }
        for acts in lock(&self.acting).values() {
            acts.iter()
                .for_each(|(_, a)| a.abort_for(AbortReason::Shutdown));
        }
        for (_, _, a) in lock(&self.waiting).values() {
            a.abort_for(AbortReason::Shutdown);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drive::abort::AbortWatch;

    fn turn(session: i64, id: &str) -> Arc<InFlight> {
        Arc::new(InFlight::new(id, session, 9, "agent", 0))
    }

    #[test]
    fn abort_stops_the_sessions_turns_only() {
        let reg = Registry::default();
        let t = reg.begin(turn(1, "a"), None);
        assert_eq!((reg.count(1), reg.abort(2)), (1, 0));
        assert_eq!(reg.abort(1), 1);
        assert!(t.is_aborted());
        assert_eq!(t.reason(), Some(AbortReason::User));
        assert_eq!(reg.in_flight(1).len(), 1);
        reg.end(1, "a");
        assert_eq!((reg.count(1), reg.count_all()), (0, 0));
    }

    #[test]
    fn mirrors_of_replies_elsewhere_join_the_sessions_replies_until_they_end() {
        let reg = Registry::default();
        let here = Arc::new(InFlight::new("a", 1, 1, "A", 0));
        let _abort = reg.begin(here, None);
        reg.add_remote("b", Arc::new(InFlight::new("m", 1, 1, "A", 0)));
        reg.add_remote("c", Arc::new(InFlight::new("n", 1, 1, "A", 0)));
        reg.add_remote("b", Arc::new(InFlight::new("o", 2, 1, "A", 0)));
        assert_eq!(reg.in_flight(1).len(), 3);
        reg.remote(1, "m").unwrap().push_at(0, "hi");
        // A chunk that does not follow what the mirror holds is not added.
        reg.remote(1, "m").unwrap().push_at(5, "lost");
        assert_eq!(reg.remote(1, "m").unwrap().text(), "hi");
        reg.forget_remote(1, "m");
        assert!(reg.remote(1, "m").is_none());
        // Instance c stopped beating: its replies are let go; b's stay.
        reg.keep_remote_of(&["b".to_owned()]);
        assert_eq!(reg.in_flight(1).len(), 1);
        assert!(reg.remote(2, "o").is_some());
        reg.forget_all_remote();
        assert!(reg.remote(2, "o").is_none());
        // Only this instance's own turns count as its own.
        assert_eq!(reg.count(1), 1);
    }

    #[tokio::test]
    async fn idle_waits_for_the_sessions_turns_calls_and_mirrors() {
        let reg = Registry::default();
        let _t = reg.begin(turn(1, "a"), None);
        let acting = reg.acting(1);
        reg.add_remote("b", Arc::new(InFlight::new("m", 1, 1, "A", 0)));
        assert!(reg.is_idle(2), "another session is idle");
        let idle = reg.idle(1);
        tokio::pin!(idle);
        assert!(futures::poll!(idle.as_mut()).is_pending());
        reg.end(1, "a");
        assert!(
            futures::poll!(idle.as_mut()).is_pending(),
            "calls still run"
        );
        drop(acting);
        assert!(
            futures::poll!(idle.as_mut()).is_pending(),
            "a reply runs elsewhere"
        );
        reg.forget_remote(1, "m");
        assert!(futures::poll!(idle.as_mut()).is_ready());
    }

    #[test]
    fn stop_reaches_queued_messages_going_to_or_from_the_session() {
        let reg = Registry::default();
        let to_two = reg.waiting(2, 1);
        let to_three = reg.waiting(3, 4);
        assert_eq!(reg.abort(1), 1, "from session 1");
        assert!(to_two.abort().is_aborted() && !to_three.abort().is_aborted());
        drop(to_two);
        assert_eq!(reg.abort(1), 0, "a dropped one is forgotten");
        assert_eq!(reg.abort(3), 1);
    }

    #[test]
    fn stop_all_stops_every_turn_for_shutdown_and_later_ones_too() {
        let reg = Registry::default();
        let user_stop = reg.begin(turn(1, "m1"), None);
        let running = reg.begin(turn(2, "m2"), None);
        user_stop.abort();
        reg.stop_all();
        // The first reason given is the one a turn keeps.
        assert_eq!(user_stop.reason(), Some(AbortReason::User));
        assert_eq!(running.reason(), Some(AbortReason::Shutdown));
        assert_eq!(reg.count_all(), 2);
        let late = reg.begin(turn(3, "m3"), None);
        assert_eq!(late.reason(), Some(AbortReason::Shutdown));
    }

    /// A turn looks at its abort through a bit of a word it reads anyway; the abort raises it.
    #[test]
    fn an_abort_raises_its_flag() {
        #[derive(Default)]
        struct Word(std::sync::atomic::AtomicU8);
        impl crate::drive::wake::Signals for Word {
            fn signals(&self) -> &std::sync::atomic::AtomicU8 {
                &self.0
            }
        }
        let reg = Registry::default();
        let word = Arc::new(Word::default());
        let watch = AbortWatch::new(reg.begin(
            turn(1, "a"),
            Some(crate::drive::wake::Flag::new(word.clone(), 4)),
        ));
        assert!(!watch.is_aborted());
        assert_eq!(reg.abort(1), 1);
        assert_eq!(word.0.load(Ordering::SeqCst), 4);
        assert!(watch.is_aborted());
    }
}
