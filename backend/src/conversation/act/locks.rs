//! One lock per message whose calls are being worked on ([`MessageLocks`]).

use std::collections::HashMap;
use std::sync::Arc;

/// One lock per message whose calls are being worked on: the turn settling them and a
/// decision arriving meanwhile take turns, so exactly one of them sees the last result.
#[derive(Default)]
pub struct MessageLocks(std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

/// Held while a message's calls are worked on; forgets the lock when nobody else wants it.
pub struct MessageGuard<'a> {
    locks: &'a MessageLocks,
    id: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl MessageLocks {
    pub async fn lock(&self, message_id: &str) -> MessageGuard<'_> {
        let m = {
            let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(message_id.to_owned()).or_default().clone()
        };
        MessageGuard {
            locks: self,
            id: message_id.to_owned(),
            guard: Some(m.lock_owned().await),
        }
    }

    /// How many messages have a lock (held or wanted): zero when nothing is being acted on.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for MessageGuard<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut map = self.locks.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(&self.id).is_some_and(|m| Arc::strong_count(m) == 1) {
            map.remove(&self.id);
        }
    }
}
