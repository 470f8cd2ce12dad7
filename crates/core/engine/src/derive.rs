//! Derivation: the record, folded into every state table (and the archive), exactly once.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use livestate_record::Record;
use livestate_spec::{Action, CompanySpec, Freshness, Value};
use paimon::spec::RowKind;

use crate::archive::Archive;
use crate::decode::{Decoded, Decoder};
use crate::error::EngineError;
use crate::index::Index;
use crate::layout::Layout;
use crate::quarantine::{Quarantine, Quarantined};
use crate::schema::{ARCHIVE_TABLE, RECORD_DB, STATE_DB};
use crate::sink::{TableLocks, TableSink};
use crate::spend::{apportion, cpu_timed};
use crate::status::{Status, TableProgress};
use crate::tail::{Tail, Taken};
use crate::upkeep::{collect_with_upkeep, commit_with_upkeep, Upkeep};
use crate::window::Tracking;
use crate::Catalog;

/// Events read from the record per step.
const READ_CHUNK: usize = crate::decode::CHUNK;

/// Default for how many events a catch-up applies between intermediate commits.
pub const CATCH_UP_COMMIT_EVENTS: u64 = 50_000;

/// How far a derivation pass got.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeriveReport {
    /// Events read from the record in this pass.
    pub events: u64,
    /// Rows written, summed over tables.
    pub rows: u64,
    /// Snapshots committed, summed over tables.
    pub commits: u64,
    /// The record offset every table now reflects.
    pub through: u64,
}

/// What a consistency barrier committed: every named table reflects exactly the events below
/// `offset`, in the snapshot given for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Barrier {
    pub offset: u64,
    pub snapshots: Vec<(String, Option<i64>)>,
}

/// Progress of a catch-up: events applied and the total to apply.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
}

/// The derivers of one directory: a sink per state table livestate derives (in spec order;
/// none for `derived_by = "external"` tables) plus the archive, sharing one pass over the
/// record. Each sink starts where its own last commit left off.
pub struct Derivers {
    layout: Layout,
    /// One per state table livestate derives, in commit order (`commit_order`: spec order, a
    /// table that looks up another before it).
    tables: Vec<StateSink>,
    /// By slot in `tables`: the tables whose mappings look that table up, directly or through
    /// another lookup, in commit order (they all come before it).
    readers: Vec<Vec<usize>>,
    /// Indexed like `spec.tables`: the position in `tables` of each table's sink (`None` for a
    /// table another engine derives).
    sink_of: Vec<Option<usize>>,
    /// The `record.events` archive, written on a task of its own (`None` in a twin that
    /// re-derives tables, see `rederive`).
    archive: Option<Archive>,
    /// Answers lookup joins: each table's rows as of its last commit.
    index: Arc<Index>,
    /// Reads and types the record ahead of the derivers, on a thread of its own (started at the
    /// first chunk; started anew if the derivers' position moves elsewhere or after an error).
    decoder: Option<Decoder>,
    /// The events this process appended, typed (the decode stage only catches up below it).
    tail: Arc<Tail>,
    /// Row operations that failed, set aside (written before any commit covering them).
    quarantine: Quarantine,
    /// By slot in `tables`: row operations applied in the current chunk (to share its CPU time).
    ops_in_chunk: Vec<u64>,
}

/// How long the derivers wait for an acknowledged event to reach the tail before they read it
/// from the record (its append returned and pushes it at once; this only guards liveness).
const TAIL_PATIENCE: Duration = Duration::from_millis(20);

struct StateSink {
    freshness: Freshness,
    sink: TableSink,
    /// When a nightly table last committed.
    last_nightly_commit: Option<chrono::DateTime<chrono::Utc>>,
    upkeep: Upkeep,
}

impl StateSink {
    /// Collects the table's running commit when it has finished (or waits for it, `wait`), and
    /// runs the upkeep its budget asks after a commit (`inline`: in place, at catch-up and
    /// shutdown); the snapshots made (0 or 1).
    async fn collect(&mut self, wait: bool, inline: bool) -> Result<u64, EngineError> {
        collect_with_upkeep(&mut self.sink, &mut self.upkeep, wait, inline).await
    }

