//! Re-deriving tables after a spec fix: a poisoned event's quarantined row operation is derived
//! once the mapping that let the poison in is fixed, the tables equal a fresh derivation with
//! the fixed spec, the correction arrives as a changelog, old snapshots keep the old rows, and
//! a fixed spec that changes more than mappings is refused with nothing changed.

mod common;

use std::path::{Path, PathBuf};

use arrow_array::Array;
use common::{derive, example_spec, fresh, line, rows};
use futures::TryStreamExt;
use livestate_engine::quarantine::entries;
use livestate_engine::{At, Committed, EngineError, Livestate, ReadRequest};
use serde_json::json;

/// The reservation mapping, as the example spec has it, and fixed to ignore impossible values.
const RESERVATION: &str = "event = \"commerce.reservation_changed\"\ntable = \"stock\"\n";
const RESERVATION_FIXED: &str =
    "event = \"commerce.reservation_changed\"\ntable = \"stock\"\nwhen = \"reserved >= 0\"\n";

/// A copy of the example spec in `dir` with `from` replaced by `to` in `file`.
fn edited_spec(dir: &Path, file: &str, from: &str, to: &str) -> PathBuf {
    let out = dir.join(format!("spec-{}", dir.read_dir().unwrap().count()));
    std::fs::create_dir_all(&out).unwrap();
    for e in std::fs::read_dir(example_spec()).unwrap() {
        let p = e.unwrap().path();
        let mut text = std::fs::read_to_string(&p).unwrap();
        if p.file_name().unwrap() == file {
            assert!(text.contains(from), "{file} holds {from:?}");
            text = text.replacen(from, to, 1);
        }
        std::fs::write(out.join(p.file_name().unwrap()), text).unwrap();
    }
    out
}

fn poison_then_orders() -> [String; 3] {
    let order = |n: u32, id: &str, item: &str| {
        line(
            n,
            "commerce.order_placed",
            json!({"order_id": id, "line": 1, "customer": "c", "item": item, "location": "north", "qty": 2, "unit_price": "1.00"}),
        )
    };
    [
        line(
            1,
            "commerce.reservation_changed",
            json!({"item": "bolt", "location": "north", "reserved": i64::MIN}),
        ),
        order(2, "o-bolt", "bolt"),
        order(3, "o-nut", "nut"),
    ]
}

/// Emits and derives the poison (committed in `stock`), then the orders: the bolt order's
/// lookup join overflows against the committed row and is quarantined.
async fn poison(ls: &Livestate) {
    let lines = poison_then_orders();
    ls.emit(&lines[0], false).unwrap();
    derive(ls).await;
    ls.emit(&lines[1..].join("\n"), false).unwrap();
    derive(ls).await;
}

fn order_ids(rows: &[serde_json::Value]) -> Vec<&str> {
    rows.iter().map(|r| r["order_id"].as_str().unwrap()).collect()
}

async fn rows_at(ls: &Livestate, table: &str, at: At) -> Vec<serde_json::Value> {
    let req = ReadRequest { table: table.into(), keys: vec![], at };
    ls.read_files(&req).await.unwrap().json_rows()
}

