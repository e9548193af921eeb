//! The act stage while a reply streams (reference 000: "Executes elements as they complete
//! (not waiting for full response)"): as the parser reports an executable element at the
//! top of the reply complete, its call is found ([`act::closed`]), gated and, if allowed,
//! run at once, in a task of its own, so the reply keeps streaming meanwhile. The calls of
//! one reply run one after another, in the order their elements closed (the message's lock
//! serialises them). An element inside another (thinking, an item, a result) or in code is
//! no call, as in the whole reply.
//!
//! From its first call until the turn closes it (`act::close`), the reply is marked
//! streaming: a decision or an answer that settles a call meanwhile leaves what follows to
//! the turn, which gives the agent every result of the reply at once.

use hero_shared::hml::{Element, Event};
use hero_shared::wire::{ErrorData, ExecutedElement, SseEvent};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::decisions;
use super::out::Out;
use crate::conversation::act::{self, Asked, Authority, MAX_CALLS_PER_MESSAGE, Scene};
use crate::drive::abort::Abort;

/// The calls of one reply begun while it streams.
pub(super) struct Early {
    out: Out,
    sc: Scene,
    by: Authority,
    /// Set when the rounds are spent: every call is told it was not run.
    over: Option<usize>,
    cancel: Abort,
    /// The executable element being written at the top of the reply, by id.
    top: Option<String>,
    /// The elements whose calls began, by id.
    begun: Vec<String>,
    /// The calls' queue and the task that works it, from the first call on.
    worker: Option<(
        mpsc::Sender<Asked>,
        JoinHandle<Vec<ExecutedElement>>,
        Streaming,
    )>,
    /// How far the worker is: the calls whose requests it recorded, and whether it is
    /// running one now.
    progress: Option<watch::Receiver<(usize, bool)>>,
}

/// What the calls begun while the reply streamed came to.
pub(super) struct Begun {
    pub(super) executed: Vec<ExecutedElement>,
    /// The elements whose calls began: the end of the reply does not find them again.
    pub(super) ids: Vec<String>,
    /// Held until the reply is closed (`act::close` ends the mark under the lock; this
    /// only makes sure a turn that fails on the way does not leave it behind).
    pub(super) _streaming: Option<Streaming>,
}

/// The reply's mark as streaming with calls begun, ended when dropped.
pub(super) struct Streaming {
    st: crate::AppState,
    message_id: String,
}

impl Drop for Streaming {
    fn drop(&mut self) {
        self.st.message_locks.end_streaming(&self.message_id);
        crate::conversation::cluster::disown_later(&self.st, act::streaming_mark(&self.message_id));
    }
}

impl Early {
    pub(super) fn new(
        out: &Out,
        sc: Scene,
        by: Authority,
        over: Option<usize>,
        cancel: Abort,
    ) -> Early {
        Early {
            out: out.clone(),
            sc,
            by,
            over,
            cancel,
            top: None,
            begun: Vec::new(),
            worker: None,
            progress: None,
        }
    }

    /// One event of the reply's parser: an executable element at the top of the reply
    /// that completes begins its call.
    pub(super) fn on_event(&mut self, ev: &Event<'_>) {
        match *ev {
            Event::Start {
                id,
                kind,
                parent: None,
                ..
            } if kind.is_executable() => self.top = Some(id.to_owned()),
            Event::Complete {
                id,
                kind,
                attributes,
                content,
                truncated,
                span,
            } if self.top.as_deref() == Some(id) => {
                self.top = None;
                let e = Element {
                    id: id.to_owned(),
                    kind,
                    attributes: attributes.to_vec(),
                    children: Vec::new(),
                    content: content.to_owned(),
                    truncated,
                    error: None,
                    span,
                };
                if let Some(asked) = act::closed(&self.sc.tools, &e) {
                    self.begin(id, asked);
                }
            }
            Event::Error { id, .. } if self.top.as_deref() == Some(id) => self.top = None,
            _ => {}
        }
    }