    /// Starts committing what the table has pending, on a task of its own, after the commit
    /// that runs (collected here), with the upkeep its budget asks before; the snapshots the
    /// collected commit made.
    async fn start_commit(&mut self) -> Result<u64, EngineError> {
        let made = self.collect(true, false).await?;
        self.upkeep.before_commit(self.sink.maintainer()).await;
        self.sink.start_commit().await?;
        Ok(made)
    }

    /// Commits what the table has pending and waits for it; the snapshots made since the last
    /// collection (the commit that was running and this one).
    async fn commit(&mut self, inline: bool) -> Result<u64, EngineError> {
        commit_with_upkeep(&mut self.sink, &mut self.upkeep, inline).await
    }
}

/// Where derivers write.
pub(crate) struct Target<'a> {
    pub catalog: &'a Catalog,
    /// The directory whose quarantine and status file they keep.
    pub layout: &'a Layout,
    /// Checked before every commit (the warehouse lease), if any.
    pub fence: Option<livestate_lsm::SharedFence>,
    /// Whether they write the `record.events` archive (not in a re-derivation's twin).
    pub archive: bool,
}

impl Derivers {
    pub(crate) async fn open(
        target: Target<'_>,
        spec: &CompanySpec,
        index: &Arc<Index>,
        tail: &Arc<Tail>,
        locks: &TableLocks,
    ) -> Result<Derivers, EngineError> {
        let Target { catalog, layout, fence, archive: with_archive } = target;
        let mut tables = Vec::new();
        let mut sink_of = Vec::with_capacity(spec.tables.len());
        for t in spec.tables.values() {
            if !t.derived_here() {
                sink_of.push(None);
                continue;
            }
            sink_of.push(Some(tables.len()));
            let triggers = spec.triggers.values().filter(|tr| tr.table == t.name).cloned().collect();
            let tracking = Tracking::new(t, triggers, Arc::clone(index))?;
            let mut sink =
                TableSink::open(catalog, STATE_DB, &t.name, true, Some(tracking), locks, fence.clone())
                    .await?;
            sink.recover_index(t).await?;
            let upkeep = Upkeep::new(&t.freshness, sink.spend().clone());
            tables.push(StateSink { freshness: t.freshness, sink, last_nightly_commit: None, upkeep });
        }
        let mut archive = match with_archive {
            true => {
                Some(TableSink::open(catalog, RECORD_DB, ARCHIVE_TABLE, false, None, locks, fence).await?)
            }
            false => None,
        };
        // This process holds the write lock and no writer has written yet, so every file no
        // snapshot or tag references is left over from a crash: remove it now.
        let now = chrono::Utc::now().timestamp_millis();
        // (Maintainers are cloned out: a sink is not `Sync`, so no borrow of one may live across
        // an await in a future that must be `Send`.)
        let maintainers: Vec<(String, livestate_lsm::Maintainer)> = tables
            .iter()
            .map(|t| &t.sink)
            .chain(archive.as_ref())
            .map(|s| (s.name().to_string(), s.maintainer().clone()))
            .collect();
        for (name, maintainer) in maintainers {
            let removed = maintainer.remove_orphans(Duration::ZERO, now).await?;
            if removed.files > 0 {
                tracing::info!(table = %name, files = removed.files, "removed files left by an earlier crash");
            }
        }
        // The status file may say a table was checked past its last snapshot (events that did not
        // touch it). It is trusted only while that snapshot is still the table's latest.
        if let Some(status) = Status::load(layout) {
            for s in tables.iter_mut().map(|t| &mut t.sink).chain(archive.as_mut()) {
                if let Some(p) = status.tables.get(s.name()) {
                    s.trust_checked(p);
                }
            }
        }
        // Commit order: a table whose mappings look up another commits before it (see
        // `commit_order`); `sink_of` and the lookups follow the tables to their new slots.
        let looked_up = lookups_by_slot(spec, &tables);
        let order = commit_order(&looked_up);
        let mut slot_of_old = vec![0; order.len()];
        for (new, &old) in order.iter().enumerate() {
            slot_of_old[old] = new;
        }
        let mut ranked: Vec<(usize, StateSink)> =
            tables.into_iter().enumerate().map(|(old, t)| (slot_of_old[old], t)).collect();
        ranked.sort_unstable_by_key(|(slot, _)| *slot);
        let tables: Vec<StateSink> = ranked.into_iter().map(|(_, t)| t).collect();
        let sink_of = sink_of.into_iter().map(|s| s.map(|old| slot_of_old[old])).collect();
        let looked_up: Vec<BTreeSet<usize>> =
            order.iter().map(|&old| looked_up[old].iter().map(|&t| slot_of_old[t]).collect()).collect();
        let readers = readers_by_slot(&looked_up);
        let positions =
            tables.iter().map(|t| (t.sink.name_in_spec().to_string(), t.sink.position())).collect();
        let quarantine = Quarantine::open(layout, &positions)?;
        let ops_in_chunk = vec![0; tables.len()];
        Ok(Derivers {
            layout: layout.clone(),
            tables,
            readers,
            sink_of,
            archive: archive.map(Archive::start),
            index: Arc::clone(index),
            decoder: None,
            tail: Arc::clone(tail),
            quarantine,
            ops_in_chunk,
        })
    }

