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

use livestate_client::{RiskLevel, RowsAnswer};
use serde_json::Value;

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

/// A cited source from a read result: the receipt's snapshot and the rows used.
pub(crate) fn source(result: &RowsAnswer, rows: &[Value], keys: Option<Value>) -> Value {
    let r = &result.receipt;
    let mut s = serde_json::json!({
        "table": r.table,
        "snapshot_id": r.snapshot_id,
        "offset": r.offset,
        "lag_ms": r.lag_ms,
        "committed_at": r.committed_at,
        "rows": rows,
    });
    if let Some(k) = keys {
        s["keys"] = Value::Array(vec![k]);
    }
    s
}
