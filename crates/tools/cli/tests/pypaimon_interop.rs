//! pypaimon 2.1.0, an independent Paimon implementation, reads every table livestate writes and
//! sees exactly the rows `livestate read` prints.
//!
//! The Python environment comes from `scripts/pyenv.sh` (or `LIVESTATE_PYTHON`).

mod common;

use common::{canonical, emit, livestate, livestate_rows, python, repo};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

/// Output of `tests/interop/read_table.py` for `table` with `extra` arguments.
fn read_table_py(py: &str, dir: &Path, table: &str, extra: &[&str]) -> String {
    let out = Command::new(py)
        .arg(repo().join("tests/interop/read_table.py"))
        .arg(dir.join("warehouse"))
        .arg(table)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pypaimon read of {table} {extra:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn pypaimon_rows(py: &str, dir: &Path, table: &str, extra: &[&str]) -> Vec<String> {
    canonical(read_table_py(py, dir, table, extra).lines().map(|l| serde_json::from_str(l).unwrap()))
}

#[test]
fn pypaimon_reads_the_same_rows_as_livestate() {
    let py = python();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    livestate(&dir, &["init"]);
    let events = livestate_sim::company_events(&livestate_sim::SimConfig::default());
    emit(&dir, &livestate_sim::to_json_lines(&events));
    livestate(&dir, &["derive", "--once"]);
    // A second commit on top: level-0 files from two commits must merge the same way.
    let more: String = [
        json!({"id": "more-1", "type": "inventory.stock_counted", "occurred_at": "2026-03-03T09:00:00Z", "data": {"item": "part-0001", "location": "north", "on_hand": 3}}),
        json!({"id": "more-2", "type": "commerce.order_shipped", "occurred_at": "2026-03-03T09:00:01Z", "data": {"order_id": "so-00002", "line": 1, "item": "part-0003", "location": "east", "qty": 8}}),
        json!({"id": "more-3", "type": "operations.job_status_changed", "occurred_at": "2026-03-03T09:00:02Z", "data": {"job_id": "job-0003", "status": "released", "machine": "press-2"}}),
    ]
    .iter()
    .map(|v| v.to_string() + "\n")
    .collect();
    emit(&dir, &more);
    // A proposal, as `livestate serve` records one (the CLI refuses `decisions.*` lines).
    let proposal = json!({"id": "more-4", "type": "decisions.proposal_created", "occurred_at": "2026-03-03T09:00:03Z", "data": {"proposal_id": "p-1", "kind": "replenishment_order", "agent": "procurement", "module": "procurement", "summary": "order 120 of part-0001", "risk_level": "low", "document": "{}"}});
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let ls = livestate_engine::Livestate::open(&dir).await.unwrap();
        ls.emit(&proposal.to_string(), false).unwrap();
    });
    livestate(&dir, &["derive", "--once"]);

    for table in
        ["stock", "work_queue", "open_orders", "supplier_risk", "approval_inbox", "reservations_total"]
    {
        let ours = livestate_rows(&dir, table, &[]);
        assert!(!ours.is_empty(), "{table} has rows");
        assert_eq!(pypaimon_rows(&py, &dir, &format!("state.{table}"), &[]), ours, "latest {table}");
    }
    // Time travel: snapshot 1 of stock is the state before the second batch.
    let then = livestate_rows(&dir, "stock", &["--snapshot", "1"]);
    assert_ne!(then, livestate_rows(&dir, "stock", &[]));
    assert_eq!(pypaimon_rows(&py, &dir, "state.stock", &["--snapshot", "1"]), then, "stock at snapshot 1");

    // Known limit until compaction exists: Paimon readers skip level-0 files of first-row tables,
    // so pypaimon shows nothing while livestate (reading every file) shows the rows.
    assert!(!livestate_rows(&dir, "item_first_seen", &[]).is_empty());
    assert!(pypaimon_rows(&py, &dir, "state.item_first_seen", &[]).is_empty());

    // The archive holds every event once, in the record's offsets.
    let seen = archive_offsets(&pypaimon_rows(&py, &dir, "record.events", &[]));
    let mut expected = offsets_of(&events);
    expected.extend((1..=4).map(|i| ((events.len() + i - 1) as i64, format!("more-{i}"))));
    assert_eq!(seen, expected);
}

