//! Compaction and expiry while deriving follow each table's freshness budget.

mod common;

use std::time::Duration;

use common::{line, rows};
use livestate_engine::Livestate;
use serde_json::json;

/// The example spec with a 200 ms inbox, a low compaction trigger and short retention.
async fn eager() -> (tempfile::TempDir, Livestate) {
    with_retention(3).await
}

async fn with_retention(min_snapshots: u32) -> (tempfile::TempDir, Livestate) {
    let dir = tempfile::tempdir().unwrap();
    let spec = livestate_testkit::example_spec()
        .only(&["events.toml", "mappings.toml", "tables.toml"])
        .option_everywhere("num-sorted-run.compaction-trigger", "3")
        .option_everywhere("snapshot.num-retained.min", &min_snapshots.to_string())
        .option_everywhere("snapshot.time-retained", "1 ms")
        .freshness("approval_inbox", "200ms")
        .write(&dir.path().join("spec"));
    let ls = Livestate::init(&dir.path().join("d"), &spec).await.unwrap();
    (dir, ls)
}

async fn kinds(ls: &Livestate, table: &str) -> Vec<String> {
    let m = ls.maintainer(table).await.unwrap();
    let all = m.table().snapshot_manager().list_all().await.unwrap();
    all.iter().map(|s| s.commit_kind().to_string()).collect()
}

fn proposal(n: u32) -> String {
    line(
        n,
        "decisions.proposal_created",
        json!({"proposal_id": format!("p{n}"), "kind": "replenishment_order", "agent": "procurement", "module": "procurement", "summary": "s", "risk_level": "low", "document": "{}"}),
    )
}

#[tokio::test]
async fn a_seconds_budget_table_compacts_in_the_background_as_it_commits() {
    let (_d, ls) = eager().await;
    let mut derivers = ls.derivers().await.unwrap();
    let mut commits = 0;
    for n in 1..=12 {
        ls.emit(&proposal(n), false).unwrap();
        ls.step(&mut derivers).await.unwrap();
        tokio::time::sleep(Duration::from_millis(110)).await;
        commits += ls.step(&mut derivers).await.unwrap().commits;
    }
    // A step starts a commit on a task of its own and the next step collects it: the last
    // one started is collected here.
    commits += derivers.finish_commits().await.unwrap();
    derivers.finish().await;
    assert!(commits >= 12, "the inbox committed {commits} times");
    let kinds = kinds(&ls, "approval_inbox").await;
    assert!(kinds.iter().any(|k| k == "COMPACT"), "no compaction among {kinds:?}");
    let health = ls.maintainer("approval_inbox").await.unwrap().health().await.unwrap();
    let stop = 3 + 3;
    assert!(health.buckets.iter().all(|b| b.sorted_runs <= stop), "{health:?}");
    // Expired as it went: not every commit's snapshot is still there.
    assert!(health.snapshots < kinds.len() + 1 && health.earliest_snapshot > Some(1), "{health:?}");
    assert_eq!(rows(&ls, "approval_inbox", &[]).await.len(), 12);
}

#[tokio::test]
async fn a_minutes_budget_table_compacts_after_the_commit_that_reaches_the_trigger() {
    let (_d, ls) = eager().await;
    let mut derivers = ls.derivers().await.unwrap();
    let events: Vec<String> = (1..=8)
        .map(|n| {
            line(
                n,
                "inventory.stock_counted",
                json!({"item": format!("i{}", n % 3), "location": "north", "on_hand": n}),
            )
        })
        .collect();
    ls.emit(&events.join("\n"), false).unwrap();
    // One commit per event: the 5-minute stock table reaches the trigger of 3 runs repeatedly.
    ls.catch_up(&mut derivers, 1, &mut |_| {}).await.unwrap();
    let kinds = kinds(&ls, "stock").await;
    assert!(kinds.iter().any(|k| k == "COMPACT"), "{kinds:?}");
    let health = ls.maintainer("stock").await.unwrap().health().await.unwrap();
    assert!(health.buckets.iter().all(|b| b.sorted_runs < 3), "{health:?}");
    let on_hand: Vec<i64> = {
        let mut r = rows(&ls, "stock", &[]).await;
        r.sort_by_key(|r| r["item"].as_str().unwrap().to_string());
        r.iter().map(|r| r["on_hand"].as_i64().unwrap()).collect()
    };
    assert_eq!(on_hand, vec![6, 7, 8]);
}

