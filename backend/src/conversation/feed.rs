//! One reader of a session's events ([`SessionFeed`]), as `GET /api/sessions/{id}/events`
//! and a WebSocket `subscribe` serve it: the resume algorithm in one place, with no socket.
//!
//! 1. Subscribe to the session's hub channel first, and note the replies in flight: a frame
//!    stored from then on is in the channel, and perhaps in the log read next too.
//! 2. Read the log after the reader's last seq (in pages; a reader that starts from what is
//!    stored now skips this), then send each reply in flight the log does not already hold
//!    as a phantom frame with its text so far.
//! 3. Go live: frames at or before the last seq sent are dropped, a frame after a gap sends
//!    the gap from the log first; the live events of a message whose frame came from the
//!    log are dropped (they waited in the channel meanwhile), and so are the chunks a
//!    phantom already held.
//! 4. Every `recheck_every`, check the sign-in is still valid; end with an error if not.
//!    A reader that falls behind the hub's bound, or a server that shuts down, ends it too.
//!
//! A feed is polled only as fast as its reader reads (an SSE body whose client reads
//! nothing, a WebSocket task busy with another message), so it never awaits the database
//! itself: a query suspended there would keep its pool connection for as long as the reader
//! waits, and a few such readers would hold every connection. Each read (a page of
//! [`PAGE`] frames, the sign-in check) runs in a task of its own ([`detached`]), which
//! gives its connection back as soon as the rows are in memory, polled or not; and a user's
//! page reads take turns ([`REPLAYS_PER_USER`] at once), so one user's many readers take
//! that many connections at most.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;

use hero_shared::feed::{MessageChunk, SessionEvent};
use hero_shared::frame::Frame;
use tokio::sync::broadcast;

use crate::accounts::auth::AuthUser;
use crate::conversation::hub::HubEvent;
use crate::conversation::in_flight::InFlight;
use crate::crypto::SecretKey;
use crate::{AppState, Result, conversation::frames};

/// The frames one catch-up read brings into memory at most.
pub const PAGE: i64 = 200;
/// How many of one user's feeds read the log at once; the others wait their turn.
pub const REPLAYS_PER_USER: usize = 2;

/// Runs `read` in a task of its own and waits for its answer: the task finishes (and gives
/// back its pool connection) whether or not the feed that waits is polled meanwhile.
async fn detached<T: Send + 'static>(
    read: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    tokio::spawn(read)
        .await
        .unwrap_or_else(|e| Err(crate::Error::Internal(format!("a feed's read failed: {e}"))))
}

/// How many frame ids read from the log a reader remembers ([`SessionFeed::from_log`]).
const REMEMBERED: usize = 8;
/// How many phantoms' lengths a reader remembers ([`SessionFeed::phantoms`]); replies in
/// flight on one session at once are far fewer.
const PHANTOMS: usize = 16;

/// A session's events for one reader, from a seq on. See the module's documentation.
pub struct SessionFeed {
    st: AppState,
    dk: SecretKey,
    user: AuthUser,
    session: i64,
    /// The seq of the last frame sent.
    sent: i64,
    live: crate::conversation::hub::Subscription,
    recheck: tokio::time::Interval,
    /// Resolves when the server shuts down; made once, so waiting costs nothing per event.
    closing: Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    /// Stored frames up to this seq are still to be read from the log.
    catch_up_to: Option<i64>,
    /// The replies in flight when the reader came, sent as phantoms after the catch-up.
    joined: Vec<Arc<InFlight>>,
    ready: VecDeque<SessionEvent>,
    done: bool,
    /// The ids of the last frames read from the log: the live events of such a message
    /// waited in the channel while its frame was read, and are not sent after it. (Live, a
    /// message's frame comes before its `message_complete`, which is sent.)
    from_log: VecDeque<String>,
    /// Replies sent as phantoms, and how many bytes of text each held: their chunks up to
    /// there are not sent again.
    phantoms: VecDeque<(String, usize)>,
}

