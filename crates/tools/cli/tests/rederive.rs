//! `livestate rederive`: once the mapping that let a poison event in is fixed, the tables it
//! feeds are derived again, the quarantined row operation is derived, and a fixed spec that
//! changes a table not named is refused with the directory unchanged.

mod common;

use std::path::{Path, PathBuf};

use std::process::Command;

use common::{canonical, emit, livestate, livestate_command, livestate_rows, python, repo};

const RESERVATION: &str = "event = \"commerce.reservation_changed\"\ntable = \"stock\"\n";

/// A copy of the example spec in `to`, its reservation mapping guarded by `when` if given.
fn example_spec_with(to: &Path, when: Option<&str>) -> PathBuf {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(repo().join("examples/company")).unwrap() {
        let p = e.unwrap().path();
        let mut text = std::fs::read_to_string(&p).unwrap();
        if let Some(when) = when.filter(|_| p.ends_with("mappings.toml")) {
            assert!(text.contains(RESERVATION), "mappings.toml holds {RESERVATION:?}");
            text = text.replacen(RESERVATION, &format!("{RESERVATION}when = \"{when}\"\n"), 1);
        }
        std::fs::write(to.join(p.file_name().unwrap()), text).unwrap();
    }
    to.to_path_buf()
}

fn quarantined(dir: &Path, table: &str) -> u64 {
    let tables: serde_json::Value = serde_json::from_str(&livestate(dir, &["tables", "--json"])).unwrap();
    let t = tables.as_array().unwrap().iter().find(|t| t["name"] == table).unwrap();
    t["quarantined"].as_u64().unwrap()
}

#[test]
fn rederive_after_a_spec_fix_derives_the_quarantined_row() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    livestate(&dir, &["init"]);
    emit(
        &dir,
        r#"{"id":"r1","type":"commerce.reservation_changed","occurred_at":"2026-01-01T00:00:00Z","data":{"item":"bolt","location":"north","reserved":-9223372036854775808}}"#,
    );
    livestate(&dir, &["derive", "--once"]);
    emit(
        &dir,
        r#"{"id":"o1","type":"commerce.order_placed","occurred_at":"2026-01-01T00:01:00Z","data":{"order_id":"o-bolt","line":1,"customer":"c","item":"bolt","location":"north","qty":2,"unit_price":"1.00"}}"#,
    );
    livestate(&dir, &["derive", "--once"]);
    assert_eq!(quarantined(&dir, "open_orders"), 1);
    assert!(livestate_rows(&dir, "open_orders", &[]).is_empty());

    let fixed = example_spec_with(&tmp.path().join("fixed"), Some("reserved >= 0"));
    let out = livestate(&dir, &["rederive", "--spec", fixed.to_str().unwrap(), "stock", "open_orders"]);
    assert!(out.contains("derived 2 event(s) again; the tables reflect record offsets < 2"), "{out}");
    assert!(out.contains("state.open_orders: 1 row(s), 1 key(s) changed (OVERWRITE snapshot"), "{out}");
    assert!(out.contains("quarantined 1 -> 0"), "{out}");
    assert!(out.contains("state.stock: 0 row(s), 1 key(s) changed"), "{out}");
    assert!(out.contains("the fixed spec replaced"), "{out}");
    assert_eq!(quarantined(&dir, "open_orders"), 0);
    let orders = livestate_rows(&dir, "open_orders", &[]);
    assert_eq!(orders.len(), 1);
    assert!(orders[0].contains(r#""available_at_order":0"#) && orders[0].contains("o-bolt"), "{orders:?}");

    // pypaimon, an independent reader, sees the same rows, and the correction in the changelog
    // that streaming readers follow (they skip the OVERWRITE snapshot, as Java's do by default).
    let py = python();
    let read = |extra: &[&str]| {
        let out = Command::new(&py)
            .arg(repo().join("tests/interop/read_table.py"))
            .arg(dir.join("warehouse"))
            .arg("state.open_orders")
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "pypaimon: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let rows: Vec<serde_json::Value> = read(&[]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(canonical(rows), orders);
    let changes: Vec<serde_json::Value> =
        read(&["--changes"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<(&str, &str)> =
        changes.iter().map(|c| (c["_row_kind"].as_str().unwrap(), c["order_id"].as_str().unwrap())).collect();
    assert_eq!(kinds, vec![("+I", "o-bolt")], "{changes:?}");

    // JSON, with nothing left to change.
    let json: serde_json::Value =
        serde_json::from_str(&livestate(&dir, &["rederive", "--json", "stock", "open_orders"])).unwrap();
    assert_eq!(json["through"], 2);
    assert!(json["tables"].as_array().unwrap().iter().all(|t| t["changed_keys"] == 0), "{json}");
}

#[test]
fn a_fixed_spec_that_changes_a_table_not_named_is_refused_and_the_spec_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    livestate(&dir, &["init"]);
    let before = std::fs::read_to_string(dir.join("spec/mappings.toml")).unwrap();
    // The fix changes stock's mapping as well as open_orders', and only open_orders is named.
    let fixed = example_spec_with(&tmp.path().join("fixed"), Some("reserved >= 0"));
    let refused = livestate_command(&dir, &["rederive", "--spec", fixed.to_str().unwrap(), "open_orders"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("changes table `stock` too; name it to re-derive it as well"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.join("spec/mappings.toml")).unwrap(),
        before,
        "the directory keeps its spec"
    );
}
