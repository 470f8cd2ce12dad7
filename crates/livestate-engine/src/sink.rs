//! One long-lived Paimon writer per table whose commit identifier is the record offset it reflects.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{ArrayRef, Int64Array, Int8Array, RecordBatch, UInt32Array};
use arrow_ord::sort::{lexsort_to_indices, SortColumn};
use arrow_schema::Schema as ArrowSchema;
use livestate_lsm::{CommitLock, Maintainer, SharedFence};
use livestate_spec::{Action, Merger, TableSpec, Trigger, Value};
use paimon::catalog::Identifier;
use paimon::spec::{BinaryRow, RowKind};
use paimon::{CommitMessage, Table, TableCommit, TableWrite};

use crate::error::{diagnose, paimon_err, EngineError};
use crate::index::{Index, IndexMeta};
use crate::rows::{self, KindRow};
use crate::schema::{latest_own_snapshot, COMMIT_USER};
use crate::triggers::{Effects, TableTriggers};
use crate::Catalog;

/// Rows buffered before they are handed to the Paimon writer (and rows per batch handed over).
const WRITE_BATCH_ROWS: usize = 8192;

/// Keys a state table's commit window may hold: a table with this many is committed at the next
/// step whatever its budget says, so the window's memory has a ceiling however many distinct
/// keys a burst touches.
pub(crate) const MAX_WINDOW_KEYS: usize = 65_536;

/// A table's commit window: what it holds decides when it is due.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    /// When this process applied the window's first event.
    pub opened: Option<std::time::Instant>,
    /// When the window's oldest event was recorded (ms since the epoch).
    pub oldest_recorded_ms: Option<i64>,
}

impl Window {
    /// Following the record, a window is due once its oldest event was recorded `following`
    /// ago; behind it (a backlog), once it has been open `behind_for` on this process's clock,
    /// because the events of a backlog were all recorded long ago and their age would make
    /// every step commit. An empty window is never due.
    pub fn due(self, behind: bool, now_ms: i64, following: Duration, behind_for: Duration) -> bool {
        if behind {
            self.opened.is_some_and(|t| t.elapsed() >= behind_for)
        } else {
            self.oldest_recorded_ms.is_some_and(|t| now_ms - t >= following.as_millis() as i64)
        }
    }

    /// How long until [`Window::due`] says the window is due (zero once it is); `None` for an
    /// empty window.
    pub fn due_in(
        self,
        behind: bool,
        now_ms: i64,
        following: Duration,
        behind_for: Duration,
    ) -> Option<Duration> {
        if behind {
            self.opened.map(|t| behind_for.saturating_sub(t.elapsed()))
        } else {
            self.oldest_recorded_ms.map(|t| {
                let left = following.as_millis() as i64 - (now_ms - t);
                Duration::from_millis(u64::try_from(left).unwrap_or(0))
            })
        }
    }
}

/// Where a sink stands, as its status reports it (the archive's task publishes it).
#[derive(Debug, Clone)]
pub(crate) struct SinkProgress {
    pub name: String,
    pub position: u64,
    pub committed: u64,
    pub snapshot_id: Option<i64>,
    pub snapshot_identifier: u64,
    pub oldest_uncommitted_ms: Option<i64>,
}

impl SinkProgress {
    /// The offset below which the latest snapshot reflects every event: the position itself when
    /// nothing was applied since the last commit (the events since touched no row of this table),
    /// else the last commit's.
    pub fn checked_through(&self) -> u64 {
        if self.oldest_uncommitted_ms.is_none() {
            self.position.max(self.committed)
        } else {
            self.committed
        }
    }
}