impl SessionFeed {
    /// Opens the feed of the user's session after seq `after` (`None`: after what is stored
    /// now, for a reader that read the rest over HTTP). Another user's session is not found.
    pub async fn open(
        st: &AppState,
        user: &AuthUser,
        session: i64,
        after: Option<i64>,
    ) -> Result<Self> {
        let dk = frames::session_key(st, user, session).await?;
        // Subscribe before reading the log: a frame stored in between is then in both, and
        // the seq check drops the second copy, instead of being in neither.
        let live = st.hub.subscribe_session(session);
        let joined = st.turns.in_flight(session);
        let sent = match after {
            Some(after) => after,
            None => frames::last_seq(&st.db, session).await?,
        };
        let every = st.settings.recheck_every;
        let mut feed = SessionFeed {
            closing: Box::pin(st.hub.closed()),
            st: st.clone(),
            dk,
            user: user.clone(),
            session,
            sent,
            live,
            recheck: tokio::time::interval_at(tokio::time::Instant::now() + every, every),
            // Everything stored after `sent`, from the log, first: for a reader that resumes.
            // One that starts from what is stored now has nothing to read there (what comes
            // after is in the channel), and goes live at once.
            catch_up_to: after.map(|_| i64::MAX),
            joined,
            ready: VecDeque::new(),
            done: false,
            from_log: VecDeque::new(),
            phantoms: VecDeque::new(),
        };
        if feed.catch_up_to.is_none() {
            feed.send_joined();
        }
        Ok(feed)
    }

