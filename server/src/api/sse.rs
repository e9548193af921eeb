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
use bytes::Bytes;
use futures::{Stream, StreamExt};
use hero_backend::conversation::turn::TurnEvents;
use hero_backend::drive::wake::Silence;

/// Silence after which a comment line keeps proxies from closing the stream (axum's default).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The comment line sent after a silence of [`KEEP_ALIVE`] (up to twice that: writes only
/// mark that something went out).
const KEEP_ALIVE_COMMENT: &[u8] = b":\n\n";

/// The keep-alive comment once `keep_alive` says a silence has lasted, else Pending.
fn comment_after(
    keep_alive: &mut Silence,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Bytes, Infallible>>> {
    keep_alive
        .poll(cx)
        .map(|()| Some(Ok(Bytes::from_static(KEEP_ALIVE_COMMENT))))
}

fn event_stream<S>(body: S) -> Response
where
    S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

/// A turn's events for its poster.
pub struct TurnSse {
    events: TurnEvents,
    /// Where events are written before they are copied out whole: each write is then one
    /// allocation of its exact size, with no shared buffer whose count every write and every
    /// release touches.
    scratch: Vec<u8>,
    keep_alive: Silence,
}

impl TurnSse {
    pub fn new(events: TurnEvents) -> Self {
        let keep_alive = events.keep_alive(KEEP_ALIVE);
        TurnSse {
            events,
            scratch: Vec::with_capacity(512),
            keep_alive,
        }
    }
}

impl Stream for TurnSse {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.events.poll_next_unpin(cx) {
            Poll::Ready(Some(ev)) => {
                this.scratch.clear();
                // Writing into memory cannot fail.
                let _ = ev.write_sse(&mut this.scratch);
                while let Some(ev) = this.events.ready() {
                    let _ = ev.write_sse(&mut this.scratch);
                }
                this.keep_alive.heard();
                Poll::Ready(Some(Ok(Bytes::copy_from_slice(&this.scratch))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => comment_after(&mut this.keep_alive, cx),
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
    keep_alive: Silence,
}

impl<S: Stream<Item = Bytes> + Unpin + Send + 'static> SseBody<S> {
    pub fn new(frames: S) -> Self {
        SseBody {
            frames,
            keep_alive: Silence::new(KEEP_ALIVE),
        }
    }
}

impl<S> SseBody<S> {
    /// With a keep-alive period other than [`KEEP_ALIVE`].
    #[cfg(test)]
    fn with_keep_alive(frames: S, period: Duration) -> Self {
        SseBody {
            frames,
            keep_alive: Silence::new(period),
        }
    }
}

impl<S: Stream<Item = Bytes> + Unpin> Stream for SseBody<S> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.frames.poll_next_unpin(cx) {
            Poll::Ready(Some(frame)) => {
                this.keep_alive.heard();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => comment_after(&mut this.keep_alive, cx),
        }
    }
}

impl<S: Stream<Item = Bytes> + Unpin + Send + 'static> IntoResponse for SseBody<S> {
    fn into_response(self) -> Response {
        event_stream(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::time::Instant;

    const PERIOD: Duration = Duration::from_millis(200);

    /// The next frame of `body` and how long it took.
    async fn next<S: Stream<Item = Bytes> + Unpin>(body: &mut SseBody<S>) -> (Bytes, Duration) {
        let t = Instant::now();
        let f = tokio::time::timeout(Duration::from_secs(10), body.next()).await;
        (
            f.expect("a frame within 10 s")
                .expect("the stream goes on")
                .unwrap(),
            t.elapsed(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_stream_gets_a_comment_after_each_quiet_period() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Bytes>();
        let mut body = SseBody::with_keep_alive(rx, PERIOD);
        let (frame, took) = next(&mut body).await;
        assert_eq!(
            (&frame[..], took >= PERIOD),
            (&b":\n\n"[..], true),
            "{took:?}"
        );
        // A write half a period in puts the next comment off to a whole period after it.
        tokio::time::sleep(PERIOD / 2).await;
        tx.unbounded_send(Bytes::from_static(b"data: x\n\n"))
            .unwrap();
        assert_eq!(&next(&mut body).await.0[..], b"data: x\n\n");
        let (frame, took) = next(&mut body).await;
        assert_eq!(
            (&frame[..], took >= PERIOD),
            (&b":\n\n"[..], true),
            "{took:?}"
        );
        // And again: the timer is armed anew after it fired.
        let (frame, took) = next(&mut body).await;
        assert_eq!(
            (&frame[..], took >= PERIOD),
            (&b":\n\n"[..], true),
            "{took:?}"
        );
        assert!(took < PERIOD * 5, "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_first_poll_out_of_budget_still_arms_the_keep_alive() {
        let (_tx, rx) = futures::channel::mpsc::unbounded::<Bytes>();
        let mut body = SseBody::with_keep_alive(rx, PERIOD);
        // Spend the task's budget, then poll: the sleep answers without registering.
        std::future::poll_fn(|cx| {
            while tokio::task::coop::has_budget_remaining() {
                let _ = std::pin::pin!(tokio::task::coop::consume_budget()).poll(cx);
            }
            assert!(body.poll_next_unpin(cx).is_pending());
            Poll::Ready(())
        })
        .await;
        let (frame, took) = next(&mut body).await;
        assert_eq!(&frame[..], b":\n\n", "{took:?}");
        assert!(
            took < PERIOD * 5,
            "woken by the keep-alive itself, not by something later: {took:?}"
        );
    }
}
