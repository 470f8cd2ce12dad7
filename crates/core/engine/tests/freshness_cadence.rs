//! Continuous derivation commits each table at the cadence its freshness budget asks for.

mod common;

use std::time::Duration;

use common::{fresh, line, rows};
use serde_json::json;

#[tokio::test]
async fn a_one_second_table_commits_within_its_budget_while_a_five_minute_table_waits() {
    let (_d, ls) = fresh().await;
    let mut derivers = ls.derivers().await.unwrap();
    ls.emit(
        &[
            line(1, "decisions.proposal_created", json!({"proposal_id": "p1", "kind": "replenishment_order", "agent": "procurement", "module": "procurement", "summary": "s", "risk_level": "low", "document": "{}"})),
            line(2, "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 4})),
        ]
        .join("\n"),
        false,
    )
    .unwrap();
    let first = ls.step(&mut derivers).await.unwrap();
    assert_eq!(first.events, 2);
    assert!(rows(&ls, "stock", &[]).await.is_empty(), "nothing is due the moment events arrive");
    // approval_inbox (1s budget) commits after an eighth of its budget; stock (5m) does not.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let second = ls.step(&mut derivers).await.unwrap();
    // The step started the commit on a task of its own; wait for it.
    assert!(second.commits + derivers.finish_commits().await.unwrap() >= 1);
    assert_eq!(rows(&ls, "approval_inbox", &[]).await.len(), 1);
    assert!(rows(&ls, "stock", &[]).await.is_empty(), "the 5m table has not committed yet");
    // Shutdown commits whatever is pending.
    derivers.commit_all().await.unwrap();
    assert_eq!(rows(&ls, "stock", &[]).await.len(), 1);
}
