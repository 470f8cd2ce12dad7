//! A row operation that fails at derivation is quarantined, not fatal, and a table derived
//! again from before it (after a crash) finds the same failure and keeps one entry for it.

mod common;

use common::{derive, fresh, line, rows};
use livestate_engine::quarantine::entries;
use serde_json::json;

fn order(n: u32, id: &str, item: &str) -> String {
    line(
        n,
        "commerce.order_placed",
        json!({"order_id": id, "line": 1, "customer": "c", "item": item, "location": "north", "qty": 1, "unit_price": "1.00"}),
    )
}

fn order_ids(rows: &[serde_json::Value]) -> Vec<&str> {
    rows.iter().map(|r| r["order_id"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_failed_row_operation_is_set_aside_once_and_found_again_when_its_table_is_derived_again() {
    let (_d, ls) = fresh().await;
    let extreme = line(
        1,
        "commerce.reservation_changed",
        json!({"item": "bolt", "location": "north", "reserved": i64::MIN}),
    );
    ls.emit(&extreme, false).unwrap();
    derive(&ls).await;
    // `available_at_order` = on_hand - reserved + inbound overflows for bolt; nut is ordinary.
    let appended =
        ls.emit(&[order(2, "o-bolt", "bolt"), order(3, "o-nut", "nut")].join("\n"), false).unwrap();
    let poisoned = appended.appended[0].1.offset;

    // Apply without committing open_orders (its budget is not spent), then drop the derivers
    // as a crash would: the quarantine is on disk, the table's commit is not.
    let mut d = ls.derivers().await.unwrap();
    ls.step(&mut d).await.unwrap();
    let committed = d.committed("open_orders").unwrap().through;
    assert!(committed <= poisoned, "open_orders was not committed past the poisoned event");
    let first = entries(ls.layout(), None, 100).unwrap();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(
        (first[0].table.as_str(), first[0].offset, first[0].event_id.as_str()),
        ("open_orders", poisoned, "t-2")
    );
    assert!(first[0].message.contains("overflow in"), "{}", first[0].message);
    drop(d);

    // Derived again from its last commit: the same failure, one entry, the other order there.
    let report = derive(&ls).await;
    assert!(report.events >= 2, "{report:?}");
    assert_eq!(entries(ls.layout(), None, 100).unwrap(), first, "the same quarantine, not a second entry");
    assert_eq!(order_ids(&rows(&ls, "open_orders", &[]).await), vec!["o-nut"]);
    // The poisoned event's other tables were derived.
    assert_eq!(rows(&ls, "item_first_seen", &[("item", "bolt")]).await.len(), 1);
    // And the status reports it per table.
    let status = ls.status(&ls.derivers().await.unwrap()).unwrap();
    let p = &status.tables["state.open_orders"];
    assert_eq!((p.quarantined, p.last_quarantined.as_ref()), (1, Some(&first[0])));
    assert_eq!(status.tables["state.stock"].quarantined, 0);
}