/// A table being derived: the writer stays open across commits (a new `TableWrite` rescans every
/// manifest), rows are buffered, and each commit's identifier is the record offset below which
/// every event is reflected. Resuming after a crash starts at that offset, so nothing is lost or
/// applied twice.
///
/// A state table (one with [`Tracking`]) hands Paimon no row operation as it arrives: the commit
/// window's operations are merged per key with the table's merge engine, and the commit writes
/// each changed key's window once ([`Tracking::window_rows`]), so Paimon receives at most one
/// row per key per commit (an upsert that would set again a row its window removed commits the
/// table first, so a reset key's delete goes alone).
pub(crate) struct TableSink {
    pub name: String,
    pub table: Table,
    write: TableWrite,
    commit: TableCommit,
    schema: Arc<ArrowSchema>,
    pending: Vec<KindRow>,
    dirty: bool,
    /// Next record offset to apply.
    pub position: u64,
    /// Offset reflected by the latest committed snapshot.
    pub committed: u64,
    pub snapshot_id: Option<i64>,
    /// Commit identifier of `snapshot_id` (`committed` may have been raised past it on open).
    pub snapshot_identifier: u64,
    /// When the oldest event not yet committed was recorded (ms since the epoch).
    pub oldest_uncommitted_ms: Option<i64>,
    /// When this process applied the first event not yet committed (the window's start on this
    /// process's clock, whatever the event's recorded time).
    pub window_opened: Option<std::time::Instant>,
    /// Taken by every commit to the table, data or compaction.
    commit_lock: CommitLock,
    /// Compaction, expiry and orphan cleanup of this table.
    pub maintainer: Maintainer,
    /// Checked before every commit (the warehouse lease on object storage).
    fence: Option<SharedFence>,
    /// State tables: each key's row before and after what is applied but not committed.
    tracking: Option<Tracking>,
}

/// The before/after of every key changed by snapshot `id`, read from its changelog.
async fn changes_of(
    table: &paimon::Table,
    ts: &TableSpec,
    name: &str,
    id: i64,
) -> Result<BTreeMap<Vec<u8>, BeforeAfter>, EngineError> {
    use futures::TryStreamExt;
    let rb = table.new_read_builder();
    let plan = rb
        .new_incremental_scan(paimon::IncrementalScanMode::Changelog, id - 1, id)
        .plan()
        .await
        .map_err(paimon_err(name, "plan changelog"))?;
    let batches: Vec<RecordBatch> = rb
        .new_read()
        .map_err(paimon_err(name, "read changelog"))?
        .to_audit_log_arrow(&plan)
        .map_err(paimon_err(name, "read changelog"))?
        .try_collect()
        .await
        .map_err(paimon_err(name, "read changelog"))?;
    let key_idx: Vec<usize> =
        ts.primary_key.iter().map(|k| ts.columns.get_index_of(k).expect("key column")).collect();
    let mut out: BTreeMap<Vec<u8>, BeforeAfter> = BTreeMap::new();
    for b in batches {
        let kinds = crate::read::row_kinds(&b)?;
        let user = b
            .project(&(1..b.num_columns()).collect::<Vec<_>>())
            .map_err(|e| EngineError::Arrow { table: name.to_string(), message: e.to_string() })?;
        for (kind, row) in kinds.into_iter().zip(crate::read::rows_of(&user, ts)?) {
            let key = crate::index::key_bytes(key_idx.iter().map(|&i| &row[i]));
            let e = out.entry(key).or_insert((None, None));
            match kind.as_str() {
                "-U" | "-D" => e.0 = Some(row),
                _ => e.1 = Some(row),
            }
        }
    }
    Ok(out)
}

/// A key's row at the last commit and now (`None`: no row).
type BeforeAfter = (Option<Vec<Value>>, Option<Vec<Value>>);

/// What the operations of the commit window did to one key.
#[derive(Debug, Clone, Default)]
struct Touched {
    /// The key's row at the last commit.
    before: Option<Vec<Value>>,
    /// The key's row now.
    now: Option<Vec<Value>>,
    /// The window's operations merged from nothing, with the table's merge engine, since the
    /// window's last removing delete: what Paimon must merge into the committed row. For an
    /// aggregation table this is the window's aggregate, not the running total, so a reader
    /// merging it with the earlier files counts each operation once.
    window: Option<Vec<Value>>,
    /// A delete that removes rows happened in the window: Paimon must drop the committed row
    /// before merging `window`.
    reset: bool,
}

