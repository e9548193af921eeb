//! One lock per message whose calls are being worked on ([`MessageLocks`]), and the
//! replies still streaming whose calls have begun.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One lock per message whose calls are being worked on: the turn settling them and a
/// decision arriving meanwhile take turns, so exactly one of them sees the last result.
///
/// A reply whose calls run while it still streams is marked [`streaming`](Self::streaming)
/// until the turn closes it ([`super::close`], under the lock): until then no call of it
/// counts as its last, since more may come, and the turn decides what follows.
#[derive(Default)]
pub struct MessageLocks {
    locks: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    streaming: std::sync::Mutex<HashSet<String>>,
}

/// Held while a message's calls are worked on; forgets the lock when nobody else wants it.
pub struct MessageGuard<'a> {
    locks: &'a MessageLocks,
    id: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl MessageLocks {
    pub async fn lock(&self, message_id: &str) -> MessageGuard<'_> {
        let m = {
            let mut map = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(message_id.to_owned()).or_default().clone()
        };
        MessageGuard {
            locks: self,
            id: message_id.to_owned(),
            guard: Some(m.lock_owned().await),
        }
    }

    /// How many messages have a lock (held or wanted) or stream with calls begun: zero
    /// when nothing is being acted on.
    pub fn len(&self) -> usize {
        let locks = self.locks.lock().unwrap_or_else(|p| p.into_inner()).len();
        locks + self.streams().len()
    }

    fn streams(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.streaming.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The reply `message_id` streams on with calls begun: none of them is its last.
    pub fn begin_streaming(&self, message_id: &str) {
        self.streams().insert(message_id.to_owned());
    }

    /// Whether the reply `message_id` still streams with calls begun.
    pub fn is_streaming(&self, message_id: &str) -> bool {
        self.streams().contains(message_id)
    }

    /// The reply `message_id` has ended: `act::close` ends it under the message's lock
    /// (dropping the mark otherwise is only for a turn that failed on the way).
    pub fn end_streaming(&self, message_id: &str) {
        self.streams().remove(message_id);
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for MessageGuard<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut map = self.locks.locks.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(&self.id).is_some_and(|m| Arc::strong_count(m) == 1) {
            map.remove(&self.id);
        }
    }
}
