//! The memory an embedded store (a fjall database) may hold, and what it holds now.
//!
//! A fjall database keeps two things in memory that grow with use: a block cache (bounded by
//! its capacity) and memtables (writes not yet flushed to a table file). A keyspace flushes its
//! memtable when it reaches the keyspace's `max_memtable_size`, or when the database's
//! journal outgrows its limit, whichever comes first. With fjall's default journal limit of
//! 512 MiB, a keyspace written slowly beside busy ones keeps its writes in memory for the better
//! part of an hour, so memory climbed for that long under a steady load. Every livestate store
//! opens with [`database`], whose journal limit of [`JOURNAL_BYTES`] bounds all its memtables
//! together to about that much, however slowly each keyspace is written.

use std::path::Path;

use fjall::{Database, DatabaseBuilder};
use serde::Serialize;

/// Journal limit of every livestate store: once its journals hold this much, fjall flushes the
/// memtables holding the oldest writes (fjall's minimum; its default is 512 MiB).
pub const JOURNAL_BYTES: u64 = 64 * 1024 * 1024;

/// A builder for the fjall database in `path` with a block cache of `cache_bytes` and the
/// journal limit [`JOURNAL_BYTES`].
pub fn database(path: &Path, cache_bytes: u64) -> DatabaseBuilder<Database> {
    Database::builder(path).cache_size(cache_bytes).max_journaling_size(JOURNAL_BYTES)
}

/// What one embedded store holds in memory now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StoreMemory {
    /// Bytes in the block cache.
    pub block_cache_bytes: u64,
    /// Capacity of the block cache.
    pub block_cache_capacity_bytes: u64,
    /// Bytes in memtables (active and sealed), not yet flushed to table files.
    pub write_buffer_bytes: u64,
}

impl StoreMemory {
    /// The current figures of `db`.
    pub fn of(db: &Database) -> StoreMemory {
        StoreMemory {
            block_cache_bytes: db.cache_size(),
            block_cache_capacity_bytes: db.cache_capacity(),
            // Marked experimental in fjall 3.1: the sum its flush bookkeeping keeps.
            write_buffer_bytes: db.write_buffer_size(),
        }
    }

    /// Block cache and write buffers together.
    pub fn total_bytes(&self) -> u64 {
        self.block_cache_bytes + self.write_buffer_bytes
    }
}
