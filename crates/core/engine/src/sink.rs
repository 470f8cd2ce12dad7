//! One long-lived Paimon writer per table whose commit identifier is the record offset it reflects.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_schema::Schema as ArrowSchema;
use livestate_lsm::{CommitLock, Level0Writer, Maintainer, SharedFence};
use livestate_spec::{TableSpec, Value};
use paimon::catalog::Identifier;
use paimon::spec::Snapshot;
use paimon::{CommitMessage, Table, TableCommit, TableWrite};
use tokio::task::JoinHandle;

use crate::error::{paimon_err, shape_err, EngineError};
use crate::index::IndexMeta;
use crate::rows::{self, KindRow};
use crate::schema::{latest_own_snapshot, COMMIT_USER};
use crate::spend::{SpendMeter, TableSpend};
use crate::verify::diagnose;
use crate::window::{ClosedWindow, Tracking};
use crate::Catalog;

/// Rows buffered before they are handed to the Paimon writer (and rows per batch handed over).
const WRITE_BATCH_ROWS: usize = 8192;

/// Keys a state table's commit window may hold: a table with this many is committed at the next
/// step whatever its budget says, so the window's memory has a ceiling however many distinct
/// keys a burst touches.
pub(crate) const MAX_WINDOW_KEYS: usize = 65_536;

/// How old a table's commit window is: what decides when it is due.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WindowAge {
    /// When this process applied the window's first event.
    pub opened: Option<Instant>,
    /// When the window's oldest event was recorded (ms since the epoch).
    pub oldest_recorded_ms: Option<i64>,
}

impl WindowAge {
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

    /// How long until [`WindowAge::due`] says the window is due (zero once it is); `None` for an
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

/// Each table's locks in this process (full names, `state.stock`): the commit lock, taken by
/// every commit to the table (a deriver's, its maintainers', and those of the maintainers
/// [`crate::Livestate::maintainer`] opens), and the writer lock, held by the one sink that writes
/// the table, for as long as its writer lives (on a task too: a commit still running after its
/// deriver was dropped, the archive's task finishing what it was handed).
#[derive(Default)]
pub(crate) struct TableLocks(std::sync::Mutex<HashMap<String, (CommitLock, CommitLock)>>);

impl TableLocks {
    fn both(&self, table: &str) -> (CommitLock, CommitLock) {
        let mut locks = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        locks.entry(table.to_string()).or_default().clone()
    }

    /// The commit lock of `table`.
    pub fn commit(&self, table: &str) -> CommitLock {
        self.both(table).0
    }

