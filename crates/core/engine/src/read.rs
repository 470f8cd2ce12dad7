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
use crate::layout::Status;
use crate::schema::latest_own_snapshot;
use crate::schema::TableId;
use crate::verify::diagnose;
use crate::Catalog;
pub use livestate_api::read::{MeasuredBy, ServedBy};

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

/// Where a table stands: which snapshot was read, which record offset it reflects, and how
/// stale it is against its freshness budget.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Receipt {
    pub table: String,
    pub snapshot_id: Option<i64>,
    /// The snapshot reflects every recorded event with an offset below this; `None` for a
    /// table another engine derives (`derived_by = "external"`), whose commits are numbered by
    /// its checkpoints, not by record offsets.
    pub offset: Option<u64>,
    /// When the snapshot was committed (UTC).
    pub committed_at: Option<String>,
    /// How long the oldest unreflected event has waited (0 when caught up); `None` for reads
    /// of a past snapshot or tag, where lag has no meaning.
    pub lag_ms: Option<u64>,
    pub budget: String,
    pub within_budget: Option<bool>,
    /// Against the record itself, the owner's status file, or not at all (a past snapshot, a
    /// table another engine derives).
    pub measured_by: MeasuredBy,
    /// The lookup index for a point read (it reflects exactly this snapshot), else the files.
    pub served_by: ServedBy,
    /// Commit identifier of the snapshot read (before any status adjustment of `offset`).
    #[serde(skip)]
    pub(crate) identifier: u64,
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
        self.rows
            .iter()
            .map(|r| {
                serde_json::Value::Object(
                    self.columns.iter().cloned().zip(r.iter().map(Value::to_json)).collect(),
                )
            })
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

/// How lag is measured: against the record (when this process may open it) or from the status
/// file the owning process writes.
///
/// The status is shared, not copied: a serving process hands the same published status to
/// every read.
pub enum LagSource<'a> {
    /// Measured against the record; the status file (if any) says how far tables were checked.
    Record(&'a Record, Option<std::sync::Arc<Status>>),
    Status(Option<std::sync::Arc<Status>>),
}

impl LagSource<'_> {
    /// The writing process's last status, if any.
    pub fn status(&self) -> Option<&Status> {
        match self {
            LagSource::Record(_, status) | LagSource::Status(status) => status.as_deref(),
        }
    }
}

