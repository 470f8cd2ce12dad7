//! Edge triggers fire once per crossing of committed rows and reach each consumer once.

mod common;

use common::{fresh, line};
use livestate_engine::Livestate;
use serde_json::json;

const TRIGGER: &str = "stock_below_reorder_point";

fn count(n: u32, on_hand: i64) -> String {
    line(n, "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": on_hand}))
}

fn planning(n: u32) -> String {
    line(
        n,
        "procurement.planning_set",
        json!({"item": "bolt", "location": "north", "reorder_point": 20, "target": 60}),
    )
}

/// Emits `lines` and commits after every event.
async fn derive_each(ls: &Livestate, lines: &[String]) {
    ls.emit(&lines.join("\n"), false).unwrap();
    let mut d = ls.derivers().await.unwrap();
    ls.catch_up(&mut d, 1, &mut |_| {}).await.unwrap();
    d.finish().await;
}

#[tokio::test]
async fn a_trigger_fires_once_per_crossing_and_rearms_only_past_its_hysteresis() {
    let (_d, ls) = fresh().await;
    // Reorder point 20, re-arm at 30: 50 no, 15 fires, 12 still below, 25 not re-armed,
    // 10 still disarmed, 35 re-arms, 5 fires again.
    let mut lines = vec![count(1, 50), planning(2)];
    for (i, on_hand) in [15, 12, 25, 10, 35, 5].into_iter().enumerate() {
        lines.push(count(i as u32 + 3, on_hand));
    }
    derive_each(&ls, &lines).await;
    let fired = ls.firings().pending(TRIGGER, "buyer", 100).unwrap();
    let seen: Vec<(u64, i64, Option<i64>)> = fired
        .iter()
        .map(|f| {
            (
                f.seq,
                f.after["on_hand"].as_i64().unwrap(),
                f.before.as_ref().and_then(|b| b["on_hand"].as_i64()),
            )
        })
        .collect();
    assert_eq!(seen, vec![(1, 15, Some(50)), (2, 5, Some(35))]);
    let f = &fired[0];
    assert_eq!(f.key["item"], "bolt");
    assert_eq!(f.table, "stock");
    assert!(f.snapshot_id.is_some() && f.offset > 0, "{f:?}");
}

#[tokio::test]
async fn an_applied_change_fires_only_once_its_table_commits() {
    let (_d, ls) = fresh().await;
    ls.emit(&[planning(1), count(2, 5)].join("\n"), false).unwrap();
    let mut derivers = ls.derivers().await.unwrap();
    // Applied, but the 5-minute stock table is not due to commit: nothing may fire.
    ls.step(&mut derivers).await.unwrap();
    assert!(ls.firings().pending(TRIGGER, "buyer", 10).unwrap().is_empty());
    derivers.commit_all().await.unwrap();
    derivers.finish().await;
    assert_eq!(ls.firings().pending(TRIGGER, "buyer", 10).unwrap().len(), 1);
}

#[tokio::test]
async fn each_consumer_resumes_after_its_own_cursor_across_a_restart() {
    let (d, ls) = fresh().await;
    derive_each(&ls, &[planning(1), count(2, 5)]).await;
    let first = ls.firings().pending(TRIGGER, "buyer", 10).unwrap();
    assert_eq!(first.len(), 1);
    ls.firings().ack(TRIGGER, "buyer", first[0].seq).unwrap();
    assert!(ls.firings().pending(TRIGGER, "buyer", 10).unwrap().is_empty());
    assert_eq!(ls.firings().pending(TRIGGER, "planner", 10).unwrap().len(), 1, "consumers are independent");
    drop(ls);

    // A restart of the deriver and of the consumers: nothing fires twice, cursors hold.
    let ls = Livestate::open(&d.path().join("d")).await.unwrap();
    derive_each(&ls, &[]).await;
    assert!(ls.firings().pending(TRIGGER, "buyer", 10).unwrap().is_empty());
    assert_eq!(ls.firings().pending(TRIGGER, "planner", 10).unwrap().len(), 1);
    derive_each(&ls, &[count(3, 40), count(4, 3)]).await;
    let next = ls.firings().pending(TRIGGER, "buyer", 10).unwrap();
    assert_eq!(next.iter().map(|f| f.seq).collect::<Vec<_>>(), vec![2]);
}

#[tokio::test]
async fn a_deleted_row_rearms_its_trigger() {
    let (_d, ls) = fresh().await;
    let job = |n: u32, status: &str| {
        line(n, "operations.job_status_changed", json!({"job_id": "j1", "status": status}))
    };
    derive_each(&ls, &[job(1, "blocked"), job(2, "blocked"), job(3, "released"), job(4, "blocked")]).await;
    let fired = ls.firings().pending("job_blocked", "ops", 10).unwrap();
    assert_eq!(fired.len(), 2, "blocked, (still blocked), released re-arms, blocked again");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

#[tokio::test]
async fn a_commit_the_index_missed_is_replayed_from_the_changelog_and_fires_once() {
    let (d, ls) = fresh().await;
    derive_each(&ls, &[count(1, 50), planning(2)]).await;
    drop(ls);
    let index = d.path().join("d/index");
    let saved = d.path().join("index-before");
    copy_dir(&index, &saved);
    let ls = Livestate::open(&d.path().join("d")).await.unwrap();
    derive_each(&ls, &[count(3, 5)]).await;
    assert_eq!(ls.firings().pending(TRIGGER, "buyer", 10).unwrap().len(), 1);
    drop(ls);

    // As if the process died after the Paimon commit of that count, before the index update.
    std::fs::remove_dir_all(&index).unwrap();
    std::fs::rename(&saved, &index).unwrap();
    let ls = Livestate::open(&d.path().join("d")).await.unwrap();
    assert!(ls.firings().pending(TRIGGER, "buyer", 10).unwrap().is_empty());
    let d2 = ls.derivers().await.unwrap();
    drop(d2);
    let fired = ls.firings().pending(TRIGGER, "buyer", 10).unwrap();
    assert_eq!(
        fired.iter().map(|f| (f.seq, f.after["on_hand"].as_i64())).collect::<Vec<_>>(),
        vec![(1, Some(5))]
    );
    let rows = common::rows(&ls, "stock", &[("item", "bolt"), ("location", "north")]).await;
    assert_eq!(rows[0]["on_hand"], 5);
    // Opening again replays nothing twice.
    drop(ls.derivers().await.unwrap());
    assert_eq!(ls.firings().pending(TRIGGER, "buyer", 10).unwrap().len(), 1);
}