impl Touched {
    fn unchanged(before: Option<Vec<Value>>) -> Touched {
        Touched { now: before.clone(), before, window: None, reset: false }
    }

    fn before_after(&self) -> (Option<&Vec<Value>>, Option<&Vec<Value>>) {
        (self.before.as_ref(), self.now.as_ref())
    }
}

/// Row-level bookkeeping of a state table: the merge engine applied to every row operation,
/// so each commit knows every key's row before and after it (changelog) and the lookup index
/// can move to the new rows when the commit succeeds.
pub(crate) struct Tracking {
    table: String,
    merger: Merger,
    index: Arc<Index>,
    /// Every key the window's operations touched.
    touched: BTreeMap<Vec<u8>, Touched>,
    /// Whether commits carry a changelog (`changelog-producer` other than `none`).
    changelog: bool,
    key_idx: Vec<usize>,
    triggers: TableTriggers,
}

impl Tracking {
    pub fn new(ts: &TableSpec, triggers: Vec<Trigger>, index: Arc<Index>) -> Result<Tracking, EngineError> {
        let merger =
            Merger::new(ts).map_err(|message| EngineError::Index { table: ts.name.clone(), message })?;
        let key_idx: Vec<usize> =
            ts.primary_key.iter().map(|k| ts.columns.get_index_of(k).expect("key column")).collect();
        let columns = ts.columns.keys().cloned().collect();
        Ok(Tracking {
            table: ts.name.clone(),
            merger,
            index,
            touched: BTreeMap::new(),
            changelog: ts.options.get("changelog-producer").is_none_or(|v| v != "none"),
            triggers: TableTriggers { triggers, columns, key_idx: key_idx.clone() },
            key_idx,
        })
    }

    fn apply(&mut self, kind: RowKind, row: &[Value]) -> Result<(), EngineError> {
        let key = crate::index::key_bytes(self.key_idx.iter().map(|&i| &row[i]));
        let action = if kind.is_add() { Action::Upsert } else { Action::Delete };
        let t = match self.touched.entry(key) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let before = self.index.get(&self.table, e.key())?;
                e.insert(Touched::unchanged(before))
            }
        };
        t.now = self.merger.apply(t.now.take(), action, row);
        if action == Action::Delete && self.merger.removes_on_delete() {
            t.window = None;
            t.reset = true;
        } else {
            t.window = self.merger.apply(t.window.take(), action, row);
        }
        Ok(())
    }

    /// The rows the pending commit hands Paimon, in key order: for each key whose row changed,
    /// a delete of the committed row when the window reset it (not needed by `deduplicate` when
    /// the window ends with a row, which replaces it anyway), then the window's merged row. A
    /// key whose row ends as it was is not written at all.
    ///
    /// The delete carries the key alone: Paimon's partial-update and aggregation engines start
    /// the key's row again from a delete's values, so any other value would come back.
    fn window_rows(&self) -> impl Iterator<Item = KindRow> + '_ {
        let replaces = self.merger.replaces_rows();
        self.touched.values().filter(|t| t.before != t.now).flat_map(move |t| {
            let delete = match &t.before {
                Some(b) if t.reset && !(replaces && t.window.is_some()) => {
                    let mut key_only = vec![Value::Null; b.len()];
                    for &i in &self.key_idx {
                        key_only[i] = b[i].clone();
                    }
                    Some((RowKind::Delete, key_only))
                }
                _ => None,
            };
            delete.into_iter().chain(t.window.clone().map(|w| (RowKind::Insert, w)))
        })
    }

    /// Trigger firings and arming changes of the pending commit, once committed as `at`
    /// (snapshot id, offset, time).
    fn effects(&self, at: (Option<i64>, u64, i64)) -> Result<Effects, EngineError> {
        let mut out = Effects::default();
        if self.triggers.triggers.is_empty() {
            return Ok(out);
        }
        let mut seqs: HashMap<String, u64> = HashMap::new();
        for t in &self.triggers.triggers {
            seqs.insert(t.name.clone(), self.index.last_seq(&t.name)?);
        }
        for (key, t) in &self.touched {
            let (before, after) = t.before_after();
            if before == after {
                continue;
            }
            // Each key appears once per commit, so its arming is read once, before evaluating.
            let mut armed: HashMap<&str, bool> = HashMap::new();
            for t in &self.triggers.triggers {
                armed.insert(&t.name, self.index.is_armed(&t.name, key)?);
            }
            let is_armed = |name: &str| armed.get(name).copied().unwrap_or(true);
            let mut next = |name: &str| {
                let s = seqs.get_mut(name).expect("trigger seq");
                *s += 1;
                *s
            };
            self.triggers.evaluate(
                &self.table,
                key,
                before.map(Vec::as_slice),
                after.map(Vec::as_slice),
                &is_armed,
                at,
                &mut next,
                &mut out,
            );
        }
        Ok(out)
    }

    /// The changes of the pending commit: (kind, row) in key order, -U before +U.
    fn changes(&self) -> Vec<(RowKind, &Vec<Value>)> {
        let mut out = Vec::new();
        for t in self.touched.values() {
            match t.before_after() {
                (None, Some(a)) => out.push((RowKind::Insert, a)),
                (Some(b), None) => out.push((RowKind::Delete, b)),
                (Some(b), Some(a)) if b != a => {
                    out.push((RowKind::UpdateBefore, b));
                    out.push((RowKind::UpdateAfter, a));
                }
                _ => {}
            }
        }
        out
    }
}

