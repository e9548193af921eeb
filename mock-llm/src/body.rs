//! Response bodies as a stream of `Bytes` the mock controls frame by frame, so chunk
//! boundaries, pauses and the way a stream ends are exactly what was asked for.
//!
//! A body ends in one of four ways: complete (terminating events), cut (the stream yields an
//! error, and hyper drops the connection without the final chunk), stall (nothing more until
//! the client leaves or the server shuts down) or a mid-stream error event. Every pause also
//! watches the server's closing signal, so shutdown never waits on a slow or stalled stream
//! (a pause of [`SHORT_PAUSE`] or less looks at it when it ends instead).

use std::{
    collections::VecDeque,
    io,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::body::Bytes;
use futures_util::Stream;
use tokio::{sync::watch, time::Instant};

use crate::{
    anthropic, openai,
    reply::{Cursor, Event, Reply},
};

/// Counts response bodies, so a test can see that a client went away (Hero's abort drops
/// the provider request) and a benchmark can see how many streams are open.
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    pub started: AtomicU64,
    pub open: AtomicU64,
    /// Bodies dropped before the server finished them: the client closed the connection.
    pub client_gone: AtomicU64,
    /// Connections accepted: a client that reuses its connections makes few.
    pub connections: AtomicU64,
}

/// One body's place in the gauge; dropped with the body.
pub(crate) struct Tracked {
    gauge: Arc<Gauge>,
    finished: bool,
}

impl Tracked {
    pub fn new(gauge: Arc<Gauge>) -> Self {
        gauge.started.fetch_add(1, Ordering::Relaxed);
        gauge.open.fetch_add(1, Ordering::Relaxed);
        Self {
            gauge,
            finished: false,
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.gauge.open.fetch_sub(1, Ordering::Relaxed);
        if !self.finished {
            self.gauge.client_gone.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What ties a body to the server: the closing signal and its place in the gauge.
pub(crate) struct Life {
    pub closing: watch::Receiver<bool>,
    pub tracked: Tracked,
}

/// How the body ends once its content (or its content budget) is spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    Complete,
    Cut,
    Stall,
    MidstreamError,
}

/// The wire format of one stream, with what every frame repeats.
pub(crate) enum Encoder {
    Anthropic {
        id: String,
    },
    OpenAi {
        id: String,
        created: u64,
        include_usage: bool,
    },
}

impl Encoder {
    fn head(&self, reply: &Reply, out: &mut Vec<Bytes>) {
        match self {
            Encoder::Anthropic { id } => anthropic::head(id, reply, out),
            Encoder::OpenAi { .. } => self.chunker(reply, |c| c.head(out)),
        }
    }

    fn event(&self, ev: Event<'_>, reply: &Reply, out: &mut Vec<Bytes>) {
        match self {
            Encoder::Anthropic { .. } => anthropic::event(ev, reply, out),
            Encoder::OpenAi { .. } => self.chunker(reply, |c| c.event(ev, reply, out)),
        }
    }

    fn tail(&self, reply: &Reply, out: &mut Vec<Bytes>) {
        match self {
            Encoder::Anthropic { .. } => anthropic::tail(reply, out),
            Encoder::OpenAi { .. } => self.chunker(reply, |c| c.tail(reply, out)),
        }
    }

    fn midstream_error(&self, out: &mut Vec<Bytes>) {
        match self {
            Encoder::Anthropic { .. } => anthropic::midstream_error(out),
            Encoder::OpenAi { .. } => openai::midstream_error(out),
        }
    }

    fn chunker(&self, reply: &Reply, f: impl FnOnce(&openai::Chunker<'_>)) {
        if let Encoder::OpenAi {
            id,
            created,
            include_usage,
        } = self
        {
            f(&openai::Chunker {
                id,
                created: *created,
                model: &reply.model,
                include_usage: *include_usage,
            });
        }
    }
}

/// A pause this short is not raced against the closing signal but looks at it when it ends:
/// registering with the signal is a lock every stream of the server shares, and at one pause
/// per delta that was much of what a paced stream cost.
const SHORT_PAUSE: Duration = Duration::from_millis(50);

/// Paces deltas: the first goes after `first` (at once, unless staggered), each next one
/// `delay` after the previous one was due. A stream that fell behind (a slow reader)
/// resumes at the pace instead of bursting.
struct Pacer {
    delay: Duration,
    first: Duration,
    next: Option<Instant>,
    /// One timer for the stream's pauses, set again for each.
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl Pacer {
    fn new(delay: Duration, first: Duration) -> Self {
        Pacer {
            delay,
            first,
            next: None,
            sleep: None,
        }
    }

    /// Waits for the next delta's turn; false when the server is closing.
    async fn wait(&mut self, closing: &mut watch::Receiver<bool>) -> bool {
        if self.delay.is_zero() {
            return true;
        }
        let at = match self.next {
            Some(at) => at,
            None if self.first.is_zero() => {
                self.next = Some(Instant::now() + self.delay);
                return true;
            }
            None => Instant::now() + self.first,
        };
        let short = at.saturating_duration_since(Instant::now()) <= SHORT_PAUSE;
        let sleep = match &mut self.sleep {
            Some(s) => {
                s.as_mut().reset(at);
                s
            }
            None => self.sleep.insert(Box::pin(tokio::time::sleep_until(at))),
        };
        if short {
            sleep.await;
            // Unchanged: go on. Changed, or its sender gone (which may have closed first, as
            // dropping the server does): the value says.
            if !matches!(closing.has_changed(), Ok(false)) && *closing.borrow() {
                return false;
            }
        } else {
            tokio::select! {
                _ = sleep => {}
                _ = closed(closing) => return false,
            }
        }
        self.next = Some((at + self.delay).max(Instant::now()));
        true
    }
}

async fn closed(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|c| *c).await.is_err() {
        // The server handle is gone without closing: nothing will ever close this stream.
        std::future::pending::<()>().await;
    }
}

fn cut() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "mock-llm: connection cut on purpose",
    )
}

struct Live {
    reply: Reply,
    cursor: Cursor,
    encoder: Encoder,
}

struct State {
    queue: VecDeque<Bytes>,
    scratch: Vec<Bytes>,
    live: Option<Live>,
    ending: Ending,
    pacer: Pacer,
    life: Life,
    done: bool,
}

impl State {
    /// The server ends the body here (whole, cut, stalled out or shut down): not a client
    /// going away.
    fn finish(&mut self) {
        self.done = true;
        self.life.tracked.finished = true;
    }
}

/// How a streamed body is paced: `chunk` bytes of content per event, `delay` between
/// events, the first after `first`.
pub(crate) struct Pace {
    pub chunk: usize,
    pub delay: Duration,
    pub first: Duration,
}

/// An SSE body playing `reply`; with an ending other than `Complete`, the content stops
/// after `after_bytes` bytes of deltas.
pub(crate) fn events(
    reply: Reply,
    encoder: Encoder,
    Pace {
        chunk,
        delay,
        first,
    }: Pace,
    ending: Ending,
    after_bytes: usize,
    life: Life,
) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    let mut scratch = Vec::new();
    encoder.head(&reply, &mut scratch);
    let budget = (ending != Ending::Complete).then_some(after_bytes);
    let live = Live {
        reply,
        cursor: Cursor::new(chunk, budget),
        encoder,
    };
    play(State {
        queue: scratch.drain(..).collect(),
        scratch,
        live: Some(live),
        ending,
        pacer: Pacer::new(delay, first),
        life,
        done: false,
    })
}

/// A body of fixed bytes (a non-streaming answer), ending as asked after `prefix`.
pub(crate) fn fixed(
    prefix: Bytes,
    ending: Ending,
    life: Life,
) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    play(State {
        queue: VecDeque::from([prefix]),
        scratch: Vec::new(),
        live: None,
        ending,
        pacer: Pacer::new(Duration::ZERO, Duration::ZERO),
        life,
        done: false,
    })
}

