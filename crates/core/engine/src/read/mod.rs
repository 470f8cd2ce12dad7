//! Reads with receipts: rows of a state table (latest, at a snapshot or at a tag) and where the
//! table stands against the record and its freshness budget.

use std::collections::HashMap;
use std::time::Duration;

use futures::TryStreamExt;
use livestate_record::Record;
use livestate_spec::expr::{compare, Expr, ExprType};
use livestate_spec::freshness::format_duration;
use livestate_spec::{CompanySpec, MergeEngine, TableSpec, Value};
use paimon::spec::{Datum, Predicate, PredicateBuilder, Snapshot};
use paimon::Table;
use serde::Serialize;

use crate::error::{paimon_err, EngineError};
use crate::index::{key_bytes, Index, IndexMeta};
use crate::schema::latest_own_snapshot;
use crate::schema::TableId;
use crate::status::Status;
use crate::verify::diagnose;
use crate::Catalog;
pub use livestate_api::read::{MeasuredBy, ServedBy};

mod filter;
mod merge;
mod reader;
mod receipt;
mod scan;

pub use filter::*;
pub use reader::{Reader, SharedRead};
pub use receipt::*;
pub use scan::*;

/// Which version of a table to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    Latest,
    Snapshot(i64),
    Tag(String),
}

/// What a read asks for.
#[derive(Debug, Clone)]
pub struct ReadRequest {
    pub table: String,
    /// `column = value` filters (values as text, parsed by the column's type).
    pub keys: Vec<(String, String)>,
    pub at: At,
}

/// Rows read from a table, with the receipt of what was read.
#[derive(Debug, Clone)]
pub struct Rows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    pub receipt: Receipt,
}

impl Rows {
    /// The read as the HTTP API answers it: the JSON text of
    /// `{"columns": [...], "receipt": {...}, "rows": [{column: value, ...}, ...]}`, each row an
    /// object as [`Rows::json_rows`] makes it (its keys in the order `serde_json` writes a map's),
    /// written straight from the values instead of through `serde_json::Value` objects.
    pub fn answer_json(&self) -> Vec<u8> {
        const WRITE: &str = "writing JSON into memory cannot fail";
        let mut by_name: Vec<usize> = (0..self.columns.len()).collect();
        by_name.sort_by(|&a, &b| self.columns[a].cmp(&self.columns[b]));
        let names: Vec<Vec<u8>> = self.columns.iter().map(|c| serde_json::to_vec(c).expect(WRITE)).collect();
        let mut out = Vec::with_capacity(256 + 128 * self.rows.len() * self.columns.len().max(1));
        out.extend_from_slice(b"{\"columns\":");
        serde_json::to_writer(&mut out, &self.columns).expect(WRITE);
        out.extend_from_slice(b",\"receipt\":");
        serde_json::to_writer(&mut out, &self.receipt).expect(WRITE);
        out.extend_from_slice(b",\"rows\":[");
        for (i, row) in self.rows.iter().enumerate() {
            out.extend_from_slice(if i == 0 { b"{" } else { b",{" });
            for (j, &c) in by_name.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&names[c]);
                out.push(b':');
                row[c].write_json(&mut out);
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"]}");
        out
    }

    /// Each row as a JSON object (decimals as strings, timestamps as `YYYY-MM-DDTHH:MM:SS.mmm`).
    pub fn json_rows(&self) -> Vec<serde_json::Value> {
        self.json_objects().into_iter().map(serde_json::Value::Object).collect()
    }

    /// Each row as a JSON object, column name to value.
    pub fn json_objects(&self) -> Vec<serde_json::Map<String, serde_json::Value>> {
        self.rows
            .iter()
            .map(|r| self.columns.iter().cloned().zip(r.iter().map(Value::to_json)).collect())
            .collect()
    }
}

