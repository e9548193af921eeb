//! A global allocator that counts the bytes the heap holds, for benchmarks (`stream_bench
//! --heap`). It lives here because this crate is the one place `unsafe` is allowed; the
//! count is off (one relaxed load per call) until [`CountingAlloc::start`], since a shared
//! counter costs CPU on every allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// The system allocator, counting live bytes once started.
pub struct CountingAlloc {
    on: AtomicBool,
    live: AtomicI64,
    /// The most `live` has been since [`CountingAlloc::reset_peak`].
    peak: AtomicI64,
}

impl CountingAlloc {
    pub const fn new() -> Self {
        CountingAlloc {
            on: AtomicBool::new(false),
            live: AtomicI64::new(0),
            peak: AtomicI64::new(0),
        }
    }

    /// Counts from now on (bytes allocated before and freed after count negative).
    pub fn start(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    /// Bytes allocated and not freed while counting.
    pub fn live_bytes(&self) -> i64 {
        self.live.load(Ordering::Relaxed)
    }

    /// The most bytes held at once since the last [`CountingAlloc::reset_peak`] (or the
    /// start).
    pub fn peak_bytes(&self) -> i64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Starts the peak again from what is held now.
    pub fn reset_peak(&self) {
        self.peak.store(self.live_bytes(), Ordering::Relaxed);
    }

    fn count(&self, bytes: i64) {
        if self.on.load(Ordering::Relaxed) {
            let now = self.live.fetch_add(bytes, Ordering::Relaxed) + bytes;
            if bytes > 0 {
                self.peak.fetch_max(now, Ordering::Relaxed);
            }
        }
    }
}

impl Default for CountingAlloc {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call is passed to `System` unchanged; only a counter is updated beside it.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            self.count(l.size() as i64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            self.count(l.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        self.count(-(l.size() as i64));
        // SAFETY: `p` came from `System` through this allocator, with layout `l`.
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new` is the caller's non-zero size.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            self.count(new as i64 - l.size() as i64);
        }
        q
    }
}
