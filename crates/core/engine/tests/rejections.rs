//! Bad events, bad specs and a second writer are refused with errors that name the problem,
//! and nothing already stored changes.

mod common;

use common::{fresh, line};
use livestate_engine::{EngineError, Livestate};
use livestate_record::RecordError;
use serde_json::json;

fn counted(n: u32, qty: serde_json::Value) -> String {
    line(n, "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": qty}))
}

#[tokio::test]
async fn one_bad_line_rejects_the_batch_and_names_line_field_and_reason() {
    let (_d, ls) = fresh().await;
    ls.emit(&counted(1, json!(5)), false).unwrap();
    let input = [
        counted(2, json!(6)),
        counted(3, json!("many")),
        line(4, "inventory.stock_teleported", json!({})),
        r#"{"id":"x","type":"inventory.stock_counted","occurred_at":"yesterday","data":{"item":"a","location":"b","on_hand":1}}"#.to_string(),
        line(5, "inventory.stock_counted", json!({"item": "bolt", "location": "north"})),
        line(6, "inventory.stock_counted", json!({"item": "bolt", "location": "north", "on_hand": 1, "colour": "red"})),
        "{not json".to_string(),
    ]
    .join("\n");
    let err = ls.emit(&input, false).unwrap_err();
    let EngineError::InvalidEvents(lines) = &err else { panic!("expected InvalidEvents, got {err}") };
    let found: Vec<(usize, String)> = lines.iter().map(|l| (l.line, l.error.field.clone())).collect();
    assert_eq!(
        found,
        vec![
            (2, "data.on_hand".to_string()),
            (3, "type".to_string()),
            (4, "occurred_at".to_string()),
            (5, "data.on_hand".to_string()),
            (6, "data.colour".to_string()),
            (7, "(line)".to_string()),
        ]
    );
    let text = err.to_string();
    assert!(text.contains("line 2 (id `t-3`): data.on_hand: expected a whole number"), "{text}");
    assert!(text.contains("unknown event type `inventory.stock_teleported`"), "{text}");
    assert!(text.contains("required int field is missing"), "{text}");
    assert_eq!(ls.record().next_offset(), 1, "nothing of the rejected batch was appended");
}

#[tokio::test]
async fn skip_invalid_appends_the_good_lines_only() {
    let (_d, ls) = fresh().await;
    let input = [counted(1, json!(5)), counted(2, json!(-1.5)), counted(3, json!(7))].join("\n");
    let report = ls.emit(&input, true).unwrap();
    assert_eq!(report.appended.iter().map(|(l, a)| (*l, a.offset)).collect::<Vec<_>>(), vec![(1, 0), (3, 1)]);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].line, 2);
}

#[tokio::test]
async fn an_input_over_one_chunk_is_appended_chunk_by_chunk_with_its_line_numbers() {
    let (_d, ls) = fresh().await;
    // One chunk and five events more, with a blank line and a bad one among them.
    let n = livestate_engine::EMIT_CHUNK as u32 + 5;
    let mut lines: Vec<String> = (1..=n).map(|i| counted(i, json!(i))).collect();
    lines.insert(3, String::new());
    lines.insert(7, counted(0, json!("many")));
    let mut chunks = Vec::new();
    let report = ls.emit_with(&lines.join("\n"), true, |acked| chunks.push(acked.len())).unwrap();
    assert_eq!(chunks, vec![livestate_engine::EMIT_CHUNK, 5], "each chunk acknowledged on its own");
    assert_eq!(report.skipped.iter().map(|l| l.line).collect::<Vec<_>>(), vec![8]);
    let numbered: Vec<(usize, u64)> = report.appended.iter().map(|(l, a)| (*l, a.offset)).collect();
    assert_eq!(numbered.len(), n as usize);
    assert_eq!(numbered[..4], [(1, 0), (2, 1), (3, 2), (5, 3)]);
    assert_eq!(numbered.last(), Some(&(n as usize + 2, u64::from(n) - 1)));
    assert_eq!(ls.record().next_offset(), u64::from(n));
}