    /// The lowest offset some sink still needs.
    pub fn position(&self) -> u64 {
        self.tables
            .iter()
            .map(|t| t.sink.position())
            .chain(self.archive.as_ref().map(Archive::position))
            .min()
            .unwrap_or(0)
    }

    /// Where a state table stands. `None` for a name that is not a state table.
    pub fn committed(&self, table: &str) -> Option<Committed> {
        self.tables
            .iter()
            .map(|t| &t.sink)
            .find(|s| s.name_in_spec() == table)
            .map(|s| Committed { through: s.committed_through(), snapshot_id: s.snapshot_id() })
    }

    /// Applies up to one chunk of events from the record.
    async fn apply_chunk(
        &mut self,
        record: &Record,
        spec: &CompanySpec,
        head: u64,
        max_events: u64,
    ) -> Result<Applied, EngineError> {
        let from = self.position();
        if from >= head {
            return Ok(Applied::default());
        }
        let head = head.min(from.saturating_add(max_events));
        let events = self.next_events(record, spec, from, head).await?;
        let n = events.len() as u64;
        let end = events.last().map_or(from, |e| e.offset + 1);
        // The chunk's CPU time, shared among the tables by the row operations each received
        // (crate::spend: what a table's freshness costs includes its derivation).
        self.ops_in_chunk.iter_mut().for_each(|o| *o = 0);
        let (applied, cpu) = cpu_timed(async {
            let mut rows = 0;
            for ev in events {
                rows += self.apply(spec, ev).await?;
            }
            Ok::<u64, EngineError>(rows)
        })
        .await;
        let rows = applied.inspect_err(|_| self.decoder = None)?;
        let now_ms = chrono::Utc::now().timestamp_millis();
        for (t, share) in self.tables.iter().zip(apportion(cpu, &self.ops_in_chunk)) {
            t.sink.spend().derivation(now_ms, share);
        }
        // Before any commit or status covers the chunk's offsets.
        self.quarantine.flush()?;
        for t in &mut self.tables {
            t.sink.advance_to(end);
        }
        let behind = record.next_offset().saturating_sub(end) > READ_CHUNK as u64;
        if let Some(a) = &mut self.archive {
            a.hand_over(end, behind).await?;
        }
        Ok(Applied { events: n, rows })
    }

    /// The events from `from` (the derivers' position) below `head`, at most a chunk: from the
    /// tail while it has them, else decoded from the record.
    async fn next_events(
        &mut self,
        record: &Record,
        spec: &CompanySpec,
        from: u64,
        head: u64,
    ) -> Result<Vec<Decoded>, EngineError> {
        let mut waited = Duration::ZERO;
        let until = loop {
            match self.tail.take(from, head, READ_CHUNK) {
                Taken::Events(events) => {
                    // Following the head: the decode stage would only read what the tail gives.
                    self.decoder = None;
                    return Ok(events);
                }
                Taken::Record { until } => break until,
                Taken::Pending if waited < TAIL_PATIENCE => {
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    waited += Duration::from_micros(200);
                }
                Taken::Pending => {
                    // Not pushed in time: read it from the record, and drop a late push.
                    let to = head.min(from + READ_CHUNK as u64);
                    self.tail.skip_to(to);
                    break to;
                }
            }
        };
        let decoder = match &mut self.decoder {
            Some(d) if d.next() == from => d,
            slot => slot.insert(Decoder::start(record, spec, from)),
        };
        decoder.take(from, head.min(until), READ_CHUNK).inspect_err(|_| self.decoder = None)
    }