/// A table's health for `livestate tables`.
#[derive(Debug, Clone, Serialize)]
pub struct TableInfo {
    pub name: String,
    /// `livestate`, or `external` when another engine derives the table.
    pub derived_by: String,
    pub merge_engine: String,
    pub buckets: String,
    pub receipt: Receipt,
    /// Rows in the data files of the latest snapshot (before merging).
    pub total_rows_in_files: Option<i64>,
    /// Files, levels and sorted runs per bucket; snapshots and tags.
    pub health: livestate_lsm::TableHealth,
    /// Row operations the derivers set aside because they failed (`livestate quarantine`), as
    /// the writing process last reported.
    pub quarantined: u64,
    /// The latest of them.
    pub last_quarantined: Option<crate::quarantine::Quarantined>,
    /// What the table's commits and compactions cost, as the writing process last reported
    /// (`None` when no process has derived it since the status file gained the figures).
    pub spend: Option<crate::spend::TableSpend>,
}

/// The spec of state table `name`.
///
/// # Errors
/// [`EngineError::UnknownTable`], listing the tables there are.
pub fn table_spec<'s>(spec: &'s CompanySpec, name: &str) -> Result<&'s TableSpec, EngineError> {
    spec.table(name).ok_or_else(|| EngineError::UnknownTable {
        name: name.into(),
        known: spec.tables.keys().cloned().collect(),
    })
}

pub(crate) async fn get_table(
    catalog: &Catalog,
    spec: &CompanySpec,
    name: &str,
) -> Result<(Table, TableSpec), EngineError> {
    let ts = table_spec(spec, name)?;
    let id = TableId::state(name);
    let table = catalog.table(id.identifier()).await.map_err(paimon_err(&id.full_name(), "open"))?;
    Ok((table, ts.clone()))
}

/// Rows from which a latest read of every row of a table (no filter) is served from its
/// Parquet files, not the lookup index: the files' column-by-column merge makes rows faster
/// than the index decodes its JSON rows, while a small table's rows come from the index before
/// a read of the files has planned its scan. Measured on `open_orders` (40,000 rows: 22 ms
/// from the files, 62 from the index) and `work_queue` (5,000 rows: 7 ms against 4);
/// docs/BENCHMARKS.md, "fifteenth pass". The index's count is approximate (a key rewritten
/// since its store last compacted counts twice), which only moves where a table crosses.
pub const WHOLE_READ_FROM_FILES_ROWS: usize = 10_000;

/// Whether a read of every row of `table` is served faster from its files than from `index`
/// (see [`WHOLE_READ_FROM_FILES_ROWS`]).
fn files_read_all_faster(index: &Index, table: &str) -> bool {
    index.approximate_rows(table).is_ok_and(|n| n >= WHOLE_READ_FROM_FILES_ROWS)
}

/// A latest read answered by the lookup index alone, receipt included, when the index knows
/// its snapshot's commit time: no Paimon file is read. The index trails a commit by the
/// moment it takes to apply it, so this is the latest snapshot or the one before it, and the
/// rows are exactly that snapshot's.
fn latest_from_index(
    ts: &TableSpec,
    filters: &[(usize, Value)],
    index: Option<&Index>,
    lag: &LagSource<'_>,
) -> Result<Option<Rows>, EngineError> {
    let Some((meta, rows)) = from_index(ts, filters, index, |m| m.committed_at_ms.is_some())? else {
        return Ok(None);
    };
    let at_ms = meta.committed_at_ms.expect("the index reflects a commit of known time");
    let mut receipt = receipt_of(ts, meta.snapshot_id, meta.identifier, Some(format_millis(at_ms)), lag)?;
    receipt.served_by = ServedBy::Index;
    Ok(Some(Rows { columns: ts.columns.keys().cloned().collect(), rows, receipt }))
}

/// Reads `req` from the warehouse.
///
/// # Errors
/// [`EngineError::UnknownTable`], [`EngineError::BadRequest`] for filters that do not fit, Paimon
/// errors (an unknown snapshot or tag among them).
pub async fn read(
    catalog: &Catalog,
    spec: &CompanySpec,
    req: &ReadRequest,
    lag: &LagSource<'_>,
    index: Option<&Index>,
) -> Result<Rows, EngineError> {
    read_where(catalog, spec, req, None, lag, index).await
}

