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

/// One table of a consistent read (`POST /v1/reads`): which rows of it to read.
///
/// ```
/// use livestate_api::read::TableRead;
/// let stock = TableRead::table("stock").key("item", "bolt").limit(10);
/// assert_eq!(serde_json::to_value(&stock).unwrap()["keys"]["item"], "bolt");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TableRead {
    /// The state table.
    pub table: String,
    /// `column: value` filters.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub keys: Map<String, Value>,
    /// A condition over the columns.
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// Most rows to return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

impl TableRead {
    /// Every row of `table` (up to the server's default limit).
    pub fn table(table: impl Into<String>) -> TableRead {
        TableRead { table: table.into(), keys: Map::new(), condition: None, limit: None }
    }

    /// Only rows whose `column` equals `value`.
    pub fn key(mut self, column: impl Into<String>, value: impl Into<Value>) -> TableRead {
        self.keys.insert(column.into(), value.into());
        self
    }

    /// Only rows for which `condition` (livestate's condition language) holds.
    pub fn filter(mut self, condition: impl Into<String>) -> TableRead {
        self.condition = Some(condition.into());
        self
    }

    /// At most `limit` rows.
    pub fn limit(mut self, limit: usize) -> TableRead {
        self.limit = Some(limit);
        self
    }
}

/// A consistent read, the body of `POST /v1/reads`: every table as of one record offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConsistentRead {
    /// The tables, each answered in this order.
    pub tables: Vec<TableRead>,
}

/// The answer of `POST /v1/reads`: every table as of one record offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConsistentAnswer {
    /// Every result reflects exactly the recorded events with an offset below this.
    pub offset: u64,
    /// One answer per table named, in the request's order; each receipt's `offset` is `offset`.
    pub results: Vec<RowsAnswer>,
}

impl ConsistentAnswer {
    /// The first result for `table`, if the read named it.
    pub fn result(&self, table: &str) -> Option<&RowsAnswer> {
        self.results.iter().find(|r| r.receipt.table == table)
    }
}

impl std::fmt::Display for ConsistentAnswer {
    /// The answer's JSON.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| std::fmt::Error)?)
    }
}

/// A table's health, as `GET /v1/tables` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TableInfo {
    /// The state table's name.
    pub name: String,
    /// `livestate`, or `external` when another engine derives the table.
    pub derived_by: String,
    /// The Paimon merge engine (`deduplicate`, `partial-update`, `aggregation`, ...).
    pub merge_engine: String,
    /// The table's bucket setting, as its options give it.
    pub buckets: String,
    /// Where the table stands: snapshot, offset, lag against its budget.
    pub receipt: Receipt,
    /// Rows in the data files of the latest snapshot (before merging).
    pub total_rows_in_files: Option<i64>,
    /// Files, levels and sorted runs per bucket; snapshots and tags.
    pub health: TableHealth,
    /// Row operations the derivers set aside because they failed, as the writing process last
    /// reported.
    pub quarantined: u64,
    /// The latest of them.
    pub last_quarantined: Option<Quarantined>,
    /// What the table's commits and compactions cost, as the writing process last reported
    /// (`None` when no process has derived it since the status file gained the figures).
    pub spend: Option<TableSpend>,
}

/// The shape of a table right now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TableHealth {
    /// The latest snapshot's id (`None` before the first commit).
    pub latest_snapshot: Option<i64>,
    /// The earliest snapshot kept.
    pub earliest_snapshot: Option<i64>,
    /// How many snapshots are kept.
    pub snapshots: usize,
    /// Each bucket of the latest snapshot.
    pub buckets: Vec<BucketHealth>,
    /// Every tag and the snapshot it pins.
    pub tags: Vec<TagInfo>,
}

/// One bucket of the latest snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BucketHealth {
    /// The bucket's number.
    pub bucket: i32,
    /// Data files in the bucket.
    pub files: usize,
    /// Sorted runs a read merges.
    pub sorted_runs: usize,
    /// Files per level, index = level.
    pub files_per_level: Vec<usize>,
    /// Bytes of the bucket's files.
    pub bytes: u64,
    /// Rows in the bucket's files (before merging).
    pub rows: i64,
}

/// A tag and the snapshot it pins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TagInfo {
    /// The tag's name.
    pub name: String,
    /// The snapshot it pins.
    pub snapshot_id: i64,
}

