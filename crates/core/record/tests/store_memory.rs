//! The memory bound every livestate store opens with: writes a keyspace receives slowly are
//! flushed once the database's journal outgrows [`JOURNAL_BYTES`], not kept in memory until that
//! keyspace's own memtable fills.

use std::time::{Duration, Instant};

use fjall::KeyspaceCreateOptions;
use livestate_record::memory::{database, PeriodicFlush, JOURNAL_BYTES};
use livestate_record::StoreMemory;

/// Bytes the journal's compression of large values cannot shrink.
fn incompressible(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn a_slowly_written_keyspace_is_flushed_once_the_journal_outgrows_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), 1024 * 1024).open().unwrap();
    let busy = db.keyspace("busy", || KeyspaceCreateOptions::default().max_memtable_size(8 << 20)).unwrap();
    // Its own memtable limit alone would keep these writes in memory until 64 MiB arrived.
    let slow = db.keyspace("slow", || KeyspaceCreateOptions::default().max_memtable_size(64 << 20)).unwrap();
    slow.insert("k", vec![7u8; 4096]).unwrap();
    assert_eq!(slow.table_count(), 0);

    // Three journals' worth of writes to the busy keyspace, and a few to the slow one all along
    // (a journal only its flushed keyspaces wrote to is dropped, whatever the limit).
    let value = incompressible(64 * 1024);
    let writes = 3 * JOURNAL_BYTES / value.len() as u64;
    for i in 0..writes {
        busy.insert(i.to_be_bytes(), value.clone()).unwrap();
        if i % 16 == 0 {
            slow.insert(i.to_be_bytes(), vec![7u8; 100]).unwrap();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while slow.table_count() == 0 {
        assert!(Instant::now() < deadline, "the slow keyspace was never flushed: {:?}", StoreMemory::of(&db));
        // fjall weighs its journals when it flushes a memtable: keep the busy keyspace flushing.
        busy.insert(u64::MAX.to_be_bytes(), value.clone()).unwrap();
        busy.rotate_memtable().unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(slow.get("k").unwrap().unwrap().len(), 4096);
    assert_eq!(StoreMemory::of(&db).block_cache_capacity_bytes, 1024 * 1024);
}

#[test]
fn writes_a_period_old_are_flushed_however_slowly_their_keyspace_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), 1024 * 1024).open().unwrap();
    let slow = db.keyspace("slow", || KeyspaceCreateOptions::default().max_memtable_size(64 << 20)).unwrap();
    let flush = PeriodicFlush::new(Duration::from_millis(300));
    slow.insert("k", b"v").unwrap();
    assert!(!flush.after_write([&slow]).unwrap(), "flushed before a period had passed");

    std::thread::sleep(Duration::from_millis(350));
    assert!(flush.after_write([&slow]).unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while slow.table_count() == 0 || StoreMemory::of(&db).write_buffer_bytes > 0 {
        assert!(Instant::now() < deadline, "never flushed: {:?}", StoreMemory::of(&db));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(slow.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    // The next period starts at that flush.
    slow.insert("k2", b"v2").unwrap();
    assert!(!flush.after_write([&slow]).unwrap());
}
