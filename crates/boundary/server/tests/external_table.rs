//! Serving a table handed over to another engine (`derived_by = "external"`): agents read it and
//! cite it, proposals pin it, audits read it back, and livestate never writes it again.

mod common;

use common::{event, eventually, start};
use livestate_client::TableRead;
use serde_json::{json, Value};

fn risk_snapshots(dir: &std::path::Path) -> Vec<String> {
    let mut s: Vec<String> = std::fs::read_dir(dir.join("warehouse/state.db/supplier_risk/snapshot"))
        .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect())
        .unwrap_or_default();
    s.sort();
    s
}

#[tokio::test]
async fn a_handed_over_table_is_served_cited_and_audited_but_never_written() {
    let mut server = start().await;
    let procurement = server.client("module:procurement");
    procurement
        .emit(&event("s1", "procurement.supplier_risk_assessed", json!({"supplier": "acme", "level": "low"})))
        .await
        .unwrap();
    let admin = server.client("admin");
    admin.consistent_read(&[TableRead::table("supplier_risk")]).await.unwrap();
    server.stop().await;

    // The handover: the stored spec now says another engine derives supplier_risk.
    livestate_testkit::SpecFiles::load(&server.dir().join("spec")).derived_externally("supplier_risk").save();
    let snapshots_at_handover = risk_snapshots(server.dir());
    assert!(!snapshots_at_handover.is_empty());
    server.serve(livestate_server::ServeConfig::default()).await;

    let agent = server.client("agent:procurement");
    let read = agent.rows("supplier_risk", &[("supplier", "acme")]).await.unwrap();
    assert_eq!(read.cell(0, "level"), json!("low"));
    let receipt = serde_json::to_value(&read.receipt).unwrap();
    assert_eq!(receipt["offset"], Value::Null, "{receipt}");
    assert_eq!(receipt["lag_ms"], Value::Null, "{receipt}");
    assert_eq!(receipt["measured_by"], json!("external"), "{receipt}");
    let snapshot = receipt["snapshot_id"].as_i64().unwrap();

    // Not readable as of one record offset together with livestate's tables.
    let e = agent
        .consistent_read(&[TableRead::table("stock"), TableRead::table("supplier_risk")])
        .await
        .unwrap_err();
    assert_eq!(e.status().unwrap().as_u16(), 400, "{e}");
    assert!(e.to_string().contains("supplier_risk") && e.to_string().contains("external"), "{e}");

    // Cited in a proposal: pinned by a tag, read back by the audit.
    let created = agent
        .propose(&json!({
            "kind": "supplier_review",
            "module": "procurement",
            "summary": "Keep acme",
            "action": {"supplier": "acme"},
            "sources": [{"table": "supplier_risk", "snapshot_id": snapshot, "keys": [{"supplier": "acme"}], "rows": [read.rows[0]]}],
            "rule": {"name": "keep-low-risk", "version": "1", "text": "keep suppliers of low risk"},
            "risk": {"level": "low", "reasons": ["risk low"]}
        }))
        .await
        .unwrap();
    let tag = created.tags.as_ref().unwrap()[0].tag.clone();
    assert!(server.dir().join(format!("warehouse/state.db/supplier_risk/tag/tag-{tag}")).is_file());
    let audit = server.client("person:ana").audit(&created.id).await.unwrap();
    assert!(audit.evidence[0].cited_rows_identical, "{audit:?}");

    // New assessments are the other engine's to apply: livestate derives what follows them
    // (the stock count) and leaves the handed-over table alone.
    let after =
        event("s2", "procurement.supplier_risk_assessed", json!({"supplier": "acme", "level": "high"}))
            + &event(
                "c1",
                "inventory.stock_counted",
                json!({"item": "nut", "location": "north", "on_hand": 3}),
            );
    server.client("admin").emit(&after).await.unwrap();
    eventually("the count after the assessment to be derived", || async {
        let r = agent.rows("stock", &[("item", "nut")]).await.unwrap();
        (!r.rows.is_empty()).then_some(())
    })
    .await;
    let tables = agent.tables().await.unwrap();
    let risk = tables.iter().find(|t| t.name == "supplier_risk").unwrap();
    assert_eq!(risk.derived_by, "external", "{risk:?}");
    server.stop().await;
    assert_eq!(risk_snapshots(server.dir()), snapshots_at_handover, "livestate wrote a handed-over table");
}
