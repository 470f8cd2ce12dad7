//! A company stocked for a `stock_replenishment` decision, and proposals of it.

use livestate_client::{ConsistentAnswer, TableRead};
use serde_json::{json, Value};

use super::{event, TestServer};

/// bolt at north: 50 on hand, 15 reserved, reorder point 40, target 100 (available 35);
/// acme sells it in packs of 50 at 1.50 and is rated low risk.
pub async fn stocked(server: &TestServer) {
    let admin = server.client("admin");
    let lines = [
        event("c1", "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 50})),
        event(
            "r1",
            "commerce.reservation_changed",
            json!({"item": "bolt", "location": "north", "reserved": 15}),
        ),
        event(
            "p1",
            "procurement.planning_set",
            json!({"item": "bolt", "location": "north", "reorder_point": 40, "target": 100}),
        ),
        event(
            "l1",
            "procurement.supplier_item_listed",
            json!({"supplier": "acme", "item": "bolt", "pack_size": 50, "unit_price": "1.50", "lead_time_days": 2}),
        ),
        event("s1", "procurement.supplier_risk_assessed", json!({"supplier": "acme", "level": "low"})),
    ];
    admin.emit(&lines.concat()).await.unwrap();
}

/// The result of `table` in a consistent read, as a cited source of its first row.
pub fn cite(read: &ConsistentAnswer, table: &str) -> Value {
    let r = read.result(table).unwrap();
    json!({"table": table, "snapshot_id": r.receipt.snapshot_id, "offset": r.receipt.offset,
           "lag_ms": r.receipt.lag_ms, "committed_at": r.receipt.committed_at, "rows": [r.rows.first()]})
}

/// A `stock_replenishment` proposal of 100 bolts for north from acme citing `sources`.
pub fn replenishment(sources: Vec<Value>) -> Value {
    json!({
        "kind": "stock_replenishment", "module": "procurement", "summary": "order 100 bolts",
        "action": {"item": "bolt", "location": "north", "supplier": "acme", "qty": 100},
        "sources": sources,
        "rule": {"name": "order-up-to-target", "version": "1", "text": "order target - available, rounded to the pack"},
        "risk": {"level": "low", "reasons": ["supplier risk low"]},
    })
}

/// One consistent read of the three tables a replenishment looks at.
pub async fn read_all(server: &TestServer) -> ConsistentAnswer {
    server
        .client("agent:procurement")
        .consistent_read(&[
            TableRead::table("stock").key("item", "bolt").key("location", "north"),
            TableRead::table("supplier_items").key("item", "bolt"),
            TableRead::table("supplier_risk").key("supplier", "acme"),
        ])
        .await
        .unwrap()
}