/// Milliseconds the event at `position` has waited, 0 when `position` is the record's head.
///
/// # Errors
/// Record errors.
pub fn lag_ms(record: &Record, position: u64, now_ms: i64) -> Result<u64, EngineError> {
    Ok(match record.recorded_at_ms(position)? {
        None => 0,
        Some(at_ms) => u64::try_from(now_ms - at_ms).unwrap_or(0),
    })
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

fn committed_at(s: &Snapshot) -> String {
    format_millis(s.time_millis() as i64)
}

fn format_millis(ms: i64) -> String {
    livestate_spec::types::format_timestamp(&livestate_spec::types::millis_to_timestamp(ms))
}

/// The receipt of a table's latest state.
pub(crate) async fn latest_receipt(
    table: &Table,
    ts: &TableSpec,
    lag: &LagSource<'_>,
) -> Result<Receipt, EngineError> {
    let full = TableId::state(&ts.name).full_name();
    if !ts.derived_here() {
        let snap = table
            .snapshot_manager()
            .get_latest_snapshot()
            .await
            .map_err(paimon_err(&full, "read snapshot"))?;
        return Ok(external_receipt(ts, snap.as_ref()));
    }
    let snap = latest_own_snapshot(table).await.map_err(paimon_err(&full, "read snapshot"))?;
    let identifier = snap.as_ref().map_or(0, |s| u64::try_from(s.commit_identifier()).unwrap_or(0));
    receipt_of(ts, snap.as_ref().map(Snapshot::id), identifier, snap.as_ref().map(committed_at), lag)
}

/// The receipt of a table's snapshot `snapshot_id` (commit identifier `identifier`) as its
/// latest state: offset (raised to what the derivers checked past it, while it is still their
/// latest), lag and budget.
fn receipt_of(
    ts: &TableSpec,
    snapshot_id: Option<i64>,
    identifier: u64,
    committed_at: Option<String>,
    lag: &LagSource<'_>,
) -> Result<Receipt, EngineError> {
    let full = TableId::state(&ts.name).full_name();
    let mut offset = identifier;
    let now = chrono::Utc::now();
    let (lag_ms, measured_by) = match lag {
        LagSource::Record(record, status) => {
            if let Some(p) = status.as_ref().and_then(|st| st.tables.get(&full)) {
                if p.still_holds(snapshot_id, identifier) {
                    offset = offset.max(p.through);
                }
            }
            (Some(lag_ms(record, offset, now.timestamp_millis())?), MeasuredBy::Record)
        }
        LagSource::Status(status) => {
            let p = status.as_ref().and_then(|st| st.tables.get(&full));
            match p {
                Some(p) if p.still_holds(snapshot_id, identifier) => {
                    offset = offset.max(p.through);
                    (Some(p.lag_ms), MeasuredBy::Status)
                }
                _ => (None, MeasuredBy::Status),
            }
        }
    };
    let allowed = ts.freshness.allowed_lag(now);
    Ok(Receipt {
        table: ts.name.clone(),
        snapshot_id,
        offset: Some(offset),
        committed_at,
        lag_ms,
        budget: ts.freshness.to_string(),
        within_budget: lag_ms.map(|l| Duration::from_millis(l) <= allowed),
        measured_by,
        served_by: ServedBy::Paimon,
        identifier,
    })
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
    let Some((meta, mut rows)) = from_index(ts, filters, index, |m| m.committed_at_ms.is_some())? else {
        return Ok(None);
    };
    let at_ms = meta.committed_at_ms.expect("the index reflects a commit of known time");
    sort_by_key(ts, &mut rows);
    let mut receipt = receipt_of(ts, meta.snapshot_id, meta.identifier, Some(format_millis(at_ms)), lag)?;
    receipt.served_by = ServedBy::Index;
    Ok(Some(Rows { columns: ts.columns.keys().cloned().collect(), rows, receipt }))
}

fn parse_filter(ts: &TableSpec, col: &str, text: &str) -> Result<(usize, Value), EngineError> {
    let bad = |message: String| EngineError::BadRequest { table: ts.name.clone(), message };
    let Some(idx) = ts.columns.get_index_of(col) else {
        return Err(bad(format!(
            "no column `{col}` (columns: {})",
            ts.columns.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    };
    let ty = ts.columns[idx];
    let json = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .filter(|j| !j.is_string() && !j.is_null())
        .unwrap_or_else(|| serde_json::Value::String(text.to_string()));
    let v = Value::from_json(&json, ty)
        .or_else(|_| Value::from_json(&serde_json::Value::String(text.into()), ty))
        .map_err(|e| bad(format!("`{col}={text}`: {e}")))?;
    Ok((idx, v))
}

fn datum(v: &Value) -> Option<Datum> {
    Some(match v {
        Value::Null => return None,
        Value::String(s) => Datum::String(s.clone()),
        Value::Int(i) => Datum::Long(*i),
        Value::Bool(b) => Datum::Bool(*b),
        Value::Decimal(d) => Datum::Decimal { unscaled: d.mantissa(), precision: 38, scale: d.scale() },
        Value::Timestamp(t) => Datum::Timestamp { millis: t.timestamp_millis(), nanos: 0 },
    })
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

/// The equalities `condition` requires that are filters on `ts`'s columns: a literal of the
/// column's own type, compared exactly (a decimal or timestamp may equal a value spelled
/// otherwise, an int column compared with a decimal literal is left to the condition).
fn required_filters(ts: &TableSpec, condition: &Expr) -> Vec<(usize, Value)> {
    use livestate_spec::ValueType;
    condition
        .required_equalities()
        .into_iter()
        .filter_map(|(name, v)| {
            let idx = ts.columns.get_index_of(name)?;
            let exact = matches!(
                (ts.columns[idx], v),
                (ValueType::String, Value::String(_))
                    | (ValueType::Int, Value::Int(_))
                    | (ValueType::Bool, Value::Bool(_))
            );
            exact.then(|| (idx, v.clone()))
        })
        .collect()
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
    let index = index.filter(|_| named.derived_here());
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
            if let Some((_, mut rows)) = from_index(&ts, &filters, index, |m| m.identifier == r.identifier)? {
                r.served_by = ServedBy::Index;
                sort_by_key(&ts, &mut rows);
                return Ok(Rows { columns: ts.columns.keys().cloned().collect(), rows, receipt: r });
            }
            (table, r)
        }
        at => {
            let (key, value) = match at {
                At::Snapshot(id) => (paimon::spec::SCAN_SNAPSHOT_ID_OPTION, id.to_string()),
                At::Tag(t) => (paimon::spec::SCAN_TAG_NAME_OPTION, t.clone()),
                At::Latest => unreachable!("handled above"),
            };
            let snap = snapshot_at(&table, &ts, at).await?;
            if let At::Snapshot(id) = at {
                if let Some((_, mut rows)) = from_index(&ts, &filters, index, |m| m.snapshot_id == Some(*id))?
                {
                    sort_by_key(&ts, &mut rows);
                    let mut receipt = past_receipt(&ts, &snap);
                    receipt.served_by = ServedBy::Index;
                    return Ok(Rows { columns: ts.columns.keys().cloned().collect(), rows, receipt });
                }
            }
            let tt = table
                .copy_with_time_travel_strict(HashMap::from([(key.to_string(), value)]))
                .await
                .map_err(paimon_err(&full, "time travel"))?;
            (tt, past_receipt(&ts, &snap))
        }
    };
    let mut rows = match scan(&table, &ts, &filters).await {
        Ok(rows) => rows,
        Err(e) => {
            let version = match &req.at {
                At::Latest => None,
                At::Snapshot(id) => Some(livestate_lsm::Version::Snapshot(*id)),
                At::Tag(t) => Some(livestate_lsm::Version::Tag(t.clone())),
            };
            return Err(diagnose(&table, &full, version.as_ref(), e).await);
        }
    };
    sort_by_key(&ts, &mut rows);
    Ok(Rows { columns: ts.columns.keys().cloned().collect(), rows, receipt })
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

/// The receipt of `table` at `at`, without reading rows.
///
/// # Errors
/// [`EngineError::UnknownTable`], [`EngineError::BadRequest`] for a missing snapshot or tag,
/// Paimon errors.
pub async fn receipt(
    catalog: &Catalog,
    spec: &CompanySpec,
    table: &str,
    at: &At,
    lag: &LagSource<'_>,
) -> Result<Receipt, EngineError> {
    let (t, ts) = get_table(catalog, spec, table).await?;
    match at {
        At::Latest => latest_receipt(&t, &ts, lag).await,
        at => Ok(past_receipt(&ts, &snapshot_at(&t, &ts, at).await?)),
    }
}

/// The receipt of a past snapshot (or the snapshot a tag names): no lag, since it is not the
/// table's present.
fn past_receipt(ts: &TableSpec, snap: &Snapshot) -> Receipt {
    if !ts.derived_here() {
        return Receipt { measured_by: MeasuredBy::Snapshot, ..external_receipt(ts, Some(snap)) };
    }
    let identifier = u64::try_from(snap.commit_identifier()).unwrap_or(0);
    Receipt {
        table: ts.name.clone(),
        snapshot_id: Some(snap.id()),
        offset: Some(identifier),
        committed_at: Some(committed_at(snap)),
        lag_ms: None,
        budget: ts.freshness.to_string(),
        within_budget: None,
        measured_by: MeasuredBy::Snapshot,
        served_by: ServedBy::Paimon,
        identifier,
    }
}

/// The receipt of a table another engine derives, at `snap`: the snapshot and its commit time,
/// but no record offset and no lag (its commit identifiers count that engine's checkpoints).
fn external_receipt(ts: &TableSpec, snap: Option<&Snapshot>) -> Receipt {
    Receipt {
        table: ts.name.clone(),
        snapshot_id: snap.map(Snapshot::id),
        offset: None,
        committed_at: snap.map(committed_at),
        lag_ms: None,
        budget: ts.freshness.to_string(),
        within_budget: None,
        measured_by: MeasuredBy::External,
        served_by: ServedBy::Paimon,
        identifier: snap.map_or(0, |s| u64::try_from(s.commit_identifier()).unwrap_or(0)),
    }
}

/// Rows read from the lookup index, with the commit they belong to.
type IndexedRows = (IndexMeta, Vec<Vec<Value>>);

/// Answers from the lookup index when it reflects the version asked for (`reflects` says so of
/// its meta): by key when `filters` name every key column, else by filtering every indexed
/// row. Meta and rows are read through one [`Index::view`] and kept only when no commit was
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

/// Parses a `where` condition over `ts`'s columns (the spec's expression language, e.g.
/// `on_hand - reserved < 10 and location == 'north'`) and checks it is a condition.
///
/// # Errors
/// [`EngineError::BadRequest`] naming what does not parse or fit.
pub fn parse_where(ts: &TableSpec, text: &str) -> Result<Expr, EngineError> {
    let bad = |message: String| EngineError::BadRequest { table: ts.name.clone(), message };
    let expr = Expr::parse(text).map_err(|e| bad(format!("where `{text}`: {e}")))?;
    let ty =
        expr.type_check(&|n| ts.columns.get(n).copied()).map_err(|e| bad(format!("where `{text}`: {e}")))?;
    if !matches!(ty, ExprType::Of(livestate_spec::ValueType::Bool) | ExprType::Null) {
        return Err(bad(format!("where `{text}` is not a condition (it yields {ty})")));
    }
    Ok(expr)
}

impl Rows {
    /// Keeps the rows for which `condition` holds, then at most `limit` of them.
    ///
    /// # Errors
    /// [`EngineError::BadRequest`] when the condition fails on a row (an overflow, say).
    pub fn select(&mut self, condition: Option<&Expr>, limit: Option<usize>) -> Result<(), EngineError> {
        if let Some(cond) = condition {
            let mut kept = Vec::with_capacity(self.rows.len());
            for row in std::mem::take(&mut self.rows) {
                let lookup = |n: &str| self.columns.iter().position(|c| c == n).map(|i| row[i].clone());
                let holds = cond.holds(&lookup).map_err(|message| EngineError::BadRequest {
                    table: self.receipt.table.clone(),
                    message,
                })?;
                if holds {
                    kept.push(row);
                }
            }
            self.rows = kept;
        }
        if let Some(n) = limit {
            self.rows.truncate(n);
        }
        Ok(())
    }
}

/// Every row of `table` (as of the version the handle points at), merged.
///
/// # Errors
/// Paimon or Arrow errors.
pub async fn scan_all(table: &Table, ts: &TableSpec) -> Result<Vec<Vec<Value>>, EngineError> {
    scan(table, ts, &[]).await
}

/// The rows of an Arrow batch of `ts`'s columns.
///
/// # Errors
/// A column whose values do not decode.
pub fn rows_of(batch: &arrow_array::RecordBatch, ts: &TableSpec) -> Result<Vec<Vec<Value>>, EngineError> {
    crate::rows::from_batch(batch).map_err(|message| EngineError::Arrow { table: ts.name.clone(), message })
}

/// The row kinds (`+I`, `-U`, `+U`, `-D`) in the first column of an audit-log batch.
///
/// # Errors
/// The first column holds no row kinds.
pub fn row_kinds(batch: &arrow_array::RecordBatch) -> Result<Vec<String>, EngineError> {
    use arrow_array::Array;
    let col = batch.column(0);
    let bad = || EngineError::Arrow {
        table: "(changelog)".into(),
        message: "first column is not a row kind".into(),
    };
    if let Some(s) = col.as_any().downcast_ref::<arrow_array::StringArray>() {
        return Ok((0..s.len()).map(|i| s.value(i).to_string()).collect());
    }
    let k = col.as_any().downcast_ref::<arrow_array::Int8Array>().ok_or_else(bad)?;
    (0..k.len())
        .map(|i| {
            paimon::spec::RowKind::from_value(k.value(i))
                .map(|r| r.short_string().to_string())
                .map_err(|_| bad())
        })
        .collect()
}

pub(crate) async fn scan(
    table: &Table,
    ts: &TableSpec,
    filters: &[(usize, Value)],
) -> Result<Vec<Vec<Value>>, EngineError> {
    let full = TableId::state(&ts.name).full_name();
    let has_snapshot = table
        .snapshot_manager()
        .get_latest_snapshot_id()
        .await
        .map_err(paimon_err(&full, "read snapshot"))?;
    if has_snapshot.is_none() {
        return Ok(Vec::new());
    }
    let mut rb = table.new_read_builder();
    if !filters.is_empty() {
        let pb = PredicateBuilder::new(table.schema().fields());
        let mut preds = Vec::new();
        for (idx, v) in filters {
            let col = ts.columns.get_index(*idx).expect("index from get_index_of").0;
            let p = match datum(v) {
                Some(d) => pb.equal(col, d),
                None => pb.is_null(col),
            };
            preds.push(p.map_err(paimon_err(&full, "filter"))?);
        }
        rb.with_filter(Predicate::and(preds));
    }
    let mut scan = rb.new_scan();
    if ts.merge_engine == MergeEngine::FirstRow {
        // Paimon readers skip level-0 files of first-row tables; until compaction moves them up,
        // the merged view of every file is the table's content.
        scan = scan.with_scan_all_files();
    }
    let plan = scan.plan().await.map_err(paimon_err(&full, "plan scan"))?;
    plan_rows(&rb, &plan, &full).await
}

fn sort_by_key(ts: &TableSpec, rows: &mut [Vec<Value>]) {
    let key_idx: Vec<usize> = ts.primary_key.iter().filter_map(|k| ts.columns.get_index_of(k)).collect();
    rows.sort_by(|a, b| {
        for &i in &key_idx {
            let o = compare(&a[i], &b[i]).unwrap_or(std::cmp::Ordering::Equal);
            if o.is_ne() {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    });
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
    let mut out = Vec::new();
    for ts in spec.tables.values() {
        let (table, _) = get_table(catalog, spec, &ts.name).await?;
        let receipt = latest_receipt(&table, ts, lag).await?;
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

/// `1.2s`-style rendering of a lag.
pub fn format_lag(ms: u64) -> String {
    format_duration(Duration::from_millis(ms))
}

/// Every row of the `record.events` archive, in offset order (columns as in
/// [`crate::schema::ARCHIVE_COLUMNS`]).
///
/// # Errors
/// Paimon errors.
pub async fn archive_rows(catalog: &Catalog) -> Result<Vec<Vec<Value>>, EngineError> {
    let id = TableId::archive();
    let full = id.full_name();
    let table = catalog.table(id.identifier()).await.map_err(paimon_err(&full, "open"))?;
    if table
        .snapshot_manager()
        .get_latest_snapshot_id()
        .await
        .map_err(paimon_err(&full, "read snapshot"))?
        .is_none()
    {
        return Ok(Vec::new());
    }
    let rb = table.new_read_builder();
    let plan = rb.new_scan().plan().await.map_err(paimon_err(&full, "plan scan"))?;
    let mut rows = plan_rows(&rb, &plan, &full).await?;
    rows.sort_by_key(|r| match r.first() {
        Some(Value::Int(o)) => *o,
        _ => i64::MAX,
    });
    Ok(rows)
}

/// Reads every split of `plan` and converts the batches into rows, in split order. Splits
/// (buckets) are independent, so they are read and merged on their own tasks, as many at once
/// as the machine has cores: a full scan of a table of several buckets uses every core.
async fn plan_rows(
    rb: &paimon::ReadBuilder<'_>,
    plan: &paimon::Plan,
    full: &str,
) -> Result<Vec<Vec<Value>>, EngineError> {
    let read = rb.new_read().map_err(paimon_err(full, "read"))?;
    let streams = plan
        .splits()
        .iter()
        .map(|split| read.to_arrow(std::slice::from_ref(split)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(paimon_err(full, "read"))?;
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(cores()));
    // A JoinSet aborts its tasks when dropped: a read given up on stops reading.
    let mut tasks = tokio::task::JoinSet::new();
    let n = streams.len();
    for (i, stream) in streams.into_iter().enumerate() {
        let read = split_rows(stream, full.to_string(), permits.clone());
        tasks.spawn(async move { (i, read.await) });
    }
    let mut parts: Vec<Vec<Vec<Value>>> = vec![Vec::new(); n];
    while let Some(done) = tasks.join_next().await {
        let (i, part) = done.map_err(|e| EngineError::Arrow {
            table: full.to_string(),
            message: format!("read task failed: {e}"),
        })?;
        parts[i] = part?;
    }
    let mut rows = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for part in parts {
        rows.extend(part);
    }
    Ok(rows)
}

/// The cores this process may use, asked once: the standard library reads the cgroup's quota
/// files on every call, which a profile of repeated scans caught.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
}

/// The rows of one split's stream, read once one of `permits` is free.
async fn split_rows(
    stream: paimon::table::ArrowRecordBatchStream,
    full: String,
    permits: std::sync::Arc<tokio::sync::Semaphore>,
) -> Result<Vec<Vec<Value>>, EngineError> {
    let _permit = permits.acquire_owned().await.expect("the semaphore is never closed");
    let batches: Vec<_> = stream.try_collect().await.map_err(paimon_err(&full, "read"))?;
    let mut rows = Vec::with_capacity(batches.iter().map(arrow_array::RecordBatch::num_rows).sum());
    for b in &batches {
        rows.extend(
            crate::rows::from_batch(b)
                .map_err(|message| EngineError::Arrow { table: full.clone(), message })?,
        );
    }
    Ok(rows)
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