    async fn apply(&mut self, spec: &CompanySpec, ev: Decoded) -> Result<u64, EngineError> {
        let Decoded { offset, recorded_at_ms, event, data } = ev;
        let mut rows = 0;
        if let Some(a) = &mut self.archive {
            rows += u64::from(a.add(offset, recorded_at_ms, &event, &data));
        }
        // Lookup joins read the other table as of its last commit (the lookup index).
        let ops = {
            let failed = std::cell::RefCell::new(None);
            let index = Arc::clone(&self.index);
            let fetch =
                |table: &str, key: &[Value]| match index.get(table, &crate::index::key_bytes(key.iter())) {
                    Ok(row) => row,
                    Err(e) => {
                        failed.replace(Some(e));
                        None
                    }
                };
            let each = event.row_ops_each(spec, offset, &fetch);
            // A lookup that could not be read is this process's failure, not the event's.
            if let Some(e) = failed.take() {
                return Err(e);
            }
            each
        };
        let slot_of = |table: &str| {
            let slot = spec.tables.get_index_of(table).and_then(|i| self.sink_of[i]);
            slot.expect("row ops are only made for tables livestate derives")
        };
        // A row operation that fails is quarantined; the event's others, and every later
        // event, go on (a table derived again from before `offset` finds the same failure).
        let ops: Vec<_> = ops
            .into_iter()
            .filter_map(|op| match op {
                Ok(op) => Some(op),
                Err((table, e)) => {
                    if offset >= self.tables[slot_of(&table)].sink.position() {
                        self.quarantine.add(Quarantined {
                            table,
                            offset,
                            event_id: event.id.clone(),
                            event_type: event.event_type.clone(),
                            message: e.to_string(),
                        });
                    }
                    None
                }
            })
            .collect();
        // An upsert of a row its window removed (partial-update, aggregation) must not share a
        // write with that delete: Paimon merges the two into the upsert alone, and the removed
        // row's other columns would come back. The table commits first, at this event's offset.
        let mut split: Vec<usize> = ops
            .iter()
            .map(|op| slot_of(&op.table))
            .zip(&ops)
            .filter(|(slot, op)| {
                let sink = &self.tables[*slot].sink;
                offset >= sink.position() && op.action == Action::Upsert && sink.would_revive(&op.row)
            })
            .map(|(slot, _)| slot)
            .collect();
        split.dedup();
        // Tables that look one of them up commit first, at the same offset (`commit_order`).
        let mut committing: BTreeSet<usize> = BTreeSet::new();
        for slot in split {
            committing.extend(self.readers[slot].iter().copied());
            committing.insert(slot);
        }
        if !committing.is_empty() {
            self.quarantine.flush()?;
        }
        for slot in committing {
            let t = &mut self.tables[slot];
            if offset < t.sink.position() {
                continue;
            }
            t.sink.advance_to(offset);
            t.commit(false).await?;
        }
        for op in ops {
            let slot = slot_of(&op.table);
            let sink = &mut self.tables[slot].sink;
            if offset < sink.position() {
                continue;
            }
            let kind = match op.action {
                Action::Upsert => RowKind::Insert,
                Action::Delete => RowKind::Delete,
            };
            sink.push((kind, op.row), recorded_at_ms)?;
            self.ops_in_chunk[slot] += 1;
            rows += 1;
        }
        Ok(rows)
    }

