//! Receipts: which snapshot a read saw, which record offset it reflects, and its lag against
//! the table's freshness budget, measured against the record or the owner's status file.

use super::*;

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

/// How lag is measured: against the record (when this process may open it) or from the status
/// file the owning process writes.
///
/// The status is shared, not copied: a serving process hands the same published status to
/// every read.
#[derive(Clone)]
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

pub(crate) fn committed_at(s: &Snapshot) -> String {
    format_millis(s.time_millis() as i64)
}

pub(crate) fn format_millis(ms: i64) -> String {
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
pub(crate) fn receipt_of(
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
pub(crate) fn past_receipt(ts: &TableSpec, snap: &Snapshot) -> Receipt {
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
pub(crate) fn external_receipt(ts: &TableSpec, snap: Option<&Snapshot>) -> Receipt {
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

/// `1.2s`-style rendering of a lag.
pub fn format_lag(ms: u64) -> String {
    format_duration(Duration::from_millis(ms))
}