/// The row kinds of snapshot `id`'s changelog, with each row's key column `key`.
async fn changelog_of(ls: &Livestate, table: &str, id: i64, key: &str) -> Vec<(String, String)> {
    let t = ls.table(table).await.unwrap();
    let rb = t.new_read_builder();
    let plan =
        rb.new_incremental_scan(paimon::IncrementalScanMode::Changelog, id - 1, id).plan().await.unwrap();
    let batches: Vec<arrow_array::RecordBatch> =
        rb.new_read().unwrap().to_audit_log_arrow(&plan).unwrap().try_collect().await.unwrap();
    let mut out = Vec::new();
    for b in batches {
        let kinds = livestate_engine::read::row_kinds(&b).unwrap();
        let keys = b.column_by_name(key).unwrap();
        let keys = keys.as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
        for (i, kind) in kinds.into_iter().enumerate() {
            out.push((kind.short_string().to_string(), keys.value(i).to_string()));
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn a_quarantined_row_is_derived_once_the_spec_is_fixed_and_the_tables_equal_a_fresh_derivation() {
    let (tmp, ls) = fresh().await;
    poison(&ls).await;
    assert_eq!(entries(ls.layout(), None, 100).unwrap().len(), 1, "the bolt order is quarantined");
    assert_eq!(order_ids(&rows(&ls, "open_orders", &[]).await), vec!["o-nut"]);
    let before = ls.derivers().await.unwrap();
    let old_orders_snapshot = before.committed("open_orders").unwrap().snapshot_id;
    let work_queue_snapshot = before.committed("work_queue").unwrap().snapshot_id;
    drop(before);

    let fixed = edited_spec(tmp.path(), "mappings.toml", RESERVATION, RESERVATION_FIXED);
    let tables = ["stock".to_string(), "open_orders".to_string()];
    let report = ls.rederive(Some(&fixed), &tables, &mut |_| {}).await.unwrap();
    assert_eq!(report.through, 3);
    assert!(report.spec_replaced);
    let (stock, orders) = (&report.tables[0], &report.tables[1]);
    assert_eq!((stock.name.as_str(), stock.changed_keys), ("stock", 1), "{report:?}");
    assert_eq!((orders.name.as_str(), orders.changed_keys, orders.rows), ("open_orders", 1, 2), "{report:?}");
    assert_eq!((orders.quarantined_before, orders.quarantined_after), (1, 0));
    assert!(entries(ls.layout(), None, 100).unwrap().is_empty(), "the quarantine entry is gone");
    // The fixed spec is the directory's now.
    assert_eq!(
        std::fs::read_to_string(ls.layout().spec_dir().join("mappings.toml")).unwrap(),
        std::fs::read_to_string(fixed.join("mappings.toml")).unwrap()
    );

    // The rows are what a directory initialised with the fixed spec derives from the same events.
    let twin_dir = tempfile::tempdir().unwrap();
    let twin = Livestate::init(&twin_dir.path().join("d"), &fixed).await.unwrap();
    twin.emit(&poison_then_orders().join("\n"), false).unwrap();
    derive(&twin).await;
    for table in ["stock", "open_orders"] {
        assert_eq!(rows(&ls, table, &[]).await, rows(&twin, table, &[]).await, "{table}");
    }
    let bolt = rows(&ls, "open_orders", &[("order_id", "o-bolt")]).await;
    assert_eq!(bolt[0]["available_at_order"], 0, "{bolt:?}");
    assert!(
        rows(&ls, "stock", &[("item", "bolt")]).await.is_empty(),
        "the impossible reservation is not derived"
    );

    // The correction is a changelog: the bolt order appears, the poisoned stock row goes.
    let changed = orders.changelog_snapshot.expect("open_orders keeps a changelog");
    assert_eq!(
        changelog_of(&ls, "open_orders", changed, "order_id").await,
        vec![("+I".into(), "o-bolt".into())]
    );
    let stock_changes = changelog_of(&ls, "stock", stock.changelog_snapshot.unwrap(), "item").await;
    assert_eq!(stock_changes, vec![("-D".into(), "bolt".into())]);
    // The snapshot an agent read before keeps what it read; a table not named is untouched.
    let old = rows_at(&ls, "open_orders", At::Snapshot(old_orders_snapshot.unwrap())).await;
    assert_eq!(order_ids(&old), vec!["o-nut"]);
    let after = ls.derivers().await.unwrap();
    assert_eq!(after.committed("work_queue").unwrap().snapshot_id, work_queue_snapshot);
    assert_eq!(
        after.committed("open_orders").unwrap(),
        Committed { through: 3, snapshot_id: Some(changed) },
        "the derivers resume after it"
    );
    drop(after);

    // Reopened, the fixed spec derives what comes next, and a second run changes nothing.
    drop(ls);
    let ls = Livestate::open(&tmp.path().join("d")).await.unwrap();
    let more =
        line(4, "commerce.reservation_changed", json!({"item": "nut", "location": "north", "reserved": -5}));
    ls.emit(&more, false).unwrap();
    derive(&ls).await;
    assert!(rows(&ls, "stock", &[("item", "nut")]).await.is_empty(), "{:?}", rows(&ls, "stock", &[]).await);
    let again = ls.rederive(None, &tables, &mut |_| {}).await.unwrap();
    assert_eq!(again.through, 4);
    assert!(again.tables.iter().all(|t| t.changed_keys == 0 && t.overwrite_snapshot.is_none()), "{again:?}");
    assert!(!again.spec_replaced);
    assert!(!ls.layout().rederive_dir().exists(), "the twin is removed");
}

/// Where `stock` stands: the offset and snapshot of its last commit.
async fn stock_commit(ls: &Livestate) -> Committed {
    ls.derivers().await.unwrap().committed("stock").unwrap()
}

#[tokio::test]
async fn a_fixed_spec_that_changes_more_than_mappings_is_refused_and_nothing_changes() {
    let (tmp, ls) = fresh().await;
    poison(&ls).await;
    let spec_before = std::fs::read_to_string(ls.layout().spec_dir().join("mappings.toml")).unwrap();
    let stock_before = stock_commit(&ls).await;

    let cases: Vec<(PathBuf, Vec<&str>, &str)> = vec![
        // An event's fields: the record was checked against them.
        (
            edited_spec(tmp.path(), "events.toml", "reserved = \"int\"", "reserved = \"int?\""),
            vec!["stock"],
            "changes the fields of event `commerce.reservation_changed`",
        ),
        // The options of the named table: the Paimon table stays as it is.
        (
            edited_spec(
                tmp.path(),
                "tables.toml",
                "options = { \"merge-engine\" = \"deduplicate\", bucket = \"2\" }",
                "options = { \"merge-engine\" = \"deduplicate\", bucket = \"3\" }",
            ),
            vec!["open_orders"],
            "changes the columns, key, merge engine or options of `open_orders`",
        ),
        // A table not named.
        (
            edited_spec(tmp.path(), "mappings.toml", RESERVATION, RESERVATION_FIXED),
            vec!["open_orders"],
            "changes table `stock` too; name it",
        ),
    ];
    for (spec, tables, expected) in cases {
        let tables: Vec<String> = tables.into_iter().map(String::from).collect();
        let e = ls.rederive(Some(&spec), &tables, &mut |_| {}).await.unwrap_err().to_string();
        assert!(e.contains(expected), "{e}");
    }
    let unknown = ls.rederive(None, &["stok".to_string()], &mut |_| {}).await.unwrap_err();
    assert!(matches!(unknown, EngineError::UnknownTable { .. }), "{unknown}");
    let none = ls.rederive(None, &[], &mut |_| {}).await.unwrap_err();
    assert!(none.to_string().contains("name at least one table"), "{none}");

    assert_eq!(std::fs::read_to_string(ls.layout().spec_dir().join("mappings.toml")).unwrap(), spec_before);
    assert_eq!(stock_commit(&ls).await, stock_before, "no snapshot was written");
    assert_eq!(entries(ls.layout(), None, 100).unwrap().len(), 1);
}

#[tokio::test]
async fn a_table_that_never_committed_takes_its_first_snapshot_from_a_rederivation() {
    let tmp = tempfile::tempdir().unwrap();
    let guarded = edited_spec(tmp.path(), "mappings.toml", RESERVATION, RESERVATION_FIXED);
    let ls = Livestate::init(&tmp.path().join("d"), &guarded).await.unwrap();
    let negative =
        line(1, "commerce.reservation_changed", json!({"item": "bolt", "location": "north", "reserved": -3}));
    ls.emit(&negative, false).unwrap();
    derive(&ls).await;
    assert_eq!(
        stock_commit(&ls).await,
        Committed { through: 1, snapshot_id: None },
        "the guard left stock without a snapshot"
    );

    // The example spec, without the guard: stock's first snapshot is the OVERWRITE.
    let report = ls.rederive(Some(&example_spec()), &["stock".to_string()], &mut |_| {}).await.unwrap();
    let stock = &report.tables[0];
    assert_eq!(
        (stock.changed_keys, stock.overwrite_snapshot, stock.changelog_snapshot),
        (1, Some(1), Some(2))
    );
    let rows = rows(&ls, "stock", &[]).await;
    assert_eq!((rows.len(), &rows[0]["reserved"]), (1, &json!(-3)), "{rows:?}");
    assert_eq!(stock_commit(&ls).await, Committed { through: 1, snapshot_id: Some(2) });
    assert_eq!(changelog_of(&ls, "stock", 2, "item").await, vec![("+I".into(), "bolt".into())]);
}

#[tokio::test]
async fn a_spec_replacement_cut_between_its_renames_is_completed_by_the_next_writer() {
    let (tmp, ls) = fresh().await;
    let fixed = edited_spec(tmp.path(), "mappings.toml", RESERVATION, RESERVATION_FIXED);
    let layout = ls.layout().clone();
    drop(ls);
    // As a crash leaves it after `spec/` became `spec.prev/` and before `spec.next/` became `spec/`.
    let next = layout.dir.join("spec.next");
    std::fs::create_dir_all(&next).unwrap();
    for e in std::fs::read_dir(&fixed).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, next.join(p.file_name().unwrap())).unwrap();
    }
    std::fs::write(next.join(".complete"), "").unwrap();
    std::fs::rename(layout.spec_dir(), layout.dir.join("spec.prev")).unwrap();
    assert!(!layout.is_initialized(), "readers see no spec meanwhile");

    let ls = Livestate::open(&layout.dir).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(layout.spec_dir().join("mappings.toml")).unwrap(),
        std::fs::read_to_string(fixed.join("mappings.toml")).unwrap()
    );
    assert!(!layout.dir.join("spec.next").exists() && !layout.dir.join("spec.prev").exists());
    assert!(
        ls.spec().mappings.iter().any(|m| m.table == "stock" && m.when.is_some()),
        "the fixed spec is loaded"
    );
}
