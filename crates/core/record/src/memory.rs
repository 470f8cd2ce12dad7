//! The memory an embedded store (a fjall database) may hold, and what it holds now.
//!
//! A fjall database keeps two things in memory that grow with use: a block cache (bounded by
//! its capacity) and memtables (writes not yet flushed to a table file). A keyspace flushes its
//! memtable when its keys and values reach the keyspace's `max_memtable_size`, or when the
//! database's journal outgrows its limit, whichever comes first. A memtable takes about two
//! and a half times its keys and values in memory (skiplist nodes, per-entry buffers: a heap
//! profile of the soak found 80 MiB of memtables where fjall counted 30), and a keyspace
//! written slowly fills its memtable slowly: with fjall's defaults (64 MiB memtables, a 512 MiB
//! journal) a server under a steady load grew for the better part of an hour. So every
//! livestate store opens with [`database`], whose journal limit of [`JOURNAL_BYTES`] flushes
//! slowly written keyspaces once the busy ones have written that much, and gives its keyspaces
//! small memtables (record and lookup index 2 MiB, proposals 1 MiB). The lookup index, whose
//! dozen keyspaces are written at very different rates, also flushes every keyspace's writes
//! once they are [`FLUSH_PERIOD`] old ([`PeriodicFlush`]): without it, its unflushed writes rose
//! from 2 to 8 MiB over a 10-minute soak (about 20 MiB of memtables) as the slow keyspaces
//! filled. The record's two keyspaces and the proposal store's are busy or small enough to cycle.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fjall::{Database, DatabaseBuilder, Keyspace};
use serde::Serialize;

/// Journal limit of every livestate store: once its journals hold this much, fjall flushes the
/// memtables holding the oldest writes (fjall's minimum; its default is 512 MiB).
pub const JOURNAL_BYTES: u64 = 64 * 1024 * 1024;

/// Block cache of the record. Reads mostly hit the newest events, still in memtables.
pub const RECORD_CACHE_BYTES: u64 = 8 * 1024 * 1024;
/// Block cache of the lookup index. Point reads, lookups and the derivers' before-images read
/// it; the example company's hot rows (10,000 stock rows) take about 1 MiB and the rest is
/// scans, which a larger cache only makes fill for longer (the soak measured 32 MiB filling at
/// about 3 MiB a minute, docs/BENCHMARKS.md).
pub const INDEX_CACHE_BYTES: u64 = 8 * 1024 * 1024;
/// Block cache of the proposal store: proposals are few and small.
pub const PROPOSALS_CACHE_BYTES: u64 = 4 * 1024 * 1024;

/// Background threads of every livestate store: three, whatever the core count.
///
/// Not one. Every write to a keyspace whose memtable is over its size asks the workers to
/// rotate it (a non-blocking send on fjall's work queue of 1,000 messages), so a busy writer
/// fills the queue while the workers compact. The worker that then rotates the memtable sends
/// the flush request with a *blocking* send on that same full queue: with one worker nobody is
/// left to drain it, the worker waits forever, sealed memtables pile up and every write halts.
/// `tests/store_memory.rs` hung exactly so (both threads parked in `flume` sends) a day after
/// the count was lowered to one to save fjall's spinning (fjall issues #257 and #260 report
/// the same family of hangs). With two or more, another worker drains the queue.
///
/// Not two. After each flush fjall sends one compaction request per worker, and worker 0, kept
/// for flushes, hands every compaction request it receives back to the queue and takes it
/// again at once. With two workers, the second request stays in the queue for as long as
/// worker 1 compacts, and worker 0 spins on it all that time: a core busy doing nothing for as
/// long as fjall compacts, 7.8 % of an ingest's samples (docs/BENCHMARKS.md, eleventh pass).
/// With three, the request worker 0 hands back is taken by worker 2, whose compaction of the
/// same keyspace finds the tables already taken by worker 1 and returns at once: the spin
/// lasts a wake-up, not a compaction (1.1 % of the samples, and 7 % less CPU per ingest). The
/// price: a third thread per store, and a peak RSS up to about 20 MiB higher in that A/B (the
/// cause not isolated).
pub const WORKER_THREADS: usize = 3;

/// A builder for the fjall database in `path` with a block cache of `cache_bytes`, the
/// journal limit [`JOURNAL_BYTES`] and [`WORKER_THREADS`] background threads.
pub fn database(path: &Path, cache_bytes: u64) -> DatabaseBuilder<Database> {
    Database::builder(path)
        .cache_size(cache_bytes)
        .max_journaling_size(JOURNAL_BYTES)
        .worker_threads(WORKER_THREADS)
}

/// What one embedded store holds in memory now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StoreMemory {
    /// Bytes in the block cache.
    pub block_cache_bytes: u64,
    /// Capacity of the block cache.
    pub block_cache_capacity_bytes: u64,
    /// Keys and values in memtables (active and sealed), not yet flushed to table files. The
    /// memtables themselves take about two and a half times this.
    pub write_buffer_bytes: u64,
    /// Memtable flushes queued and not yet started: above zero for long, flushes lag writes.
    pub queued_flushes: usize,
    /// Journal files (the active one and sealed ones whose writes are not all flushed yet).
    pub journals: usize,
}

impl StoreMemory {
    /// The current figures of `db`.
    pub fn of(db: &Database) -> StoreMemory {
        StoreMemory {
            block_cache_bytes: db.cache_size(),
            block_cache_capacity_bytes: db.cache_capacity(),
            // Marked experimental in fjall 3.1: the sum its flush bookkeeping keeps.
            write_buffer_bytes: db.write_buffer_size(),
            queued_flushes: db.outstanding_flushes(),
            journals: db.journal_count(),
        }
    }
}

/// How old unflushed writes may get in a store using [`PeriodicFlush`] before they are flushed.
pub const FLUSH_PERIOD: Duration = Duration::from_secs(30);

/// Flushes a store's keyspaces once a period has passed since the last time, so memtables hold
/// at most about two periods of writes however slowly each keyspace is written: memory reaches
/// its level within a minute of a steady load instead of as slowly as the slowest keyspace fills.
/// Driven by the store's writes (a store nobody writes holds nothing new); the flushes themselves
/// run on fjall's background workers.
#[derive(Debug)]
pub struct PeriodicFlush {
    period_ms: u64,
    start: Instant,
    /// Milliseconds after `start` of the last flush.
    last_ms: AtomicU64,
}

impl PeriodicFlush {
    /// Flushes every `period`.
    pub fn new(period: Duration) -> PeriodicFlush {
        PeriodicFlush {
            period_ms: u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    /// Call after writing to the store: when a period has passed since the last flush, seals the
    /// memtable of each keyspace holding writes, for fjall to flush (empty ones are left alone).
    /// Returns whether it did.
    ///
    /// # Errors
    /// fjall's, when the journal cannot be written (a sealed memtable starts a new one).
    pub fn after_write<'a>(&self, keyspaces: impl IntoIterator<Item = &'a Keyspace>) -> fjall::Result<bool> {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.last_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < self.period_ms
            || self.last_ms.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err()
        {
            return Ok(false);
        }
        for keyspace in keyspaces {
            // Marked hidden in fjall 3.1 (what its own memtable-size limit calls).
            keyspace.rotate_memtable()?;
        }
        Ok(true)
    }
}
