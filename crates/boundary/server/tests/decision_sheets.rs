//! Decision input sheets over real HTTP: a proposal of a declared kind must cite every input,
//! and its sheet shows each input's value as the pinned tag holds it (also after the row
//! changed, compaction and expiry), the value now, the rule's arithmetic and whether the
//! inputs were read at one instant.

mod common;

use common::decisions::{cite, read_all, replenishment, stocked};
use common::{event, eventually, start, TestServer};
use livestate_api::read::TagInfo;
use livestate_client::{ConsistentAnswer, TableRead};
use serde_json::{json, Value};

/// The typed sheet, as JSON for the assertions.
async fn sheet_json(client: &livestate_client::Client, id: &str) -> Value {
    serde_json::to_value(client.sheet(id).await.unwrap()).unwrap()
}

fn input<'a>(sheet: &'a Value, name: &str) -> &'a Value {
    sheet["inputs"].as_array().unwrap().iter().find(|i| i["name"] == name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_missing_an_input_is_refused_naming_it_and_nothing_is_stored() {
    let server = start().await;
    stocked(&server).await;
    let agent = server.client("agent:procurement");
    let read = read_all(&server).await;
    let before = agent.health().await.unwrap().record_next_offset;
    let tags_before = stock_tags(&server).await;

    // Stock and supplier risk cited, the supplier's offer not: pack_size is the first input missing.
    let p = replenishment(vec![cite(&read, "stock"), cite(&read, "supplier_risk")]);
    let e = agent.propose(&p).await.unwrap_err();
    assert_eq!(e.status().unwrap().as_u16(), 400, "{e}");
    let msg = e.to_string();
    assert!(msg.contains("input `pack_size`") && msg.contains("supplier_items.pack_size"), "{msg}");
    assert!(msg.contains("item=bolt, supplier=acme"), "{msg}");

    // A cited row without the input's column does not count as citing it.
    let mut thin = cite(&read, "supplier_items");
    thin["rows"][0].as_object_mut().unwrap().remove("unit_price");
    let e =
        agent.propose(&replenishment(vec![cite(&read, "stock"), thin, cite(&read, "supplier_risk")])).await;
    assert!(e.unwrap_err().to_string().contains("input `unit_price`"));

    // The action must hold the kind's fields, and the module must be the kind's.
    let mut no_qty = replenishment(vec![
        cite(&read, "stock"),
        cite(&read, "supplier_items"),
        cite(&read, "supplier_risk"),
    ]);
    no_qty["action"].as_object_mut().unwrap().remove("qty");
    let e = agent.propose(&no_qty).await.unwrap_err();
    assert!(e.to_string().contains("action.qty: missing"), "{e}");
    let mut wrong_module = replenishment(vec![cite(&read, "stock")]);
    wrong_module["module"] = json!("commerce");
    let e = agent.propose(&wrong_module).await.unwrap_err();
    assert!(e.to_string().contains("carried out by `procurement`"), "{e}");

    // Nothing was stored: no event, no proposal, no tag.
    assert_eq!(agent.health().await.unwrap().record_next_offset, before);
    assert!(agent.proposals(None).await.unwrap().proposals.is_empty());
    assert_eq!(stock_tags(&server).await, tags_before);

    // Citing every input is accepted.
    let ok = replenishment(vec![
        cite(&read, "stock"),
        cite(&read, "supplier_items"),
        cite(&read, "supplier_risk"),
    ]);
    agent.propose(&ok).await.unwrap();
}

async fn stock_tags(server: &TestServer) -> Vec<TagInfo> {
    let t = server.client("admin").tables().await.unwrap();
    t.into_iter().find(|t| t.name == "stock").unwrap().health.tags
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sheet_of_one_consistent_read_is_at_one_instant_and_keeps_its_values_after_change_compaction_and_expiry(
) {
    let server = start().await;
    stocked(&server).await;
    let agent = server.client("agent:procurement");
    let ana = server.client("person:ana");
    let read = read_all(&server).await;
    let p = replenishment(vec![
        cite(&read, "stock"),
        cite(&read, "supplier_items"),
        cite(&read, "supplier_risk"),
    ]);
    let id = agent.propose(&p).await.unwrap().id;

    let sheet = sheet_json(&ana, &id).await;
    assert_eq!(sheet["kind"], json!("stock_replenishment"));
    assert_eq!(
        sheet["summary"],
        json!("Order 100 x bolt from acme for north: available 35 < reorder point 40")
    );
    let names: Vec<&str> =
        sheet["inputs"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "on_hand",
            "reserved",
            "inbound",
            "reorder_point",
            "target",
            "pack_size",
            "unit_price",
            "supplier_risk"
        ]
    );
    let on_hand = input(&sheet, "on_hand");
    assert_eq!(on_hand["value"], json!(50));
    assert_eq!(on_hand["key"], json!({"item": "bolt", "location": "north"}));
    assert_eq!(on_hand["offset"], read.offset);
    assert_eq!(on_hand["need"], json!("1m"));
    assert_eq!(on_hand["lag_ms"], json!(0), "nothing was recorded between the read and the proposal");
    assert_eq!(on_hand["fresh_enough"], json!(true), "{on_hand}");
    assert_eq!(on_hand["changed_since"], json!(false));
    assert_eq!(input(&sheet, "unit_price")["value"], json!("1.50"));
    assert_eq!(input(&sheet, "supplier_risk")["value"], json!("low"));
    assert_eq!(input(&sheet, "supplier_risk")["need"], json!("24h"));
    // The rule's arithmetic, with the numbers in it.
    let step =
        |name: &str| sheet["rule"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap().clone();
    assert_eq!(
        step("available")["with_values"],
        json!("coalesce(50, 0) - coalesce(15, 0) + coalesce(null, 0)")
    );
    assert_eq!(step("available")["value"], json!(35));
    assert_eq!(step("below_reorder_point")["with_values"], json!("35 < 40"));
    assert_eq!(step("below_reorder_point")["value"], json!(true));
    assert_eq!(step("shortfall")["value"], json!(65));
    assert_eq!(step("value")["value"], json!("150.00"));
    // One consistent read: one instant.
    assert_eq!(sheet["verdict"]["one_instant"], json!(true), "{}", sheet["verdict"]);
    assert_eq!(sheet["verdict"]["offset_spread"], json!(0));
    assert_eq!(sheet["verdict"]["instants"].as_array().unwrap().len(), 1);

    // The row changes, then many commits; compaction and expiry run meanwhile.
    let inventory = server.client("module:inventory");
    let stock_snapshot = input(&sheet, "on_hand")["snapshot_id"].as_i64().unwrap();
    for i in 0..60 {
        let line = event(
            &format!("c-more-{i}"),
            "inventory.stock_counted",
            json!({"item": "bolt", "location": "north", "on_hand": 60 + i}),
        );
        inventory.emit(&line).await.unwrap();
        agent.consistent_read(&[TableRead::table("stock").limit(1)]).await.unwrap();
    }
    // Expiry runs after a commit, at most once a second: on a fast machine the 60 commits take
    // less than that, so other rows are counted (bolt at north stays as it is) until it has run.
    let other = std::sync::atomic::AtomicUsize::new(0);
    let stock = eventually("the cited snapshot to expire", || async {
        let t = agent.tables().await.unwrap();
        let stock = t.into_iter().find(|t| t.name == "stock").unwrap();
        if stock.health.earliest_snapshot.unwrap() > stock_snapshot {
            return Some(stock);
        }
        let n = other.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let line = event(
            &format!("c-other-{n}"),
            "inventory.stock_counted",
            json!({"item": "nut", "location": "north", "on_hand": n}),
        );
        inventory.emit(&line).await.unwrap();
        agent.consistent_read(&[TableRead::table("stock").limit(1)]).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        None
    })
    .await;
    // Compaction merged the files of those 60 commits.
    let files: usize = stock.health.buckets.iter().map(|b| b.files).sum();
    assert!(files < 60, "{files} files after 60 commits: {:?}", stock.health);

    let after = sheet_json(&ana, &id).await;
    let on_hand = input(&after, "on_hand");
    assert_eq!(on_hand["value"], json!(50), "the value the agent used, from the pinned tag");
    assert_eq!(on_hand["value_now"], json!(119));
    assert_eq!(on_hand["changed_since"], json!(true));
    assert_eq!(input(&after, "reserved")["changed_since"], json!(false));
    assert_eq!(input(&after, "reserved")["value_now"], json!(15));
    assert_eq!(after["summary"], sheet["summary"]);
    assert_eq!(after["rule"], sheet["rule"]);
    // The value read back from the tag is what the tag holds.
    let tag = on_hand["tag"].as_str().unwrap();
    let at_tag = agent.rows("stock", &[("tag", tag), ("item", "bolt"), ("location", "north")]).await.unwrap();
    assert_eq!(at_tag.cell(0, "on_hand"), on_hand["value"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_read_at_two_offsets_get_a_verdict_naming_both_instants_and_how_far_apart() {
    let server = start().await;
    stocked(&server).await;
    let agent = server.client("agent:procurement");
    let first = read_all(&server).await;
    // More business is recorded, then the stock is read again on its own.
    let admin = server.client("admin");
    admin
        .emit(&event(
            "c2",
            "inventory.stock_counted",
            json!({"item": "nut", "location": "north", "on_hand": 5}),
        ))
        .await
        .unwrap();
    let second = agent
        .consistent_read(&[TableRead::table("stock").key("item", "bolt").key("location", "north")])
        .await
        .unwrap();
    let (o1, o2) = (first.offset, second.offset);
    assert!(o2 > o1, "{o1} {o2}");
    let p = replenishment(vec![
        cite(&second, "stock"),
        cite(&first, "supplier_items"),
        cite(&first, "supplier_risk"),
    ]);
    let id = agent.propose(&p).await.unwrap().id;

    let sheet = sheet_json(&server.client("person:ana"), &id).await;
    // The offer was read before the nut count was recorded: stale by the time since then.
    assert!(input(&sheet, "pack_size")["lag_ms"].as_u64().unwrap() > 0, "{sheet}");
    assert_eq!(input(&sheet, "on_hand")["lag_ms"], json!(0));
    let verdict = sheet["verdict"].clone();
    assert_eq!(verdict["one_instant"], json!(false), "{verdict}");
    let instants = verdict["instants"].as_array().unwrap();
    assert_eq!(instants.len(), 2, "{verdict}");
    assert_eq!(instants[0]["offset"], json!(o1));
    assert_eq!(instants[0]["inputs"], json!(["pack_size", "unit_price", "supplier_risk"]));
    assert_eq!(instants[1]["offset"], json!(o2));
    assert_eq!(instants[1]["inputs"], json!(["on_hand", "reserved", "inbound", "reorder_point", "target"]));
    assert_eq!(verdict["offset_spread"], json!(o2 - o1));
    let text = verdict["text"].as_str().unwrap();
    assert!(text.contains("2 different instants") && text.contains(&format!("{} events", o2 - o1)), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_kinds_are_listed_for_agents_with_their_module_and_inputs() {
    let server = start().await;
    let agent = server.client("agent:procurement");
    let kinds = agent.decision_kinds().await.unwrap();
    let names: Vec<&str> = kinds.kinds.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["stock_replenishment", "job_reassignment", "job_release"]);
    let k = &kinds.kinds[0];
    assert_eq!(k.module, "procurement");
    assert_eq!(
        serde_json::to_value(&k.inputs[0]).unwrap(),
        json!({"name": "on_hand", "table": "stock", "column": "on_hand", "type": "int",
        "key": {"item": "item", "location": "location"}, "need": "1m"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_of_an_undeclared_kind_has_no_sheet() {
    let server = start().await;
    let agent = server.client("agent:procurement");
    let (snapshot, row) = common::bolt_in_stock(&server, 30).await;
    let undeclared = json!({
        "kind": "replenishment_order", "module": "procurement", "summary": "order 10 bolts",
        "action": {}, "sources": [{"table": "stock", "snapshot_id": snapshot, "rows": [row]}],
        "rule": {"name": "r", "version": "1", "text": "t"}, "risk": {"level": "low"},
    });
    let id = agent.propose(&undeclared).await.unwrap().id;
    let e = agent.sheet(&id).await.unwrap_err();
    assert_eq!(e.status().unwrap().as_u16(), 404, "{e}");
    assert!(e.to_string().contains("kind `replenishment_order`, which the spec does not declare"), "{e}");
}

/// Whether stock's Paimon changelog holds a change of bolt at north after `snapshot`.
async fn stock_key_changed_after(server: &TestServer, snapshot: i64) -> bool {
    use futures::TryStreamExt;
    let layout = livestate_engine::Layout::new(server.dir()).unwrap();
    let catalog = livestate_engine::open_catalog(&layout).unwrap();
    let table = catalog.table(livestate_engine::TableId::state("stock").identifier()).await.unwrap();
    let latest = table.snapshot_manager().get_latest_snapshot_id().await.unwrap().unwrap();
    let rb = table.new_read_builder();
    let plan = rb
        .new_incremental_scan(paimon::IncrementalScanMode::Changelog, snapshot, latest)
        .plan()
        .await
        .unwrap();
    let batches: Vec<arrow_array::RecordBatch> =
        rb.new_read().unwrap().to_audit_log_arrow(&plan).unwrap().try_collect().await.unwrap();
    let spec = livestate_engine::load_spec(&layout).unwrap();
    let ts = spec.table("stock").unwrap();
    let (item, location) =
        (ts.columns.get_index_of("item").unwrap(), ts.columns.get_index_of("location").unwrap());
    batches.iter().any(|b| {
        let user = b.project(&(1..b.num_columns()).collect::<Vec<_>>()).unwrap();
        livestate_engine::read::rows_of(&user, ts).unwrap().iter().any(|row| {
            row[item] == livestate_spec::Value::String("bolt".into())
                && row[location] == livestate_spec::Value::String("north".into())
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_of_a_kind_counts_decisions_changes_before_them_staleness_and_split_reads() {
    let server = start().await;
    stocked(&server).await;
    let agent = server.client("agent:procurement");
    let ana = server.client("person:ana");
    let inventory = server.client("module:inventory");
    let all = |read: &ConsistentAnswer| {
        vec![cite(read, "stock"), cite(read, "supplier_items"), cite(read, "supplier_risk")]
    };

    // 1: on hand is recounted after the agent read it, then approved.
    let read = read_all(&server).await;
    let proposed1 = agent.propose(&replenishment(all(&read))).await.unwrap();
    let p1 = proposed1.id.clone();
    let recount =
        event("c2", "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 20}));
    inventory.emit(&recount).await.unwrap();
    ana.decide(&p1, true, "needed").await.unwrap();
    // 2: nothing changes before it is rejected.
    let read = read_all(&server).await;
    let proposed2 = agent.propose(&replenishment(all(&read))).await.unwrap();
    let p2 = proposed2.id.clone();
    ana.decide(&p2, false, "not now").await.unwrap();
    // 3: stock read, another event, the offer read apart 50 ms later; left pending. Stock is
    // then stale by the time since that event: over inbound's 1 ms need, within the others'.
    let stock = agent
        .consistent_read(&[TableRead::table("stock").key("item", "bolt").key("location", "north")])
        .await
        .unwrap();
    let other =
        event("c3", "inventory.stock_counted", json!({"item": "nut", "location": "north", "on_hand": 1}));
    inventory.emit(&other).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let rest = read_all(&server).await;
    agent
        .propose(&replenishment(vec![
            cite(&stock, "stock"),
            cite(&rest, "supplier_items"),
            cite(&rest, "supplier_risk"),
        ]))
        .await
        .unwrap();

    let h = ana.decision_history("stock_replenishment", "30d").await.unwrap();
    assert_eq!((h.proposals, h.approved, h.rejected, h.pending), (3, 1, 1, 1), "{h:?}");
    assert_eq!(h.per_day.len(), 1);
    assert_eq!((h.per_day[0].proposed, h.per_day[0].decided), (3, 2));
    assert_eq!(h.time_to_decide.as_ref().unwrap().count, 2);
    assert_eq!(h.not_one_instant, 1);
    assert!(!h.truncated);
    let input = |n: &str| h.inputs.iter().find(|i| i.name == n).unwrap();
    let on_hand = input("on_hand");
    assert_eq!(
        (on_hand.decided_checked, on_hand.changed_before_decision, on_hand.unknown),
        (2, 1, 0),
        "{on_hand:?}"
    );
    assert_eq!(input("reserved").changed_before_decision, 0);
    assert_eq!(input("pack_size").changed_before_decision, 0);
    assert_eq!((input("inbound").lag_known, input("inbound").staler_than_needed), (3, 1));
    assert_eq!(input("on_hand").staler_than_needed, 0, "a minute's need");

    // The history carries each cited row through the record (kept for good); the Paimon
    // changelog, while its snapshots are kept, tells the same story: after proposal 1's
    // snapshot bolt at north changed, after proposal 2's it did not.
    let pinned = |p: &livestate_client::Proposed| {
        p.tags.as_ref().unwrap().iter().find(|t| t.table == "stock").unwrap().snapshot_id
    };
    assert!(stock_key_changed_after(&server, pinned(&proposed1)).await);
    assert!(!stock_key_changed_after(&server, pinned(&proposed2)).await);

    // A window that ends before them holds none; an undeclared kind and a bad window are refused.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let empty = ana.decision_history("stock_replenishment", "10ms").await.unwrap();
    assert_eq!(empty.proposals, 0);
    let e = ana.decision_history("nope", "30d").await.unwrap_err();
    assert_eq!(e.status().unwrap().as_u16(), 404, "{e}");
    let e = ana.decision_history("stock_replenishment", "soon").await.unwrap_err();
    assert_eq!(e.status().unwrap().as_u16(), 400, "{e}");
    assert!(e.to_string().contains("since"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proposals_recorded_before_their_kind_was_declared_have_no_sheet_and_count_as_unknown() {
    let mut server = start().await;
    // The directory starts without the decision kinds: a replenishment citing only stock is taken.
    server.stop().await;
    let decisions = server.dir().join("spec/decisions.toml");
    let declared = std::fs::read_to_string(&decisions).unwrap();
    std::fs::remove_file(&decisions).unwrap();
    server.serve(livestate_server::ServeConfig::default()).await;
    stocked(&server).await;
    let read = read_all(&server).await;
    let agent = server.client("agent:procurement");
    let id = agent.propose(&replenishment(vec![cite(&read, "stock")])).await.unwrap().id;
    server.client("person:ana").decide(&id, true, "fine").await.unwrap();

    // Declared at the next start: the old proposal has no sheet, and the history says what it can.
    server.stop().await;
    std::fs::write(&decisions, declared).unwrap();
    server.serve(livestate_server::ServeConfig::default()).await;
    let ana = server.client("person:ana");
    let e = ana.sheet(&id).await.unwrap_err();
    assert_eq!(e.status().unwrap().as_u16(), 404, "{e}");
    assert!(e.to_string().contains("does not cite input `pack_size`"), "{e}");
    let h = ana.decision_history("stock_replenishment", "1d").await.unwrap();
    assert_eq!((h.proposals, h.approved), (1, 1));
    let input = |n: &str| h.inputs.iter().find(|i| i.name == n).unwrap();
    assert_eq!((input("on_hand").decided_checked, input("on_hand").unknown), (1, 0));
    assert_eq!((input("pack_size").decided_checked, input("pack_size").unknown), (0, 1));
    assert_eq!(h.not_one_instant, 1, "inputs it never cited were not read at its instant");
}
