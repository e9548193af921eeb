//! The conversations turns were last given, kept decrypted in memory: a session's next turn
//! starts from them instead of reading, decrypting and parsing its history again, so the
//! cost of starting a turn no longer grows with the length of the conversation.
//!
//! A session's frames are only ever appended, each with the next `seq`, so what is kept for
//! a session is exactly its log if the last `seq` kept is the one just before the frame a turn
//! appends. Anything else (a frame appended by another path, a restart, an eviction) is a
//! miss, and the turn reads the log as before. Nothing here is ever the only copy.
//!
//! The server holds the keys that open the frames, and decrypts a session's history for
//! every turn anyway; keeping it between turns keeps plaintext in memory longer, not in any
//! new place. It is bounded by [`HISTORY_CACHE_BYTES`] (the least recently used sessions are
//! let go first).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use hero_shared::frame::{CompiledMessage, Frame, FrameType};

use crate::providers::ChatMessage;

/// What the kept conversations may add up to, counted as [`Kept::new`] estimates them.
pub const HISTORY_CACHE_BYTES: usize = 64 << 20;

/// A conversation larger than this share of the whole is not kept: one session must not
/// push out every other.
const MAX_SHARE: usize = 4;

/// What a frame costs in memory beyond its payload's text: its id, timestamp and targets,
/// the frame itself and its counted pointer, the nodes of its JSON trees (its own and the
/// copy [`Alone`] compiles).
const PER_FRAME: usize = 1024;

/// A frame as kept: shared with the turns that read it, and what it counts for.
#[derive(Clone)]
pub struct Kept {
    pub frame: Arc<Frame>,
    pub bytes: usize,
    /// The frame compiled by itself, filled the first time a turn reads it and shared by
    /// every copy of this `Kept` ([`crate::conversation::context::messages`]).
    pub alone: Arc<OnceLock<Alone>>,
    /// What the compaction thresholds read of it ([`crate::conversation::compact::due`]),
    /// read from its payload once rather than at the end of every turn.
    pub counts: Counts,
}

/// What one frame adds to the measures of a conversation that decide its compaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// A message of the conversation: not a startup process's, nor a memory flush's
    /// exchange or note.
    pub message: bool,
    /// The tokens the provider reported for the reply it holds (input and output), if it
    /// said.
    pub usage: Option<u64>,
    /// The length of its `content`, when that is text.
    pub content_len: u64,
    /// A memory flush's note (`memory_flush` in its payload).
    pub memory_flush: bool,
}

impl Counts {
    pub fn of(frame: &Frame) -> Counts {
        let p = &frame.payload;
        let usage = p.get("usage").and_then(|u| {
            let n = |f: &str| u.get(f).and_then(serde_json::Value::as_u64);
            match (n("input_tokens"), n("output_tokens")) {
                (None, None) => None,
                (i, o) => Some(i.unwrap_or(0) + o.unwrap_or(0)),
            }
        });
        let memory_flush = p.get("memory_flush").is_some();
        Counts {
            message: frame.frame_type == FrameType::Message
                && p.get("startup").is_none()
                && p.get("flush").is_none()
                && !memory_flush,
            usage,
            content_len: p
                .get("content")
                .and_then(serde_json::Value::as_str)
                .map_or(0, |c| c.len() as u64),
            memory_flush,
        }
    }
}

/// What one frame compiles to by itself: a conversation whose frames each compile alone
/// (nothing edits, answers or reorders an earlier one) is the list of these, so a turn
/// compiles only the frames it has not read before.
pub struct Alone {
    /// Whether the frame adds a message of its own after what came before it, whatever that
    /// was (a message, a call's request, a result that answers no prompt; no prompt in it).
    pub own: bool,
    /// The message it compiles to; `None` for a frame that makes none.
    pub compiled: Option<CompiledMessage>,
    /// The message as the model reads it; `None` for one it is not shown (a call's request,
    /// a private note).
    pub said: Option<Arc<ChatMessage>>,
}

impl Kept {
    /// `sealed` is the size of its sealed payload, about that of its JSON; decoded, the JSON
    /// takes about twice that (its strings, and the tree that holds them). What it compiles
    /// to ([`Alone`]) holds the text three times more: a copy of the payload, the compiled
    /// content, and the content as the model reads it.
    pub fn new(frame: Frame, sealed: usize) -> Self {
        Kept {
            counts: Counts::of(&frame),
            frame: Arc::new(frame),
            bytes: 6 * sealed + PER_FRAME,
            alone: Arc::default(),
        }
    }
}

