//! The agent boundary end to end over real HTTP on loopback: modules emit, an agent reads with
//! receipts and proposes, tags pin what it read, a person approves, the module pulls its
//! outbox and emits with the proposal as causation, the state changes, and the audit shows the
//! whole chain with the rows the agent saw, after the row changed, 100 more commits,
//! compaction and expiry.

mod common;

use common::{caused, event, eventually, start};
use livestate_client::{ConsistentAnswer, ProposalStatus, RowsAnswer, TableRead};
use serde_json::{json, Value};

fn receipt_of<'a>(read: &'a ConsistentAnswer, table: &str) -> &'a RowsAnswer {
    read.result(table).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_goes_from_reading_to_decision_to_module_event_and_its_audit_keeps_what_the_agent_saw() {
    let mut server = start().await;
    let inventory = server.client("module:inventory");
    let commerce = server.client("module:commerce");
    let procurement = server.client("module:procurement");
    let agent = server.client("agent:procurement");
    let ana = server.client("person:ana");
    let olaf = server.client("person:olaf");

    // Modules emit: 50 on hand, 15 reserved, reorder point 40 → available 35 < 40.
    inventory
        .emit(&event(
            "c1",
            "inventory.stock_counted",
            json!({"item": "bolt", "location": "north", "on_hand": 50}),
        ))
        .await
        .unwrap();
    commerce
        .emit(&event(
            "r1",
            "commerce.reservation_changed",
            json!({"item": "bolt", "location": "north", "reserved": 15}),
        ))
        .await
        .unwrap();
    procurement
        .emit(
            &(event(
                "p1",
                "procurement.planning_set",
                json!({"item": "bolt", "location": "north", "reorder_point": 40, "target": 100}),
            ) + &event(
                "s1",
                "procurement.supplier_risk_assessed",
                json!({"supplier": "acme", "level": "low"}),
            )),
        )
        .await
        .unwrap();

    // The agent is told of the shortage by the trigger.
    let firing = eventually("the shortage to fire", || async {
        let f = agent.firings("stock_below_reorder_point", None, true).await.unwrap();
        f.firings.into_iter().next()
    })
    .await;
    assert_eq!(Value::Object(firing.key), json!({"item": "bolt", "location": "north"}));

    // One consistent read of the stock and the supplier's risk, with receipts.
    let read = agent
        .consistent_read(&[TableRead::table("stock").key("item", "bolt"), TableRead::table("supplier_risk")])
        .await
        .unwrap();
    let stock = receipt_of(&read, "stock");
    let risk = receipt_of(&read, "supplier_risk");
    assert_eq!(stock.receipt.offset, Some(read.offset));
    assert_eq!(risk.receipt.offset, Some(read.offset));
    assert_eq!((stock.cell(0, "on_hand"), stock.cell(0, "reserved")), (json!(50), json!(15)));
    let seen = stock.rows[0].clone();
    let stock_snapshot = stock.receipt.snapshot_id.unwrap();

    // The agent proposes, citing both receipts and the rows it used.
    let proposal = json!({
        "kind": "replenishment_order",
        "module": "procurement",
        "summary": "Order 65 bolts for north from acme",
        "action": {"item": "bolt", "location": "north", "qty": 65, "supplier": "acme"},
        "sources": [
            {"table": "stock", "snapshot_id": stock_snapshot, "offset": stock.receipt.offset, "keys": [{"item": "bolt"}], "rows": [seen]},
            {"table": "supplier_risk", "snapshot_id": risk.receipt.snapshot_id, "offset": risk.receipt.offset, "rows": [risk.rows.first()]}
        ],
        "rule": {"name": "order-up-to-target", "version": "1", "parameters": {"target": 100}, "text": "order target - (on_hand - reserved + inbound)"},
        "risk": {"level": "low", "reasons": ["supplier risk low", "order value small"]}
    });
    let created = agent.propose(&proposal).await.unwrap();
    let id = created.id.clone();
    let tags = created.tags.clone().unwrap();
    assert_eq!(tags.len(), 2, "{created:?}");
    let stock_tag = tags.iter().find(|t| t.table == "stock").unwrap().tag.clone();
    assert!(stock_tag.contains(&id));

    // The tag pins the snapshot the agent read, kept for the default 400 days.
    let tag_file = server.dir().join(format!("warehouse/state.db/stock/tag/tag-{stock_tag}"));
    let tag_json: Value = serde_json::from_str(&std::fs::read_to_string(&tag_file).unwrap()).unwrap();
    assert_eq!(tag_json["id"], json!(stock_snapshot));
    assert_eq!(tag_json["tagTimeRetained"].as_f64(), Some(400.0 * 86_400.0), "{tag_json}");
    let at_tag = agent.rows("stock", &[("tag", &stock_tag), ("item", "bolt")]).await.unwrap();
    assert_eq!(json!(at_tag.receipt.snapshot_id), json!(stock_snapshot));
    assert_eq!(at_tag.cell(0, "on_hand"), json!(50));

    // The approval inbox (budget 1 s) shows it pending.
    eventually("the inbox to show the proposal", || async {
        let inbox = ana.rows("approval_inbox", &[("proposal_id", &id)]).await.unwrap();
        (inbox.rows.first().map(|r| r["status"].clone()) == Some(json!("pending"))).then_some(())
    })
    .await;
    let pending = ana.proposals(Some(ProposalStatus::Pending)).await.unwrap();
    assert_eq!(pending.proposals[0].id, id);

    // Only a person in scope decides, and only once.
    let e = agent.decide(&id, true, "agents cannot decide").await.unwrap_err();
    assert_eq!(e.status().unwrap().as_u16(), 403, "{e}");
    let e = olaf.decide(&id, true, "not my module").await.unwrap_err();
    assert_eq!(e.status().unwrap().as_u16(), 403, "{e}");
    assert!(e.to_string().contains("decide:procurement"), "{e}");
    ana.decide(&id, true, "supplier is reliable").await.unwrap();
    let e = ana.decide(&id, false, "changed my mind").await.unwrap_err();
    assert_eq!(e.status().unwrap().as_u16(), 409, "{e}");
    assert!(e.to_string().contains("already approved by person:ana"), "{e}");
    let e = ana.decide("p-nope", true, "x").await.unwrap_err();
    assert_eq!(e.status().unwrap().as_u16(), 404, "{e}");
    eventually("the inbox to show the approval", || async {
        let inbox = ana.rows("approval_inbox", &[("proposal_id", &id)]).await.unwrap();
        (inbox.cell(0, "status") == json!("approved") && inbox.cell(0, "decided_by") == json!("person:ana"))
            .then_some(())
    })
    .await;

    // The module pulls its outbox and carries the decision out.
    let outbox = procurement.outbox("procurement", 0).await.unwrap();
    let items = &outbox.items;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].proposal_id, id);
    assert_eq!(items[0].action["qty"], json!(65));
    let next = outbox.next_after;
    assert!(procurement.outbox("procurement", next).await.unwrap().items.is_empty());
    let e = inventory.outbox("procurement", 0).await.unwrap_err();
    assert_eq!(e.status().unwrap().as_u16(), 403);
    procurement
        .emit(&caused(
            "po-1",
            "procurement.inbound_changed",
            json!({"item": "bolt", "location": "north", "inbound": 65}),
            &id,
        ))
        .await
        .unwrap();
    eventually("inbound to reach the stock row", || async {
        let r = agent.rows("stock", &[("item", "bolt"), ("location", "north")]).await.unwrap();
        (r.cell(0, "inbound") == json!(65)).then_some(())
    })
    .await;

    // The row changes, then 100 more commits; compaction and expiry run meanwhile.
    for i in 0..100 {
        inventory
            .emit(&event(
                &format!("c-more-{i}"),
                "inventory.stock_counted",
                json!({"item": "bolt", "location": "north", "on_hand": 60 + i}),
            ))
            .await
            .unwrap();
        agent.consistent_read(&[TableRead::table("stock").limit(1)]).await.unwrap();
    }
    let tables = eventually("the cited snapshot to expire", || async {
        let t = agent.tables().await.unwrap();
        let stock = t.into_iter().find(|t| t.name == "stock").unwrap();
        (stock.health.earliest_snapshot.unwrap() > stock_snapshot).then_some(stock)
    })
    .await;
    assert!(tables.health.tags.iter().any(|t| t.name == stock_tag));
    let runs: Vec<usize> = tables.health.buckets.iter().map(|b| b.sorted_runs).collect();
    assert!(runs.iter().all(|&r| r <= 8), "compaction keeps sorted runs bounded: {runs:?}");

    // The audit: the rows as the agent saw them, the decision, the caused event, the state now.
    let audit = ana.audit(&id).await.unwrap();
    assert_eq!(audit.status, ProposalStatus::Approved);
    let decision = audit.decision.as_ref().unwrap();
    assert_eq!(decision.decided_by, "person:ana");
    assert_eq!(decision.reason.as_deref(), Some("supplier is reliable"));
    let stock_ev = audit.evidence.iter().find(|e| e.table == "stock").unwrap();
    assert!(stock_ev.cited_rows_identical, "{stock_ev:?}");
    assert_eq!(stock_ev.rows_at_tag.len(), 1);
    assert_eq!(Value::Object(stock_ev.rows_at_tag[0].clone()), proposal["sources"][0]["rows"][0]);
    assert_eq!(stock_ev.rows_at_tag[0]["on_hand"], json!(50));
    assert!(audit.evidence.iter().all(|e| e.cited_rows_identical));
    assert_eq!(audit.caused_events.len(), 1);
    assert_eq!(audit.caused_events[0].id, "po-1");
    let now = audit
        .state_after
        .iter()
        .find(|s| {
            s.table == "stock" && Value::Object(s.key.clone()) == json!({"item": "bolt", "location": "north"})
        })
        .unwrap();
    assert_eq!(now.rows[0]["on_hand"], json!(159));
    assert_eq!(now.rows[0]["inbound"], json!(65));
    assert_eq!(audit.proposal.rule.name, "order-up-to-target");
    assert_eq!(audit.proposal.agent, "procurement");

    // Metrics show each table's lag against its budget and the proposals.
    let metrics = ana.metrics().await.unwrap();
    assert!(metrics.contains("livestate_table_within_budget{table=\"stock\"}"), "{metrics}");
    assert!(metrics.contains("livestate_proposals{status=\"approved\"} 1"), "{metrics}");

    // After a restart the store, the tags and the audit are all still there.
    server.stop().await;
    let dir = server.dir().to_path_buf();
    let ls = livestate_engine::Livestate::open(&dir).await.unwrap();
    let store = livestate_server::store::Store::open(&ls.layout().boundary_dir()).unwrap();
    assert_eq!(store.get(&id).unwrap().unwrap().status, ProposalStatus::Approved);
    assert_eq!(store.caused(&id).unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_read_returns_every_table_as_of_one_offset_while_events_interleave() {
    let server = start().await;
    let inventory = server.client("module:inventory");
    let ops = server.client("admin");
    let agent = server.client("agent:procurement");
    // Writers alternate between two tables owned by two modules; each event's value is its
    // position in the sequence, so a read shows exactly which events it reflects. Every 40
    // events the writer waits for one more read, so reads land mid-stream however fast either is.
    let reads_done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let done = std::sync::Arc::clone(&reads_done);
    let writer = tokio::spawn(async move {
        let mut offsets = Vec::new();
        for i in 0..120i64 {
            if i % 40 == 39 {
                let want = (i / 40 + 1) as usize;
                while done.load(std::sync::atomic::Ordering::SeqCst) < want {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            }
            let (client, line) = if i % 2 == 0 {
                (
                    &inventory,
                    event(
                        &format!("i{i}"),
                        "inventory.stock_counted",
                        json!({"item": "bolt", "location": "north", "on_hand": i}),
                    ),
                )
            } else {
                (
                    &ops,
                    event(
                        &format!("o{i}"),
                        "operations.job_status_changed",
                        json!({"job_id": "j1", "status": format!("step-{i}")}),
                    ),
                )
            };
            let r = client.emit(&line).await.unwrap();
            offsets.push((r.appended[0].offset, i));
        }
        offsets
    });
    let mut reads = Vec::new();
    while !writer.is_finished() {
        let r = agent
            .consistent_read(&[
                TableRead::table("stock").key("item", "bolt").key("location", "north"),
                TableRead::table("work_queue").key("job_id", "j1"),
            ])
            .await
            .unwrap();
        reads.push(r);
        reads_done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    let offsets = writer.await.unwrap();
    assert!(reads.len() >= 3, "reads interleaved with the writes: {}", reads.len());
    for r in &reads {
        let at = r.offset;
        // What each table must show: the last event of its kind below the offset.
        let last = |even: bool| {
            offsets.iter().filter(|(o, i)| *o < at && (i % 2 == 0) == even).map(|(_, i)| *i).max()
        };
        let stock = receipt_of(r, "stock");
        let queue = receipt_of(r, "work_queue");
        assert_eq!(stock.receipt.offset, Some(at));
        assert_eq!(queue.receipt.offset, Some(at));
        assert_eq!(
            stock.rows.first().map(|row| row.get("on_hand").cloned().unwrap_or_default()),
            last(true).map(|i| json!(i)),
            "stock at {at}: {r}"
        );
        assert_eq!(
            queue.rows.first().map(|row| row.get("status").cloned().unwrap_or_default()),
            last(false).map(|i| json!(format!("step-{i}"))),
            "work queue at {at}: {r}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_proposal_is_posted_to_the_module_webhook_until_it_answers_2xx() {
    use std::sync::{Arc, Mutex};
    // A module endpoint that is down for its first two calls.
    // Each accepted delivery: its cursor header and body.
    type Deliveries = Arc<Mutex<Vec<(Option<String>, Value)>>>;
    let got: Deliveries = Arc::default();
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let hook = {
        let (got, calls) = (Arc::clone(&got), Arc::clone(&calls));
        axum::Router::new().route(
            "/approved",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: axum::Json<Value>| {
                let (got, calls) = (Arc::clone(&got), Arc::clone(&calls));
                async move {
                    if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 {
                        return axum::http::StatusCode::SERVICE_UNAVAILABLE;
                    }
                    let cursor = headers.get("x-livestate-cursor").map(|v| v.to_str().unwrap().to_string());
                    got.lock().unwrap().push((cursor, body.0));
                    axum::http::StatusCode::OK
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook_url = format!("http://{}/approved", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, hook).await.unwrap() });

    let config = livestate_server::ServeConfig {
        webhooks: [("procurement".to_string(), hook_url)].into_iter().collect(),
        ..Default::default()
    };
    let server = common::start_with(config).await;
    let snapshot = common::bolt_in_stock(&server, 5).await.0;
    let created = server
        .client("agent:procurement")
        .propose(&json!({
            "kind": "replenishment_order", "module": "procurement", "summary": "order 95 bolts",
            "action": {"item": "bolt", "qty": 95},
            "sources": [{"table": "stock", "snapshot_id": snapshot}],
            "rule": {"name": "r", "version": "1", "text": "up to 100"},
            "risk": {"level": "low"}
        }))
        .await
        .unwrap();
    let id = created.id.clone();
    server.client("person:ana").decide(&id, true, "ok").await.unwrap();
    let delivered =
        eventually("the webhook to accept the approval", || async { got.lock().unwrap().first().cloned() })
            .await;
    assert!(calls.load(std::sync::atomic::Ordering::SeqCst) >= 3, "retried after the failures");
    assert_eq!(delivered.1["proposal_id"], json!(id));
    assert_eq!(delivered.1["action"]["qty"], json!(95));
    let outbox = server.client("module:procurement").outbox("procurement", 0).await.unwrap();
    assert_eq!(delivered.0, Some(outbox.items[0].cursor.to_string()));
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(got.lock().unwrap().len(), 1, "delivered once it was accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_names_one_request_a_different_one_under_it_is_a_conflict() {
    let mut server = start().await;
    let (snapshot, _) = common::bolt_in_stock(&server, 5).await;
    let agent = server.client("agent:procurement");
    let proposal = |summary: &str, qty: i64| {
        json!({
            "kind": "replenishment_order", "module": "procurement", "summary": summary,
            "action": {"item": "bolt", "qty": qty},
            "sources": [{"table": "stock", "snapshot_id": snapshot, "keys": [{"item": "bolt"}]}],
            "rule": {"name": "r", "version": "1", "text": "order up to target"},
            "risk": {"level": "low"},
            "idempotency_key": "night-run-1"
        })
    };
    let first = agent.propose(&proposal("order 10 bolts", 10)).await.unwrap();
    // The same request again (its answer lost, say): the same proposal.
    let again = agent.propose(&proposal("order 10 bolts", 10)).await.unwrap();
    assert_eq!((again.id.clone(), again.duplicate), (first.id.clone(), true), "{again:?}");
    let head = server.client("admin").health().await.unwrap().record_next_offset;
    // Another request under the same key: refused, naming the key and the proposal, nothing stored.
    for other in [proposal("order 500 bolts", 500), proposal("order 10 bolts", 11)] {
        let e = agent.propose(&other).await.unwrap_err();
        assert_eq!(e.status().map(|s| s.as_u16()), Some(409), "{e}");
        let text = e.to_string();
        assert!(text.contains("night-run-1") && text.contains(first.id.as_str()), "{text}");
    }
    assert_eq!(server.client("admin").health().await.unwrap().record_next_offset, head);
    let listed = agent.proposals(None).await.unwrap();
    assert_eq!(listed.proposals.iter().filter(|p| p.summary == "order 500 bolts").count(), 0, "{listed:?}");
    server.stop().await;
}