#[tokio::test]
async fn a_resent_id_with_the_same_content_is_acknowledged_at_its_first_offset() {
    let (_d, ls) = fresh().await;
    let first = ls.emit(&counted(1, json!(5)), false).unwrap();
    let again = ls.emit(&counted(1, json!(5)), false).unwrap();
    assert_eq!(first.appended[0].1.offset, again.appended[0].1.offset);
    assert!(again.appended[0].1.duplicate);
    assert_eq!(ls.record().next_offset(), 1);
}

#[tokio::test]
async fn a_resent_id_with_changed_content_refuses_its_batch() {
    let (_d, ls) = fresh().await;
    ls.emit(&counted(1, json!(5)), false).unwrap();
    let err = ls.emit(&[counted(9, json!(1)), counted(1, json!(6))].join("\n"), false).unwrap_err();
    assert!(
        matches!(&err, EngineError::Record(RecordError::IdConflict { id, offset: 0 }) if id == "t-1"),
        "{err}"
    );
    assert_eq!(ls.record().next_offset(), 1);
}

#[tokio::test]
async fn a_mapping_that_would_write_a_bad_value_rejects_the_event() {
    let (_d, ls) = fresh().await;
    // unit_price is decimal(12,2): three decimal places would have to be rounded.
    let bad = line(
        1,
        "commerce.order_placed",
        json!({"order_id": "o", "line": 1, "customer": "c", "item": "i", "location": "l", "qty": 1, "unit_price": "1.005"}),
    );
    let err = ls.emit(&bad, false).unwrap_err();
    assert!(err.to_string().contains("data.unit_price"), "{err}");
    assert_eq!(ls.record().next_offset(), 0);
}

#[tokio::test]
async fn a_second_writer_is_refused_with_a_clear_message() {
    let (dir, ls) = fresh().await;
    let err = Livestate::open(&dir.path().join("d")).await.err().expect("second open must fail");
    assert!(matches!(err, EngineError::Locked { .. }), "{err}");
    assert!(err.to_string().contains("in use by another livestate process (pid"), "{err}");
    drop(ls);
    Livestate::open(&dir.path().join("d")).await.expect("free once the first writer is gone");
}

fn spec_with(tables: &str, mappings: &str) -> Vec<(std::path::PathBuf, String)> {
    let events = r#"
[events."inventory.counted"]
fields = { item = "string", qty = "int", note = "string?" }
"#;
    vec![
        ("events.toml".into(), events.to_string()),
        ("tables.toml".into(), tables.to_string()),
        ("mappings.toml".into(), mappings.to_string()),
    ]
}

fn spec_error(tables: &str, mappings: &str) -> String {
    match livestate_spec::CompanySpec::from_sources(&spec_with(tables, mappings)) {
        Ok(_) => panic!("spec should be rejected"),
        Err(e) => e.to_string(),
    }
}

const GOOD_TABLE: &str = r#"
[tables.stock]
primary_key = ["item"]
freshness = "5m"
columns = { item = "string", on_hand = "int" }
"#;

