//! The built-in domain agents. Each uses only [`livestate_client`], with an agent's token,
//! exactly as an outside agent would: it reads with receipts, subscribes to triggers and
//! proposes; it never writes state or modules.
//!
//! - [`procurement`]: on `stock_below_reorder_point`, one consistent read of the item's stock
//!   in every warehouse, its open orders, the suppliers carrying it and their risk; the rule
//!   orders up to target, rounded to the supplier's pack size; one proposal per shortage.
//! - [`work_queue`]: jobs blocked longer than a threshold get a proposal to release them, or
//!   to move them to a free machine.

pub mod procurement;
pub mod work_queue;

use livestate_client::{RiskLevel, RowsAnswer, Source};
use serde_json::{Map, Value};

/// What an agent did, for narration and summaries.
#[derive(Debug, Clone, PartialEq)]
pub enum Narration {
    Shortage { item: String, location: String, available: i64, reorder_point: i64 },
    Proposed { id: String, summary: String, risk: RiskLevel },
    Skipped { item: String, why: String },
    Failed { what: String, error: String },
}

/// An integer column of a row (`null` reads as 0).
pub(crate) fn int(row: &Value, col: &str) -> i64 {
    row.get(col).and_then(Value::as_i64).unwrap_or(0)
}

pub(crate) fn text<'a>(row: &'a Value, col: &str) -> &'a str {
    row.get(col).and_then(Value::as_str).unwrap_or("")
}

/// The rows of one result of a consistent read, each as a JSON object.
pub(crate) fn rows_of(result: &RowsAnswer) -> Vec<Value> {
    result.rows.iter().cloned().map(Value::Object).collect()
}

/// A JSON object of these fields: an action or a rule's parameters, whose shape is per kind.
pub(crate) fn object<const N: usize>(fields: [(&str, Value); N]) -> Map<String, Value> {
    fields.into_iter().map(|(name, value)| (name.to_string(), value)).collect()
}

/// A cited source from a read result: the receipt's snapshot, the rows used (objects, as
/// [`rows_of`] gives them) and the key read, if any. `None` when the table has no snapshot yet,
/// so nothing of it can be cited.
pub(crate) fn source(result: &RowsAnswer, rows: &[Value], key: Option<Map<String, Value>>) -> Option<Source> {
    let r = &result.receipt;
    Some(Source {
        table: r.table.clone(),
        snapshot_id: r.snapshot_id?,
        offset: r.offset,
        lag_ms: r.lag_ms,
        committed_at: r.committed_at.clone(),
        keys: key.into_iter().collect(),
        rows: rows.iter().filter_map(Value::as_object).cloned().collect(),
        tag: None,
    })
}

/// Checks that `typed` goes over the wire as the proposal the agent used to build as JSON:
/// the server reads both as the same proposal, and the JSON differs only in that a source
/// cited without a key now says `"keys": []` (the old JSON left the field out; the server
/// reads both as no keys).
#[cfg(test)]
pub(crate) fn assert_wire_unchanged(typed: &livestate_client::NewProposal, old: Value) {
    let read: livestate_client::NewProposal =
        serde_json::from_value(old.clone()).expect("the old JSON parses");
    assert_eq!(&read, typed, "the server reads the old JSON and the typed proposal alike");
    let mut expected = old;
    for s in expected["sources"].as_array_mut().expect("sources") {
        s.as_object_mut().expect("a source").entry("keys").or_insert_with(|| serde_json::json!([]));
    }
    assert_eq!(serde_json::to_value(typed).expect("serializes"), expected);
}