/// As [`read`], keeping only the rows `condition` holds for (see [`Rows::select`]). The
/// `column == literal` terms the condition requires ([`Expr::required_equalities`]) narrow the
/// read first, as `column = value` filters do: the lookup index skips the rows whose stored
/// bytes cannot hold those values without decoding them, answers by key when they name the
/// whole primary key, and a Paimon scan gets them as predicates.
///
/// # Errors
/// As [`read`]; [`EngineError::BadRequest`] when the condition fails on a row (an overflow,
/// say).
pub async fn read_where(
    catalog: &Catalog,
    spec: &CompanySpec,
    req: &ReadRequest,
    condition: Option<&Expr>,
    lag: &LagSource<'_>,
    index: Option<&Index>,
) -> Result<Rows, EngineError> {
    let named = table_spec(spec, &req.table)?;
    let mut filters: Vec<(usize, Value)> =
        req.keys.iter().map(|(c, v)| parse_filter(named, c, v)).collect::<Result<_, _>>()?;
    if let Some(c) = condition {
        filters.extend(required_filters(named, c));
    }
    let mut rows = read_filtered(catalog, spec, req, &filters, lag, index).await?;
    rows.select(condition, None)?;
    Ok(rows)
}

async fn read_filtered(
    catalog: &Catalog,
    spec: &CompanySpec,
    req: &ReadRequest,
    filters: &[(usize, Value)],
    lag: &LagSource<'_>,
    index: Option<&Index>,
) -> Result<Rows, EngineError> {
    let named = table_spec(spec, &req.table)?;
    // The index holds only the tables livestate derives.
    let mut index = index.filter(|_| named.derived_here());
    if filters.is_empty() && index.is_some_and(|i| files_read_all_faster(i, &named.name)) {
        index = None;
    }
    let filters = filters.to_vec();
    if matches!(req.at, At::Latest) {
        if let Some(rows) = latest_from_index(named, &filters, index, lag)? {
            return Ok(rows);
        }
    }
    let (table, ts) = get_table(catalog, spec, &req.table).await?;
    let full = TableId::state(&ts.name).full_name();
    let (table, receipt) = match &req.at {
        At::Latest => {
            let mut r = latest_receipt(&table, &ts, lag).await?;
            if let Some((_, rows)) = from_index(&ts, &filters, index, |m| m.identifier == r.identifier)? {
                r.served_by = ServedBy::Index;
                return Ok(Rows { columns: ts.columns.keys().cloned().collect(), rows, receipt: r });
            }
            (table, r)
        }
        at => {
            let snap = snapshot_at(&table, &ts, at).await?;
            if let At::Snapshot(id) = at {
                if let Some((_, rows)) = from_index(&ts, &filters, index, |m| m.snapshot_id == Some(*id))? {
                    let mut receipt = past_receipt(&ts, &snap);
                    receipt.served_by = ServedBy::Index;
                    return Ok(Rows { columns: ts.columns.keys().cloned().collect(), rows, receipt });
                }
            }
            (traveled(&table, &full, at).await?, past_receipt(&ts, &snap))
        }
    };
    let rows = match scan(&table, &ts, &filters).await {
        Ok(rows) => rows,
        Err(e) => return Err(diagnose(&table, &full, version_of(&req.at).as_ref(), e).await),
    };
    Ok(Rows { columns: ts.columns.keys().cloned().collect(), rows, receipt })
}

/// `table` as of the version `at` names (the table itself for [`At::Latest`]).
async fn traveled(table: &Table, full: &str, at: &At) -> Result<Table, EngineError> {
    let (key, value) = match at {
        At::Latest => return Ok(table.clone()),
        At::Snapshot(id) => (paimon::spec::SCAN_SNAPSHOT_ID_OPTION, id.to_string()),
        At::Tag(t) => (paimon::spec::SCAN_TAG_NAME_OPTION, t.clone()),
    };
    table
        .copy_with_time_travel_strict(HashMap::from([(key.to_string(), value)]))
        .await
        .map_err(paimon_err(full, "time travel"))
}

