//! The four merge engines, fed only by events through the example company's mappings.

mod common;

use common::{derive, fresh, line, rows};
use serde_json::json;

#[tokio::test]
async fn partial_update_row_is_merged_from_three_modules() {
    let (_d, ls) = fresh().await;
    let key = json!({"item": "bolt", "location": "north"});
    let with = |extra: serde_json::Value| {
        let mut m = key.as_object().unwrap().clone();
        m.extend(extra.as_object().unwrap().clone());
        serde_json::Value::Object(m)
    };
    // Three modules, each in its own commit, none aware of the others.
    ls.emit(&line(1, "inventory.stock_counted", with(json!({"on_hand": 40}))), false).unwrap();
    derive(&ls).await;
    ls.emit(&line(2, "commerce.reservation_changed", with(json!({"reserved": 7}))), false).unwrap();
    derive(&ls).await;
    let batch = [
        line(3, "procurement.inbound_changed", with(json!({"inbound": 25}))),
        line(4, "procurement.planning_set", with(json!({"reorder_point": 30, "target": 90}))),
        line(5, "inventory.stock_counted", with(json!({"on_hand": 38}))),
    ]
    .join("\n");
    ls.emit(&batch, false).unwrap();
    derive(&ls).await;
    let got = rows(&ls, "stock", &[]).await;
    assert_eq!(
        got,
        vec![json!({
            "item": "bolt", "location": "north", "on_hand": 38, "reserved": 7, "inbound": 25,
            "reorder_point": 30, "target": 90, "updated_at": "2026-03-02T08:00:05.000"
        })]
    );
}

#[tokio::test]
async fn delete_through_a_mapping_removes_the_row() {
    let (_d, ls) = fresh().await;
    let order = |id: &str| json!({"order_id": id, "line": 1, "customer": "c1", "item": "bolt", "location": "north", "qty": 3, "unit_price": "2.50"});
    let lines = [
        line(1, "commerce.order_placed", order("so-1")),
        line(2, "commerce.order_placed", order("so-2")),
        line(3, "commerce.order_placed", order("so-3")),
    ];
    ls.emit(&lines.join("\n"), false).unwrap();
    derive(&ls).await;
    assert_eq!(rows(&ls, "open_orders", &[]).await.len(), 3);
    let gone = [
        line(
            4,
            "commerce.order_shipped",
            json!({"order_id": "so-1", "line": 1, "item": "bolt", "location": "north", "qty": 3}),
        ),
        line(
            5,
            "commerce.order_cancelled",
            json!({"order_id": "so-3", "line": 1, "item": "bolt", "location": "north", "qty": 3}),
        ),
    ];
    ls.emit(&gone.join("\n"), false).unwrap();
    derive(&ls).await;
    let left = rows(&ls, "open_orders", &[]).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["order_id"], "so-2");
    assert_eq!(left[0]["line_value"], "7.50", "qty * unit_price into decimal(14,2)");
}

/// Orders of gear placed at east (5) and north (7), in one commit; then, in a second, a count
/// at south, the east order shipped and an order of 2 placed at south (event 5).
async fn gear_ordered_shipped_and_ordered_again(ls: &livestate_engine::Livestate) {
    let placed = |n: u32, order: &str, qty: i64, loc: &str| {
        line(
            n,
            "commerce.order_placed",
            json!({"order_id": order, "line": 1, "customer": "c", "item": "gear", "location": loc, "qty": qty, "unit_price": "1.00"}),
        )
    };
    ls.emit(&[placed(1, "a", 5, "east"), placed(2, "b", 7, "north")].join("\n"), false).unwrap();
    derive(ls).await;
    ls.emit(
        &line(3, "inventory.stock_counted", json!({"item": "gear", "location": "south", "on_hand": 1})),
        false,
    )
    .unwrap();
    ls.emit(
        &line(
            4,
            "commerce.order_shipped",
            json!({"order_id": "a", "line": 1, "item": "gear", "location": "east", "qty": 5}),
        ),
        false,
    )
    .unwrap();
    ls.emit(&placed(5, "c", 2, "south"), false).unwrap();
    derive(ls).await;
}