    /// Reads every event up to the record's current head, applies it, and commits every table
    /// (also along the way, after every `commit_every` events, so a long catch-up that is
    /// interrupted keeps most of its work).
    ///
    /// # Errors
    /// Record, Paimon or derivation errors; what was committed before the error stays committed
    /// and a restart resumes from there.
    pub(crate) async fn catch_up(
        &mut self,
        record: &Record,
        spec: &CompanySpec,
        commit_every: u64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<DeriveReport, EngineError> {
        let head = record.next_offset();
        let start = self.position();
        let mut report = DeriveReport::default();
        let mut since_commit = 0;
        loop {
            let Applied { events: n, rows } = self.apply_chunk(record, spec, head, commit_every).await?;
            report.events += n;
            report.rows += rows;
            since_commit += n;
            progress(Progress {
                done: self.position().saturating_sub(start),
                total: head.saturating_sub(start),
            });
            if n == 0 {
                break;
            }
            if since_commit >= commit_every {
                report.commits += self.commit_all().await?;
                since_commit = 0;
            }
        }
        report.commits += self.commit_all().await?;
        report.through = self.position();
        self.write_status(record)?;
        Ok(report)
    }

    /// One step of continuous derivation: collect the commits that finished, apply what is new,
    /// then start committing each table whose freshness budget asks for it (each on a task of its
    /// own; [`Derivers::finish_commits`] waits for them). Returns the events applied and the
    /// commits collected.
    ///
    /// # Errors
    /// As [`Derivers::catch_up`].
    pub(crate) async fn step(
        &mut self,
        record: &Record,
        spec: &CompanySpec,
    ) -> Result<DeriveReport, EngineError> {
        let head = record.next_offset();
        let Applied { events, rows } = self.apply_chunk(record, spec, head, u64::MAX).await?;
        // Behind the record (a backlog after a restart or a burst), the events applied were
        // recorded long ago, so their age says nothing about when to commit: a commit per chunk
        // would only add snapshots and files. Behind, a table commits once its window has been
        // open for half its budget on this process's clock; following the record, once the
        // oldest event in its window was recorded at least its interval ago.
        // Behind means a backlog: more than a chunk beyond the position, not the few events
        // an append added while this step ran (or the decode stage holds in flight).
        let behind = record.next_offset().saturating_sub(self.position()) > READ_CHUNK as u64;
        let now = chrono::Utc::now();
        let now_ms = now.timestamp_millis();
        let waited = |sink: &TableSink, following: Duration, behind_for: Duration| {
            let window = sink.window_age();
            window.due(behind, now_ms, following, behind_for)
        };
        let mut commits = 0;
        for t in &mut self.tables {
            commits += t.collect(false, false).await?;
        }
        for t in &mut self.tables {
            let due = match t.freshness.commit_interval() {
                Some(interval) => {
                    let relaxed = (t.freshness.allowed_lag(now) / 2).max(interval);
                    waited(&t.sink, interval, relaxed)
                }
                None => {
                    let boundary = t.freshness.last_boundary(now);
                    let due = t.last_nightly_commit.is_none_or(|last| last < boundary);
                    if due {
                        t.last_nightly_commit = Some(now);
                    }
                    due
                }
            };
            // A window this large commits now: its memory has a ceiling whatever the budget.
            let due = due || t.sink.window_keys() >= crate::sink::MAX_WINDOW_KEYS;
            if due {
                // The commit runs on a task of its own; the next step collects it.
                commits += t.start_commit().await?;
            } else {
                t.upkeep.when_idle(t.sink.maintainer()).await;
            }
        }
        // The archive commits on its own task; a failure there stops derivation here.
        if let Some(a) = &mut self.archive {
            a.check().await?;
            commits += a.take_commits();
        }
        Ok(DeriveReport { events, rows, commits, through: self.position() })
    }

    /// A consistency barrier: derives every event below `target` (and whatever else was
    /// already applied), then commits each table in `tables` through the same offset. Returns
    /// that offset and, per table, the snapshot that reflects exactly the events below it
    /// (`None` while the table has never been committed).
    ///
    /// A table with nothing new keeps its last snapshot: no event between that commit and
    /// the barrier touched it, so it reflects the barrier offset too.
    ///
    /// # Errors
    /// [`EngineError::UnknownTable`]; as [`Derivers::catch_up`].
    pub(crate) async fn barrier(
        &mut self,
        record: &Record,
        spec: &CompanySpec,
        tables: &[String],
        target: u64,
    ) -> Result<Barrier, EngineError> {
        let mut idx = Vec::with_capacity(tables.len());
        for t in tables {
            if spec.table(t).is_some_and(|ts| !ts.derived_here()) {
                return Err(EngineError::BadRequest {
                    table: t.clone(),
                    message: "derived_by = \"external\": another engine commits it at its own checkpoints, \
                              not at a record offset, so it cannot join a read as of one offset"
                        .into(),
                });
            }
            idx.push(self.tables.iter().position(|s| s.sink.name_in_spec() == t).ok_or_else(|| {
                EngineError::UnknownTable { name: t.clone(), known: spec.tables.keys().cloned().collect() }
            })?);
        }
        let positions =
            self.tables.iter().map(|t| t.sink.position()).chain(self.archive.as_ref().map(Archive::position));
        let through = positions.max().unwrap_or(0).max(target);
        while self.position() < through {
            if self.apply_chunk(record, spec, through, u64::MAX).await?.events == 0 {
                return Err(EngineError::Derivation {
                    offset: self.position(),
                    message: format!("the record ends before the barrier offset {through}"),
                });
            }
        }
        // Committed in commit order (`commit_order`), answered in the order asked.
        let mut in_order = idx.clone();
        in_order.sort_unstable();
        in_order.dedup();
        for i in in_order {
            let t = &mut self.tables[i];
            t.commit(false).await?;
            debug_assert_eq!(t.sink.committed_through(), through);
        }
        let snapshots = idx
            .into_iter()
            .map(|i| (self.tables[i].sink.name_in_spec().to_string(), self.tables[i].sink.snapshot_id()))
            .collect();
        Ok(Barrier { offset: through, snapshots })
    }

    /// The maintainer of every state table, by table name. They share the derivers' locks, so
    /// a tag pinned through one cannot race an expiry the derivers run.
    pub fn maintainers(&self) -> std::collections::HashMap<String, livestate_lsm::Maintainer> {
        self.tables.iter().map(|t| (t.sink.name_in_spec().to_string(), t.sink.maintainer().clone())).collect()
    }

    /// Waits for every state table's running commit (a step starts them on tasks of their own
    /// and collects those that finished at the next step); the snapshots they made.
    ///
    /// # Errors
    /// Paimon and index errors of those commits.
    pub async fn finish_commits(&mut self) -> Result<u64, EngineError> {
        let mut commits = 0;
        for t in &mut self.tables {
            commits += t.collect(true, false).await?;
        }
        Ok(commits)
    }

    /// Commits whatever is pending in every table (used at shutdown).
    ///
    /// # Errors
    /// Paimon errors.
    pub async fn commit_all(&mut self) -> Result<u64, EngineError> {
        let mut commits = 0;
        for t in &mut self.tables {
            commits += t.commit(true).await?;
        }
        // Rows of the last chunk are already handed over; the commit runs after them.
        if let Some(a) = &mut self.archive {
            a.commit().await?;
            commits += a.take_commits();
        }
        Ok(commits)
    }

    /// Waits for background compactions and expiries (call before exiting).
    pub async fn finish(&mut self) {
        for t in &mut self.tables {
            if let Err(e) = t.collect(true, false).await {
                tracing::warn!(table = %t.sink.name(), error = %e, "the last commit failed");
            }
            t.upkeep.finish(t.sink.name()).await;
        }
        if let Some(a) = &mut self.archive {
            a.finish().await;
        }
    }

    /// Writes the status file: each table's snapshot, checked-through offset and lag.
    ///
    /// # Errors
    /// Record or I/O errors.
    pub(crate) fn write_status(&self, record: &Record) -> Result<(), EngineError> {
        self.status(record)?.store(&self.layout)
    }

    /// Each table's snapshot, checked-through offset and lag, now.
    ///
    /// # Errors
    /// Record errors.
    pub(crate) fn status(&self, record: &Record) -> Result<Status, EngineError> {
        let now = chrono::Utc::now().timestamp_millis();
        let next = record.next_offset();
        let mut status = Status {
            written_at_ms: now,
            pid: std::process::id(),
            record_next_offset: next,
            ..Default::default()
        };
        let sinks =
            self.tables.iter().map(|t| t.sink.progress()).chain(self.archive.as_ref().map(Archive::progress));
        for s in sinks {
            // A table no event touched since its last commit is as fresh as the record's head.
            let through = s.checked_through();
            let lag_ms = crate::read::lag_ms(record, through, now)?;
            let q = s.name.strip_prefix(STATE_DB).and_then(|t| self.quarantine.of(t.strip_prefix('.')?));
            status.tables.insert(
                s.name.clone(),
                TableProgress {
                    snapshot_id: s.snapshot_id,
                    identifier: s.snapshot_id.map(|_| s.snapshot_identifier),
                    through,
                    lag_ms,
                    quarantined: q.map_or(0, |q| q.count),
                    last_quarantined: q.and_then(|q| q.latest.clone()),
                    spend: Some(s.spend),
                },
            );
        }
        Ok(status)
    }
}

/// The order in which the derivers commit their tables, as slots of `looked_up` (by slot: the
/// other tables that table's mappings look up): spec order, except that a table whose mappings
/// look up another table comes before that table. A lookup join reads the other table as of
/// its last commit, so a failure (a full disk, `kill -9`) between two commits must never leave
/// the looked-up table committed past the table that reads it: a restart would derive that
/// table's events again against a later row than the first pass read. With the reading table
/// first, either both re-derive from the same commit or only the looked-up one does, and the
/// rows come out the same. Tables in a lookup cycle keep spec order.
fn commit_order(looked_up: &[BTreeSet<usize>]) -> Vec<usize> {
    let mut waiting_for = vec![0usize; looked_up.len()];
    for &t in looked_up.iter().flatten() {
        waiting_for[t] += 1;
    }
    let mut ready: BTreeSet<usize> = (0..looked_up.len()).filter(|&i| waiting_for[i] == 0).collect();
    let mut placed = vec![false; looked_up.len()];
    let mut order = Vec::with_capacity(looked_up.len());
    while let Some(d) = ready.pop_first() {
        placed[d] = true;
        order.push(d);
        for &t in &looked_up[d] {
            waiting_for[t] -= 1;
            if waiting_for[t] == 0 {
                ready.insert(t);
            }
        }
    }
    order.extend((0..looked_up.len()).filter(|&i| !placed[i]));
    order
}

/// By slot in `tables`: the other tables that table's mappings look up.
fn lookups_by_slot(spec: &CompanySpec, tables: &[StateSink]) -> Vec<BTreeSet<usize>> {
    let slot: std::collections::HashMap<&str, usize> =
        tables.iter().enumerate().map(|(i, t)| (t.sink.name_in_spec(), i)).collect();
    let mut looked_up: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); tables.len()];
    for m in &spec.mappings {
        let Some(&d) = slot.get(m.table.as_str()) else { continue };
        for l in &m.lookups {
            if let Some(&t) = slot.get(l.table.as_str()) {
                if t != d {
                    looked_up[d].insert(t);
                }
            }
        }
    }
    looked_up
}

