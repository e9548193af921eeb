//! SSE response bodies written straight into bytes.
//!
//! axum's `Sse` builds an `Event` per event and re-arms its keep-alive timer for every one;
//! at one or two events per token that is much of what a reply costs. These bodies write
//! each event's frame as bytes, and their keep-alive timer is only looked at again when it
//! fires. [`TurnSse`] also gathers every event that is ready into one write.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use futures::{Stream, StreamExt};
use hero_backend::turn::TurnEvents;
use tokio::time::{Instant, Sleep};

/// Silence after which a comment line keeps proxies from closing the stream (axum's default).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A comment line after [`KEEP_ALIVE`] of silence, without touching a timer per write.
struct KeepAlive {
    sleep: Pin<Box<Sleep>>,
    last_write: Instant,
}

impl KeepAlive {
    fn new() -> Self {
        let now = Instant::now();
        KeepAlive { sleep: Box::pin(tokio::time::sleep_until(now + KEEP_ALIVE)), last_write: now }
    }

    fn wrote(&mut self) {
        self.last_write = Instant::now();
    }

    /// Ready with the comment once the stream has been silent for the whole period.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Bytes> {
        loop {
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let due = self.last_write + KEEP_ALIVE;
            if Instant::now() >= due {
                self.wrote();
                self.sleep.as_mut().reset(self.last_write + KEEP_ALIVE);
                return Poll::Ready(Bytes::from_static(b":\n\n"));
            }
            self.sleep.as_mut().reset(due);
        }
    }
}

fn event_stream<S>(body: S) -> Response
where
    S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    (
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
        Body::from_stream(body),
    )
        .into_response()
}

/// A turn's events for its poster.
pub struct TurnSse {
    events: TurnEvents,
    /// Written into and split off per write: one allocation serves many events.
    buf: BytesMut,
    keep_alive: KeepAlive,
}

impl TurnSse {
    pub fn new(events: TurnEvents) -> Self {
        TurnSse { events, buf: BytesMut::new(), keep_alive: KeepAlive::new() }
    }
}

impl Stream for TurnSse {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.events.poll_next_unpin(cx) {
            Poll::Ready(Some(ev)) => {
                this.buf.reserve(4096);
                let mut w = (&mut this.buf).writer();
                // Writing into memory cannot fail.
                let _ = ev.write_sse(&mut w);
                while let Some(ev) = this.events.ready() {
                    let _ = ev.write_sse(&mut w);
                }
                this.keep_alive.wrote();
                Poll::Ready(Some(Ok(this.buf.split().freeze())))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => this.keep_alive.poll(cx).map(|b| Some(Ok(b))),
        }
    }
}

impl IntoResponse for TurnSse {
    fn into_response(self) -> Response {
        event_stream(self)
    }
}

/// Any stream of whole SSE frames (`event: …\ndata: …\n\n`), kept alive.
pub struct SseBody<S> {
    frames: S,
    keep_alive: KeepAlive,
}

impl<S: Stream<Item = Bytes> + Unpin + Send + 'static> SseBody<S> {
    pub fn new(frames: S) -> Self {
        SseBody { frames, keep_alive: KeepAlive::new() }
    }
}

impl<S: Stream<Item = Bytes> + Unpin> Stream for SseBody<S> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.frames.poll_next_unpin(cx) {
            Poll::Ready(Some(frame)) => {
                this.keep_alive.wrote();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => this.keep_alive.poll(cx).map(|b| Some(Ok(b))),
        }
    }
}

impl<S: Stream<Item = Bytes> + Unpin + Send + 'static> IntoResponse for SseBody<S> {
    fn into_response(self) -> Response {
        event_stream(self)
    }
}

/// One SSE frame: `event`, an optional `id`, and one line of `data`.
pub fn frame(event: &str, id: Option<i64>, data: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(event.as_bytes());
    if let Some(id) = id {
        out.extend_from_slice(format!("\nid: {id}").as_bytes());
    }
    out.extend_from_slice(b"\ndata: ");
    data(&mut out);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}
