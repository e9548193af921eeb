//! The poster's side of a turn: a stream of its SSE events that also drives the turn.
//!
//! A reply's tokens would otherwise cross two tasks on their way out (the turn's, then the
//! response's), one wake-up each. Here the turn's future is polled by whoever reads its
//! events, so a token goes from the provider's connection to the poster's socket through
//! one task.
//!
//! The reply must never wait for its poster, though. The turn is handed to a task of its
//! own, and finishes there, when
//! - the poster goes away before the end (a client that left, a server function that only
//!   wanted the message id): other tabs are still watching; or
//! - the poster stops reading: the turn was woken (the provider sent something) and the
//!   poster has not polled it for a whole [`STALL_CHECK`]. One [`Watch`] task looks at
//!   every turn in flight once per period (one timer for all, not one per turn). The
//!   poster's stream then ends with an error event saying so, like any subscriber that
//!   falls behind.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures::Stream;
use futures::task::AtomicWaker;

use crate::drive::wake::{Flag, Signals, Silence};
use hero_shared::wire::{ErrorData, SseEvent};

pub(crate) type TurnFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How long a woken turn may wait for its poster before it is taken over.
pub const STALL_CHECK: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where a turn puts the events meant for its poster. It lives in [`Shared`], which a token
/// touches anyway: one allocation less to find in memory per token.
#[derive(Default)]
struct Outbox {
    events: Mutex<VecDeque<SseEvent>>,
    /// `events` is not empty: looked at with a load, so that a poster asking again and
    /// again while nothing came takes no lock.
    waiting: AtomicBool,
    /// Set once the poster is gone or was dropped for falling behind.
    detached: AtomicBool,
}

impl Outbox {
    fn push(&self, ev: SseEvent) {
        if !self.detached.load(Ordering::Relaxed) {
            let mut q = lock(&self.events);
            q.push_back(ev);
            // Under the lock, so that a taker clearing it has taken this event.
            self.waiting.store(true, Ordering::Release);
        }
    }

    /// The oldest event waiting, if any.
    fn pop(&self) -> Option<SseEvent> {
        if !self.waiting.load(Ordering::Acquire) {
            return None;
        }
        let mut q = lock(&self.events);
        let ev = q.pop_front();
        if q.is_empty() {
            self.waiting.store(false, Ordering::Relaxed);
        }
        ev
    }

    fn detach(&self) {
        self.detached.store(true, Ordering::Relaxed);
        lock(&self.events).clear();
    }
}

/// Where a turn's events go: a handle on the [`TurnEvents`] they are read from.
///
/// The turn holds it, and the turn is held by what it points to until the turn ends or is
/// handed over: a cycle that both of those break.
#[derive(Clone)]
pub(crate) struct Sink(Arc<Shared>);

impl Sink {
    pub(crate) fn push(&self, ev: SseEvent) {
        self.0.outbox.push(ev);
    }

    /// One of [`ABORTED`] and [`IDLE`], in the word the poster's polls look at.
    pub(crate) fn flag(&self, bit: u8) -> Flag {
        Flag::new(self.0.clone(), bit)
    }
}

/// The bits of a turn's [`Signals`] word: its abort, its provider's silence timer, and its
/// poster's keep-alive timer.
pub(crate) const ABORTED: u8 = 1;
pub(crate) const IDLE: u8 = 2;
const KEEP_ALIVE: u8 = 4;

impl Signals for Shared {
    fn signals(&self) -> &AtomicU8 {
        &self.signals
    }
}

/// What the poster, its stream and the runner share.
struct Shared {
    outbox: Outbox,
    /// The turn, until it finishes or the runner takes it.
    turn: Mutex<Option<TurnFuture>>,
    /// The poster's waker: the turn's wake-ups are passed on to it.
    poster: AtomicWaker,
    /// The turn was woken and the poster has not polled it since.
    woken: AtomicBool,
    /// How many times the poster has polled the turn.
    polls: AtomicU64,
    /// `polls` when the watch last found the turn woken, or `u64::MAX`.
    seen: AtomicU64,
    /// The poster was dropped for not reading; its stream ends with an error.
    fell_behind: AtomicBool,
    /// Raised by the turn's signals when they fire ([`Signals`]).
    signals: AtomicU8,
}