    /// Queues a call; the first one starts the worker. Past the calls a message may make,
    /// or after a Stop, the call is left to the end of the reply (which says why it did not
    /// run, or runs nothing).
    fn begin(&mut self, element_id: &str, asked: Asked) {
        if self.begun.len() >= MAX_CALLS_PER_MESSAGE || self.cancel.is_aborted() {
            return;
        }
        let progress = &mut self.progress;
        let (tx, _, _) = self.worker.get_or_insert_with(|| {
            let st = self.out.st.clone();
            st.message_locks.begin_streaming(&self.sc.message_id);
            let streaming = Streaming {
                st,
                message_id: self.sc.message_id.clone(),
            };
            let (tx, rx) = mpsc::channel(MAX_CALLS_PER_MESSAGE);
            let (said, heard) = watch::channel((0, false));
            *progress = Some(heard);
            let work = work(
                self.out.clone(),
                self.sc.clone(),
                self.by,
                self.over,
                self.cancel.clone(),
                rx,
                said,
            );
            (tx, tokio::spawn(work), streaming)
        });
        // Never full: the queue holds as many calls as a message may make.
        if tx.try_send(asked).is_ok() {
            self.begun.push(element_id.to_owned());
        }
    }

    /// Waits until the requests of the calls begun so far are recorded, so that the reply,
    /// stored next, comes after them in the log. Calls queued behind one that is running
    /// are recorded after it: the reply does not wait for a command to finish.
    pub(super) async fn requests_recorded(&mut self) {
        let Some(progress) = &mut self.progress else {
            return;
        };
        let begun = self.begun.len();
        // The worker gone (a Stop, a failure) records nothing more: nothing to wait for.
        let _ = progress
            .wait_for(|&(recorded, running)| recorded >= begun || running)
            .await;
    }

    /// Waits for the calls begun to settle as far as they can now (a call waiting for the
    /// user waits on).
    pub(super) async fn finish(self) -> Begun {
        let Some((tx, worker, streaming)) = self.worker else {
            return Begun {
                executed: Vec::new(),
                ids: self.begun,
                _streaming: None,
            };
        };
        drop(tx);
        let executed = worker.await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "the calls begun while a reply streamed failed unexpectedly");
            Vec::new()
        });
        Begun {
            executed,
            ids: self.begun,
            _streaming: Some(streaming),
        }
    }
}

/// The worker: each queued call opened, gated and settled in turn, under the message's
/// lock; its events to the poster and the readers. After a Stop, the calls still queued
/// are not opened (a reply stopped runs nothing more).
async fn work(
    out: Out,
    sc: Scene,
    by: Authority,
    over: Option<usize>,
    cancel: Abort,
    mut rx: mpsc::Receiver<Asked>,
    said: watch::Sender<(usize, bool)>,
) -> Vec<ExecutedElement> {
    let st = &out.st;
    // The other instances learn the reply streams with calls begun before the first call's
    // request is stored: none of them takes a decision on it for the message's last.
    crate::conversation::cluster::own(st, &act::streaming_mark(&sc.message_id)).await;
    let mut executed = Vec::new();
    let emit = |ev: SseEvent| out.emit(ev);
    while let Some(asked) = rx.recv().await {
        if cancel.is_aborted() {
            break;
        }
        let recorded = || said.send_modify(|(n, running)| (*n, *running) = (*n + 1, true));
        let settled = act::open_and_settle_saying(
            st,
            &sc,
            by,
            vec![asked],
            over,
            &emit,
            Some(&cancel),
            &recorded,
        )
        .await;
        said.send_modify(|(_, running)| *running = false);
        match settled {
            Ok(s) => {
                decisions::arm(st, s.timed);
                executed.extend(s.executed);
            }
            Err(e) => {
                tracing::error!(error = %e, "a call could not be run while its reply streamed");
                out.emit(SseEvent::Error(ErrorData {
                    message_id: Some(sc.message_id.clone()),
                    error: format!("a call could not be run: {}", e.public_message()),
                }));
            }
        }
    }
    executed
}