/// A table's measured spend, as the derivers publish it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TableSpend {
    /// The last 60 minutes (or since the start, when the process is younger).
    pub last_hour: Spend,
    /// Since the process started measuring (`since_ms`).
    pub total: Spend,
    /// When measuring started, milliseconds since the epoch.
    pub since_ms: i64,
}

/// What one table spent in some span of time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Spend {
    /// Data commits (snapshots of kind APPEND) the derivers made.
    pub commits: u64,
    /// Compactions that committed (snapshots of kind COMPACT).
    pub compactions: u64,
    /// Data, changelog and compacted files written by those commits and compactions.
    pub files_written: u64,
    /// Bytes of those files.
    pub bytes_written: u64,
    /// Wall time of those commits and compactions, in milliseconds.
    pub busy_ms: u64,
    /// CPU time of those commits and compactions and the table's share of derivation, in
    /// microseconds.
    #[serde(default)]
    pub cpu_us: u64,
    /// Of `cpu_us`, the table's share of derivation: applying events to its window.
    #[serde(default)]
    pub derive_cpu_us: u64,
}

/// One row operation the derivers set aside because its derivation failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Quarantined {
    /// The state table (`stock`).
    pub table: String,
    /// The event's record offset.
    pub offset: u64,
    /// The event's id.
    pub event_id: String,
    /// The event's type.
    pub event_type: String,
    /// Why the row operation failed (the mapping and the column, with the values).
    pub message: String,
}

/// The answer of `GET /v1/quarantine`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuarantineList {
    /// The latest quarantined row operations, oldest first.
    pub entries: Vec<Quarantined>,
}

/// One firing of a trigger, as delivered to consumers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Firing {
    /// The trigger's name.
    pub trigger: String,
    /// Position in the trigger's firings, from 1.
    pub seq: u64,
    /// The state table whose row changed.
    pub table: String,
    /// Primary-key columns and values.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub key: Map<String, Value>,
    /// The row at the previous commit (absent for a new row).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub before: Option<Map<String, Value>>,
    /// The row at the commit that fired.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub after: Map<String, Value>,
    /// The snapshot that committed the change.
    pub snapshot_id: Option<i64>,
    /// The record offset that snapshot reflects.
    pub offset: u64,
    /// When the change was committed (UTC, ms).
    pub fired_at_ms: i64,
}

/// The answer of `GET /v1/triggers/{trigger}/firings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Firings {
    /// The consumer whose cursor was read: the caller's name, or `name/consumer`.
    pub consumer: String,
    /// Firings after the cursor, oldest first.
    pub firings: Vec<Firing>,
}

/// The body of `POST /v1/sql`: one read-only query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SqlRequest {
    /// One query; `FROM t VERSION AS OF 12` or `VERSION AS OF 'tag'` reads a past version.
    pub query: String,
    /// At most this many rows (default 1000, at most 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// The answer of `POST /v1/sql`: each row an object of the query's columns, and a receipt per
/// table the plan read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SqlAnswer {
    /// The query's columns, in its order.
    pub columns: Vec<String>,
    /// Each row as `column: value` (a null cell is left out).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub rows: Vec<Map<String, Value>>,
    /// Rows were cut at the row limit or at the answer's byte limit.
    pub truncated: bool,
    /// One receipt per table read, by table name.
    pub receipts: Vec<Receipt>,
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

/// One column of a table's schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SchemaColumn {
    /// The column's name.
    pub name: String,
    /// Its type in the spec (`string`, `int`, `decimal(12,2)`, `timestamp`, ...).
    #[serde(rename = "type")]
    pub ty: String,
    /// Whether it is part of the primary key.
    pub key: bool,
}

/// The answer of `GET /v1/tables/{table}/schema`: what a state table holds and how it is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TableSchema {
    /// The table.
    pub table: String,
    /// What the spec says the table is for.
    pub description: Option<String>,
    /// The columns, in order.
    pub columns: Vec<SchemaColumn>,
    /// The primary key's columns.
    pub primary_key: Vec<String>,
    /// The Paimon merge engine.
    pub merge_engine: String,
    /// The freshness budget (`5s`, `1m`, ...).
    pub budget: String,
    /// The table's Paimon options.
    pub options: std::collections::BTreeMap<String, String>,
}