/// So that a conversation as kept compiles as it is ([`hero_shared::frame::compile_frames`]).
impl std::borrow::Borrow<Frame> for Kept {
    fn borrow(&self) -> &Frame {
        &self.frame
    }
}

pub struct HistoryCache {
    inner: Mutex<Inner>,
    /// Bytes kept at most: [`HISTORY_CACHE_BYTES`] but in tests.
    limit: usize,
    /// Turns that started from a kept conversation.
    hits: AtomicU64,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<i64, Entry>,
    bytes: usize,
    /// Bumped on every use: the entry with the smallest `used` is the least recently used.
    clock: u64,
}

struct Entry {
    /// The session's frames from its last `compact` on, in `seq` order.
    frames: Vec<Kept>,
    bytes: usize,
    used: u64,
}

impl Entry {
    fn last_seq(&self) -> Option<i64> {
        self.frames.last().map(|k| k.frame.seq)
    }
}

impl Default for HistoryCache {
    fn default() -> Self {
        HistoryCache {
            inner: Mutex::default(),
            limit: HISTORY_CACHE_BYTES,
            hits: AtomicU64::new(0),
        }
    }
}

impl HistoryCache {
    /// One that keeps at most `limit` bytes.
    #[cfg(test)]
    fn with_limit(limit: usize) -> Self {
        HistoryCache {
            limit,
            ..Default::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The session's conversation if what is kept ends at `last_seq`: the frame with the next
    /// `seq` is the one being appended, so nothing came in between.
    pub fn get(&self, session_id: i64, last_seq: i64) -> Option<Vec<Kept>> {
        let kept = self.look(session_id, last_seq, <[Kept]>::to_vec)?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(kept)
    }

    /// What `f` makes of the session's conversation if what is kept ends at `last_seq`,
    /// read in place (a look after a turn: nothing copied), not counted as a turn's hit.
    /// `f` runs under the cache's lock: keep it short.
    pub fn look<R>(
        &self,
        session_id: i64,
        last_seq: i64,
        f: impl FnOnce(&[Kept]) -> R,
    ) -> Option<R> {
        let mut inner = self.lock();
        inner.clock += 1;
        let clock = inner.clock;
        let e = inner.sessions.get_mut(&session_id)?;
        if e.last_seq() != Some(last_seq) {
            return None;
        }
        e.used = clock;
        Some(f(&e.frames))
    }

    /// Keeps `frames`, the session's whole conversation from its last `compact` on.
    pub fn put(&self, session_id: i64, frames: Vec<Kept>) {
        let bytes = frames.iter().map(|k| k.bytes).sum();
        let limit = self.limit;
        let mut inner = self.lock();
        let mut gone = inner.remove(session_id).into_iter().collect::<Vec<_>>();
        if !frames.is_empty() && bytes <= limit / MAX_SHARE {
            inner.clock += 1;
            let used = inner.clock;
            inner.bytes += bytes;
            inner.sessions.insert(
                session_id,
                Entry {
                    frames,
                    bytes,
                    used,
                },
            );
            gone.extend(inner.shrink_to(limit));
        }
        // What was let go is freed once the lock is.
        drop(inner);
        drop(gone);
    }

    /// Adds a frame just appended to its session's log, if it follows what is kept; one the
    /// kept conversation already holds or has gone past changes nothing; one that leaves a
    /// gap makes the session forgotten (its next turn reads the log).
    pub fn append(&self, kept: Kept) {
        let (session_id, seq) = (kept.frame.session_id, kept.frame.seq);
        let limit = self.limit;
        let mut guard = self.lock();
        let inner = &mut *guard;
        inner.clock += 1;
        let Some(e) = inner.sessions.get_mut(&session_id) else {
            return;
        };
        let last = e.last_seq().unwrap_or(i64::MIN);
        if seq <= last {
            return;
        }
        // A compact starts the conversation again from itself.
        let restart = kept.frame.frame_type == FrameType::Compact;
        let bytes = if restart {
            kept.bytes
        } else {
            e.bytes + kept.bytes
        };
        if seq != last + 1 || bytes > limit / MAX_SHARE {
            let gone = inner.remove(session_id);
            drop(guard);
            drop(gone);
            return;
        }
        let gone = if restart {
            std::mem::take(&mut e.frames)
        } else {
            Vec::new()
        };
        inner.bytes = inner.bytes - e.bytes + bytes;
        e.bytes = bytes;
        e.frames.push(kept);
        e.used = inner.clock;
        let evicted = inner.shrink_to(limit);
        drop(guard);
        drop((gone, evicted));
    }

    /// Bytes kept, all sessions together.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// How many turns started from a kept conversation.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }
}

impl Inner {
    fn remove(&mut self, session_id: i64) -> Option<Entry> {
        let e = self.sessions.remove(&session_id)?;
        self.bytes -= e.bytes;
        Some(e)
    }

    /// Lets the least recently used sessions go until at most `limit` bytes are kept, and
    /// gives them back to be freed once the lock is let go. A scan per eviction: sessions
    /// number in the thousands at most, and an eviction is rare next to the turns that fill
    /// the cache.
    fn shrink_to(&mut self, limit: usize) -> Vec<Entry> {
        let mut gone = Vec::new();
        while self.bytes > limit {
            let Some((&oldest, _)) = self.sessions.iter().min_by_key(|(_, e)| e.used) else {
                break;
            };
            gone.extend(self.remove(oldest));
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hero_shared::frame::AuthorType;

    fn frame(session_id: i64, seq: i64, frame_type: FrameType) -> Kept {
        let frame = Frame {
            id: format!("f{session_id}-{seq}"),
            session_id,
            seq,
            parent_id: None,
            target_ids: Vec::new(),
            timestamp: "t".into(),
            frame_type,
            author_type: AuthorType::User,
            author_id: None,
            payload: serde_json::json!({"role": "user", "content": "x"}),
        };
        Kept {
            bytes: 100,
            ..Kept::new(frame, 0)
        }
    }

    fn seqs(v: Option<Vec<Kept>>) -> Option<Vec<i64>> {
        v.map(|v| v.iter().map(|k| k.frame.seq).collect())
    }

    #[test]
    fn a_conversation_is_given_back_only_if_nothing_came_in_between() {
        let c = HistoryCache::default();
        c.put(
            1,
            vec![
                frame(1, 1, FrameType::Message),
                frame(1, 2, FrameType::Message),
            ],
        );
        assert_eq!(seqs(c.get(1, 2)), Some(vec![1, 2]));
        // A frame it holds already, appended late (its turn was overtaken), changes nothing.
        c.append(frame(1, 2, FrameType::Message));
        c.append(frame(1, 1, FrameType::Message));
        assert_eq!(seqs(c.get(1, 2)), Some(vec![1, 2]));
        assert_eq!(c.hits(), 2);
        // A frame 3 the cache never saw: the turn appending frame 4 must read the log.
        assert_eq!(seqs(c.get(1, 3)), None);
        assert_eq!(seqs(c.get(2, 2)), None, "another session");
        c.append(frame(1, 3, FrameType::Message));
        assert_eq!(seqs(c.get(1, 3)), Some(vec![1, 2, 3]));
        // An append that skips a seq forgets the session.
        c.append(frame(1, 5, FrameType::Message));
        assert_eq!(seqs(c.get(1, 3)), None);
        assert_eq!(seqs(c.get(1, 5)), None);
        assert_eq!(c.bytes(), 0);
    }

    #[test]
    fn a_compact_starts_the_conversation_again() {
        let c = HistoryCache::default();
        c.put(
            1,
            vec![
                frame(1, 1, FrameType::Message),
                frame(1, 2, FrameType::Message),
            ],
        );
        c.append(frame(1, 3, FrameType::Compact));
        c.append(frame(1, 4, FrameType::Message));
        assert_eq!(seqs(c.get(1, 4)), Some(vec![3, 4]));
        assert_eq!(c.bytes(), 200);
    }

    #[test]
    fn the_least_recently_used_sessions_go_first() {
        // Room for four conversations of 200 bytes, not five.
        let c = HistoryCache::with_limit(900);
        for s in 1..=4 {
            c.put(
                s,
                vec![
                    frame(s, 1, FrameType::Message),
                    frame(s, 2, FrameType::Message),
                ],
            );
        }
        assert_eq!(c.bytes(), 800);
        // Session 1 is used again; 2 is now the oldest.
        assert!(c.get(1, 2).is_some());
        c.put(
            5,
            vec![
                frame(5, 1, FrameType::Message),
                frame(5, 2, FrameType::Message),
            ],
        );
        assert_eq!(c.bytes(), 800);
        assert!(c.get(2, 2).is_none());
        for s in [1, 3, 4, 5] {
            assert!(c.get(s, 2).is_some(), "session {s}");
        }
        // A conversation larger than a quarter of the whole is not kept at all.
        c.put(
            6,
            (1..=3).map(|q| frame(6, q, FrameType::Message)).collect(),
        );
        assert!(c.get(1, 2).is_some(), "and pushes nothing out");
        assert!(c.get(6, 3).is_none());
        assert_eq!(c.bytes(), 800);
    }
}