/// The example spec with short retention and an eager compaction trigger on every table.
fn short_retention_spec(dir: &Path) {
    livestate_testkit::example_spec()
        .only(&["events.toml", "mappings.toml", "tables.toml"])
        .option_everywhere("snapshot.num-retained.min", "2")
        .option_everywhere("snapshot.time-retained", "1 ms")
        .option_everywhere("num-sorted-run.compaction-trigger", "3")
        .write(dir);
}

#[test]
fn pypaimon_reads_every_table_after_compaction_and_expiry() {
    let py = python();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let spec = tmp.path().join("spec");
    short_retention_spec(&spec);
    livestate(&dir, &["init", "--spec", spec.to_str().unwrap()]);
    let events = livestate_sim::company_events(&livestate_sim::SimConfig::default());
    // Many small commits: derive commits every 40 events and compacts as the budgets say.
    for chunk in events.chunks(events.len() / 6 + 1) {
        emit(&dir, &livestate_sim::to_json_lines(chunk));
        livestate(&dir, &["derive", "--once", "--commit-every", "40"]);
    }
    let tables =
        ["stock", "work_queue", "open_orders", "supplier_risk", "approval_inbox", "reservations_total"];
    let before: Vec<Vec<String>> = tables.iter().map(|t| livestate_rows(&dir, t, &[])).collect();
    for t in tables.iter().chain(&["item_first_seen"]) {
        livestate(&dir, &["compact", t, "--full"]);
    }
    let merged = livestate(&dir, &["compact", "record.events", "--full"]);
    let out = livestate(&dir, &["expire", "--orphans-older-than", "0s"]);
    assert!(out.contains("state.stock: expired"), "{out}");

    let info: Value = serde_json::from_str(&livestate(&dir, &["tables", "--json"])).unwrap();
    for t in info.as_array().unwrap() {
        let h = &t["health"];
        if h["latest_snapshot"].is_null() {
            continue;
        }
        // Expired down to the two newest snapshots, every bucket one sorted run.
        assert_eq!(h["snapshots"], 2, "{t}");
        for b in h["buckets"].as_array().unwrap() {
            assert_eq!(b["sorted_runs"], 1, "{t}");
        }
    }
    for (t, rows) in tables.iter().zip(&before) {
        assert_eq!(&livestate_rows(&dir, t, &[]), rows, "{t} changed under compaction");
        assert_eq!(&pypaimon_rows(&py, &dir, &format!("state.{t}"), &[]), rows, "pypaimon {t}");
    }
    // Once compacted out of level 0, a first-row table is visible to every Paimon reader.
    let first_seen = livestate_rows(&dir, "item_first_seen", &[]);
    assert!(!first_seen.is_empty());
    assert_eq!(pypaimon_rows(&py, &dir, "state.item_first_seen", &[]), first_seen);
    // The archive's six commits were merged into one file; every event is still there once, at
    // its offset.
    let rows = events.len();
    assert!(merged.contains(&format!("({rows} rows) into 1 file(s) ({rows} rows)")), "{merged}");
    assert_eq!(archive_offsets(&pypaimon_rows(&py, &dir, "record.events", &[])), offsets_of(&events));
}

/// `(event_offset, id)` of archive rows, sorted.
fn archive_offsets(rows: &[String]) -> Vec<(i64, String)> {
    let mut seen: Vec<(i64, String)> = rows
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["event_offset"].as_i64().unwrap(), v["id"].as_str().unwrap().to_string())
        })
        .collect();
    seen.sort();
    seen
}