/// The version a failed read of `at` is diagnosed at.
fn version_of(at: &At) -> Option<livestate_lsm::Version> {
    match at {
        At::Latest => None,
        At::Snapshot(id) => Some(livestate_lsm::Version::Snapshot(*id)),
        At::Tag(t) => Some(livestate_lsm::Version::Tag(t.clone())),
    }
}

/// A state table's rows as Arrow batches of its columns, with the receipt of the version read
/// (see [`scan_batches`]).
#[derive(Debug, Clone)]
pub struct Batches {
    /// The table's columns, in the spec's order: each batch holds them in this order.
    pub columns: Vec<String>,
    /// A batch or more per bucket, buckets in order; within a bucket livestate merged, rows in
    /// key order (see [`scan_all_batches`]).
    pub batches: Vec<arrow_array::RecordBatch>,
    pub receipt: Receipt,
}

impl Batches {
    /// Rows in all batches.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(arrow_array::RecordBatch::num_rows).sum()
    }
}

/// Every row of the state table `table` as of `at`, read from its files as Arrow batches, with
/// a receipt: the columnar form of a full [`read`], for consumers that take Arrow (no value is
/// decoded into a row; see [`scan_all_batches`]). It reads what a full read from the files
/// reads, never the lookup index.
///
/// # Errors
/// As [`read`].
pub async fn scan_batches(
    catalog: &Catalog,
    spec: &CompanySpec,
    table: &str,
    at: &At,
    lag: &LagSource<'_>,
) -> Result<Batches, EngineError> {
    let (handle, ts) = get_table(catalog, spec, table).await?;
    let full = TableId::state(&ts.name).full_name();
    let (handle, receipt) = match at {
        At::Latest => {
            let r = latest_receipt(&handle, &ts, lag).await?;
            (handle, r)
        }
        at => {
            let snap = snapshot_at(&handle, &ts, at).await?;
            (traveled(&handle, &full, at).await?, past_receipt(&ts, &snap))
        }
    };
    let batches = match scan_all_batches(&handle, &ts).await {
        Ok(b) => b,
        Err(e) => return Err(diagnose(&handle, &full, version_of(at).as_ref(), e).await),
    };
    Ok(Batches { columns: ts.columns.keys().cloned().collect(), batches, receipt })
}

/// The snapshot `at` names (`At::Latest` is not a past version).
async fn snapshot_at(table: &Table, ts: &TableSpec, at: &At) -> Result<Snapshot, EngineError> {
    let full = TableId::state(&ts.name).full_name();
    match at {
        At::Snapshot(id) => {
            let sm = table.snapshot_manager();
            // Read the snapshot first and list the directory only when that fails: a table
            // keeps an hour of snapshots (thousands of files under load), and every consistent
            // read names a snapshot, so listing first took about 6 % of a loaded server's CPU.
            let read_error = match sm.get_snapshot(*id).await {
                Ok(snapshot) => return Ok(snapshot),
                Err(e) => e,
            };
            let ids = sm.list_all_ids().await.map_err(paimon_err(&full, "list snapshots"))?;
            if ids.contains(id) {
                // The snapshot is there but could not be read: say why.
                return Err(paimon_err(&full, "read snapshot")(read_error));
            }
            let kept = match (ids.first(), ids.last()) {
                (Some(a), Some(b)) => format!("snapshots kept: {a}..={b}"),
                _ => "the table has no snapshot yet".into(),
            };
            Err(EngineError::BadRequest {
                table: ts.name.clone(),
                message: format!("no snapshot {id} ({kept})"),
            })
        }
        At::Tag(t) => {
            check_tag_name(&ts.name, t)?;
            table.tag_manager().get(t).await.map_err(paimon_err(&full, "read tag"))?.ok_or_else(|| {
                EngineError::BadRequest { table: ts.name.clone(), message: format!("no tag `{t}`") }
            })
        }
        At::Latest => unreachable!("callers handle the latest version"),
    }
}

