//! Every interleaving, up to a length, of what can happen around a turn driven by its
//! poster ([`TurnEvents`]): the poster polls once, the turn is let take its next step (it
//! pushes an event and, at its last step, finishes), the stall watch ticks (the paused clock
//! moves on by [`STALL_CHECK`]), the poster leaves. Each schedule runs on a fresh runtime
//! with a paused clock, so it is exact and repeatable; afterwards the turn is let finish
//! and the poster, if still there, reads to the end. The promises checked:
//!
//! - the turn finishes exactly once, whoever drives it (poster, or the task it is handed to);
//! - the poster sees the turn's events in order, each once, then the end; or, if it was
//!   dropped for not reading, a prefix of them, one error saying so, then the end;
//! - nothing comes after the end.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use futures::Stream;
use hero_shared::wire::{SseEvent, TextData};

use super::events::{STALL_CHECK, Sink, TurnEvents, Watch};

/// How many steps the turn takes (one event each); the last finishes it.
const STEPS: usize = 2;
/// How long a schedule is: every sequence of this many actions is run.
const LENGTH: usize = 6;

#[derive(Clone, Copy, Debug)]
enum Action {
    Poll,
    Step,
    Tick,
    Leave,
}

const ACTIONS: [Action; 4] = [Action::Poll, Action::Step, Action::Tick, Action::Leave];

fn event(i: usize) -> SseEvent {
    SseEvent::Text(TextData {
        message_id: "m".into(),
        text: i.to_string(),
    })
}

/// The turn: takes a step each time `released` grows, pushing event `step`; finishes after
/// [`STEPS`] steps, counting it in `finished`.
struct Turn {
    sink: Sink,
    released: Arc<AtomicUsize>,
    waker: Arc<Mutex<Option<Waker>>>,
    finished: Arc<AtomicUsize>,
    step: usize,
}

impl Future for Turn {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.waker.lock().unwrap_or_else(|p| p.into_inner()) = Some(cx.waker().clone());
        while self.step < self.released.load(Ordering::SeqCst).min(STEPS) {
            self.sink.push(event(self.step));
            self.step += 1;
        }
        if self.step == STEPS {
            self.finished.fetch_add(1, Ordering::SeqCst);
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// What one schedule saw.
#[derive(Debug, Default)]
struct Seen {
    events: Vec<SseEvent>,
    ended: bool,
    after_end: usize,
}

impl Seen {
    fn take(&mut self, p: Poll<Option<SseEvent>>) {
        match p {
            Poll::Ready(Some(_)) if self.ended => self.after_end += 1,
            Poll::Ready(Some(ev)) => self.events.push(ev),
            Poll::Ready(None) => self.ended = true,
            Poll::Pending => {}
        }
    }
}

/// Lets spawned tasks (the watch, a handed-over turn) run until they wait.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

/// How a schedule ended for the poster.
#[derive(Debug, PartialEq, Eq, Hash)]
enum Outcome {
    ReadAll,
    Left,
    FellBehind,
}

fn run(schedule: &[Action]) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let released = Arc::new(AtomicUsize::new(0));
        let turn_waker: Arc<Mutex<Option<Waker>>> = Arc::default();
        let finished = Arc::new(AtomicUsize::new(0));
        let watch = Arc::new(Watch::default());
        let mut events = Some(TurnEvents::new());
        if let Some(ev) = events.as_mut() {
            let turn = Turn {
                sink: ev.sink(),
                released: released.clone(),
                waker: turn_waker.clone(),
                finished: finished.clone(),
                step: 0,
            };
            ev.start(Box::pin(turn), &watch);
        }
        let release = || {
            released.fetch_add(1, Ordering::SeqCst);
            if let Some(w) = turn_waker.lock().unwrap_or_else(|p| p.into_inner()).take() {
                w.wake();
            }
        };
        let mut seen = Seen::default();
        let mut cx = Context::from_waker(Waker::noop());
        for action in schedule {
            match action {
                Action::Poll => {
                    if let Some(ev) = events.as_mut() {
                        seen.take(Pin::new(ev).poll_next(&mut cx));
                    }
                }
                Action::Step => release(),
                Action::Tick => {
                    tokio::time::advance(STALL_CHECK).await;
                    settle().await;
                }
                Action::Leave => events = None,
            }
            settle().await;
        }
        // The rest of the turn, and the poster (if still there) reading to the end.
        for _ in 0..STEPS {
            release();
        }
        if let Some(mut ev) = events.take() {
            for _ in 0..64 {
                seen.take(Pin::new(&mut ev).poll_next(&mut cx));
                settle().await;
                if seen.ended {
                    break;
                }
            }
            seen.take(Pin::new(&mut ev).poll_next(&mut cx));
            assert!(seen.ended, "{schedule:?}: the poster's stream never ended: {seen:?}");
        }
        for _ in 0..64 {
            if finished.load(Ordering::SeqCst) > 0 {
                break;
            }
            tokio::time::advance(STALL_CHECK).await;
            settle().await;
        }
        assert_eq!(finished.load(Ordering::SeqCst), 1, "{schedule:?}: the turn must finish exactly once");
        assert_eq!(seen.after_end, 0, "{schedule:?}: something came after the end");
        let texts: Vec<&SseEvent> = seen.events.iter().filter(|e| matches!(e, SseEvent::Text(_))).collect();
        let errors = seen.events.len() - texts.len();
        for (i, ev) in texts.iter().enumerate() {
            assert_eq!(**ev, event(i), "{schedule:?}: events out of order or repeated: {seen:?}");
        }
        let left = schedule.iter().any(|a| matches!(a, Action::Leave));
        match errors {
            // Read to the end: every event (unless it left, when a prefix is all it read).
            0 => assert!(left || texts.len() == STEPS, "{schedule:?}: events lost: {seen:?}"),
            // Dropped for not reading: the notice comes last.
            1 => assert!(
                matches!(seen.events.last(), Some(SseEvent::Error(e)) if e.error.contains("not read for too long")),
                "{schedule:?}: {seen:?}"
            ),
            _ => panic!("{schedule:?}: more than one error: {seen:?}"),
        }
        match (errors, left) {
            (1, _) => Outcome::FellBehind,
            (_, true) => Outcome::Left,
            _ => Outcome::ReadAll,
        }
    })
}

#[test]
fn every_schedule_keeps_the_promises() {
    let mut schedule = vec![Action::Poll; LENGTH];
    let mut outcomes = std::collections::HashMap::new();
    for n in 0..ACTIONS.len().pow(LENGTH as u32) {
        let mut k = n;
        for slot in schedule.iter_mut() {
            *slot = ACTIONS[k % ACTIONS.len()];
            k /= ACTIONS.len();
        }
        *outcomes.entry(run(&schedule)).or_insert(0) += 1;
    }
    // Every way a turn can end for its poster was met, not only the easy one.
    assert_eq!(outcomes.values().sum::<usize>(), 4096);
    for o in [Outcome::ReadAll, Outcome::Left, Outcome::FellBehind] {
        assert!(
            outcomes.get(&o).is_some_and(|&n| n > 0),
            "no schedule ended {o:?}: {outcomes:?}"
        );
    }
}