/// `(offset, id)` of `events` recorded in order from offset 0.
fn offsets_of(events: &[Value]) -> Vec<(i64, String)> {
    events.iter().enumerate().map(|(i, e)| (i as i64, e["id"].as_str().unwrap().to_string())).collect()
}

fn pypaimon_changes(py: &str, dir: &Path, table: &str) -> Vec<Value> {
    read_table_py(py, dir, table, &["--changes"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn pypaimon_streams_every_change_with_its_before_and_after() {
    let py = python();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    livestate(&dir, &["init"]);
    let ev = |id: &str, ty: &str, data: Value| {
        json!({"id": id, "type": ty, "occurred_at": "2026-03-02T08:00:00Z", "data": data}).to_string() + "\n"
    };
    emit(
        &dir,
        &(ev("a1", "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 40}))
            + &ev("a2", "operations.job_status_changed", json!({"job_id": "j1", "status": "released"}))),
    );
    livestate(&dir, &["derive", "--once"]);
    emit(
        &dir,
        &(ev("a3", "commerce.reservation_changed", json!({"item": "bolt", "location": "north", "reserved": 5}))
            + &ev("a4", "operations.job_status_changed", json!({"job_id": "j1", "status": "blocked", "block_reason": "no steel"}))
            // Changes nothing: no change row.
            + &ev("a5", "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 40}))),
    );
    livestate(&dir, &["derive", "--once"]);

    let stock = pypaimon_changes(&py, &dir, "state.stock");
    let kinds: Vec<(&str, i64, Value)> = stock
        .iter()
        .map(|r| (r["_row_kind"].as_str().unwrap(), r["_snapshot"].as_i64().unwrap(), r["reserved"].clone()))
        .collect();
    // The partial-update row: inserted with on_hand, then updated with reserved; the second
    // count of 40 changes nothing and adds no change.
    assert_eq!(kinds, vec![("+I", 1, Value::Null), ("-U", 2, Value::Null), ("+U", 2, json!(5))], "{stock:?}");
    assert!(stock.iter().all(|r| r["on_hand"] == 40), "the full row, not just the changed column: {stock:?}");

    let jobs = pypaimon_changes(&py, &dir, "state.work_queue");
    let statuses: Vec<(&str, &str)> =
        jobs.iter().map(|r| (r["_row_kind"].as_str().unwrap(), r["status"].as_str().unwrap())).collect();
    assert_eq!(statuses, vec![("+I", "released"), ("-U", "released"), ("+U", "blocked")]);

    // Over the simulated company, replaying pypaimon's stream gives the table livestate reads.
    let events = livestate_sim::company_events(&livestate_sim::SimConfig::default());
    for chunk in events.chunks(events.len() / 3 + 1) {
        emit(&dir, &livestate_sim::to_json_lines(chunk));
        livestate(&dir, &["derive", "--once", "--commit-every", "60"]);
    }
    for (table, key) in [("stock", vec!["item", "location"]), ("open_orders", vec!["order_id", "line"])] {
        let mut state: BTreeMap<String, Value> = BTreeMap::new();
        for mut row in pypaimon_changes(&py, &dir, &format!("state.{table}")) {
            let obj = row.as_object_mut().unwrap();
            let kind = obj.remove("_row_kind").unwrap();
            obj.remove("_snapshot");
            let k = key.iter().map(|c| obj[*c].to_string()).collect::<Vec<_>>().join("/");
            match kind.as_str().unwrap() {
                "+I" | "+U" => {
                    state.insert(k, row);
                }
                _ => assert_eq!(
                    state.remove(&k).as_ref(),
                    Some(&row),
                    "{table}: retracting a row that is not there"
                ),
            }
        }
        assert_eq!(canonical(state.into_values()), livestate_rows(&dir, table, &[]), "{table}");
    }
}
