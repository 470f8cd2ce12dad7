//! A deterministic shortage, end to end through the HTTP API: the procurement agent makes
//! exactly one proposal with the right quantities and cited rows, citing every input of its
//! declared kind from one consistent read (and no second one for the warehouse while it is
//! pending), a person approves, the module orders (inbound rises) and receives (on hand
//! rises), and the audit shows the rows the agent saw.

use std::path::Path;
use std::time::{Duration, Instant};

use livestate_agents::procurement::ProcurementAgent;
use livestate_client::Client;
use livestate_testkit::{eventually, InProcessServer};
use serde_json::{json, Value};

fn event(id: &str, ty: &str, data: Value, causation: Option<&str>) -> String {
    let mut e = json!({"id": id, "type": ty, "occurred_at": "2026-03-02T08:00:00Z", "data": data});
    if let Some(c) = causation {
        e["causation"] = json!(c);
    }
    e.to_string() + "\n"
}

fn spec(dir: &Path) -> std::path::PathBuf {
    livestate_testkit::example_spec().freshness("stock", "200ms").write(&dir.join("spec"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shortage_makes_one_proposal_which_leads_to_inbound_then_on_hand() {
    let mut server = InProcessServer::start(
        spec,
        &[
            ("module:inventory", &[]),
            ("module:commerce", &[]),
            ("module:procurement", &[]),
            ("agent:procurement", &[]),
            ("person:ana", &["procurement"]),
        ],
        livestate_server::ServeConfig::default(),
    )
    .await;
    let url = server.url();
    let c = |principal: &str| Client::new(&url, server.token(principal)).unwrap();
    let (inventory, commerce, procurement, ana) =
        (c("module:inventory"), c("module:commerce"), c("module:procurement"), c("person:ana"));
    eventually("the server", || async { ana.whoami().await.ok() }).await;

    procurement
        .emit(
            &(event("r1", "procurement.supplier_risk_assessed", json!({"supplier": "acme", "level": "low"}), None)
                + &event("r2", "procurement.supplier_risk_assessed", json!({"supplier": "cheap", "level": "high"}), None)
                + &event("o1", "procurement.supplier_item_listed", json!({"supplier": "acme", "item": "bolt", "pack_size": 50, "unit_price": "1.50", "lead_time_days": 2}), None)
                + &event("o2", "procurement.supplier_item_listed", json!({"supplier": "cheap", "item": "bolt", "pack_size": 10, "unit_price": "0.50", "lead_time_days": 2}), None)
                + &event("pl1", "procurement.planning_set", json!({"item": "bolt", "location": "north", "reorder_point": 40, "target": 100}), None)
                + &event("pl2", "procurement.planning_set", json!({"item": "bolt", "location": "south", "reorder_point": 40, "target": 100}), None)),
        )
        .await
        .unwrap();
    inventory
        .emit(
            &(event(
                "c1",
                "inventory.stock_counted",
                json!({"item": "bolt", "location": "north", "on_hand": 50}),
                None,
            ) + &event(
                "c2",
                "inventory.stock_counted",
                json!({"item": "bolt", "location": "south", "on_hand": 90}),
                None,
            )),
        )
        .await
        .unwrap();
    // A customer order reserves 15 in the north: available 35 < 40.
    commerce
        .emit(
            &(event("so1", "commerce.order_placed", json!({"order_id": "so-1", "line": 1, "customer": "c", "item": "bolt", "location": "north", "qty": 15, "unit_price": "3.00"}), None)
                + &event("rs1", "commerce.reservation_changed", json!({"item": "bolt", "location": "north", "reserved": 15}), None)),
        )
        .await
        .unwrap();

    let (told, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let mut agent = ProcurementAgent::new(c("agent:procurement"), Some(told));
    let deadline = Instant::now() + Duration::from_secs(30);
    let made = loop {
        let made = agent.poll().await.unwrap();
        if !made.is_empty() {
            break made;
        }
        assert!(Instant::now() < deadline, "the agent never proposed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(made.len(), 1);
    let id = made[0].clone();
    let p = ana.proposal(&id).await.unwrap();
    let doc = &serde_json::to_value(&p.document).unwrap();
    // North needs 100 - 35 = 65; acme (low risk) packs 50s: 100. South is fine.
    assert_eq!(doc["action"]["supplier"], "acme");
    assert_eq!(doc["action"]["qty"], 100);
    assert_eq!(doc["action"]["lines"], json!([{"location": "north", "qty": 100}]));
    assert_eq!(doc["action"]["value"], "150.00");
    assert_eq!(doc["rule"]["name"], "order-up-to-target");
    assert_eq!(doc["risk"]["level"], "low");
    let cited =
        |t: &str| doc["sources"].as_array().unwrap().iter().find(|s| s["table"] == t).cloned().unwrap();
    assert_eq!(
        cited("stock")["rows"],
        json!([{"item": "bolt", "location": "north", "on_hand": 50, "reserved": 15, "inbound": null, "reorder_point": 40, "target": 100, "updated_at": "2026-03-02T08:00:00.000"}])
    );
    assert_eq!(cited("open_orders")["rows"][0]["order_id"], "so-1");
    assert_eq!(cited("supplier_items")["rows"][0]["supplier"], "acme");
    assert_eq!(cited("supplier_risk")["rows"][0]["level"], "low");

    // Every input of the declared kind was cited, from one consistent read.
    let sheet = ana.sheet(&id).await.unwrap();
    assert_eq!(sheet.summary, "Order 100 x bolt from acme for north: available 35 < reorder point 40");
    assert!(sheet.verdict.one_instant, "{}", sheet.verdict.text);
    let value = |n: &str| sheet.inputs.iter().find(|i| i.name == n).unwrap().value.clone();
    assert_eq!((value("on_hand"), value("reserved"), value("pack_size")), (json!(50), json!(15), json!(50)));
    assert_eq!(value("supplier_risk"), json!("low"));

    // The south falls short too: a decision of its own. The north, looked at again while its
    // proposal is pending, gets no second one.
    inventory
        .emit(&event(
            "c3",
            "inventory.stock_counted",
            json!({"item": "bolt", "location": "south", "on_hand": 30}),
            None,
        ))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let south = loop {
        let made = agent.poll().await.unwrap();
        if !made.is_empty() {
            break made;
        }
        assert!(Instant::now() < deadline, "the south shortage never fired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(south.len(), 1);
    let south_action = ana.proposal(&south[0]).await.unwrap().document.action;
    assert_eq!(south_action["location"], "south");
    assert_eq!(south_action["qty"], 100, "100 - 30 = 70, rounded up to acme's pack of 50");
    assert_eq!(agent.handle("bolt", "north").await.unwrap(), None);
    let skipped = std::iter::from_fn(|| heard.try_recv().ok())
        .any(|n| matches!(n, livestate_agents::Narration::Skipped { ref item, .. } if item == "bolt"));
    assert!(skipped, "the agent says why it did not propose");
    // Restarted, the agent learns which of its proposals are pending: still no second one.
    let mut restarted = ProcurementAgent::new(c("agent:procurement"), None);
    restarted.resume().await.unwrap();
    assert_eq!(restarted.handle("bolt", "north").await.unwrap(), None, "proposed again after a restart");
    assert_eq!(ana.proposals(None).await.unwrap().proposals.len(), 2);

    // Approved, ordered (inbound rises), received (on hand rises), each citing the proposal.
    ana.decide(&id, true, "stock is needed").await.unwrap();
    let outbox = procurement.outbox("procurement", 0).await.unwrap();
    let item = serde_json::to_value(&outbox.items[0]).unwrap();
    assert_eq!(item["proposal_id"], json!(id));
    procurement
        .emit(&event(
            "po1",
            "procurement.inbound_changed",
            json!({"item": "bolt", "location": "north", "inbound": 100}),
            Some(&id),
        ))
        .await
        .unwrap();
    let reader = c("agent:procurement");
    eventually("inbound", || async {
        let r = reader.rows("stock", &[("item", "bolt"), ("location", "north")]).await.unwrap();
        (r.cell(0, "inbound") == 100).then_some(())
    })
    .await;
    inventory
        .emit(&event(
            "gr1",
            "inventory.stock_counted",
            json!({"item": "bolt", "location": "north", "on_hand": 150}),
            Some(&id),
        ))
        .await
        .unwrap();
    procurement
        .emit(&event(
            "gr2",
            "procurement.inbound_changed",
            json!({"item": "bolt", "location": "north", "inbound": 0}),
            Some(&id),
        ))
        .await
        .unwrap();
    eventually("on hand", || async {
        let r = reader.rows("stock", &[("item", "bolt"), ("location", "north")]).await.unwrap();
        (r.cell(0, "on_hand") == 150 && r.cell(0, "inbound") == 0).then_some(())
    })
    .await;

    let audit = ana.audit(&id).await.unwrap();
    let stock = audit.evidence.iter().find(|e| e.table == "stock").unwrap();
    assert_eq!(stock.rows_at_tag.iter().find(|r| r["location"] == "north").unwrap()["on_hand"], 50);
    assert!(audit.evidence.iter().all(|e| e.cited_rows_identical));
    assert_eq!(audit.caused_events.len(), 3);
    server.stop().await;
}
