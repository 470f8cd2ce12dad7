//! A global allocator that counts the bytes allocated and not yet freed, for the binaries that
//! measure what reads hold (tests/read_memory.rs, benches/whole_file_reads.rs). It counts every
//! allocation of the process, so such a binary runs nothing else beside its measurement.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

/// The system allocator, counted.
pub struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

/// Bytes allocated through [`Counting`] and not freed.
pub fn live() -> i64 {
    LIVE.load(Ordering::SeqCst)
}

// SAFETY: every call is passed to `System` unchanged; the wrapper only adds to a counter.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }
}
