//! `livestate tables --advise` on the example company: each table's budget against the needs of
//! the declared decision kinds that read it.

mod common;

use common::livestate;

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
}
