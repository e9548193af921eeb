//! Waiting cheaply, token after token: a turn polls the same few signals for every piece of
//! a reply, and each poll of a tokio timer or an `AtomicWaker` is an atomic write to memory
//! other threads touch too. These register once and are then looked at with a load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
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

/// A word of bits kept in memory a task touches on every poll anyway (a turn's shared
/// state), which its rarely firing signals (its timers, its abort) set when they fire. A
/// poll then learns whether any fired with one load from memory it already has, instead of
/// one load per signal from memory of their own, cold again by the next token.
pub trait Signals: Send + Sync + 'static {
    fn signals(&self) -> &AtomicU8;
}

/// One bit of a [`Signals`] word.
#[derive(Clone)]
pub struct Flag {
    word: Arc<dyn Signals>,
    bit: u8,
}

impl Flag {
    pub fn new(word: Arc<dyn Signals>, bit: u8) -> Self {
        Flag { word, bit }
    }

    /// Set before the wake-up that goes with it.
    pub(crate) fn raise(&self) {
        self.word.signals().fetch_or(self.bit, Ordering::AcqRel);
    }

    pub(crate) fn is_up(&self) -> bool {
        self.word.signals().load(Ordering::Acquire) & self.bit != 0
    }

    fn lower(&self) {
        self.word.signals().fetch_and(!self.bit, Ordering::AcqRel);
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
    /// Raised by `ring` too: while it is down, the alarm has not rung.
    flag: Option<Flag>,
}

#[derive(Default)]
struct Ring {
    rang: AtomicBool,
    task: AtomicWaker,
    flag: Option<Flag>,
}

impl std::task::Wake for Ring {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.rang.store(true, Ordering::Release);
        if let Some(f) = &self.flag {
            f.raise();
        }
        self.task.wake();
    }
}

impl Alarm {
    fn new(at: Instant, flag: Option<Flag>) -> Self {
        let ring = Arc::new(Ring {
            flag: flag.clone(),
            ..Ring::default()
        });
        let waker = Waker::from(ring.clone());
        Alarm {
            sleep: Box::pin(tokio::time::sleep_until(at)),
            ring,
            waker,
            set: false,
            task: Armed::default(),
            flag,
        }
    }

    /// Sets the alarm to ring at `at` instead.
    fn reset(&mut self, at: Instant) {
        self.sleep.as_mut().reset(at);
        self.set = false;
    }

    /// Ready once the deadline has passed; otherwise wakes `cx`'s task when it does.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        use std::future::Future;
        if let Some(f) = &self.flag
            && self.set
            && self.task.holds(cx)
        {
            if !f.is_up() {
                return Poll::Pending;
            }
            // Down again before the ring is looked at: a ring after this raises it anew.
            f.lower();
        }
        // A ring takes the task's waker: register it again after one.
        // A load first: an atomic swap on every poll would write to the flag each time.
        let rang =
            self.ring.rang.load(Ordering::Acquire) && self.ring.rang.swap(false, Ordering::AcqRel);
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
        match self
            .sleep
            .as_mut()
            .poll(&mut Context::from_waker(&self.waker))
        {
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
        Silence {
            period,
            alarm: Alarm::new(Instant::now() + period, None),
            heard: false,
        }
    }

    /// One whose ringing also raises `flag`, and which looks at nothing else while it is down.
    pub fn flagged(period: Duration, flag: Flag) -> Self {
        Silence {
            period,
            alarm: Alarm::new(Instant::now() + period, Some(flag)),
            heard: false,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Word(AtomicU8);

    impl Signals for Word {
        fn signals(&self) -> &AtomicU8 {
            &self.0
        }
    }

    /// Two silences flag one word: each still rings after its own quiet period, and the one
    /// that keeps hearing something never does, though the other's rings wake the task.
    #[tokio::test(start_paused = true)]
    async fn silences_that_share_a_word_ring_apart() {
        const PERIOD: Duration = Duration::from_millis(100);
        let word: Arc<dyn Signals> = Arc::new(Word::default());
        let mut quiet = Silence::flagged(PERIOD, Flag::new(word.clone(), 1));
        let mut busy = Silence::flagged(PERIOD / 3, Flag::new(word.clone(), 2));
        let t = Instant::now();
        let rang = std::future::poll_fn(|cx| {
            busy.heard();
            assert!(
                busy.poll(cx).is_pending(),
                "a silence that keeps hearing does not ring"
            );
            quiet.poll(cx)
        });
        tokio::time::timeout(Duration::from_secs(5), rang)
            .await
            .expect("the quiet one rang");
        let took = t.elapsed();
        assert!(took >= PERIOD && took < PERIOD * 5, "{took:?}");
    }
}
