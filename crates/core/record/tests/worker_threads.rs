//! Every livestate store runs three background threads (`memory::WORKER_THREADS`), whatever
//! the core count: with one, a worker blocked sending a flush request to fjall's full work queue
//! is the only thread that could drain it, and the store hangs; with two, fjall's flush worker
//! spins on a compaction request it hands back for as long as the other worker compacts.
//!
//! The only test of its binary, so no other store's threads are counted.

#![cfg(target_os = "linux")]

use livestate_record::memory::{database, WORKER_THREADS};
use livestate_record::Record;

mod common;

/// Threads of this process that fjall named as its workers.
fn fjall_workers() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "fjall:worker")
        .count()
}

/// The worker count once it settles: a new thread names itself after it starts.
fn settled_workers(expected: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while fjall_workers() < expected && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Time for any further worker to show itself.
    std::thread::sleep(std::time::Duration::from_millis(200));
    fjall_workers()
}

#[test]
fn each_store_runs_three_background_workers_whatever_the_core_count() {
    assert_eq!(WORKER_THREADS, 3);
    assert_eq!(fjall_workers(), 0);
    let dir = tempfile::tempdir().unwrap();
    let record = Record::open(&dir.path().join("record")).unwrap();
    assert_eq!(settled_workers(WORKER_THREADS), WORKER_THREADS, "the record");
    let other = database(&dir.path().join("other"), 1 << 20).open().unwrap();
    assert_eq!(settled_workers(2 * WORKER_THREADS), 2 * WORKER_THREADS, "the record and a second store");
    let ev = common::event("e-1", serde_json::json!({"qty": 1}));
    assert_eq!(record.append(vec![ev]).unwrap()[0].offset, 0);
    assert_eq!(record.read(0, 10).unwrap().len(), 1);
    drop(other);
}
