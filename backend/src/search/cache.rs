//! The vectors of texts held in memory (reference 002 §13): a user's skills' vectors are
//! sealed in the database, and opening a thousand of them at each search would cost more
//! than the search; here they are kept open, in memory only, by (endpoint, model, tag). A
//! tag names a text's content, so an entry never goes stale: a changed skill has another
//! tag. Bounded in bytes (`--index-cache-mib`), the least recently used let go first.

use std::sync::{Arc, Mutex};

use hashlink::LinkedHashMap;

/// What the cache holds unless the installation says otherwise (`--index-cache-mib`).
pub const DEFAULT_BYTES: usize = 256 << 20;

/// A vector's key: its endpoint and model, and its text's tag.
pub type Key = (Arc<str>, Vec<u8>);

/// What one entry is counted as: its numbers, its tag, and the map's own share.
fn size(key: &Key, v: &[f32]) -> usize {
    v.len() * 4 + key.1.len() + 64
}

pub struct IndexCache {
    inner: Mutex<Inner>,
    limit: usize,
}

#[derive(Default)]
struct Inner {
    /// Least recently used first.
    entries: LinkedHashMap<Key, Arc<Vec<f32>>>,
    bytes: usize,
}

impl Default for IndexCache {
    fn default() -> Self {
        IndexCache::new(DEFAULT_BYTES)
    }
}

impl IndexCache {
    /// A cache of `limit` bytes at most.
    pub fn new(limit: usize) -> IndexCache {
        IndexCache {
            inner: Mutex::default(),
            limit,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The vector of `key`, if held (now the most recently used).
    pub fn get(&self, key: &Key) -> Option<Arc<Vec<f32>>> {
        let mut inner = self.lock();
        let v = inner.entries.get(key).cloned()?;
        inner.entries.to_back(key);
        Some(v)
    }

    /// Holds `v` under `key`, letting the least recently used go to stay within the limit;
    /// a vector larger than the whole limit is not held.
    pub fn put(&self, key: Key, v: Arc<Vec<f32>>) {
        let bytes = size(&key, &v);
        if bytes > self.limit {
            return;
        }
        let mut inner = self.lock();
        if let Some(old) = inner.entries.remove(&key) {
            inner.bytes -= size(&key, &old);
        }
        while inner.bytes + bytes > self.limit {
            let Some((k, old)) = inner.entries.pop_front() else {
                break;
            };
            inner.bytes -= size(&k, &old);
        }
        inner.bytes += bytes;
        inner.entries.insert(key, v);
    }

    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// How many vectors are held.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u8) -> Key {
        (Arc::from("e|m"), vec![i; 16])
    }

    #[test]
    fn bounded_in_bytes_least_recently_used_first() {
        let one = size(&key(0), &[0.0; 8]);
        let cache = IndexCache::new(3 * one);
        for i in 0..3 {
            cache.put(key(i), Arc::new(vec![f32::from(i); 8]));
        }
        assert_eq!((cache.len(), cache.bytes()), (3, 3 * one));
        // 0 used: 1 is now the least recently used.
        assert_eq!(cache.get(&key(0)).unwrap()[0], 0.0);
        cache.put(key(3), Arc::new(vec![3.0; 8]));
        assert!(cache.get(&key(1)).is_none());
        assert!(cache.get(&key(0)).is_some() && cache.get(&key(3)).is_some());
        assert_eq!(cache.bytes(), 3 * one);
        // Again under one key: counted once.
        cache.put(key(3), Arc::new(vec![4.0; 8]));
        assert_eq!((cache.len(), cache.bytes()), (3, 3 * one));
        // Larger than the whole: not held, nothing let go.
        cache.put(key(9), Arc::new(vec![0.0; 128]));
        assert!(cache.get(&key(9)).is_none());
        assert_eq!(cache.len(), 3);
        assert!(cache.bytes() <= 3 * one);
    }
}
