//! What searches keep open in memory (reference 002 §13), by key, bounded in bytes
//! (`--index-cache-mib`), the least recently used let go first:
//! - the vectors of texts, by (endpoint and model, text's tag): a user's skills' vectors
//!   and their memory's are sealed in the database, and opening thousands of them at each
//!   search would cost more than the search. A tag names a text's content, so such an entry
//!   never goes stale: a changed text has another tag;
//! - a memory's index ([`crate::memory`]), by agent and user, which its searches bring up to
//!   date with what is stored.

use std::any::Any;
use std::sync::{Arc, Mutex};

use hashlink::LinkedHashMap;

/// What the cache holds unless the installation says otherwise (`--index-cache-mib`).
pub const DEFAULT_BYTES: usize = 256 << 20;

/// An entry's key: what kind of entry and where (a vector's endpoint and model), and which
/// (its text's tag).
pub type Key = (Arc<str>, Vec<u8>);

/// What a vector entry is counted as: its numbers, its tag, and the map's own share.
fn size(key: &Key, v: &[f32]) -> usize {
    v.len() * 4 + key.1.len() + 64
}

pub struct IndexCache {
    inner: Mutex<Inner>,
    limit: usize,
}

struct Entry {
    value: Arc<dyn Any + Send + Sync>,
    bytes: usize,
}

#[derive(Default)]
struct Inner {
    /// Least recently used first.
    entries: LinkedHashMap<Key, Entry>,
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
        self.get_any(key)
    }

    /// Holds `v` under `key`, letting the least recently used go to stay within the limit;
    /// a vector larger than the whole limit is not held.
    pub fn put(&self, key: Key, v: Arc<Vec<f32>>) {
        let bytes = size(&key, &v);
        self.put_any(key, v, bytes);
    }

    /// The entry of `key` if held and of type `T` (now the most recently used).
    pub fn get_any<T: Any + Send + Sync>(&self, key: &Key) -> Option<Arc<T>> {
        let mut inner = self.lock();
        let v = inner.entries.get(key)?.value.clone();
        inner.entries.to_back(key);
        v.downcast().ok()
    }

    /// Holds `value`, counted as `bytes`, under `key` (again: its count is now `bytes`),
    /// letting the least recently used go to stay within the limit; one larger than the
    /// whole limit is not held (and an older entry of its key goes).
    pub fn put_any<T: Any + Send + Sync>(&self, key: Key, value: Arc<T>, bytes: usize) {
        let mut inner = self.lock();
        self.hold(&mut inner, key, value, bytes);
    }

    /// [`IndexCache::put_any`] with the lock held.
    fn hold(&self, inner: &mut Inner, key: Key, value: Arc<dyn Any + Send + Sync>, bytes: usize) {
        if let Some(old) = inner.entries.remove(&key) {
            inner.bytes -= old.bytes;
        }
        if bytes > self.limit {
            return;
        }
        while inner.bytes + bytes > self.limit {
            let Some((_, old)) = inner.entries.pop_front() else {
                break;
            };
            inner.bytes -= old.bytes;
        }
        inner.bytes += bytes;
        inner.entries.insert(key, Entry { value, bytes });
    }

    /// The entry of `key` if held and of type `T`, else a new default one, held at once
    /// (counted as `bytes` until put again): two callers asking together get the same
    /// entry, so what one builds the other waits for rather than builds again. Whether it
    /// was new.
    pub fn get_or_default<T: Any + Send + Sync + Default>(
        &self,
        key: &Key,
        bytes: usize,
    ) -> (Arc<T>, bool) {
        let mut inner = self.lock();
        if let Some(v) = inner.entries.get(key).map(|e| e.value.clone()) {
            inner.entries.to_back(key);
            if let Ok(v) = v.downcast::<T>() {
                return (v, false);
            }
        }
        let fresh = Arc::new(T::default());
        self.hold(&mut inner, key.clone(), fresh.clone(), bytes);
        (fresh, true)
    }

    /// Lets the entry of `key` go.
    pub fn remove(&self, key: &Key) {
        let mut inner = self.lock();
        if let Some(old) = inner.entries.remove(key) {
            inner.bytes -= old.bytes;
        }
    }

    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The most bytes held.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// How many entries are held.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn two_askers_of_a_new_entry_get_the_same_one() {
        let cache = IndexCache::new(1 << 20);
        let key: Key = (Arc::from("k"), vec![1]);
        let (a, new_a) = cache.get_or_default::<std::sync::Mutex<Vec<u8>>>(&key, 10);
        let (b, new_b) = cache.get_or_default::<std::sync::Mutex<Vec<u8>>>(&key, 10);
        assert!(new_a && !new_b);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(cache.bytes(), 10);
        // An entry of another type under the key is replaced by a new default.
        let (_, new_c) = cache.get_or_default::<String>(&key, 5);
        assert!(new_c);
        assert_eq!(cache.bytes(), 5);
    }

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

    #[test]
    fn entries_of_other_kinds_are_held_by_type_and_counted_as_told() {
        let cache = IndexCache::new(1000);
        let k = (Arc::from("memory"), vec![1]);
        cache.put_any(k.clone(), Arc::new(String::from("index")), 600);
        assert_eq!(
            cache.get_any::<String>(&k).as_deref().map(String::as_str),
            Some("index")
        );
        // Asked for as another type: not that.
        assert!(cache.get(&k).is_none());
        // Counted again when put again.
        cache.put_any(k.clone(), Arc::new(String::from("grown")), 900);
        assert_eq!(cache.bytes(), 900);
        // Grown past the whole: let go.
        cache.put_any(k.clone(), Arc::new(String::from("huge")), 1001);
        assert!(cache.get_any::<String>(&k).is_none());
        assert_eq!(cache.bytes(), 0);
        cache.put_any(k.clone(), Arc::new(String::from("again")), 10);
        cache.remove(&k);
        assert!(cache.is_empty() && cache.bytes() == 0);
    }
}
