//! `GET /v1/health`: whether the record takes appends, and what each embedded store holds in
//! memory (the part of the server's memory its configuration bounds).

mod common;

use common::{event, start};
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
    assert_eq!(health["status"], json!("ok"), "{health}");
    assert_eq!(health["record_next_offset"], json!(1), "{health}");
    use livestate_record::memory::{INDEX_CACHE_BYTES, PROPOSALS_CACHE_BYTES, RECORD_CACHE_BYTES};
    for (store, cache) in
        [("record", RECORD_CACHE_BYTES), ("index", INDEX_CACHE_BYTES), ("proposals", PROPOSALS_CACHE_BYTES)]
    {
        let s = &health["stores"][store];
        assert_eq!(s["block_cache_capacity_bytes"], json!(cache), "{store}: {health}");
        assert!(s["block_cache_bytes"].as_u64().unwrap() <= cache, "{store}: {health}");
        assert!(s["queued_flushes"].is_u64() && s["journals"].as_u64().unwrap() >= 1, "{store}: {health}");
    }
    // The event sits in the record's memtable until it fills or the journal outgrows its limit.
    assert!(health["stores"]["record"]["write_buffer_bytes"].as_u64().unwrap() > 0, "{health}");
    server.stop().await;
}
