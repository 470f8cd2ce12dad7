//! The answer of `GET /v1/health`: whether the record takes appends, its next offset, and what
//! each embedded store holds in memory.

use serde::{Deserialize, Serialize};

/// Whether the server takes appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HealthStatus {
    /// Up and taking appends.
    Ok,
    /// A write or fsync of the record failed: the server answers reads but refuses appends
    /// until it is restarted (answered with 503).
    RefusingAppends,
}

/// What one embedded store (fjall) holds in memory: its block cache and its unflushed writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoreMemory {
    /// Bytes in the block cache.
    pub block_cache_bytes: u64,
    /// Capacity of the block cache.
    pub block_cache_capacity_bytes: u64,
    /// Keys and values in memtables (active and sealed), not yet flushed to table files.
    pub write_buffer_bytes: u64,
    /// Memtable flushes queued and not yet started: above zero for long, flushes lag writes.
    pub queued_flushes: u64,
    /// Journal files (the active one and sealed ones whose writes are not all flushed yet).
    pub journals: u64,
}

/// Each embedded store's memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Stores {
    /// The record.
    pub record: StoreMemory,
    /// The lookup index.
    pub index: StoreMemory,
    /// Proposals and decisions.
    pub proposals: StoreMemory,
}

impl Stores {
    /// The three stores' block caches and unflushed writes together, in bytes.
    pub fn total_bytes(&self) -> u64 {
        [self.record, self.index, self.proposals]
            .iter()
            .map(|s| s.block_cache_bytes + s.write_buffer_bytes)
            .sum()
    }
}

/// The answer of `GET /v1/health` (status 200, or 503 while the record refuses appends).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// Whether the record takes appends.
    pub status: HealthStatus,
    /// The offset the next appended event gets.
    pub record_next_offset: u64,
    /// What each embedded store holds in memory.
    pub stores: Stores,
    /// Bytes the process's allocations hold, when the binary counts them (`null` otherwise).
    pub heap_live_bytes: Option<u64>,
    /// Why appends are refused (only with `refusing_appends`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stores_memory_is_the_sum_of_every_stores_cache_and_write_buffers() {
        let store = |cache: u64, buffers: u64| StoreMemory {
            block_cache_bytes: cache << 20,
            block_cache_capacity_bytes: 16 << 20,
            write_buffer_bytes: buffers << 20,
            ..StoreMemory::default()
        };
        let stores = Stores { record: store(1, 2), index: store(3, 0), proposals: store(0, 0) };
        assert_eq!(stores.total_bytes(), 6 << 20);
    }

    #[test]
    fn an_answer_without_the_stores_is_refused() {
        let partial = serde_json::json!({"status": "ok", "record_next_offset": 3, "heap_live_bytes": null});
        assert!(serde_json::from_value::<Health>(partial).is_err(), "stores are required");
    }

    #[test]
    fn a_health_answer_refusing_appends_reads_back_with_its_error() {
        let refusing = Health {
            status: HealthStatus::RefusingAppends,
            record_next_offset: 7,
            stores: Stores::default(),
            heap_live_bytes: None,
            error: Some("fsync failed".into()),
        };
        let wire = serde_json::to_value(&refusing).unwrap();
        assert_eq!(wire["status"], "refusing_appends");
        assert_eq!(wire["heap_live_bytes"], serde_json::Value::Null, "null, not left out");
        assert_eq!(serde_json::from_value::<Health>(wire).unwrap(), refusing);
    }
}
