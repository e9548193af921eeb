//! The poster's side of a turn: a stream of its SSE events that also drives the turn.
//!
//! A reply's tokens would otherwise cross two tasks on their way out (the turn's, then the
//! response's), one wake-up each. Here the turn's future is polled by whoever reads its
//! events, so a token goes from the provider's connection to the poster's socket through
//! one task.
//!
//! The reply must never wait for its poster, though. A runner task stands by for each
//! turn and takes the turn over, finishing it in a task of its own, when
//! - the poster goes away before the end (a client that left, a server function that only
//!   wanted the message id): other tabs are still watching; or
//! - the poster stops reading: the turn was woken (the provider sent something) and the
//!   poster has not polled it for a whole [`STALL_CHECK`]. Its stream then ends with an
//!   error event saying so, like any subscriber that falls behind.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures::Stream;
use futures::task::AtomicWaker;
use hero_shared::wire::{ErrorData, SseEvent};

pub(crate) type TurnFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How long a woken turn may wait for its poster before the runner takes it over.
pub const STALL_CHECK: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where a turn puts the events meant for its poster.
#[derive(Default)]
pub(crate) struct Outbox {
    events: Mutex<VecDeque<SseEvent>>,
    /// Set once the poster is gone or was dropped for falling behind.
    detached: AtomicBool,
}

impl Outbox {
    pub(crate) fn push(&self, ev: SseEvent) {
        if !self.detached.load(Ordering::Relaxed) {
            lock(&self.events).push_back(ev);
        }
    }

    fn pop(&self) -> Option<SseEvent> {
        lock(&self.events).pop_front()
    }

    fn detach(&self) {
        self.detached.store(true, Ordering::Relaxed);
        lock(&self.events).clear();
    }
}

/// What the poster, its stream and the runner share.
struct Shared {
    outbox: Arc<Outbox>,
    /// The turn, until it finishes or the runner takes it.
    turn: Mutex<Option<TurnFuture>>,
    /// The poster's waker: the turn's wake-ups are passed on to it.
    poster: AtomicWaker,
    /// The turn was woken and the poster has not polled it since.
    woken: AtomicBool,
    /// How many times the poster has polled the turn.
    polls: AtomicU64,
    /// The poster has gone.
    gone: AtomicBool,
    /// The runner was told to take over (the poster has gone).
    handoff: tokio::sync::Notify,
    /// The poster was dropped for not reading; its stream ends with an error.
    fell_behind: AtomicBool,
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
}

impl TurnEvents {
    /// Events already in `outbox`, and `turn` (if any) still to run. Must be called inside
    /// the runtime: the runner task starts here.
    pub(crate) fn new(outbox: Arc<Outbox>, turn: Option<TurnFuture>) -> Self {
        let has_turn = turn.is_some();
        let shared = Arc::new(Shared {
            outbox,
            turn: Mutex::new(turn),
            poster: AtomicWaker::new(),
            woken: AtomicBool::new(false),
            polls: AtomicU64::new(0),
            gone: AtomicBool::new(false),
            handoff: tokio::sync::Notify::new(),
            fell_behind: AtomicBool::new(false),
        });
        if has_turn {
            tokio::spawn(runner(shared.clone()));
        }
        let waker = Waker::from(shared.clone());
        TurnEvents { shared, waker, told: false }
    }

    /// The next event already produced, without driving the turn: lets a writer gather
    /// what is ready into one write.
    pub fn ready(&mut self) -> Option<SseEvent> {
        self.shared.outbox.pop()
    }
}

/// Stands by while the poster drives the turn; takes it over when the poster leaves or
/// stops reading; ends when the turn does.
async fn runner(shared: Arc<Shared>) {
    let mut last: Option<u64> = None;
    loop {
        tokio::select! {
            _ = shared.handoff.notified() => {}
            _ = tokio::time::sleep(STALL_CHECK) => {}
        }
        let polls = shared.polls.load(Ordering::Acquire);
        let gone = shared.gone.load(Ordering::Acquire);
        // Woken, and not polled since the previous look a whole period ago.
        let stalled = shared.woken.load(Ordering::Acquire) && last == Some(polls);
        last = shared.woken.load(Ordering::Acquire).then_some(polls);
        if !gone && !stalled {
            if lock(&shared.turn).is_none() {
                return;
            }
            continue;
        }
        let Some(turn) = lock(&shared.turn).take() else { return };
        if stalled && !gone {
            tracing::info!("a reply's poster stopped reading; the reply goes on without it");
            shared.fell_behind.store(true, Ordering::Release);
        }
        shared.outbox.detach();
        // Wakes a poster still parked on the turn, so that it sees the turn is gone.
        shared.poster.wake();
        turn.await;
        return;
    }
}

