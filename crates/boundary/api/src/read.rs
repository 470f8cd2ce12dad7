//! Reads on the wire: what a read answers with its rows, the receipt that says which snapshot
//! was read, which record offset it reflects and how stale it is.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What answered a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ServedBy {
    /// The lookup index, which reflects exactly the snapshot named (a point read).
    Index,
    /// The table's Paimon files (a scan).
    Paimon,
}

/// How a receipt's lag was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum MeasuredBy {
    /// Against the record itself, by the process that derives the table.
    Record,
    /// The figure the process owning the directory last reported (its status file).
    Status,
    /// Not measured: a past snapshot or tag was read.
    Snapshot,
    /// Not measured: another engine derives the table (`derived_by = "external"`).
    External,
}

/// Where a table stands: which snapshot was read, which record offset it reflects, and how
/// stale it is against its freshness budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Receipt {
    pub table: String,
    pub snapshot_id: Option<i64>,
    /// The snapshot reflects every recorded event with an offset below this; `None` for a
    /// table another engine derives, whose commits are numbered by its checkpoints.
    pub offset: Option<u64>,
    /// When the snapshot was committed (UTC).
    pub committed_at: Option<String>,
    /// How long the oldest unreflected event has waited (0 when caught up); `None` for reads
    /// of a past snapshot or tag, where lag has no meaning.
    pub lag_ms: Option<u64>,
    /// The table's freshness budget (`200ms`, `5m`, `nightly`).
    pub budget: String,
    pub within_budget: Option<bool>,
    pub measured_by: MeasuredBy,
    pub served_by: ServedBy,
}

/// The answer of `GET /v1/tables/{table}/rows`: each row an object of its columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RowsAnswer {
    pub columns: Vec<String>,
    pub receipt: Receipt,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub rows: Vec<Map<String, Value>>,
}

impl RowsAnswer {
    /// The value of `column` in row `i`, or null when there is no such row or column (as
    /// indexing the answer's JSON would give).
    pub fn cell(&self, i: usize, column: &str) -> Value {
        self.rows.get(i).and_then(|r| r.get(column)).cloned().unwrap_or(Value::Null)
    }
}

impl std::fmt::Display for RowsAnswer {
    /// The answer's JSON.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| std::fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_names_what_served_it_and_how_its_lag_was_measured_in_lowercase() {
        let text = r#"{"table":"stock","snapshot_id":3,"offset":41,"committed_at":"2026-03-02T08:00:00.000Z","lag_ms":0,"budget":"200ms","within_budget":true,"measured_by":"record","served_by":"index"}"#;
        let r: Receipt = serde_json::from_str(text).expect("parses");
        assert_eq!((r.measured_by, r.served_by), (MeasuredBy::Record, ServedBy::Index));
        assert_eq!(serde_json::to_string(&r).expect("serializes"), text);
    }
}