fn play(state: State) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(b) = st.queue.pop_front() {
                return Some((Ok(b), st));
            }
            if st.done {
                return None;
            }
            if let Some(live) = &mut st.live {
                match live.cursor.next(&live.reply) {
                    Some(ev) => {
                        if matches!(ev, Event::Delta(..))
                            && !st.pacer.wait(&mut st.life.closing).await
                        {
                            st.finish();
                            return Some((Err(cut()), st));
                        }
                        live.encoder.event(ev, &live.reply, &mut st.scratch);
                    }
                    None => {
                        match st.ending {
                            Ending::Complete => live.encoder.tail(&live.reply, &mut st.scratch),
                            Ending::MidstreamError => live.encoder.midstream_error(&mut st.scratch),
                            Ending::Cut | Ending::Stall => {}
                        }
                        st.live = None;
                    }
                }
                st.queue.extend(st.scratch.drain(..));
                continue;
            }
            match st.ending {
                Ending::Complete | Ending::MidstreamError => {
                    st.finish();
                    return None;
                }
                Ending::Cut => {
                    // Give hyper a pending poll to flush what was written, so the bytes before
                    // the cut reach the client instead of dying in its write buffer.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    st.finish();
                    return Some((Err(cut()), st));
                }
                Ending::Stall => {
                    // Until the server closes, or the client leaves and hyper drops this body.
                    closed(&mut st.life.closing).await;
                    st.finish();
                    return Some((Err(cut()), st));
                }
            }
        }
    })
}
