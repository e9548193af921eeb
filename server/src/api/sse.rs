//! A turn's events as an SSE response body, written straight into bytes.
//!
//! axum's `Sse` builds an `Event` per event and re-arms its keep-alive timer for every one;
//! at one event per token that is most of what a reply costs here. This body writes each
//! event's frame into one buffer (every event that is ready goes out in one write), and
//! its keep-alive timer is only looked at again when it fires.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::{BufMut, Bytes, BytesMut};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use hero_backend::turn::TurnEvents;
use tokio::time::{Instant, Sleep};

/// Silence after which a comment line keeps proxies from closing the stream (axum's default).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub struct TurnSse {
    events: TurnEvents,
    /// Written into and split off per write: one allocation serves many events.
    buf: BytesMut,
    keep_alive: Pin<Box<Sleep>>,
    last_write: Instant,
}

impl TurnSse {
    pub fn new(events: TurnEvents) -> Self {
        let now = Instant::now();
        TurnSse { events, buf: BytesMut::new(), keep_alive: Box::pin(tokio::time::sleep_until(now + KEEP_ALIVE)), last_write: now }
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
                this.last_write = Instant::now();
                Poll::Ready(Some(Ok(this.buf.split().freeze())))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => loop {
                if this.keep_alive.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let due = this.last_write + KEEP_ALIVE;
                if Instant::now() >= due {
                    this.last_write = Instant::now();
                    this.keep_alive.as_mut().reset(this.last_write + KEEP_ALIVE);
                    return Poll::Ready(Some(Ok(Bytes::from_static(b":\n\n"))));
                }
                this.keep_alive.as_mut().reset(due);
            },
        }
    }
}

impl IntoResponse for TurnSse {
    fn into_response(self) -> Response {
        (
            [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
            Body::from_stream(self),
        )
            .into_response()
    }
}