impl Shared {
    /// Takes the turn from its poster and finishes it in a task of its own; `stalled` when
    /// the poster is dropped for not reading (its stream then ends with an error). Nothing
    /// happens if the turn has already finished.
    fn hand_over(&self, runtime: &tokio::runtime::Handle, stalled: bool) {
        let turn = {
            let mut slot = lock(&self.turn);
            let Some(turn) = slot.take() else { return };
            // Under the lock: a poster cannot finish the turn in between and then be told
            // it fell behind after its `message_complete`.
            if stalled {
                self.fell_behind.store(true, Ordering::Release);
            }
            turn
        };
        self.outbox.detach();
        // A poster still parked on the turn wakes to find it gone.
        self.poster.wake();
        runtime.spawn(turn);
    }

    /// Woken, and not polled since the watch's previous look.
    fn stalled(&self) -> bool {
        if !self.woken.load(Ordering::Acquire) {
            self.seen.store(u64::MAX, Ordering::Relaxed);
            return false;
        }
        // Read after `woken`: a poster that polls in between shows up as a new count.
        let polls = self.polls.load(Ordering::Acquire);
        self.seen.swap(polls, Ordering::AcqRel) == polls
    }
}

/// Every turn in flight driven by a poster, looked at once per [`STALL_CHECK`] by one task.
#[derive(Default)]
pub struct Watch {
    turns: Mutex<Vec<Weak<Shared>>>,
    started: AtomicBool,
}

impl Watch {
    fn add(self: &Arc<Self>, shared: &Arc<Shared>) {
        lock(&self.turns).push(Arc::downgrade(shared));
        if !self.started.swap(true, Ordering::AcqRel) {
            let watch = Arc::downgrade(self);
            tokio::spawn(async move {
                let runtime = tokio::runtime::Handle::current();
                let mut tick = tokio::time::interval(STALL_CHECK);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    // Gone with the state it belongs to.
                    let Some(watch) = watch.upgrade() else { return };
                    let mut stalled: Vec<Arc<Shared>> = Vec::new();
                    lock(&watch.turns).retain(|w| {
                        let Some(s) = w.upgrade() else { return false };
                        // A turn being polled right now is not stalled; never wait for it.
                        let in_flight = match s.turn.try_lock() {
                            Ok(t) => t.is_some(),
                            Err(std::sync::TryLockError::WouldBlock) => return true,
                            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().is_some(),
                        };
                        if in_flight && s.stalled() {
                            stalled.push(s);
                        }
                        in_flight
                    });
                    for s in stalled {
                        tracing::info!(
                            "a reply's poster stopped reading; the reply goes on without it"
                        );
                        s.hand_over(&runtime, true);
                    }
                }
            });
        }
    }
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.poster.wake();
    }
}

/// The events of one turn, in order, ending after `message_complete`.
pub struct TurnEvents {
    shared: Arc<Shared>,
    /// `shared` as a waker, made once: the turn is polled with it.
    waker: Waker,
    /// The fell-behind notice was given.
    told: bool,
    /// The turn's last poll ended Pending: until it is woken, polling it again would only
    /// walk its whole chain of futures to find them all still waiting.
    parked: bool,
    runtime: tokio::runtime::Handle,
}