    /// The next event; `None` once the feed has ended (after its last event).
    pub async fn next(&mut self) -> Option<SessionEvent> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Some(ev);
            }
            if self.done {
                return None;
            }
            if let Some(upto) = self.catch_up_to.take() {
                self.catch_up(upto).await;
                if self.catch_up_to.is_none() {
                    self.send_joined();
                }
                continue;
            }
            let ev = tokio::select! {
                ev = self.live.recv() => ev,
                () = &mut self.closing => {
                    self.end(SessionEvent::Shutdown);
                    continue;
                }
                _ = self.recheck.tick() => {
                    let (st, user) = (self.st.clone(), self.user.clone());
                    let valid = detached(async move { crate::accounts::auth::still_valid(&st, &user).await });
                    match valid.await {
                        Ok(true) => {}
                        Ok(false) => self.end(SessionEvent::Error("this sign-in has ended".into())),
                        Err(e) => self.end(SessionEvent::Error(format!(
                            "{}; reconnect with Last-Event-ID to resume",
                            e.public_message()
                        ))),
                    }
                    continue;
                }
            };
            let ev = match ev {
                Ok(ev) => ev,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.st.metrics.lagged();
                    self.end(SessionEvent::Error(format!(
                        "this stream fell {n} events behind and was closed; reconnect with Last-Event-ID to resume"
                    )));
                    continue;
                }
                // The hub ended the channel: live events were lost on their way here
                // (another instance's could not be heard for a while, `Hub::resync`).
                Err(broadcast::error::RecvError::Closed) => {
                    self.end(SessionEvent::Error(
                        "this stream's live events were interrupted; reconnect with Last-Event-ID to resume".into(),
                    ));
                    continue;
                }
            };
            if let Some(out) = self.on_live(&ev) {
                return Some(out);
            }
        }
    }

    /// The feed as a stream.
    pub fn into_stream(self) -> impl futures::Stream<Item = SessionEvent> + Send + 'static {
        futures::stream::unfold(self, |mut feed| async move {
            let ev = feed.next().await?;
            Some((ev, feed))
        })
    }

    fn end(&mut self, last: SessionEvent) {
        self.ready.push_back(last);
        self.done = true;
    }

    /// What a live hub event becomes for this reader, if anything.
    fn on_live(&mut self, ev: &HubEvent) -> Option<SessionEvent> {
        match ev {
            HubEvent::Frame(f) if f.seq <= self.sent => None,
            // Frames are published after they are stored, by different tasks, so a later one
            // can arrive first: the ones in between come from the log.
            HubEvent::Frame(f) if f.seq > self.sent + 1 => {
                self.catch_up_to = Some(f.seq);
                None
            }
            HubEvent::Frame(f) => {
                self.sent = f.seq;
                self.phantoms.retain(|(id, _)| *id != f.id);
                Some(SessionEvent::Frame(for_readers(f.clone())))
            }
            // A call runs after its message is stored: its events are not the reply's.
            HubEvent::Stream { event, .. } => match event.message_id() {
                Some(m) if self.read_from_log(m) && !event.is_execution() => None,
                // Sent as a phantom already (joined mid-reply): its start would begin it
                // again, empty, and the chunks the phantom holds are not sent.
                Some(m)
                    if matches!(event, hero_shared::wire::SseEvent::MessageStart(_))
                        && self.held(m) =>
                {
                    None
                }
                _ => Some(SessionEvent::Reply(event.clone())),
            },
            HubEvent::Chunk {
                session_id,
                message_id,
                delta,
                offset,
            } => {
                let held = self
                    .phantoms
                    .iter()
                    .find(|(id, _)| id == message_id)
                    .map(|p| p.1);
                if self.read_from_log(message_id) || held.is_some_and(|len| *offset < len) {
                    return None;
                }
                Some(SessionEvent::Chunk(MessageChunk {
                    session_id: *session_id,
                    message_id: message_id.clone(),
                    content: delta.clone(),
                }))
            }
            HubEvent::Started(live)
                if self.read_from_log(&live.message_id) || self.held(&live.message_id) =>
            {
                None
            }
            // Published before any of the reply's text, so all of it follows as chunks: a
            // snapshot taken now (the turn may be tokens ahead of this reader) would hold
            // back text the page that began the reply on `message_start` never gets.
            HubEvent::Started(live) => Some(SessionEvent::Phantom(live.started())),
            HubEvent::Approval(a) => Some(SessionEvent::Approval(a.clone())),
            HubEvent::Question(q) => Some(SessionEvent::Question(q.clone())),
            HubEvent::Assertion(a) => Some(SessionEvent::Assertion(a.clone())),
            HubEvent::AgentStatus { .. }
            | HubEvent::Notification { .. }
            | HubEvent::ConfigChange(_)
            | HubEvent::TaskChanged { .. } => None,
        }
    }

    /// The reply so far as a phantom frame, for a reader that joins mid-reply; its chunks
    /// up to here are not sent again.
    fn phantom(&mut self, live: &InFlight) -> SessionEvent {
        let (frame, len) = live.snapshot();
        if self.phantoms.len() == PHANTOMS {
            self.phantoms.pop_front();
        }
        self.phantoms.push_back((frame.id.clone(), len));
        SessionEvent::Phantom(frame)
    }

    /// After the first catch-up: the replies that were in flight when the reader came,
    /// unless the log already holds them.
    fn send_joined(&mut self) {
        for live in std::mem::take(&mut self.joined) {
            // A reply finished by now has its frame stored at or before the seq this reader
            // starts from, or coming live: a phantom of it would never be replaced.
            if !self.read_from_log(&live.message_id) && !live.is_finished() {
                let ev = self.phantom(&live);
                self.ready.push_back(ev);
            }
        }
    }

    fn remember(&mut self, frame: &Frame) {
        if self.from_log.len() == REMEMBERED {
            self.from_log.pop_front();
        }
        self.from_log.push_back(frame.id.clone());
    }

    /// Whether message `id` was sent as a phantom of the reply so far.
    fn held(&self, id: &str) -> bool {
        self.phantoms.iter().any(|(p, _)| p == id)
    }

    /// Whether the frame of message `id` was read from the log.
    fn read_from_log(&self, id: &str) -> bool {
        self.from_log.iter().any(|s| s == id)
    }

    /// Queues one page of the stored frames with `sent < seq <= upto`, and asks for the next
    /// page if there may be one; ends the feed when the log cannot be read.
    async fn catch_up(&mut self, upto: i64) {
        let filter = frames::Filter {
            after_seq: Some(self.sent),
            limit: Some(PAGE),
            ..Default::default()
        };
        let (st, dk, session, user) = (
            self.st.clone(),
            self.dk.clone(),
            self.session,
            self.user.id(),
        );
        let read = detached(async move {
            let _turn = st.replays.wait(user).await;
            frames::list(&st.db, &dk, session, &filter).await
        });
        let Ok(page) = read.await else {
            self.end(SessionEvent::Error(
                "the session's log could not be read".into(),
            ));
            return;
        };
        let full = page.len() as i64 == PAGE;
        for f in page.into_iter().take_while(|f| f.seq <= upto) {
            self.sent = f.seq;
            self.remember(&f);
            self.ready.push_back(SessionEvent::Frame(for_readers(f)));
        }
        if full && self.sent < upto {
            self.catch_up_to = Some(upto);
        }
    }
}

