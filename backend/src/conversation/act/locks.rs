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
    /// The same lock among the instances on a PostgreSQL database, while others are alive.
    _across: Option<crate::conversation::cluster::Owned>,
}

/// The name of a message's lock among the instances.
fn across_name(message_id: &str) -> String {
    format!("lock:message:{message_id}")
}

impl MessageLocks {
    /// Waits for the message's lock: this process's, then (on PostgreSQL, while other
    /// instances are alive) the one among the instances, always in that order.
    pub async fn lock(
        &self,
        st: &crate::AppState,
        message_id: &str,
    ) -> crate::Result<MessageGuard<'_>> {
        let m = self.local(message_id);
        let mut guard = MessageGuard {
            locks: self,
            id: message_id.to_owned(),
            guard: Some(m.lock_owned().await),
            _across: None,
        };
        guard._across = crate::conversation::cluster::lock(st, across_name(message_id)).await?;
        Ok(guard)
    }

    /// The message's lock if no one holds it now, here or on another instance alive.
    pub async fn try_lock(
        &self,
        st: &crate::AppState,
        message_id: &str,
    ) -> crate::Result<Option<MessageGuard<'_>>> {
        let Ok(local) = self.local(message_id).try_lock_owned() else {
            return Ok(None);
        };
        let mut guard = MessageGuard {
            locks: self,
            id: message_id.to_owned(),
            guard: Some(local),
            _across: None,
        };
        match crate::conversation::cluster::try_lock(st, across_name(message_id)).await? {
            Some(across) => guard._across = across,
            None => return Ok(None),
        }
        Ok(Some(guard))
    }

    fn local(&self, message_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(message_id.to_owned()).or_default().clone()
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

    /// Whether the reply `message_id` still streams with calls begun, on this instance.
    pub fn is_streaming(&self, message_id: &str) -> bool {
        self.streams().contains(message_id)
    }

    /// Whether the reply `message_id` still streams with calls begun, here or on another
    /// instance that is alive ([`streaming_mark`]).
    pub async fn is_streaming_anywhere(
        &self,
        st: &crate::AppState,
        message_id: &str,
    ) -> crate::Result<bool> {
        Ok(self.is_streaming(message_id)
            || crate::conversation::cluster::owned_alive(st, &streaming_mark(message_id)).await?)
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

/// The name under which the instance whose reply streams with calls begun holds it, for
/// the others ([`crate::conversation::cluster::own`]).
pub fn streaming_mark(message_id: &str) -> String {
    format!("streaming:{message_id}")
}