impl TableSink {
    pub async fn open(
        catalog: &Catalog,
        db: &str,
        name: &str,
        with_kind: bool,
        tracking: Option<Tracking>,
        fence: Option<SharedFence>,
    ) -> Result<TableSink, EngineError> {
        let full = format!("{db}.{name}");
        let table = catalog.table(&Identifier::new(db, name)).await.map_err(paimon_err(&full, "open"))?;
        match TableSink::open_table(table.clone(), full.clone(), with_kind, tracking, fence).await {
            Ok(sink) => Ok(sink),
            Err(e) => Err(diagnose(&table, &full, None, e).await),
        }
    }

    async fn open_table(
        mut table: Table,
        full: String,
        with_kind: bool,
        tracking: Option<Tracking>,
        fence: Option<SharedFence>,
    ) -> Result<TableSink, EngineError> {
        if tracking.is_some() {
            // livestate writes the changelog itself (before and after of every change); the
            // `paimon` writer must not add its raw input changelog on top.
            table = table.copy_with_options(HashMap::from([("changelog-producer".into(), "none".into())]));
        }
        let (committed, snapshot_id) =
            match latest_own_snapshot(&table).await.map_err(paimon_err(&full, "find last commit"))? {
                Some(s) => (u64::try_from(s.commit_identifier()).unwrap_or(0), Some(s.id())),
                None => (0, None),
            };
        let wb =
            table.new_write_builder().with_commit_user(COMMIT_USER).map_err(paimon_err(&full, "writer"))?;
        let write = wb.new_write().map_err(paimon_err(&full, "writer"))?;
        let commit = wb.new_commit();
        let schema = rows::write_schema(&table, with_kind).map_err(paimon_err(&full, "schema"))?;
        let commit_lock = CommitLock::default();
        let maintainer = Maintainer::new(table.clone(), full.clone(), commit_lock.clone())?
            .with_fence(fence.clone())
            .with_tag_cache();
        Ok(TableSink {
            name: full,
            table,
            write,
            commit,
            schema,
            pending: Vec::new(),
            dirty: false,
            position: committed,
            committed,
            snapshot_id,
            snapshot_identifier: committed,
            oldest_uncommitted_ms: None,
            window_opened: None,
            commit_lock,
            maintainer,
            fence,
            tracking,
        })
    }

    /// Where the sink stands (see [`SinkProgress`]).
    pub fn progress(&self) -> SinkProgress {
        SinkProgress {
            name: self.name.clone(),
            position: self.position,
            committed: self.committed,
            snapshot_id: self.snapshot_id,
            snapshot_identifier: self.snapshot_identifier,
            oldest_uncommitted_ms: self.oldest_uncommitted_ms,
        }
    }

