//! Waiting cheaply, token after token: a turn polls the same few signals for every piece of
//! a reply, and each poll of a tokio timer or an `AtomicWaker` is an atomic write to memory
//! other threads touch too. These register once and are then looked at with a load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::task::AtomicWaker;
use tokio::time::Instant;

/// The waker a signal was last registered with. Registering with an `AtomicWaker` is an
/// atomic write to memory that other threads touch too; a task that waits with the same
/// waker token after token need not do it every time.
#[derive(Default)]
pub(crate) struct Armed(Option<Waker>);

impl Armed {
    /// Whether the last registration would wake `cx`'s task.
    pub(crate) fn holds(&self, cx: &Context<'_>) -> bool {
        self.0.as_ref().is_some_and(|w| w.will_wake(cx.waker()))
    }

    /// Notes that `cx`'s waker is now the registered one.
    pub(crate) fn set(&mut self, cx: &Context<'_>) {
        if !self.holds(cx) {
            self.0 = Some(cx.waker().clone());
        }
    }
}

/// A deadline a task can wait on token after token for the price of one atomic load: the
/// tokio sleep behind it wakes a flag of its own (which passes the wake-up on), so it need
/// not be polled again, nor the clock read, until it rings.
struct Alarm {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    ring: Arc<Ring>,
    /// `ring` as a waker, made once: the sleep is polled with it.
    waker: Waker,
    /// The sleep holds `waker`: it was last polled with budget left, and has not fired.
    set: bool,
    /// The task `ring` passes wake-ups on to.
    task: Armed,
}

#[derive(Default)]
struct Ring {
    rang: AtomicBool,
    task: AtomicWaker,
}

impl std::task::Wake for Ring {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.rang.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl Alarm {
    fn new(at: Instant) -> Self {
        let ring = Arc::new(Ring::default());
        let waker = Waker::from(ring.clone());
        Alarm { sleep: Box::pin(tokio::time::sleep_until(at)), ring, waker, set: false, task: Armed::default() }
    }

    /// Sets the alarm to ring at `at` instead.
    fn reset(&mut self, at: Instant) {
        self.sleep.as_mut().reset(at);
        self.set = false;
    }

    /// Ready once the deadline has passed; otherwise wakes `cx`'s task when it does.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        use std::future::Future;
        // A ring takes the task's waker: register it again after one.
        // A load first: an atomic swap on every poll would write to the flag each time.
        let rang = self.ring.rang.load(Ordering::Acquire) && self.ring.rang.swap(false, Ordering::AcqRel);
        if rang || !self.task.holds(cx) {
            self.ring.task.register(cx.waker());
            self.task.set(cx);
        }
        if self.set && !rang {
            return Poll::Pending;
        }
        // Out of budget, a tokio sleep answers Pending without registering anything (and
        // has the task polled again soon): only a poll made with budget left sets it.
        let budget = tokio::task::coop::has_budget_remaining();
        match self.sleep.as_mut().poll(&mut Context::from_waker(&self.waker)) {
            Poll::Ready(()) => {
                self.set = false;
                Poll::Ready(())
            }
            Poll::Pending => {
                self.set = budget;
                Poll::Pending
            }
        }
    }
}

/// Notices a whole period with nothing heard (a provider gone silent, an SSE stream that
/// needs a keep-alive) without a clock read or a timer per event: events only mark that
/// something was heard, and when the alarm rings after one it is set again. A silence is
/// noticed after one to two periods.
pub struct Silence {
    period: Duration,
    alarm: Alarm,
    heard: bool,
}

impl Silence {
    pub fn new(period: Duration) -> Self {
        Silence { period, alarm: Alarm::new(Instant::now() + period), heard: false }
    }

    /// Something was heard.
    pub fn heard(&mut self) {
        self.heard = true;
    }

    /// Ready once a period has passed with nothing heard; the next period starts then.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while self.alarm.poll(cx).is_ready() {
            self.alarm.reset(Instant::now() + self.period);
            if !std::mem::take(&mut self.heard) {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    }
}