/// A tag is a file in the table's `tag/` directory: its name must be 1 to 200 bytes without `/`,
/// `\`, `..` or control characters, so that it names a file there and nothing else.
fn check_tag_name(table: &str, name: &str) -> Result<(), EngineError> {
    let fine = !name.trim().is_empty()
        && name.len() <= 200
        && !name.contains("..")
        && !name.chars().any(|c| c == '/' || c == '\\' || c.is_control());
    if fine {
        return Ok(());
    }
    let shown: String = name.chars().take(60).collect();
    Err(EngineError::BadRequest {
        table: table.to_string(),
        message: format!(
            "tag `{}`{}: not a tag name (1 to 200 bytes without `/`, `\\`, `..` or control characters)",
            shown.escape_debug(),
            if shown.len() < name.len() { "..." } else { "" }
        ),
    })
}

/// Rows read from the lookup index, with the commit they belong to.
type IndexedRows = (IndexMeta, Vec<Vec<Value>>);

/// Answers from the lookup index when it reflects the version asked for (`reflects` says so of
/// its meta), rows in key order: by key when `filters` name every key column, else by
/// filtering every indexed row. Meta and rows are read through one [`Index::view`] and kept only when no commit was
/// applied meanwhile (tried three times), so the rows are exactly the commit the meta names;
/// `None` when the table must be read from Paimon instead.
fn from_index(
    ts: &TableSpec,
    filters: &[(usize, Value)],
    index: Option<&Index>,
    reflects: impl Fn(&IndexMeta) -> bool,
) -> Result<Option<IndexedRows>, EngineError> {
    let Some(index) = index else { return Ok(None) };
    let mut key = Vec::new();
    for k in &ts.primary_key {
        let idx = ts.columns.get_index_of(k).expect("key column");
        match filters.iter().find(|(i, _)| *i == idx) {
            Some((_, v)) => key.push(v),
            None => break,
        }
    }
    let key = (key.len() == ts.primary_key.len()).then(|| key_bytes(key.into_iter()));
    for _ in 0..3 {
        let view = index.view();
        let Some(meta) = view.meta(&ts.name)?.filter(|m| reflects(m)) else { return Ok(None) };
        let rows = match &key {
            Some(key) => view.get(&ts.name, key)?.into_iter().collect(),
            None => view.rows_matching(&ts.name, filters.iter().map(|(_, v)| v))?,
        };
        if view.unchanged() {
            return Ok(Some((
                meta,
                rows.into_iter().filter(|r| filters.iter().all(|(i, v)| &r[*i] == v)).collect(),
            )));
        }
    }
    Ok(None)
}