    /// Applies one row operation: a state table merges it into its key's window (written at
    /// the commit); the archive buffers it and hands Paimon every [`WRITE_BATCH_ROWS`].
    pub async fn push(&mut self, row: KindRow, recorded_at_ms: i64) -> Result<(), EngineError> {
        self.oldest_uncommitted_ms.get_or_insert(recorded_at_ms);
        self.window_opened.get_or_insert_with(std::time::Instant::now);
        if let Some(t) = &mut self.tracking {
            return t.apply(row.0, &row.1);
        }
        self.pending.push(row);
        if self.pending.len() >= WRITE_BATCH_ROWS {
            self.flush().await?;
        }
        Ok(())
    }

    /// Hands Paimon what is buffered: the archive's pending rows, or a state table's window rows.
    async fn flush(&mut self) -> Result<(), EngineError> {
        if let Some(t) = &self.tracking {
            let mut rows = t.window_rows().peekable();
            while rows.peek().is_some() {
                let chunk: Vec<KindRow> = rows.by_ref().take(WRITE_BATCH_ROWS).collect();
                self.dirty |=
                    write_rows(&mut self.write, &self.table, &self.name, &self.schema, &chunk).await?;
            }
            return Ok(());
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        self.dirty |=
            write_rows(&mut self.write, &self.table, &self.name, &self.schema, &self.pending).await?;
        self.pending.clear();
        Ok(())
    }

    /// Whether upserting `row` would set again a row this window removed from a table whose
    /// upserts merge into the row (partial-update, aggregation): such an upsert must go to
    /// Paimon in a later commit than the delete (see `Derivers::apply`).
    pub fn would_revive(&self, row: &[Value]) -> bool {
        let Some(t) = &self.tracking else { return false };
        // Only a table whose deletes remove rows can have a window that reset a key (stock, a
        // partial-update table without deletes, never computes the key here).
        if t.merger.replaces_rows() || !t.merger.removes_on_delete() {
            return false;
        }
        let key = crate::index::key_bytes(t.key_idx.iter().map(|&i| &row[i]));
        t.touched.get(&key).is_some_and(|k| k.reset && k.before.is_some())
    }

    /// Keys the commit window holds (0 for the archive).
    pub fn window_keys(&self) -> usize {
        self.tracking.as_ref().map_or(0, |t| t.touched.len())
    }

    /// The table's name without its database (`stock` for `state.stock`).
    pub fn name_in_spec(&self) -> &str {
        self.name.rsplit_once('.').map_or(self.name.as_str(), |(_, t)| t)
    }

    /// Commits everything applied so far as reflecting every event below `self.position`.
    /// Returns the new snapshot id, or `None` when nothing changed.
    ///
    /// # Errors
    /// Paimon and index errors; [`EngineError::Damaged`] when the table's files are.
    pub async fn commit(&mut self) -> Result<Option<i64>, EngineError> {
        match self.commit_unchecked().await {
            Ok(id) => Ok(id),
            Err(e) => Err(diagnose(&self.table, &self.name, None, e).await),
        }
    }

    async fn commit_unchecked(&mut self) -> Result<Option<i64>, EngineError> {
        self.flush().await?;
        if !self.dirty {
            // Nothing changed (the window's operations left every row as it was): the last
            // snapshot already reflects every event below the position.
            self.committed = self.position;
            self.oldest_uncommitted_ms = None;
            self.window_opened = None;
            self.window_opened = None;
            if let Some(t) = &mut self.tracking {
                t.touched.clear();
            }
            return Ok(None);
        }
        let mut messages =
            self.write.prepare_commit().await.map_err(paimon_err(&self.name, "prepare commit"))?;
        if let Some(t) = self.tracking.as_ref().filter(|t| t.changelog) {
            attach_changelog(&self.table, &self.name, t, &mut messages).await?;
        }
        let identifier = i64::try_from(self.position).expect("record offsets fit i64");
        let _guard = self.commit_lock.lock().await;
        if let Some(f) = &self.fence {
            // Fenced off: nothing is committed; the prepared files stay unreferenced (orphans).
            f.check().await.map_err(|reason| {
                EngineError::Maintenance(livestate_lsm::LsmError::Fenced {
                    table: self.name.clone(),
                    what: "commit",
                    reason,
                })
            })?;
        }
        self.commit
            .commit_with_identifier(messages, identifier)
            .await
            .map_err(paimon_err(&self.name, "commit"))?;
        self.dirty = false;
        self.committed = self.position;
        self.oldest_uncommitted_ms = None;
        self.window_opened = None;
        let latest = self
            .table
            .snapshot_manager()
            .get_latest_snapshot()
            .await
            .map_err(paimon_err(&self.name, "read snapshot"))?;
        let id = latest.as_ref().map(|s| s.id());
        self.snapshot_id = id;
        self.snapshot_identifier = self.position;
        if let Some(t) = &mut self.tracking {
            let committed_at_ms = latest.map(|s| i64::try_from(s.time_millis()).unwrap_or(0));
            let meta = IndexMeta { identifier: self.position, snapshot_id: id, committed_at_ms };
            let effects = t.effects((id, self.position, chrono::Utc::now().timestamp_millis()))?;
            let touched = std::mem::take(&mut t.touched);
            t.index.apply_with(
                &t.table,
                touched.iter().map(|(k, t)| (k.as_slice(), t.now.as_deref())),
                meta,
                &effects,
            )?;
        }
        Ok(id)
    }

    /// Brings the lookup index (and trigger firings) to the table's last commit.
    ///
    /// The index lags only after a crash between a Paimon commit and the index update (or in a
    /// new directory). When the changelog of the missing commits is there, it is replayed
    /// commit by commit, so their trigger firings happen exactly once; otherwise the index is
    /// rebuilt from a full read (and those commits fire nothing).
    ///
    /// # Errors
    /// Paimon or index errors; [`EngineError::Damaged`] when the table's files are.
    pub async fn recover_index(&mut self, ts: &TableSpec) -> Result<(), EngineError> {
        match self.recover_index_unchecked(ts).await {
            Ok(()) => Ok(()),
            Err(e) => Err(diagnose(&self.table, &self.name, None, e).await),
        }
    }

    async fn recover_index_unchecked(&mut self, ts: &TableSpec) -> Result<(), EngineError> {
        let Some(t) = &mut self.tracking else { return Ok(()) };
        let now =
            IndexMeta { identifier: self.committed, snapshot_id: self.snapshot_id, committed_at_ms: None };
        let meta = t.index.meta(&t.table)?;
        if meta.is_some_and(|m| m.identifier == now.identifier) && now.snapshot_id.is_some() {
            return Ok(());
        }
        let sm = self.table.snapshot_manager();
        if let (Some(from), Some(to), true) = (meta.and_then(|m| m.snapshot_id), now.snapshot_id, t.changelog)
        {
            if sm.get_snapshot(from).await.is_ok() {
                for id in from + 1..=to {
                    let Ok(snap) = sm.get_snapshot(id).await else { continue };
                    let changes = changes_of(&self.table, ts, &self.name, id).await?;
                    if changes.is_empty() {
                        continue;
                    }
                    t.touched = changes
                        .into_iter()
                        .map(|(k, (before, now))| (k, Touched { before, now, window: None, reset: false }))
                        .collect();
                    let identifier = u64::try_from(snap.commit_identifier()).unwrap_or(0);
                    let committed_at_ms = i64::try_from(snap.time_millis()).unwrap_or(0);
                    let effects = t.effects((Some(id), identifier, committed_at_ms))?;
                    let touched = std::mem::take(&mut t.touched);
                    let m = IndexMeta {
                        identifier,
                        snapshot_id: Some(id),
                        committed_at_ms: Some(committed_at_ms),
                    };
                    let rows = touched.iter().map(|(k, t)| (k.as_slice(), t.now.as_deref()));
                    t.index.apply_with(&t.table, rows, m, &effects)?;
                }
                if t.index.meta(&t.table)?.is_some_and(|m| m.identifier == now.identifier) {
                    return Ok(());
                }
            }
        }
        let rows = crate::read::scan(&self.table, ts, &[]).await?;
        t.index.rebuild(&t.table, &rows, now)
    }
}

/// Hands `rows` to the Paimon writer as one batch; whether there were any.
async fn write_rows(
    write: &mut TableWrite,
    table: &Table,
    name: &str,
    schema: &Arc<ArrowSchema>,
    rows: &[KindRow],
) -> Result<bool, EngineError> {
    if rows.is_empty() {
        return Ok(false);
    }
    let batch = rows::to_batch(schema, rows)
        .map_err(|message| EngineError::Arrow { table: name.to_string(), message })?;
    if let Err(e) = write.write_arrow_batch(&batch).await {
        let e = paimon_err(name, "write")(e);
        return Err(diagnose(table, name, None, e).await);
    }
    Ok(true)
}

/// Writes the pending commit's changes as Paimon changelog files, one per bucket, and adds
/// them to that bucket's commit message.
async fn attach_changelog(
    table: &Table,
    name: &str,
    t: &Tracking,
    messages: &mut [CommitMessage],
) -> Result<(), EngineError> {
    let changes = t.changes();
    if changes.is_empty() {
        return Ok(());
    }
    let arrow = |message: String| EngineError::Arrow { table: name.to_string(), message };
    let plain = rows::write_schema(table, false).map_err(paimon_err(name, "schema"))?;
    let owned: Vec<KindRow> = changes.iter().map(|(k, r)| (*k, (*r).clone())).collect();
    let user = rows::to_batch(&plain, &owned).map_err(arrow)?;
    let fields = table.schema().fields();
    let buckets: i32 = table.schema().options().get("bucket").and_then(|b| b.parse().ok()).unwrap_or(1);
    let mut by_bucket: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
    for i in 0..user.num_rows() {
        let key = BinaryRow::from_arrow(&user, i, &t.key_idx, fields).map_err(paimon_err(name, "bucket"))?;
        by_bucket.entry((key.hash_code() % buckets).wrapping_abs()).or_default().push(i as u32);
    }
    let physical = livestate_lsm::kvfile::physical_schema(table, name)?;
    for (bucket, idx) in by_bucket {
        let message = messages.iter_mut().find(|m| m.bucket == bucket).ok_or_else(|| EngineError::Arrow {
            table: name.to_string(),
            message: format!("a change in bucket {bucket}, which this commit wrote nothing to"),
        })?;
        let seq = message.new_files.iter().map(|f| f.max_sequence_number).max().unwrap_or(0);
        let take = UInt32Array::from(idx.clone());
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![seq; idx.len()])),
            Arc::new(Int8Array::from(
                idx.iter().map(|&i| owned[i as usize].0.to_value()).collect::<Vec<_>>(),
            )),
        ];
        for c in user.columns() {
            columns
                .push(arrow_select::take::take(c.as_ref(), &take, None).map_err(|e| arrow(e.to_string()))?);
        }
        let batch = RecordBatch::try_new(physical.clone(), columns).map_err(|e| arrow(e.to_string()))?;
        // Files are sorted by primary key (their min/max keys say so); -U stays before +U.
        let mut sort: Vec<SortColumn> = t
            .key_idx
            .iter()
            .map(|&k| SortColumn { values: batch.column(k + 2).clone(), options: None })
            .collect();
        sort.push(SortColumn {
            values: Arc::new(UInt32Array::from_iter_values(0..idx.len() as u32)),
            options: None,
        });
        let order = lexsort_to_indices(&sort, None).map_err(|e| arrow(e.to_string()))?;
        let batch =
            arrow_select::take::take_record_batch(&batch, &order).map_err(|e| arrow(e.to_string()))?;
        let bucket_path = format!("{}/bucket-{bucket}", table.location().trim_end_matches('/'));
        let file = livestate_lsm::kvfile::write_changelog(table, name, &bucket_path, &batch, 0).await?;
        message.new_changelog_files.push(file);
    }
    Ok(())
}