/// By slot: every table that reads it through lookups, directly or not, in slot order.
fn readers_by_slot(looked_up: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    let mut direct: Vec<Vec<usize>> = vec![Vec::new(); looked_up.len()];
    for (d, ts) in looked_up.iter().enumerate() {
        for &t in ts {
            direct[t].push(d);
        }
    }
    (0..looked_up.len())
        .map(|t| {
            let mut seen = BTreeSet::new();
            let mut stack = direct[t].clone();
            while let Some(d) = stack.pop() {
                if d != t && seen.insert(d) {
                    stack.extend(direct[d].iter().copied());
                }
            }
            seen.into_iter().collect()
        })
        .collect()
}

/// Where a state table's latest commit stands ([`Derivers::committed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// The record offset the commit reflects: every event below it.
    pub through: u64,
    /// The commit's snapshot (`None` before the table's first commit).
    pub snapshot_id: Option<i64>,
}

/// What one chunk applied: events read from the record and row operations they made.
#[derive(Debug, Default, Clone, Copy)]
struct Applied {
    events: u64,
    rows: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookups(edges: &[&[usize]]) -> Vec<BTreeSet<usize>> {
        edges.iter().map(|ts| ts.iter().copied().collect()).collect()
    }

    #[test]
    fn a_table_that_looks_another_up_commits_before_it_and_the_rest_keep_spec_order() {
        // stock (0), work_queue (1), open_orders (2) looking up stock, reservations (3) looking up open_orders.
        let l = lookups(&[&[], &[], &[0], &[2]]);
        assert_eq!(commit_order(&l), vec![1, 3, 2, 0]);
        // Readers, directly or through another lookup.
        assert_eq!(readers_by_slot(&l), vec![vec![2, 3], vec![], vec![3], vec![]]);
    }

    #[test]
    fn tables_in_a_lookup_cycle_keep_spec_order_after_the_others() {
        let l = lookups(&[&[1], &[0], &[]]);
        assert_eq!(commit_order(&l), vec![2, 0, 1]);
        assert_eq!(readers_by_slot(&l), vec![vec![1], vec![0], vec![]]);
    }
}
