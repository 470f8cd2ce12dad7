//! `GET /v1/health`: whether the record takes appends, and what each embedded store holds in
//! memory (the part of the server's memory its configuration bounds).

mod common;

use common::{event, start};
use livestate_client::HealthStatus;
use serde_json::json;

#[tokio::test]
async fn health_reports_each_stores_block_cache_and_unflushed_writes() {
    let mut server = start().await;
    server
        .client("module:inventory")
        .emit(&event(
            "c1",
            "inventory.stock_counted",
            json!({"item": "bolt", "location": "north", "on_hand": 5}),
        ))
        .await
        .unwrap();
    let health = server.client("agent:procurement").health().await.unwrap();
    assert_eq!(health.status, HealthStatus::Ok, "{health:?}");
    assert_eq!(health.record_next_offset, 1, "{health:?}");
    assert_eq!(health.error, None, "{health:?}");
    use livestate_record::memory::{INDEX_CACHE_BYTES, PROPOSALS_CACHE_BYTES, RECORD_CACHE_BYTES};
    let stores = health.stores;
    for (store, s, cache) in [
        ("record", stores.record, RECORD_CACHE_BYTES),
        ("index", stores.index, INDEX_CACHE_BYTES),
        ("proposals", stores.proposals, PROPOSALS_CACHE_BYTES),
    ] {
        assert_eq!(s.block_cache_capacity_bytes, cache, "{store}: {health:?}");
        assert!(s.block_cache_bytes <= cache, "{store}: {health:?}");
        assert!(s.journals >= 1, "{store}: {health:?}");
    }
    // The event sits in the record's memtable until it fills or the journal outgrows its limit.
    assert!(stores.record.write_buffer_bytes > 0, "{health:?}");
    server.stop().await;
}
