//! `livestate tables --advise` on the example company: each table's budget against the needs of
//! the declared decision kinds that read it.

mod common;

use common::{emit, livestate};

#[test]
fn the_example_companys_budgets_are_advised_from_its_decision_kinds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    livestate(&dir, &["init"]);
    let out = livestate(&dir, &["tables", "--advise"]);
    let line = |table: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("{table}:")))
            .unwrap_or_else(|| panic!("{table} in {out}"))
    };
    // stock (5 min, 24 commits an hour) is read by replenishment inputs needed within a minute.
    let stock = line("stock");
    assert!(stock.contains("tighten to 1m: needs about 96.0 more commits an hour"), "{stock}");
    assert!(stock.contains("stock_replenishment.on_hand needs 1m"), "{stock}");
    // supplier_items (5 min) is read only by inputs needed within an hour.
    assert!(line("supplier_items").contains("loosen to 1h: saves about 22.0 commits an hour"), "{out}");
    assert!(line("work_queue").contains("keep it"), "{out}");
    assert!(line("open_orders").contains("no declared decision reads it"), "{out}");

    let json: serde_json::Value =
        serde_json::from_str(&livestate(&dir, &["tables", "--advise", "--json"])).unwrap();
    let risk = json.as_array().unwrap().iter().find(|a| a["table"] == "supplier_risk").unwrap();
    assert_eq!(risk["budget"], "nightly@02:00");
    assert_eq!(risk["recommended"], "24h");
    assert_eq!(risk["verdict"], "keep", "a day's need is what a nightly budget gives");
    // Nothing derived yet: nothing measured.
    assert!(json.as_array().unwrap().iter().all(|a| a["measured_last_hour"].is_null()), "{json}");
}

#[test]
fn advice_shows_what_each_budget_cost_in_the_last_hour_once_derived() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    livestate(&dir, &["init"]);
    emit(
        &dir,
        r#"{"id":"c1","type":"inventory.stock_counted","occurred_at":"2026-01-01T00:00:00Z","data":{"item":"bolt","location":"north","on_hand":5}}"#,
    );
    livestate(&dir, &["derive", "--once"]);
    let out = livestate(&dir, &["tables", "--advise"]);
    let stock = out.lines().skip_while(|l| !l.trim_start().starts_with("stock:")).nth(1).unwrap_or("");
    assert!(stock.trim_start().starts_with("measured, last hour: 1 commit, "), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&livestate(&dir, &["tables", "--advise", "--json"])).unwrap();
    let stock = json.as_array().unwrap().iter().find(|a| a["table"] == "stock").unwrap();
    assert_eq!(stock["measured_last_hour"]["commits"], 1, "{stock}");
    assert!(stock["measured_last_hour"]["bytes_written"].as_u64().unwrap() > 0, "{stock}");
    let work_queue = json.as_array().unwrap().iter().find(|a| a["table"] == "work_queue").unwrap();
    assert_eq!(work_queue["measured_last_hour"]["commits"], 0, "{work_queue}");
    // `livestate tables` shows the same figures in its own column.
    let tables = livestate(&dir, &["tables"]);
    assert!(tables.contains("last hour: commits, compactions, written, busy"), "{tables}");
    assert!(tables.contains("1 commit, 0 compactions, "), "{tables}");
}
