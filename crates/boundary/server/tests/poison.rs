//! No single event stops derivation: a row operation that fails is quarantined, visible, and
//! the same after a restart; every other row and table goes on.

mod common;

use common::{event, eventually, start, TestServer};
use livestate_api::read::Quarantined;
use livestate_client::{TableInfo, TableRead};
use serde_json::{json, Value};

/// An extreme reservation is valid on its own; an order for the same item then overflows in
/// `open_orders.available_at_order`, which reads it through a lookup join.
async fn poison(server: &TestServer) -> u64 {
    let commerce = server.client("module:commerce");
    commerce
        .emit(&event(
            "r-min",
            "commerce.reservation_changed",
            json!({"item": "bolt", "location": "north", "reserved": i64::MIN}),
        ))
        .await
        .unwrap();
    // Commit stock, so the order's lookup join reads the extreme value.
    let admin = server.client("admin");
    admin.consistent_read(&[TableRead::table("stock").key("item", "bolt")]).await.unwrap();
    let acked = commerce.emit(&order("o-poison", "bolt")).await.unwrap();
    acked.appended.first().unwrap_or_else(|| panic!("an offset in {acked:?}")).offset
}

fn order(id: &str, item: &str) -> String {
    event(
        id,
        "commerce.order_placed",
        json!({"order_id": id, "line": 1, "customer": "c", "item": item, "location": "north", "qty": 2, "unit_price": "1.50"}),
    )
}

async fn open_orders(server: &TestServer) -> Vec<String> {
    let read = server.client("admin").consistent_read(&[TableRead::table("open_orders")]).await.unwrap();
    let rows = &read.results[0].rows;
    rows.iter().map(|r| r["order_id"].as_str().unwrap().to_string()).collect()
}

fn quarantined_in(tables: &[TableInfo], table: &str) -> (u64, Option<Quarantined>) {
    let t = tables.iter().find(|t| t.name == table).unwrap();
    (t.quarantined, t.last_quarantined.clone())
}

async fn quarantine(server: &TestServer) -> Vec<Value> {
    let url = format!("{}/v1/quarantine", server.url());
    let v: Value = reqwest::Client::new()
        .get(url)
        .bearer_auth(server.token("agent:procurement"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["entries"].as_array().unwrap().clone()
}

#[tokio::test]
async fn an_overflowing_lookup_join_is_quarantined_and_every_other_row_and_restart_goes_on() {
    let mut server = start().await;
    let offset = poison(&server).await;
    // Ordinary events after it, in the same table and in others.
    let commerce = server.client("module:commerce");
    commerce.emit(&order("o-ok", "nut")).await.unwrap();
    server
        .client("module:inventory")
        .emit(&event(
            "c-nut",
            "inventory.stock_counted",
            json!({"item": "nut", "location": "north", "on_hand": 7}),
        ))
        .await
        .unwrap();
    assert_eq!(open_orders(&server).await, vec!["o-ok"], "the poisoned row is not there, the next one is");
    // stock commits at its own budget (the consistent read above committed open_orders only).
    let nut = eventually("the nut count in stock", || async {
        let nut = server.client("admin").rows("stock", &[("item", "nut")]).await.unwrap();
        (nut.cell(0, "on_hand") == 7).then_some(nut)
    })
    .await;
    assert_eq!(nut.rows.len(), 1, "{nut}");
    // The other tables of the poisoned event itself were derived.
    let totals = server
        .client("admin")
        .consistent_read(&[TableRead::table("reservations_total").key("item", "bolt")])
        .await
        .unwrap();
    assert_eq!(totals.results[0].cell(0, "open_lines"), 1, "{totals}");

    // Visible: GET /v1/tables, /metrics, GET /v1/quarantine, the web tables page.
    let tables = eventually("the quarantine in the status", || async {
        let t = server.client("admin").tables().await.unwrap();
        (quarantined_in(&t, "open_orders").0 == 1).then_some(t)
    })
    .await;
    let (_, last) = quarantined_in(&tables, "open_orders");
    let last = last.expect("open_orders names its last quarantined row operation");
    assert_eq!(last.offset, offset, "{last:?}");
    assert_eq!(last.event_id, "o-poison");
    assert!(last.message.contains("overflow"), "{last:?}");
    assert_eq!(quarantined_in(&tables, "stock").0, 0);
    let metrics = server.client("admin").metrics().await.unwrap();
    assert!(metrics.contains("livestate_table_quarantined{table=\"open_orders\"} 1"), "{metrics}");
    let entries = quarantine(&server).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(
        (entries[0]["table"].as_str(), entries[0]["offset"].as_u64()),
        (Some("open_orders"), Some(offset))
    );

    // A restart yields the same tables and the same quarantine, and derives what comes next.
    server.stop().await;
    server.serve(livestate_server::ServeConfig::default()).await;
    assert_eq!(open_orders(&server).await, vec!["o-ok"]);
    assert_eq!(quarantine(&server).await, entries, "the same quarantine after a restart");
    server.client("module:commerce").emit(&order("o-later", "nut")).await.unwrap();
    assert_eq!(open_orders(&server).await, vec!["o-later", "o-ok"]);
    server.stop().await;
}
