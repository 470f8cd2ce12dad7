//! `POST /v1/sql`: read-only SQL with receipts and time travel; writes of every kind are
//! refused on the plan and change nothing.

mod common;

use common::{event, start};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_reads_with_receipts_and_time_travel_and_refuses_every_write() {
    let server = start().await;
    let admin = server.client("admin");
    let agent = server.client("agent:procurement");
    admin
        .emit(
            &(event("c1", "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 50}))
                + &event("c2", "inventory.stock_counted", json!({"item": "bolt", "location": "south", "on_hand": 70}))
                + &event("o1", "commerce.order_placed", json!({"order_id": "so-1", "line": 1, "customer": "c", "item": "bolt", "location": "north", "qty": 5, "unit_price": "2.50"}))),
        )
        .await
        .unwrap();
    let first =
        admin.consistent_read(&[json!({"table": "stock"}), json!({"table": "open_orders"})]).await.unwrap();
    let first_snapshot = first["results"][0]["receipt"]["snapshot_id"].as_i64().unwrap();
    admin
        .emit(&event(
            "c3",
            "inventory.stock_counted",
            json!({"item": "bolt", "location": "north", "on_hand": 10}),
        ))
        .await
        .unwrap();
    admin.consistent_read(&[json!({"table": "stock"})]).await.unwrap();

    // A join and an aggregate, with a receipt per table read.
    let a = agent
        .sql("SELECT s.location, s.on_hand, sum(o.qty) AS ordered FROM stock s LEFT JOIN open_orders o ON s.item = o.item AND s.location = o.location GROUP BY s.location, s.on_hand ORDER BY s.location", None)
        .await
        .unwrap();
    assert_eq!(
        a["rows"],
        json!([{"location": "north", "on_hand": 10, "ordered": 5}, {"location": "south", "on_hand": 70}]),
        "{a}"
    );
    let tables: Vec<&str> =
        a["receipts"].as_array().unwrap().iter().map(|r| r["table"].as_str().unwrap()).collect();
    assert_eq!(tables, vec!["open_orders", "stock"]);
    assert!(a["receipts"][1]["snapshot_id"].as_i64().unwrap() > first_snapshot);

    // Time travel by snapshot, and by a tag.
    let old = agent
        .sql(
            &format!("SELECT on_hand FROM stock VERSION AS OF {first_snapshot} WHERE location = 'north'"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(old["rows"], json!([{"on_hand": 50}]));
    assert_eq!(old["receipts"][0]["snapshot_id"], json!(first_snapshot));
    let created = agent
        .propose(&json!({
            "kind": "replenishment_order", "module": "procurement", "summary": "s", "action": {},
            "sources": [{"table": "stock", "snapshot_id": first_snapshot}],
            "rule": {"name": "r", "version": "1", "text": "t"}, "risk": {"level": "low"}
        }))
        .await
        .unwrap();
    let tag = created["tags"][0]["tag"].as_str().unwrap();
    let tagged = agent
        .sql(&format!("SELECT sum(on_hand) AS total FROM stock VERSION AS OF '{tag}'"), None)
        .await
        .unwrap();
    assert_eq!(tagged["rows"], json!([{"total": 120}]));
    let e = agent.sql("SELECT * FROM stock VERSION AS OF 9999", None).await.unwrap_err();
    assert!(e.to_string().contains("no snapshot 9999"), "{e}");

    // The row limit.
    let limited = agent.sql("SELECT * FROM stock", Some(1)).await.unwrap();
    assert_eq!((limited["rows"].as_array().unwrap().len(), limited["truncated"].clone()), (1, json!(true)));

    // Writes of every kind are refused on the plan, and nothing changes. (The proposal's event
    // is committed into the inbox first, so its 1 s budget cannot commit during the check.)
    admin.consistent_read(&[json!({"table": "approval_inbox"})]).await.unwrap();
    let before = (
        admin.tables().await.unwrap(),
        std::fs::read_dir(server.dir.join("warehouse/state.db")).unwrap().count(),
    );
    let copy_target = server.dir.join("copied.csv");
    for q in [
        "INSERT INTO stock (item, location, on_hand) VALUES ('bolt', 'north', 999)".to_string(),
        "UPDATE stock SET on_hand = 0".to_string(),
        "DELETE FROM stock".to_string(),
        "CALL sys.create_tag('state.stock', 'evil', 1)".to_string(),
        "DROP TABLE stock".to_string(),
        "CREATE TABLE evil AS SELECT * FROM stock".to_string(),
        "CREATE VIEW evil AS SELECT * FROM stock".to_string(),
        format!("COPY stock TO '{}'", copy_target.display()),
        "SELECT 1; DROP TABLE stock".to_string(),
        "SELECT 1 /* ; */; DELETE FROM stock -- ;".to_string(),
        "EXPLAIN ANALYZE SELECT * FROM stock".to_string(),
        "SET datafusion.execution.batch_size = 1".to_string(),
        "SELECT * FROM information_schema.tables".to_string(),
        "SELECT * FROM stok".to_string(),
    ] {
        let e = agent.sql(&q, None).await.expect_err(&q);
        assert_eq!(e.status().map(|s| s.as_u16()), Some(400), "{q}: {e}");
    }
    let after = (
        admin.tables().await.unwrap(),
        std::fs::read_dir(server.dir.join("warehouse/state.db")).unwrap().count(),
    );
    let snapshots = |t: &Value| {
        t.as_array()
            .unwrap()
            .iter()
            .map(|x| (x["name"].clone(), x["receipt"]["snapshot_id"].clone(), x["health"]["tags"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(snapshots(&before.0), snapshots(&after.0));
    assert_eq!(before.1, after.1);
    assert!(!copy_target.exists());
    let rows = agent.sql("SELECT on_hand FROM stock ORDER BY location", None).await.unwrap();
    assert_eq!(rows["rows"], json!([{"on_hand": 10}, {"on_hand": 70}]));

    // Modules do not read.
    let e = server.client("module:inventory").sql("SELECT 1", None).await.unwrap_err();
    assert_eq!(e.status().map(|s| s.as_u16()), Some(403));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_failing_on_its_own_values_is_the_callers_error_and_named() {
    let server = start().await;
    let agent = server.client("agent:procurement");
    common::bolt_in_stock(&server, 50).await;
    // On a column (computed while running) and on constants (folded while planning).
    for (q, named) in [
        ("SELECT on_hand / (on_hand - on_hand) FROM stock", "Divide by zero"),
        ("SELECT 1 / 0", "Divide by zero"),
        ("SELECT CAST(item AS INT) FROM stock", "Cast error"),
        ("SELECT CAST('x' AS INT)", "Cast error"),
    ] {
        let e = agent.sql(q, None).await.expect_err(q);
        assert_eq!(e.status().map(|s| s.as_u16()), Some(400), "{q}: {e}");
        assert!(e.to_string().to_lowercase().contains(&named.to_lowercase()), "{q}: {e}");
    }
    // The server goes on answering.
    let rows = agent.sql("SELECT on_hand FROM stock", None).await.unwrap();
    assert_eq!(rows["rows"], json!([{"on_hand": 50}]));
}