#[test]
fn bad_specs_are_reported_with_file_table_and_field() {
    let unknown_engine = GOOD_TABLE.to_string() + "options = { \"merge-engine\" = \"newest-wins\" }\n";
    let e = spec_error(&unknown_engine, "");
    assert!(
        e.contains("tables.toml: tables.stock.options.\"merge-engine\": unknown merge engine `newest-wins`"),
        "{e}"
    );

    let missing_key =
        "[tables.stock]\nprimary_key = [\"sku\"]\nfreshness = \"5m\"\ncolumns = { item = \"string\" }\n";
    let e = spec_error(missing_key, "");
    assert!(e.contains("tables.stock.primary_key: key column `sku` is not among the columns"), "{e}");

    let e = spec_error(GOOD_TABLE, "[[mappings]]\nevent = \"inventory.counted\"\ntable = \"stock\"\nset = { item = \"item\", on_hnad = \"qty\" }\n");
    assert!(e.contains("mappings.toml: mappings[0] (inventory.counted -> stock).set.on_hnad: table `stock` has no column `on_hnad`"), "{e}");

    let e = spec_error(GOOD_TABLE, "[[mappings]]\nevent = \"inventory.counted\"\ntable = \"stock\"\nset = { item = \"item\", on_hand = \"note\" }\n");
    assert!(e.contains("expression `note` is string, column `on_hand` is int"), "{e}");

    let typo = GOOD_TABLE.to_string() + "options = { merge_engine = \"deduplicate\" }\n";
    let e = spec_error(&typo, "");
    assert!(e.contains("tables.stock.options.\"merge_engine\": unknown or unsupported Paimon option"), "{e}");

    let partial = GOOD_TABLE.to_string() + "options = { \"merge-engine\" = \"partial-update\" }\n";
    let e = spec_error(&partial, "[[mappings]]\nevent = \"inventory.counted\"\ntable = \"stock\"\naction = \"delete\"\nset = { item = \"item\" }\n");
    assert!(e.contains("partial-update.remove-record-on-delete"), "{e}");

    let agg = GOOD_TABLE.to_string()
        + "options = { \"merge-engine\" = \"aggregation\", \"fields.item.aggregate-function\" = \"sum\" }\n";
    let e = spec_error(&agg, "");
    assert!(e.contains("`item` is a key column and cannot be aggregated"), "{e}");

    let e = spec_error("[tables.stock\n", "");
    assert!(e.contains("tables.toml: (syntax)"), "{e}");
}

#[tokio::test]
async fn init_with_a_bad_spec_writes_nothing() {
    let spec = tempfile::tempdir().unwrap();
    std::fs::write(
        spec.path().join("tables.toml"),
        "[tables.stock]\nprimary_key = []\nfreshness = \"soon\"\ncolumns = {}\n",
    )
    .unwrap();
    let target = tempfile::tempdir().unwrap();
    let dir = target.path().join("d");
    let err = Livestate::init(&dir, spec.path()).await.err().expect("bad spec");
    let text = err.to_string();
    assert!(text.contains("tables.stock.primary_key: a state table needs a primary key"), "{text}");
    assert!(text.contains("tables.stock.freshness"), "{text}");
    assert!(!dir.exists(), "nothing may be created for a rejected spec");
}

#[test]
fn a_lookup_that_cannot_work_is_reported_by_table_key_and_column() {
    let m = |lookup: &str, set: &str| {
        format!("[[mappings]]\nevent = \"inventory.counted\"\ntable = \"stock\"\nlookup = {lookup}\nset = {set}\n")
    };
    let e = spec_error(GOOD_TABLE, &m("{ stok = { item = \"item\" } }", "{ item = \"item\" }"));
    assert!(e.contains("lookup.stok: unknown table `stok`"), "{e}");
    let e = spec_error(GOOD_TABLE, &m("{ stock = { sku = \"item\" } }", "{ item = \"item\" }"));
    assert!(e.contains("lookup.stock: give exactly the key columns of `stock`: item"), "{e}");
    let e = spec_error(
        GOOD_TABLE,
        &m("{ stock = { item = \"item\" } }", "{ item = \"item\", on_hand = \"stock.on_hnad\" }"),
    );
    assert!(e.contains("stock.on_hnad"), "{e}");
}

#[test]
fn a_trigger_that_cannot_work_is_reported_by_its_condition_or_table() {
    let trig = |when: &str| {
        GOOD_TABLE.to_string() + &format!("[triggers.low]\ntable = \"stock\"\nwhen = \"{when}\"\n")
    };
    let e = spec_error(&trig("on_hand + 1"), "");
    assert!(e.contains("triggers.low.when: `on_hand + 1` is int; a trigger condition must be bool"), "{e}");
    let e = spec_error(
        &(GOOD_TABLE.to_string() + "[triggers.low]\ntable = \"stok\"\nwhen = \"on_hand < 1\"\n"),
        "",
    );
    assert!(e.contains("triggers.low.table: unknown table `stok`"), "{e}");
}

#[test]
fn a_sequence_field_option_is_refused_naming_it() {
    let e = spec_error(&(GOOD_TABLE.to_string() + "options = { \"sequence.field\" = \"on_hand\" }\n"), "");
    assert!(e.contains("sequence.field"), "{e}");
}