#[tokio::test]
async fn a_nightly_table_is_fully_compacted_in_its_nightly_run() {
    let (_d, ls) = eager().await;
    let mut derivers = ls.derivers().await.unwrap();
    let events: Vec<String> = (1..=4)
        .map(|n| {
            line(
                n,
                "procurement.supplier_risk_assessed",
                json!({"supplier": format!("s{}", n % 2), "level": "high", "reason": "late"}),
            )
        })
        .collect();
    ls.emit(&events.join("\n"), false).unwrap();
    ls.catch_up(&mut derivers, 1, &mut |_| {}).await.unwrap();
    let health = ls.maintainer("supplier_risk").await.unwrap().health().await.unwrap();
    let top = ls.maintainer("supplier_risk").await.unwrap().compaction_options().max_level() as usize;
    for b in &health.buckets {
        assert_eq!((b.files, b.sorted_runs, b.files_per_level.len() - 1), (1, 1, top), "{health:?}");
    }
    assert_eq!(rows(&ls, "supplier_risk", &[]).await.len(), 2);
}

#[tokio::test]
async fn a_restart_after_compaction_and_expiry_resumes_where_the_data_left_off() {
    let (d, ls) = with_retention(1).await;
    let lines: Vec<String> = (1..=6)
        .map(|n| line(n, "commerce.order_placed", json!({"order_id": format!("o{n}"), "line": 1, "customer": "c", "item": "bolt", "location": "north", "qty": 2, "unit_price": "1.50"})))
        .collect();
    ls.emit(&lines.join("\n"), false).unwrap();
    let mut derivers = ls.derivers().await.unwrap();
    ls.catch_up(&mut derivers, 2, &mut |_| {}).await.unwrap();
    derivers.finish().await;
    drop(derivers);
    // Compact and expire until only the COMPACT snapshot is left.
    let m = ls.maintainer("reservations_total").await.unwrap();
    m.compact(livestate_lsm::CompactMode::Full, |_, _| {}).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    m.expire(chrono::Utc::now().timestamp_millis(), |_, _| {}).await.unwrap();
    let left = m.table().snapshot_manager().list_all().await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].commit_user(), livestate_lsm::COMPACT_USER);
    let before = rows(&ls, "reservations_total", &[]).await;
    assert_eq!(before[0]["reserved_qty"], 12, "{before:?}");
    drop(ls);
    // A new process: nothing may be applied twice (the aggregation would double).
    let ls = Livestate::open(&d.path().join("d")).await.unwrap();
    let mut derivers = ls.derivers().await.unwrap();
    let report = ls.catch_up(&mut derivers, 2, &mut |_| {}).await.unwrap();
    assert_eq!(report.events, 0, "{report:?}");
    assert_eq!(rows(&ls, "reservations_total", &[]).await, before);
}

#[tokio::test]
async fn the_archive_merges_its_small_files_as_it_commits_and_keeps_every_event_once() {
    let (_d, ls) = eager().await;
    let mut derivers = ls.derivers().await.unwrap();
    let events: Vec<String> = (1..=40)
        .map(|n| line(n, "inventory.stock_counted", json!({"item": "i1", "location": "north", "on_hand": n})))
        .collect();
    ls.emit(&events.join("\n"), false).unwrap();
    // One commit per event: forty archive commits, each a small file.
    ls.catch_up(&mut derivers, 1, &mut |_| {}).await.unwrap();
    derivers.finish().await;
    let kinds = kinds(&ls, "record.events").await;
    assert!(kinds.iter().filter(|k| *k == "APPEND").count() >= 40, "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "COMPACT"), "{kinds:?}");
    let health = ls.maintainer("record.events").await.unwrap().health().await.unwrap();
    let files: usize = health.buckets.iter().map(|b| b.files).sum();
    assert!(files < 10, "forty commits left {files} files: {health:?}");
    let offsets: Vec<i64> = ls
        .archive_rows()
        .await
        .unwrap()
        .iter()
        .map(|r| match r[0] {
            livestate_spec::Value::Int(o) => o,
            ref v => panic!("offset {v:?}"),
        })
        .collect();
    assert_eq!(offsets, (0..40).collect::<Vec<i64>>());
}