    /// The writer lock of `table`.
    fn writer(&self, table: &str) -> CommitLock {
        self.both(table).1
    }
}

/// How long opening a sink waits for the table's previous writer in this process to finish.
const WRITER_PATIENCE: Duration = Duration::from_secs(60);

/// Where a sink stands, as its status reports it (the archive's task publishes it).
#[derive(Debug, Clone)]
pub(crate) struct SinkProgress {
    pub name: String,
    pub position: u64,
    pub committed: u64,
    pub snapshot_id: Option<i64>,
    pub snapshot_identifier: u64,
    /// Events were applied that no finished commit reflects yet.
    pub pending: bool,
    /// What its commits and compactions cost.
    pub spend: TableSpend,
}

impl SinkProgress {
    /// The offset below which the latest snapshot reflects every event: the position itself when
    /// nothing was applied since the last commit (the events since touched no row of this table),
    /// else the last commit's.
    pub fn checked_through(&self) -> u64 {
        if self.pending {
            self.committed
        } else {
            self.position.max(self.committed)
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
/// each changed key's window once ([`ClosedWindow::rows`]), so Paimon receives at most one row
/// per key per commit (an upsert that would set again a row its window removed commits the
/// table first, so a reset key's delete goes alone). A state table's commit runs on a task of
/// its own ([`TableSink::start_commit`]) while the next window fills; at most one runs at a
/// time, and it holds the table's commit lock from start to end.
pub(crate) struct TableSink {
    name: String,
    table: Table,
    /// The Paimon writer and committer; with the running commit's task while it runs.
    writer: Option<Writer>,
    /// A state table's commit running on a task of its own.
    running: Option<Running>,
    schema: Arc<ArrowSchema>,
    /// The archive's rows not yet handed to the writer.
    pending: Vec<RecordBatch>,
    /// Next record offset to apply. Only moves forward ([`TableSink::advance_to`]), and
    /// is never below `committed`.
    position: u64,
    /// Offset reflected by the latest committed snapshot.
    committed: u64,
    snapshot_id: Option<i64>,
    /// Commit identifier of `snapshot_id` (`committed` may have been raised past it on open).
    snapshot_identifier: u64,
    /// When the oldest event not yet committed was recorded (ms since the epoch).
    oldest_uncommitted_ms: Option<i64>,
    /// When this process applied the first event not yet committed (the window's start on this
    /// process's clock, whatever the event's recorded time).
    window_opened: Option<Instant>,
    /// Taken by every commit to the table, data or compaction (shared by every writer of the
    /// table in this process: [`crate::Livestate`] hands it out).
    commit_lock: CommitLock,
    /// Compaction, expiry and orphan cleanup of this table.
    maintainer: Maintainer,
    /// State tables: each key's row before and after what is applied but not committed.
    tracking: Option<Tracking>,
    /// What the table's commits and compactions cost (its commit task and upkeep add to it).
    spend: SpendMeter,
}

/// How a writer turns rows into data files.
enum Files {
    /// Through the `paimon` crate's writer (the archive, an append table).
    Crate(Box<TableWrite>),
    /// As livestate's own level-0 files, one per bucket per commit: a state table's closed
    /// window holds one merged row per key, so the crate's write buffer, which sorted and merged
    /// the rows again one key at a time, had nothing left to merge (docs/formats/lsm.md).
    Level0 {
        writer: Box<Level0Writer>,
        /// The table's columns (no `_VALUE_KIND`: the kinds go beside the batch).
        columns: Arc<ArrowSchema>,
    },
}

/// The Paimon side of a sink, which a running commit takes with it.
struct Writer {
    table: Table,
    name: String,
    files: Files,
    commit: TableCommit,
    fence: Option<SharedFence>,
    /// Rows were handed to `write` since the last commit.
    dirty: bool,
    spend: SpendMeter,
    /// The table's writer lock, for as long as this writer lives.
    _writing: tokio::sync::OwnedMutexGuard<()>,
}

/// A commit running on a task: the offset it reflects and the task, which gives the writer back
/// with the new snapshot id (`None`: nothing changed, no snapshot).
struct Running {
    position: u64,
    task: JoinHandle<(Writer, Result<Option<i64>, EngineError>)>,
}

impl TableSink {
    pub async fn open(
        catalog: &Catalog,
        db: &str,
        name: &str,
        with_kind: bool,
        tracking: Option<Tracking>,
        locks: &TableLocks,
        fence: Option<SharedFence>,
    ) -> Result<TableSink, EngineError> {
        let full = format!("{db}.{name}");
        let table = catalog.table(&Identifier::new(db, name)).await.map_err(paimon_err(&full, "open"))?;
        // The previous writer of this table in this process (a dropped deriver's commit or
        // archive task) finishes first, so this one starts from the snapshot it made.
        let writing =
            tokio::time::timeout(WRITER_PATIENCE, locks.writer(&full).lock_owned()).await.map_err(|_| {
                EngineError::Derivation {
                    offset: 0,
                    message: format!(
                        "{full} is still written by another deriver of this process after {} s",
                        WRITER_PATIENCE.as_secs()
                    ),
                }
            })?;
        let commit_lock = locks.commit(&full);
        match TableSink::open_table(
            table.clone(),
            full.clone(),
            with_kind,
            tracking,
            commit_lock,
            fence,
            writing,
        )
        .await
        {
            Ok(sink) => Ok(sink),
            Err(e) => Err(diagnose(&table, &full, None, e).await),
        }
    }

    async fn open_table(
        mut table: Table,
        full: String,
        with_kind: bool,
        tracking: Option<Tracking>,
        commit_lock: CommitLock,
        fence: Option<SharedFence>,
        writing: tokio::sync::OwnedMutexGuard<()>,
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
        let files = if tracking.is_some() {
            Files::Level0 {
                writer: Box::new(Level0Writer::open(&table, &full).await?),
                columns: rows::write_schema(&table, false).map_err(paimon_err(&full, "schema"))?,
            }
        } else {
            Files::Crate(Box::new(wb.new_write().map_err(paimon_err(&full, "writer"))?))
        };
        let commit = wb.new_commit();
        let schema = rows::write_schema(&table, with_kind).map_err(paimon_err(&full, "schema"))?;
        let maintainer = Maintainer::new(table.clone(), full.clone(), commit_lock.clone())?
            .with_fence(fence.clone())
            .with_tag_cache();
        let spend = SpendMeter::new(chrono::Utc::now().timestamp_millis());
        let writer = Writer {
            table: table.clone(),
            name: full.clone(),
            files,
            commit,
            fence: fence.clone(),
            dirty: false,
            spend: spend.clone(),
            _writing: writing,
        };
        Ok(TableSink {
            name: full,
            table,
            writer: Some(writer),
            running: None,
            schema,
            pending: Vec::new(),
            position: committed,
            committed,
            snapshot_id,
            snapshot_identifier: committed,
            oldest_uncommitted_ms: None,
            window_opened: None,
            commit_lock,
            maintainer,
            tracking,
            spend,
        })
    }

    /// Where the sink stands (see [`SinkProgress`]).
    /// The next record offset to apply.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The offset the latest committed snapshot reflects.
    pub fn committed_through(&self) -> u64 {
        self.committed
    }

    /// The latest snapshot this sink committed (or found on open), if any.
    pub fn snapshot_id(&self) -> Option<i64> {
        self.snapshot_id
    }

    /// How long the window of applied, uncommitted events has been open.
    pub fn window_age(&self) -> WindowAge {
        WindowAge { opened: self.window_opened, oldest_recorded_ms: self.oldest_uncommitted_ms }
    }

    /// Every event below `end` has been applied (or touches no row of the table): the position
    /// moves there, never back.
    pub fn advance_to(&mut self, end: u64) {
        self.position = self.position.max(end);
    }

    /// On open: the status file says the table was checked through `through` past its last
    /// snapshot (events that did not touch it); trusted only while that snapshot is still the
    /// table's latest and only to move forward.
    pub fn trust_checked(&mut self, p: &crate::status::TableProgress) {
        if p.still_holds(self.snapshot_id, self.snapshot_identifier) && p.through > self.position {
            self.position = p.through;
            self.committed = p.through;
        }
    }

    pub fn progress(&self) -> SinkProgress {
        SinkProgress {
            name: self.name.clone(),
            position: self.position,
            committed: self.committed,
            snapshot_id: self.snapshot_id,
            snapshot_identifier: self.snapshot_identifier,
            pending: self.oldest_uncommitted_ms.is_some() || self.running.is_some(),
            spend: self.spend.read(chrono::Utc::now().timestamp_millis()),
        }
    }

    /// Applies one row operation to a state table: it merges into its key's window, written
    /// at the commit.
    pub fn push(&mut self, row: KindRow, recorded_at_ms: i64) -> Result<(), EngineError> {
        self.oldest_uncommitted_ms.get_or_insert(recorded_at_ms);
        self.window_opened.get_or_insert_with(Instant::now);
        let t = self.tracking.as_mut().expect("row operations go to state tables");
        t.apply(row.0, row.1)
    }

    /// Adds archive rows (of this sink's Arrow schema) whose oldest was recorded at
    /// `oldest_recorded_ms`; they are handed to Paimon every [`WRITE_BATCH_ROWS`].
    pub async fn push_batch(
        &mut self,
        batch: RecordBatch,
        oldest_recorded_ms: i64,
    ) -> Result<(), EngineError> {
        debug_assert!(self.tracking.is_none(), "batches go to the archive");
        self.oldest_uncommitted_ms.get_or_insert(oldest_recorded_ms);
        self.window_opened.get_or_insert_with(Instant::now);
        self.pending.push(batch);
        if self.pending.iter().map(RecordBatch::num_rows).sum::<usize>() >= WRITE_BATCH_ROWS {
            self.flush().await?;
        }
        Ok(())
    }

    /// The table's full name (`state.stock`, `record.events`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Compaction, expiry and orphan cleanup of the table (what its upkeep runs).
    pub fn maintainer(&self) -> &Maintainer {
        &self.maintainer
    }

    /// What the table's commits, compactions and derivation cost.
    pub fn spend(&self) -> &SpendMeter {
        &self.spend
    }

    /// The Arrow schema of the rows this sink writes.
    pub fn arrow_schema(&self) -> Arc<ArrowSchema> {
        Arc::clone(&self.schema)
    }

    /// Hands Paimon the archive's buffered rows, as one batch.
    async fn flush(&mut self) -> Result<(), EngineError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = arrow_select::concat::concat_batches(&self.schema, &self.pending)
            .map_err(|source| EngineError::Arrow { table: self.name.clone(), source })?;
        self.pending.clear();
        let w = self.writer.as_mut().expect("the archive commits in place");
        let Files::Crate(write) = &mut w.files else { unreachable!("the archive writes through the crate") };
        if let Err(e) = write.write_arrow_batch(&batch).await {
            let e = paimon_err(&self.name, "write")(e);
            return Err(diagnose(&self.table, &self.name, None, e).await);
        }
        w.dirty = true;
        Ok(())
    }

    /// Whether upserting `row` would set again a row this window removed from a table whose
    /// upserts merge into the row (partial-update, aggregation): such an upsert must go to
    /// Paimon in a later commit than the delete (see `Derivers::apply`).
    pub fn would_revive(&self, row: &[Value]) -> bool {
        self.tracking.as_ref().is_some_and(|t| t.would_revive(row))
    }

    /// Keys the commit window holds (0 for the archive).
    pub fn window_keys(&self) -> usize {
        self.tracking.as_ref().map_or(0, Tracking::keys)
    }

    /// The table's name without its database (`stock` for `state.stock`).
    pub fn name_in_spec(&self) -> &str {
        self.name.rsplit_once('.').map_or(self.name.as_str(), |(_, t)| t)
    }

    /// Commits everything applied so far as reflecting every event below `self.position`, and
    /// waits for it. Returns the new snapshot id, or `None` when nothing changed (a commit that
    /// was already running is waited for first; its snapshot is not returned).
    ///
    /// # Errors
    /// Paimon and index errors; [`EngineError::Damaged`] when the table's files are.
    pub async fn commit(&mut self) -> Result<Option<i64>, EngineError> {
        if self.tracking.is_some() {
            self.finish_commit().await?;
            self.start_commit().await?;
            return self.finish_commit().await;
        }
        self.flush().await?;
        let w = self.writer.as_mut().expect("the archive commits in place");
        let id = commit_writer(w, None, None, self.position, Some(&self.commit_lock), Instant::now())
            .await?
            .map(|s| s.id());
        self.record_commit(self.position, id);
        self.oldest_uncommitted_ms = None;
        self.window_opened = None;
        Ok(id)
    }

    /// Starts committing a state table's window as reflecting every event below the position, on
    /// a task of its own, after the commit that runs (if any) has finished. The window closes;
    /// the next one fills meanwhile. [`TableSink::finish_commit`] collects the result.
    ///
    /// # Errors
    /// The commit that was running failed.
    pub async fn start_commit(&mut self) -> Result<(), EngineError> {
        self.finish_commit().await?;
        let t = self.tracking.as_mut().expect("a state table");
        if t.keys() == 0 {
            // Nothing applied touched the table: the last snapshot reflects every event below
            // the position already.
            self.committed = self.position;
            self.oldest_uncommitted_ms = None;
            self.window_opened = None;
            return Ok(());
        }
        let window = t.close();
        let mut w = self.writer.take().expect("no commit runs");
        let (position, lock, spend) = (self.position, Arc::clone(&self.commit_lock), self.spend.clone());
        let task = tokio::spawn(async move {
            // The lock first: it is held from the window's rows to the index, so a deriver
            // opened on this table meanwhile waits for this commit.
            let guard = lock.lock_owned().await;
            let (r, cpu) = crate::spend::cpu_timed(commit_window(&mut w, &window, position, guard)).await;
            if matches!(r, Ok(Some(_))) {
                spend.commit_cpu(chrono::Utc::now().timestamp_millis(), cpu);
            }
            (w, r)
        });
        self.running = Some(Running { position, task });
        self.oldest_uncommitted_ms = None;
        self.window_opened = None;
        Ok(())
    }

    /// Whether a running commit has finished (collect it with [`TableSink::finish_commit`]).
    pub fn commit_finished(&self) -> bool {
        self.running.as_ref().is_some_and(|r| r.task.is_finished())
    }

    /// Waits for the running commit, if any: the snapshot it made, if it made one.
    ///
    /// # Errors
    /// Paimon and index errors of that commit; [`EngineError::Damaged`] when the table's files are.
    pub async fn finish_commit(&mut self) -> Result<Option<i64>, EngineError> {
        let Some(running) = self.running.take() else { return Ok(None) };
        let (writer, outcome) = running
            .task
            .await
            .map_err(|source| EngineError::Task { what: format!("the commit of {}", self.name), source })?;
        self.writer = Some(writer);
        if let Some(t) = &mut self.tracking {
            t.closed(outcome.is_ok());
        }
        let id = match outcome {
            Ok(id) => id,
            Err(e) => return Err(diagnose(&self.table, &self.name, None, e).await),
        };
        self.record_commit(running.position, id);
        Ok(id)
    }

    fn record_commit(&mut self, position: u64, snapshot: Option<i64>) {
        self.committed = position;
        if let Some(id) = snapshot {
            self.snapshot_id = Some(id);
            self.snapshot_identifier = position;
        }
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
        match self.recover_index_undiagnosed(ts).await {
            Ok(()) => Ok(()),
            Err(e) => Err(diagnose(&self.table, &self.name, None, e).await),
        }
    }

    /// [`Self::recover_index`] before a failure is diagnosed (checked for damaged files).
    async fn recover_index_undiagnosed(&mut self, ts: &TableSpec) -> Result<(), EngineError> {
        let Some(t) = &mut self.tracking else { return Ok(()) };
        let (index, table) = (Arc::clone(&t.rules().index), t.rules().table.clone());
        let now =
            IndexMeta { identifier: self.committed, snapshot_id: self.snapshot_id, committed_at_ms: None };
        let meta = index.meta(&table)?;
        if meta.is_some_and(|m| m.identifier == now.identifier) && now.snapshot_id.is_some() {
            return Ok(());
        }
        let sm = self.table.snapshot_manager();
        if let (Some(from), Some(to), true) =
            (meta.and_then(|m| m.snapshot_id), now.snapshot_id, t.rules().changelog)
        {
            if sm.get_snapshot(from).await.is_ok() {
                for id in from + 1..=to {
                    let Ok(snap) = sm.get_snapshot(id).await else { continue };
                    let changes = crate::changelog::changes_of(&self.table, ts, &self.name, id).await?;
                    if changes.is_empty() {
                        continue;
                    }
                    let identifier = u64::try_from(snap.commit_identifier()).unwrap_or(0);
                    let committed_at_ms = i64::try_from(snap.time_millis()).unwrap_or(0);
                    let m = IndexMeta {
                        identifier,
                        snapshot_id: Some(id),
                        committed_at_ms: Some(committed_at_ms),
                    };
                    t.recovered(changes).apply_to_index(m, committed_at_ms)?;
                }
                if index.meta(&table)?.is_some_and(|m| m.identifier == now.identifier) {
                    return Ok(());
                }
            }
        }
        let rows = crate::read::scan(&self.table, ts, &[]).await?;
        index.rebuild(&table, &rows, now)
    }
}

/// A state table's commit, on its task: the window's rows to Paimon, its changelog, the commit,
/// then the lookup index and triggers. The new snapshot, `None` when the window changed no row.
async fn commit_window(
    w: &mut Writer,
    window: &ClosedWindow,
    position: u64,
    lock: tokio::sync::OwnedMutexGuard<()>,
) -> Result<Option<i64>, EngineError> {
    let started = Instant::now();
    let Files::Level0 { writer, columns } = &mut w.files else {
        unreachable!("a state table writes level-0 files")
    };
    // The whole window as one batch, so each bucket gets one file per commit (a window holds
    // at most `MAX_WINDOW_KEYS` keys, a row each, and a removed key's delete).
    let rows: Vec<_> = window.rows().collect();
    let messages = if rows.is_empty() {
        Vec::new()
    } else {
        let kinds: Vec<paimon::spec::RowKind> = rows.iter().map(|(k, _)| *k).collect();
        let batch = rows::to_batch(columns, &rows).map_err(shape_err(&w.name))?;
        drop(rows);
        writer.write(&batch, &kinds).await?
    };
    w.dirty = !messages.is_empty();
    let snapshot = commit_writer(w, Some(messages), Some(window), position, None, started).await?;
    let id = snapshot.as_ref().map(Snapshot::id);
    if let Some(s) = snapshot {
        let committed_at_ms = Some(i64::try_from(s.time_millis()).unwrap_or(0));
        let meta = IndexMeta { identifier: position, snapshot_id: Some(s.id()), committed_at_ms };
        window.apply_to_index(meta, chrono::Utc::now().timestamp_millis())?;
    }
    drop(lock);
    Ok(id)
}

/// Commits what `w` was handed (a state table: the `written` level-0 files, with `window`'s
/// changelog) with identifier `position`, under the table's commit lock (`lock`, or the caller
/// holds it); the new snapshot, `None` when nothing was handed over. The table's spend meter
/// counts the commit, its files and the time since `started` (when its rows were first handed
/// over).
async fn commit_writer(
    w: &mut Writer,
    written: Option<Vec<CommitMessage>>,
    window: Option<&ClosedWindow>,
    position: u64,
    lock: Option<&CommitLock>,
    started: Instant,
) -> Result<Option<Snapshot>, EngineError> {
    if !w.dirty {
        // Nothing changed (the window's operations left every row as it was): the last
        // snapshot already reflects every event below the position.
        return Ok(None);
    }
    let mut messages = match (&mut w.files, written) {
        (_, Some(messages)) => messages,
        (Files::Crate(write), None) => {
            write.prepare_commit().await.map_err(paimon_err(&w.name, "prepare commit"))?
        }
        (Files::Level0 { .. }, None) => unreachable!("a state table commits the files its window wrote"),
    };
    if let Some(window) = window.filter(|win| win.rules().changelog) {
        crate::changelog::attach(&w.table, &w.name, window, &mut messages).await?;
    }
    let identifier = i64::try_from(position).expect("record offsets fit i64");
    let (files, bytes) = messages
        .iter()
        .flat_map(|m| m.new_files.iter().chain(&m.new_changelog_files))
        .fold((0u64, 0u64), |(n, b), f| (n + 1, b + u64::try_from(f.file_size).unwrap_or(0)));
    let _guard = match lock {
        Some(l) => Some(l.lock().await),
        None => None,
    };
    if let Some(f) = &w.fence {
        // Fenced off: nothing is committed; the prepared files stay unreferenced (orphans).
        f.check().await.map_err(|reason| {
            EngineError::Maintenance(livestate_lsm::LsmError::Fenced {
                table: w.name.clone(),
                what: "commit",
                reason,
            })
        })?;
    }
    w.commit.commit_with_identifier(messages, identifier).await.map_err(paimon_err(&w.name, "commit"))?;
    w.dirty = false;
    w.spend.commit(chrono::Utc::now().timestamp_millis(), files, bytes, started.elapsed());
    // Under the lock, the latest snapshot is this commit's.
    w.table.snapshot_manager().get_latest_snapshot().await.map_err(paimon_err(&w.name, "read snapshot"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_backlog_commits_by_how_long_its_window_is_open_not_by_how_old_its_events_are() {
        let now_ms = 1_000_000;
        let just_opened =
            WindowAge { opened: Some(Instant::now()), oldest_recorded_ms: Some(now_ms - 60_000) };
        // Following, a minute-old event makes the window due at once.
        assert!(just_opened.due(false, now_ms, 125 * MS, 500 * MS));
        // Behind, the same window waits until it has been open half the budget.
        assert!(!just_opened.due(true, now_ms, 125 * MS, 500 * MS));
        let open_long = WindowAge { opened: Instant::now().checked_sub(600 * MS), ..just_opened };
        assert!(open_long.due(true, now_ms, 125 * MS, 500 * MS));
        let fresh = WindowAge { opened: Some(Instant::now()), oldest_recorded_ms: Some(now_ms - 10) };
        assert!(!fresh.due(false, now_ms, 125 * MS, 500 * MS), "a window younger than the interval waits");
        let empty = WindowAge { opened: None, oldest_recorded_ms: None };
        assert!(!empty.due(false, now_ms, Duration::ZERO, Duration::ZERO));
        assert!(!empty.due(true, now_ms, Duration::ZERO, Duration::ZERO));
    }

    #[test]
    fn how_long_until_a_window_is_due_agrees_with_whether_it_is() {
        let now_ms = 1_000_000;
        let w = WindowAge { opened: Some(Instant::now()), oldest_recorded_ms: Some(now_ms - 100) };
        let left = w.due_in(false, now_ms, 1000 * MS, 1000 * MS).unwrap();
        assert_eq!(left, 900 * MS);
        assert_eq!(w.due_in(false, now_ms + 900, 1000 * MS, 1000 * MS), Some(Duration::ZERO));
        assert!(w.due(false, now_ms + 900, 1000 * MS, 1000 * MS));
        let behind = w.due_in(true, now_ms, 1000 * MS, 1000 * MS).unwrap();
        assert!(behind > 900 * MS && behind <= 1000 * MS, "{behind:?}");
        let old = WindowAge { opened: Instant::now().checked_sub(2000 * MS), ..w };
        assert_eq!(old.due_in(true, now_ms, 1000 * MS, 1000 * MS), Some(Duration::ZERO));
        let empty = WindowAge { opened: None, oldest_recorded_ms: None };
        assert_eq!(empty.due_in(false, now_ms, 1000 * MS, 1000 * MS), None);
    }
}
