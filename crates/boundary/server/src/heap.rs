//! Bytes the process holds on its heap: allocated and not yet freed. The `livestate` binary wraps
//! its global allocator in [`Counting`]; `GET /v1/health` reports the count beside what the
//! embedded stores hold, so a soak can tell memory the program holds from memory the allocator
//! keeps or the system counts (code, stacks, mapped files).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

static LIVE: AtomicI64 = AtomicI64::new(0);
static COUNTING: AtomicBool = AtomicBool::new(false);

/// A global allocator that counts the bytes allocated through `A` and not yet freed.
///
/// ```ignore
/// #[global_allocator]
/// static GLOBAL: Counting<mimalloc::MiMalloc> = Counting(mimalloc::MiMalloc);
/// ```
pub struct Counting<A>(pub A);

impl<A> Counting<A> {
    fn add(bytes: i64) {
        LIVE.fetch_add(bytes, Ordering::Relaxed);
        if !COUNTING.load(Ordering::Relaxed) {
            COUNTING.store(true, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call is passed to `A` unchanged; the wrapper only adds to a counter.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `A`'s.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            Self::add(layout.size() as i64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `A`'s.
        let p = unsafe { self.0.alloc_zeroed(layout) };
        if !p.is_null() {
            Self::add(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `A`'s.
        unsafe { self.0.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is `A`'s.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            Self::add(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

/// Bytes allocated and not freed, when the process allocates through [`Counting`]; `None`
/// otherwise (tests, or a binary built for a heap profiler).
pub fn live_bytes() -> Option<u64> {
    COUNTING.load(Ordering::Relaxed).then(|| LIVE.load(Ordering::Relaxed).max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_adds_what_is_allocated_and_takes_back_what_is_freed() {
        // Not this test binary's global allocator: only this test moves the counter.
        let counting = Counting(std::alloc::System);
        let before = LIVE.load(Ordering::SeqCst);
        let small = Layout::from_size_align(1000, 8).unwrap();
        // SAFETY: each pointer is used with the layout it was allocated with, and freed once.
        unsafe {
            let p = counting.alloc(small);
            assert_eq!(LIVE.load(Ordering::SeqCst) - before, 1000);
            let p = counting.realloc(p, small, 3000);
            assert_eq!(LIVE.load(Ordering::SeqCst) - before, 3000);
            counting.dealloc(p, Layout::from_size_align(3000, 8).unwrap());
            let z = counting.alloc_zeroed(small);
            assert_eq!(LIVE.load(Ordering::SeqCst) - before, 1000);
            counting.dealloc(z, small);
        }
        assert_eq!(LIVE.load(Ordering::SeqCst), before);
        assert!(live_bytes().is_some());
    }
}