#[tokio::test]
async fn aggregation_sums_across_commits_and_keeps_the_latest_order_time() {
    let (_d, ls) = fresh().await;
    gear_ordered_shipped_and_ordered_again(&ls).await;
    let total = rows(&ls, "reservations_total", &[("item", "gear")]).await;
    assert_eq!(
        total,
        vec![
            json!({"item": "gear", "reserved_qty": 9, "open_lines": 2, "last_order_at": "2026-03-02T08:00:05.000"})
        ]
    );
}

#[tokio::test]
async fn first_row_keeps_the_first_event_of_a_key() {
    let (_d, ls) = fresh().await;
    gear_ordered_shipped_and_ordered_again(&ls).await;
    let first = rows(&ls, "item_first_seen", &[]).await;
    assert_eq!(
        first,
        vec![
            json!({"item": "gear", "first_seen_at": "2026-03-02T08:00:01.000", "first_location": "east", "first_event": "t-1"})
        ]
    );
}

#[tokio::test]
async fn deriving_again_after_reopen_applies_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    {
        let ls = livestate_engine::Livestate::init(&path, &common::example_spec()).await.unwrap();
        let lines: Vec<String> = (0..20)
            .map(|n| line(n, "commerce.order_placed", json!({"order_id": format!("o{n}"), "line": 1, "customer": "c", "item": "nut", "location": "east", "qty": 2, "unit_price": "1.00"})))
            .collect();
        ls.emit(&lines.join("\n"), false).unwrap();
        let r = derive(&ls).await;
        assert_eq!(r.events, 20);
    }
    let ls = livestate_engine::Livestate::open(&path).await.unwrap();
    let again = derive(&ls).await;
    assert_eq!((again.events, again.commits), (0, 0), "a reopened deriver resumes at its commit");
    let total = rows(&ls, "reservations_total", &[]).await;
    assert_eq!(total[0]["reserved_qty"], 40);
    let archive = ls.archive_rows().await.unwrap();
    assert_eq!(archive.len(), 20);
}

/// Job j1 released (snapshot 1 of `work_queue`), then blocked, and j2 released.
async fn j1_released_then_blocked(ls: &livestate_engine::Livestate) {
    ls.emit(&line(1, "operations.job_status_changed", json!({"job_id": "j1", "status": "released"})), false)
        .unwrap();
    derive(ls).await;
    ls.emit(
        &line(
            2,
            "operations.job_status_changed",
            json!({"job_id": "j1", "status": "blocked", "block_reason": "no material"}),
        ),
        false,
    )
    .unwrap();
    ls.emit(&line(3, "operations.job_status_changed", json!({"job_id": "j2", "status": "released"})), false)
        .unwrap();
    derive(ls).await;
}

#[tokio::test]
async fn a_read_filtered_by_key_gets_that_keys_latest_row() {
    let (_d, ls) = fresh().await;
    j1_released_then_blocked(&ls).await;
    let now = rows(&ls, "work_queue", &[("job_id", "j1")]).await;
    assert_eq!(now.len(), 1);
    assert_eq!(now[0]["status"], "blocked");
}

#[tokio::test]
async fn a_read_at_an_earlier_snapshot_gets_the_rows_as_they_were_then() {
    let (_d, ls) = fresh().await;
    j1_released_then_blocked(&ls).await;
    let req = livestate_engine::ReadRequest {
        table: "work_queue".into(),
        keys: vec![],
        at: livestate_engine::At::Snapshot(1),
    };
    let then = ls.read(&req).await.unwrap();
    assert_eq!(then.rows.len(), 1);
    assert_eq!(then.json_rows()[0]["status"], "released");
    assert_eq!(then.receipt.offset, Some(1), "snapshot 1 reflects offsets below 1");
}