/// Health of every state table. `maintainers` (by table name) are the long-lived maintainers
/// of a serving process, whose tag caches spare re-reading every tag file; a table without one
/// gets a new maintainer.
///
/// # Errors
/// Paimon errors.
pub async fn tables(
    catalog: &Catalog,
    spec: &CompanySpec,
    lag: &LagSource<'_>,
    maintainers: Option<&HashMap<String, livestate_lsm::Maintainer>>,
) -> Result<Vec<TableInfo>, EngineError> {
    // Every receipt first, then each table's health. A receipt measures lag from the derivers'
    // progress as `lag` captured it, against the clock when the receipt is made; listing a
    // large table's files and snapshots takes long enough under load that a table listed after
    // it would be charged that time as lag (a 1 s table was once reported 1,078 ms behind).
    let mut opened = Vec::with_capacity(spec.tables.len());
    for ts in spec.tables.values() {
        let (table, _) = get_table(catalog, spec, &ts.name).await?;
        let receipt = latest_receipt(&table, ts, lag).await?;
        opened.push((ts, table, receipt));
    }
    let mut out = Vec::new();
    for (ts, table, receipt) in opened {
        let full = TableId::state(&ts.name).full_name();
        let progress = lag.status().and_then(|st| st.tables.get(&full));
        let total = table
            .snapshot_manager()
            .get_latest_snapshot()
            .await
            .map_err(paimon_err(&full, "read snapshot"))?
            .and_then(|s| s.total_record_count());
        let maintainer = match maintainers.and_then(|m| m.get(&ts.name)) {
            Some(m) => m.clone(),
            None => livestate_lsm::Maintainer::new(
                table.clone(),
                full.clone(),
                livestate_lsm::CommitLock::default(),
            )?,
        };
        let health = match maintainer.health().await {
            Ok(h) => h,
            Err(e) => return Err(diagnose(&table, &full, None, e.into()).await),
        };
        out.push(TableInfo {
            name: ts.name.clone(),
            derived_by: ts.derived_by.to_string(),
            merge_engine: ts.merge_engine.as_str().to_string(),
            buckets: ts.options.get("bucket").cloned().unwrap_or_else(|| "1".into()),
            receipt,
            total_rows_in_files: total,
            health,
            quarantined: progress.map_or(0, |p| p.quarantined),
            last_quarantined: progress.and_then(|p| p.last_quarantined.clone()),
            spend: progress.and_then(|p| p.spend),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt() -> Receipt {
        Receipt {
            table: "stock".into(),
            snapshot_id: Some(7),
            offset: Some(42),
            committed_at: Some("2026-03-02T08:00:00.000".into()),
            lag_ms: Some(0),
            budget: "1s".into(),
            within_budget: Some(true),
            measured_by: MeasuredBy::Record,
            served_by: ServedBy::Index,
            identifier: 42,
        }
    }

    /// What the HTTP API answered before `answer_json`: a `serde_json::Value` built from the
    /// rows and serialized.
    fn answer_through_values(rows: &Rows) -> serde_json::Value {
        serde_json::json!({"receipt": rows.receipt, "columns": rows.columns, "rows": rows.json_rows()})
    }

    #[test]
    fn the_answer_written_from_values_reads_as_the_one_built_from_json_values() {
        let ts = chrono::DateTime::parse_from_rfc3339("2026-03-02T08:13:57.773Z").unwrap().to_utc();
        let rows = Rows {
            // Not in name order, one name needing escapes: rows' keys come out sorted.
            columns: ["sku", "qty", "price", "ok", "at", "note \"x\"", "gone"].map(String::from).to_vec(),
            rows: vec![
                vec![
                    Value::String("part-1".into()),
                    Value::Int(-3),
                    Value::Decimal("12.50".parse().unwrap()),
                    Value::Bool(true),
                    Value::Timestamp(ts),
                    Value::String("a \"quoted\"\nline\u{7f} é".into()),
                    Value::Null,
                ],
                vec![
                    Value::String("part-2".into()),
                    Value::Int(i64::MAX),
                    Value::Decimal("0".parse().unwrap()),
                    Value::Bool(false),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                ],
            ],
            receipt: receipt(),
        };
        let text = rows.answer_json();
        let parsed: serde_json::Value = serde_json::from_slice(&text).expect("valid JSON");
        assert_eq!(parsed, answer_through_values(&rows));
        // Rows' keys in the order serde_json writes a map's, as before.
        let old = serde_json::to_string(&answer_through_values(&rows)).unwrap();
        let old_rows = &old[old.find("\"rows\":").unwrap()..];
        let text = String::from_utf8(text).unwrap();
        assert!(text.ends_with(old_rows), "{text}\n{old_rows}");

        let empty = Rows { columns: vec!["sku".into()], rows: Vec::new(), receipt: receipt() };
        let parsed: serde_json::Value = serde_json::from_slice(&empty.answer_json()).unwrap();
        assert_eq!(parsed, answer_through_values(&empty));
    }
}