impl Stream for TurnEvents {
    type Item = SseEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<SseEvent>> {
        let this = self.get_mut();
        let shared = &*this.shared;
        loop {
            if let Some(ev) = shared.outbox.pop() {
                return Poll::Ready(Some(ev));
            }
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
            shared.woken.store(false, Ordering::Release);
            shared.polls.fetch_add(1, Ordering::AcqRel);
            match turn.as_mut().poll(&mut Context::from_waker(&this.waker)) {
                Poll::Ready(()) => *slot = None,
                Poll::Pending => {
                    drop(slot);
                    return match shared.outbox.pop() {
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
        self.shared.gone.store(true, Ordering::Release);
        self.shared.handoff.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use hero_shared::wire::TextData;

    fn text(t: &str) -> SseEvent {
        SseEvent::Text(TextData { message_id: "m".into(), text: t.into() })
    }

    /// A turn that says "a", waits for `go`, says "b", and reports that it finished.
    fn turn(outbox: Arc<Outbox>, go: tokio::sync::oneshot::Receiver<()>, done: tokio::sync::oneshot::Sender<()>) -> TurnFuture {
        Box::pin(async move {
            outbox.push(text("a"));
            let _ = go.await;
            outbox.push(text("b"));
            let _ = done.send(());
        })
    }

    #[tokio::test]
    async fn the_reader_drives_the_turn_and_sees_every_event() {
        let outbox = Arc::new(Outbox::default());
        let (go, go_rx) = tokio::sync::oneshot::channel();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let mut events = TurnEvents::new(outbox.clone(), Some(turn(outbox, go_rx, done_tx)));
        assert_eq!(events.next().await, Some(text("a")));
        go.send(()).unwrap();
        assert_eq!(events.next().await, Some(text("b")));
        assert_eq!(events.next().await, None);
        done.await.unwrap();
    }

    #[tokio::test]
    async fn a_reader_that_leaves_hands_the_turn_over() {
        let outbox = Arc::new(Outbox::default());
        let (go, go_rx) = tokio::sync::oneshot::channel();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let mut events = TurnEvents::new(outbox.clone(), Some(turn(outbox, go_rx, done_tx)));
        assert_eq!(events.next().await, Some(text("a")));
        drop(events);
        go.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), done).await.expect("the turn finished").unwrap();
    }

    #[tokio::test]
    async fn a_reader_that_stops_reading_is_dropped_and_the_turn_goes_on() {
        let outbox = Arc::new(Outbox::default());
        let (go, go_rx) = tokio::sync::oneshot::channel();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let mut events = TurnEvents::new(outbox.clone(), Some(turn(outbox, go_rx, done_tx)));
        assert_eq!(events.next().await, Some(text("a")));
        // The turn is parked on `go`; the reader polls once more, then stops reading.
        assert!(futures::poll!(events.next()).is_pending());
        go.send(()).unwrap();
        // Woken, never polled again: within two looks the runner has it, and it finishes.
        tokio::time::timeout(STALL_CHECK * 4, done).await.expect("the turn finished without its reader").unwrap();
        // The reader, back at last, is told it fell behind; "b" went to no one.
        match events.next().await {
            Some(SseEvent::Error(e)) => assert!(e.error.contains("not read for too long"), "{}", e.error),
            other => panic!("{other:?}"),
        }
        assert_eq!(events.next().await, None);
    }

    #[tokio::test]
    async fn a_quiet_provider_is_not_mistaken_for_a_stalled_reader() {
        let outbox = Arc::new(Outbox::default());
        let (go, go_rx) = tokio::sync::oneshot::channel();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let mut events = TurnEvents::new(outbox.clone(), Some(turn(outbox, go_rx, done_tx)));
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
}