impl TurnEvents {
    /// Events to come through [`TurnEvents::sink`], and a turn to run once
    /// [`started`](TurnEvents::start). Must be called inside the runtime.
    pub(crate) fn new() -> Self {
        let shared = Arc::new(Shared {
            outbox: Outbox::default(),
            turn: Mutex::new(None),
            poster: AtomicWaker::new(),
            woken: AtomicBool::new(false),
            polls: AtomicU64::new(0),
            seen: AtomicU64::new(u64::MAX),
            fell_behind: AtomicBool::new(false),
            signals: AtomicU8::new(0),
        });
        let waker = Waker::from(shared.clone());
        TurnEvents {
            shared,
            waker,
            told: false,
            parked: false,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// Where the turn puts its events.
    pub(crate) fn sink(&self) -> Sink {
        Sink(self.shared.clone())
    }

    /// A keep-alive timer for whoever writes these events out: it looks at the turn's
    /// [`Signals`] word, which the writer's polls bring into the cache anyway.
    pub fn keep_alive(&self, period: Duration) -> Silence {
        Silence::flagged(period, Flag::new(self.shared.clone(), KEEP_ALIVE))
    }

    /// Hands `turn` to be driven by whoever reads these events, looked after by `watch`.
    pub(crate) fn start(&mut self, turn: TurnFuture, watch: &Arc<Watch>) {
        *lock(&self.shared.turn) = Some(turn);
        watch.add(&self.shared);
    }

    /// The next event already produced, without driving the turn: lets a writer gather
    /// what is ready into one write.
    pub fn ready(&mut self) -> Option<SseEvent> {
        self.shared.outbox.pop()
    }
}

impl Stream for TurnEvents {
    type Item = SseEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<SseEvent>> {
        let this = self.get_mut();
        // Any read counts as reading, a backlog drained from the outbox included. Only the
        // poster writes the count: a load and a store, not a locked add.
        let polls = &this.shared.polls;
        polls.store(
            polls.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Release,
        );
        loop {
            if let Some(ev) = this.ready() {
                return Poll::Ready(Some(ev));
            }
            let shared = &*this.shared;
            let mut slot = lock(&shared.turn);
            let Some(turn) = slot.as_mut() else {
                drop(slot);
                if shared.fell_behind.load(Ordering::Acquire) && !this.told {
                    this.told = true;
                    return Poll::Ready(Some(SseEvent::Error(ErrorData {
                        message_id: None,
                        error: "this stream was not read for too long and was closed; the reply goes on, \
                                and the session's event stream has it"
                            .into(),
                    })));
                }
                return Poll::Ready(None);
            };
            shared.poster.register(cx.waker());
            // Read after registering: a wake-up after this load reaches the new waker.
            if this.parked && !shared.woken.load(Ordering::Acquire) {
                return Poll::Pending;
            }
            shared.woken.store(false, Ordering::Release);
            match turn.as_mut().poll(&mut Context::from_waker(&this.waker)) {
                Poll::Ready(()) => *slot = None,
                Poll::Pending => {
                    this.parked = true;
                    drop(slot);
                    return match this.ready() {
                        Some(ev) => Poll::Ready(Some(ev)),
                        None => Poll::Pending,
                    };
                }
            }
        }
    }
}

impl Drop for TurnEvents {
    fn drop(&mut self) {
        self.shared.hand_over(&self.runtime, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use hero_shared::wire::TextData;

    fn text(t: &str) -> SseEvent {
        SseEvent::Text(TextData {
            message_id: "m".into(),
            text: t.into(),
        })
    }

    /// A turn that says "a", waits for `go`, says "b", and reports that it finished.
    fn turn(
        outbox: Sink,
        go: tokio::sync::oneshot::Receiver<()>,
        done: tokio::sync::oneshot::Sender<()>,
    ) -> TurnFuture {
        Box::pin(async move {
            outbox.push(text("a"));
            let _ = go.await;
            outbox.push(text("b"));
            let _ = done.send(());
        })
    }

    /// The events of [`turn`], its `go`, its `done`, and the watch, which looks after the
    /// turn only while it is kept.
    fn started() -> (
        TurnEvents,
        tokio::sync::oneshot::Sender<()>,
        tokio::sync::oneshot::Receiver<()>,
        Arc<Watch>,
    ) {
        let (go, go_rx) = tokio::sync::oneshot::channel();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let watch = Arc::new(Watch::default());
        let mut events = TurnEvents::new();
        events.start(turn(events.sink(), go_rx, done_tx), &watch);
        (events, go, done, watch)
    }

    #[tokio::test(start_paused = true)]
    async fn the_reader_drives_the_turn_and_sees_every_event() {
        let (mut events, go, done, _watch) = started();
        assert_eq!(events.next().await, Some(text("a")));
        go.send(()).unwrap();
        assert_eq!(events.next().await, Some(text("b")));
        assert_eq!(events.next().await, None);
        done.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_leaves_hands_the_turn_over() {
        let (mut events, go, done, _watch) = started();
        assert_eq!(events.next().await, Some(text("a")));
        drop(events);
        go.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), done)
            .await
            .expect("the turn finished")
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_stops_reading_is_dropped_and_the_turn_goes_on() {
        let (mut events, go, done, _watch) = started();
        assert_eq!(events.next().await, Some(text("a")));
        // The turn is parked on `go`; the reader polls once more, then stops reading.
        assert!(futures::poll!(events.next()).is_pending());
        go.send(()).unwrap();
        // Woken, never polled again: within two looks the runner has it, and it finishes.
        tokio::time::timeout(STALL_CHECK * 4, done)
            .await
            .expect("the turn finished without its reader")
            .unwrap();
        // The reader, back at last, is told it fell behind; "b" went to no one.
        match events.next().await {
            Some(SseEvent::Error(e)) => {
                assert!(e.error.contains("not read for too long"), "{}", e.error)
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(events.next().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_provider_is_not_mistaken_for_a_stalled_reader() {
        let (mut events, go, done, _watch) = started();
        assert_eq!(events.next().await, Some(text("a")));
        let waiting = tokio::spawn(async move {
            let b = events.next().await;
            (b, events)
        });
        // Nothing arrives for a long time: the reader is waiting, not stalled.
        tokio::time::sleep(STALL_CHECK * 3).await;
        go.send(()).unwrap();
        let (b, mut events) = waiting.await.unwrap();
        assert_eq!(b, Some(text("b")));
        assert_eq!(events.next().await, None);
        done.await.unwrap();
    }

    /// A turn that says "a", then waits until its waker (kept in `waker`) is called, then
    /// ends, counting how often it is polled.
    struct Counted {
        outbox: Sink,
        polls: Arc<AtomicU64>,
        waker: Arc<Mutex<Option<Waker>>>,
    }

    impl Future for Counted {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            match self.polls.fetch_add(1, Ordering::SeqCst) {
                0 => {
                    self.outbox.push(text("a"));
                    *lock(&self.waker) = Some(cx.waker().clone());
                    Poll::Pending
                }
                _ => Poll::Ready(()),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_is_polled_again_only_once_woken() {
        let (polls, waker) = (Arc::new(AtomicU64::new(0)), Arc::new(Mutex::new(None)));
        let watch = Arc::new(Watch::default());
        let mut events = TurnEvents::new();
        let turn = Counted {
            outbox: events.sink(),
            polls: polls.clone(),
            waker: waker.clone(),
        };
        events.start(Box::pin(turn), &watch);
        assert_eq!(events.next().await, Some(text("a")));
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        // Asked again before anything woke the turn: its chain of futures is not walked.
        for _ in 0..3 {
            assert!(futures::poll!(events.next()).is_pending());
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        // Woken, it is polled again, and finishes.
        lock(&waker).take().expect("the turn's waker").wake();
        assert_eq!(events.next().await, None);
        assert_eq!(polls.load(Ordering::SeqCst), 2);
    }

    /// A turn that says "a" and wakes itself before answering Pending (as a future out of
    /// tokio's budget does), then ends.
    struct SelfWaking(Sink, bool);

    impl Future for SelfWaking {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if std::mem::replace(&mut self.1, true) {
                return Poll::Ready(());
            }
            self.0.push(text("a"));
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_that_wakes_itself_is_polled_again() {
        let watch = Arc::new(Watch::default());
        let mut events = TurnEvents::new();
        events.start(Box::pin(SelfWaking(events.sink(), false)), &watch);
        let all = tokio::time::timeout(Duration::from_secs(5), async {
            let mut all = Vec::new();
            while let Some(ev) = events.next().await {
                all.push(ev);
            }
            all
        });
        assert_eq!(
            all.await.expect("the turn was polled again and ended"),
            vec![text("a")]
        );
    }
}
