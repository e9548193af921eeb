//! The stop signal of a turn or of calls running outside one ([`Abort`]): raised by the
//! WebSocket's `abort` or the server's shutdown, looked at between every two pieces of a
//! reply, by a provider's stream, a sandboxed command and a summary alike.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;

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
    /// Raised with `set`, where the turn looks on every poll anyway ([`crate::drive::wake::Signals`]).
    flag: Option<crate::drive::wake::Flag>,
}

impl Abort {
    /// A signal that raises `flag` too, where its turn looks on every poll anyway.
    pub fn with_flag(flag: Option<crate::drive::wake::Flag>) -> Self {
        Abort(Arc::new(AbortInner {
            flag,
            ..AbortInner::default()
        }))
    }

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
    flag: Option<crate::drive::wake::Flag>,
    armed: crate::drive::wake::Armed,
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
