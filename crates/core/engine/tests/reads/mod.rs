//! What the binaries that measure whole-file reads share (tests/read_memory.rs,
//! benches/whole_file_reads.rs): a global allocator that counts the bytes allocated and not yet
//! freed, the filesystem operator as the `paimon` crate builds it, the heap a number of kept
//! reads hold, and the heap an operator's buffer pool keeps after reads at once. The allocator
//! counts every allocation of the process, so such a binary runs nothing else beside its
//! measurement.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

use opendal::{Buffer, Operator};
use opendal_service_fs::FsConfig;

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

/// The filesystem operator as the `paimon` crate builds it for a local warehouse (rooted at `/`).
pub fn paimon_operator() -> Operator {
    let mut cfg = FsConfig::default();
    cfg.root = Some("/".to_string());
    Operator::from_config(cfg).unwrap()
}

/// `file` as an operator rooted at `/` names it.
pub fn op_path(file: &Path) -> String {
    file.to_string_lossy().trim_start_matches('/').to_string()
}

/// Heap held by `n` kept results of whole-file reads of `path` through `op` (each of `len`
/// bytes), after one read has filled the filesystem service's buffer pool.
pub async fn held_by_kept_reads(op: &Operator, path: &str, n: usize, len: usize) -> i64 {
    drop(op.read(path).await.unwrap());
    let before = live();
    let mut held: Vec<Buffer> = Vec::with_capacity(n);
    for _ in 0..n {
        held.push(op.read(path).await.unwrap());
    }
    assert!(held.iter().all(|b| b.len() == len));
    live() - before
}

/// Heap `op` still holds after `n` whole-file reads of `path` (of `len` bytes) at once, their
/// results dropped: the filesystem service's pool of read buffers (up to 16), which concurrent
/// reads fill.
pub async fn held_after_concurrent_reads(op: &Operator, path: &str, n: usize, len: usize) -> i64 {
    let before = live();
    let results = futures::future::join_all((0..n).map(|_| op.read(path))).await;
    assert!(results.iter().all(|r| r.as_ref().is_ok_and(|b| b.len() == len)));
    drop(results);
    live() - before
}