/// A frame as the feed sends it: without the text read from its attachments
/// (`hero_shared::frame::without_attached_text`).
pub fn for_readers(mut f: Frame) -> Frame {
    hero_shared::frame::without_attached_text(&mut f.payload);
    f
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hero_shared::api::CreateSessionRequest;
    use hero_shared::frame::AuthorType;
    use hero_shared::wire::{SseEvent, TextData};
    use serde_json::json;

    use super::*;
    use crate::conversation::frames::NewFrame;
    use crate::test_support::{TestState, signed_in, state_with};

    struct Fixture {
        t: TestState,
        user: AuthUser,
        session: i64,
        dk: SecretKey,
    }

    async fn fixture() -> Fixture {
        let settings = crate::Settings {
            recheck_every: Duration::from_millis(100),
            ..Default::default()
        };
        let t = state_with(settings).await;
        let user = signed_in(&t, "alice").await;
        let session = crate::conversation::sessions::create(
            &t,
            &user,
            CreateSessionRequest {
                name: "s".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .id;
        let dk = frames::session_key(&t, &user, session).await.unwrap();
        Fixture {
            t,
            user,
            session,
            dk,
        }
    }

    impl Fixture {
        /// Stores a user message `text` without publishing it.
        async fn store(&self, text: &str) -> Frame {
            self.store_as(&frames::new_id(), text).await
        }

        /// Stores a message `text` with frame id `id` without publishing it.
        async fn store_as(&self, id: &str, text: &str) -> Frame {
            let mut f = NewFrame::message(
                self.session,
                AuthorType::User,
                Some(self.user.id()),
                json!({"role": "user", "content": text}),
            );
            f.id = id.to_owned();
            frames::append(&self.t, &self.dk, f).await.unwrap()
        }

        async fn feed(&self, after: Option<i64>) -> SessionFeed {
            SessionFeed::open(&self.t, &self.user, self.session, after)
                .await
                .unwrap()
        }

        fn publish(&self, ev: HubEvent) {
            self.t.hub.publish(self.user.id(), self.session, ev);
        }
    }

    /// The next event, or a failure if none comes in time.
    async fn next(feed: &mut SessionFeed) -> Option<SessionEvent> {
        tokio::time::timeout(Duration::from_secs(10), feed.next())
            .await
            .expect("an event")
    }

    fn seq(ev: Option<SessionEvent>) -> i64 {
        match ev {
            Some(SessionEvent::Frame(f)) => f.seq,
            other => panic!("not a frame: {other:?}"),
        }
    }

    #[tokio::test]
    async fn resumes_after_the_last_seq_without_gap_or_duplicate() {
        let fx = fixture().await;
        let mut stored = Vec::new();
        for i in 1..=5 {
            stored.push(fx.store(&format!("m{i}")).await);
        }
        let mut feed = fx.feed(Some(2)).await;
        // Stored while the reader catches up, and published: in the log and the channel.
        let sixth = fx.store("m6").await;
        fx.publish(HubEvent::Frame(sixth.clone()));
        for want in 3..=6 {
            assert_eq!(seq(next(&mut feed).await), want);
        }
        // A duplicate of a frame already sent is dropped; the next one comes through.
        fx.publish(HubEvent::Frame(stored[4].clone()));
        fx.publish(HubEvent::Frame(sixth));
        let seventh = fx.store("m7").await;
        fx.publish(HubEvent::Frame(seventh));
        assert_eq!(seq(next(&mut feed).await), 7);
    }

    #[tokio::test]
    async fn a_frame_after_a_gap_brings_the_gap_from_the_log() {
        let fx = fixture().await;
        fx.store("m1").await;
        let mut feed = fx.feed(None).await;
        fx.store("m2").await;
        let third = fx.store("m3").await;
        fx.publish(HubEvent::Frame(third));
        assert_eq!(seq(next(&mut feed).await), 2);
        assert_eq!(seq(next(&mut feed).await), 3);
    }

    #[tokio::test]
    async fn a_reader_that_joins_mid_reply_gets_it_so_far_then_only_what_follows() {
        let fx = fixture().await;
        let user_frame = fx.store("question").await;
        let live = Arc::new(InFlight::new(
            "reply-1",
            fx.session,
            4,
            "Agent",
            user_frame.seq,
        ));
        let _abort = fx.t.turns.begin(live.clone(), None);
        let chunk = |delta: &str, offset: usize| HubEvent::Chunk {
            session_id: fx.session,
            message_id: "reply-1".into(),
            delta: delta.into(),
            offset,
        };
        live.push("Hello, ");
        let mut feed = fx.feed(Some(user_frame.seq)).await;
        // Sent before the snapshot was taken, received after it: the phantom holds it.
        fx.publish(chunk("Hello, ", 0));
        let off = live.push("world");
        fx.publish(chunk("world", off));
        match next(&mut feed).await {
            Some(SessionEvent::Phantom(f)) => {
                assert_eq!((f.id.as_str(), f.seq), ("reply-1", user_frame.seq));
                assert_eq!(f.payload["content"], "Hello, world");
            }
            other => panic!("{other:?}"),
        }
        // The reply's start, read after the phantom (the turn published it while the
        // reader caught up from the log), neither begins it again nor empties it.
        let start = SseEvent::MessageStart(hero_shared::wire::MessageStart {
            message_id: "reply-1".into(),
            session_id: fx.session,
            agent_name: "Agent".into(),
        });
        fx.publish(HubEvent::Stream {
            session_id: fx.session,
            event: start,
        });
        fx.publish(HubEvent::Started(live.clone()));
        let off = live.push("!");
        fx.publish(chunk("!", off));
        match next(&mut feed).await {
            Some(SessionEvent::Chunk(c)) => assert_eq!(c.content, "!"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_reply_that_finished_before_the_reader_came_is_no_phantom() {
        let fx = fixture().await;
        let live = Arc::new(InFlight::new("reply-3", fx.session, 4, "Agent", 0));
        let _abort = fx.t.turns.begin(live.clone(), None);
        live.push("all of it");
        live.finish();
        // Its frame is stored before the reader reads where the log ends.
        let stored = fx.store_as("reply-3", "all of it").await;
        let mut feed = fx.feed(None).await;
        assert!(stored.seq <= feed.sent);
        // Everything the reader is sent, up to the server's shutdown: no phantom.
        fx.t.hub.close();
        let mut seen = Vec::new();
        while let Some(ev) = next(&mut feed).await {
            seen.push(ev);
        }
        assert_eq!(seen, vec![SessionEvent::Shutdown]);
    }

    #[tokio::test]
    async fn a_reply_that_starts_is_a_phantom_and_its_stored_frame_replaces_it() {
        let fx = fixture().await;
        let mut feed = fx.feed(None).await;
        let live = Arc::new(InFlight::new("reply-2", fx.session, 4, "Agent", 0));
        fx.publish(HubEvent::Started(live.clone()));
        assert!(
            matches!(next(&mut feed).await, Some(SessionEvent::Phantom(f)) if f.payload["content"] == "")
        );
        let text = SseEvent::Text(TextData {
            message_id: "reply-2".into(),
            text: "hi".into(),
        });
        fx.publish(HubEvent::Stream {
            session_id: fx.session,
            event: text.clone(),
        });
        assert_eq!(next(&mut feed).await, Some(SessionEvent::Reply(text)));
        let stored = fx.store_as("reply-2", "hi").await;
        fx.publish(HubEvent::Frame(stored.clone()));
        assert_eq!(next(&mut feed).await, Some(SessionEvent::Frame(stored)));
        assert!(
            feed.phantoms.is_empty(),
            "the stored frame replaced the phantom"
        );
    }

    #[tokio::test]
    async fn a_reply_read_late_from_its_start_loses_none_of_its_text() {
        // The reply's start is published before any of its text, so every chunk follows it
        // on the channel; a reader that takes the start late, when text was pushed since,
        // still gets each chunk (the page that began the reply on `message_start` ignores
        // the phantom and builds the reply from the chunks alone).
        let fx = fixture().await;
        let mut feed = fx.feed(None).await;
        let live = Arc::new(InFlight::new("reply-4", fx.session, 4, "Agent", 0));
        fx.publish(HubEvent::Started(live.clone()));
        for delta in ["<websearch>", "cards"] {
            let offset = live.push(delta);
            fx.publish(HubEvent::Chunk {
                session_id: fx.session,
                message_id: "reply-4".into(),
                delta: delta.into(),
                offset,
            });
        }
        match next(&mut feed).await {
            Some(SessionEvent::Phantom(f)) => assert_eq!(f.payload["content"], ""),
            other => panic!("{other:?}"),
        }
        for delta in ["<websearch>", "cards"] {
            match next(&mut feed).await {
                Some(SessionEvent::Chunk(c)) => assert_eq!(c.content, delta),
                other => panic!("{other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_message_read_from_the_log_drops_its_live_events() {
        let fx = fixture().await;
        let mut feed = fx.feed(Some(0)).await;
        let stored = fx.store("done").await;
        // Its live events waited in the channel while the frame was read from the log.
        fx.publish(HubEvent::Stream {
            session_id: fx.session,
            event: SseEvent::Text(TextData {
                message_id: stored.id.clone(),
                text: "done".into(),
            }),
        });
        assert_eq!(seq(next(&mut feed).await), stored.seq);
        fx.publish(HubEvent::Frame(stored));
        let later = fx.store("later").await;
        fx.publish(HubEvent::Frame(later.clone()));
        assert_eq!(seq(next(&mut feed).await), later.seq);
    }

    /// Feeds started reading and then left unpolled (readers that read nothing) hold no
    /// connection of the pool: more of them than it has connections, and it still answers.
    #[tokio::test]
    async fn a_feed_left_unpolled_holds_no_connection() {
        let fx = fixture().await;
        for i in 0..3 {
            fx.store(&format!("m{i}")).await;
        }
        let most = fx.t.db.pool_max();
        let mut feeds = Vec::new();
        for _ in 0..most + 4 {
            feeds.push(fx.feed(Some(0)).await);
        }
        // Each read started (polled once), then never polled again, never dropped.
        let mut pending: Vec<_> = feeds.iter_mut().map(|f| Box::pin(f.next())).collect();
        for p in &mut pending {
            assert!(futures::poll!(p.as_mut()).is_pending());
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (open, idle) = fx.t.db.pool_use();
            if idle >= open as usize {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} of {open} connections held by feeds nobody polls",
                open as usize - idle,
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let last = tokio::time::timeout(
            Duration::from_secs(5),
            frames::last_seq(&fx.t.db, fx.session),
        )
        .await
        .expect("the pool answers")
        .unwrap();
        assert_eq!(last, 3);
        // Polled again, each feed has its frames.
        for p in &mut pending {
            assert_eq!(
                seq(tokio::time::timeout(Duration::from_secs(5), p)
                    .await
                    .unwrap()),
                1
            );
        }
    }

    #[tokio::test]
    async fn an_ended_sign_in_ends_the_feed() {
        let fx = fixture().await;
        let mut feed = fx.feed(None).await;
        crate::accounts::auth::logout(&fx.t, &fx.user)
            .await
            .unwrap();
        assert_eq!(
            next(&mut feed).await,
            Some(SessionEvent::Error("this sign-in has ended".into()))
        );
        assert_eq!(next(&mut feed).await, None);
    }

    #[tokio::test]
    async fn a_reader_too_far_behind_is_told_and_dropped() {
        let fx = fixture().await;
        let mut feed = fx.feed(None).await;
        for i in 0..crate::conversation::hub::CHANNEL_CAPACITY + 1 {
            fx.publish(HubEvent::Stream {
                session_id: fx.session,
                event: SseEvent::Text(TextData {
                    message_id: "m".into(),
                    text: i.to_string(),
                }),
            });
        }
        match next(&mut feed).await {
            Some(SessionEvent::Error(e)) => assert!(e.contains("fell 1 events behind"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(next(&mut feed).await, None);
        // The operator's metrics count it.
        let text = fx.t.metrics.render(crate::metrics::Now {
            turns: 0,
            streams: 0,
            pool_size: 0,
            pool_idle: 0,
        });
        assert!(
            text.lines().any(|l| l == "hero_fanout_lagged_total 1"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn shutdown_ends_the_feed() {
        let fx = fixture().await;
        let mut feed = fx.feed(None).await;
        fx.t.shutdown();
        assert_eq!(next(&mut feed).await, Some(SessionEvent::Shutdown));
        assert_eq!(next(&mut feed).await, None);
    }

    #[tokio::test]
    async fn another_users_session_is_not_found() {
        let fx = fixture().await;
        let bob = signed_in(&fx.t, "bob").await;
        let err = SessionFeed::open(&fx.t, &bob, fx.session, None).await.err();
        assert!(matches!(err, Some(crate::Error::NotFound(_))), "{err:?}");
    }
}
