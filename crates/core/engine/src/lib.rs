//! The state-table engine of livestate: the company's live state as Apache Paimon primary-key
//! tables, derived from the record exactly once.
//!
//! [`Livestate`] owns one directory (see [`Layout`]): it holds the write lock, the [`Record`] and
//! the Paimon warehouse. [`Livestate::emit`] validates and appends events; [`Derivers`] folds the
//! record into every state table and the `record.events` archive, committing each table with its
//! record offset as the Paimon commit identifier so a restart resumes exactly where the last
//! commit ended. [`read::read`] answers with rows and a [`Receipt`].

mod archive;
pub mod catalog;
mod changelog;
mod cores;
mod decode;
mod derive;
mod error;
pub mod flink;
mod follow;
pub mod index;
mod index_row;
mod layout;
pub mod lease;
pub mod local_io;
pub mod quarantine;
pub mod read;
pub mod rederive;
mod rows;
pub mod schema;
mod sink;
pub mod spend;
mod status;
mod tail;
#[cfg(test)]
mod testing;
pub mod triggers;
mod upkeep;
pub mod verify;
pub mod warehouse;
mod window;

use std::collections::HashMap;
use std::path::Path;

use livestate_record::{Appended, Record, RecordedEvent};
use livestate_spec::{CompanySpec, Event, EventEnvelope, Value};
use paimon::Catalog as _;

pub use catalog::Catalog;
pub use derive::{Barrier, Committed, DeriveReport, Derivers, Progress, CATCH_UP_COMMIT_EVENTS};
pub use error::{EngineError, LineError};
pub use follow::{BarrierRequest, Follow};
pub use layout::{Layout, WriteLock};
pub use livestate_record::RecordError;
pub use read::{At, Batches, LagSource, ReadRequest, Reader, Receipt, Rows, SharedRead, TableInfo};
pub use rederive::{RederiveReport, RederivedTable};
pub use schema::TableId;
pub use status::{Status, TableProgress};
pub use warehouse::{S3Location, Warehouse};

use crate::error::{io_err, paimon_err};
use crate::index::Index;
use crate::lease::Lease;
use crate::schema::{archive_schema, state_schema, ARCHIVE_TABLE, RECORD_DB, STATE_DB};
use crate::warehouse::WarehouseConfig;

/// Events appended per record write (each write is one atomic batch and one fsync).
pub const EMIT_CHUNK: usize = 10_000;

/// What `emit` did with its input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmitReport {
    /// Offsets of the accepted lines, in input order (a re-sent id reports its original offset).
    pub appended: Vec<(usize, Appended)>,
    /// Lines skipped as invalid (only with `skip_invalid`).
    pub skipped: Vec<LineError>,
}

/// Opens the Paimon filesystem catalog of a directory's warehouse (`D/warehouse/`, or the
/// object-storage location recorded in `D/warehouse.json`).
///
/// # Errors
/// [`EngineError::BadWarehouse`] for an unreadable warehouse config; Paimon configuration errors.
pub fn open_catalog(layout: &Layout) -> Result<Catalog, EngineError> {
    Catalog::open(&layout.warehouse()?)
}

/// Loads the spec a directory was initialised with.
///
/// # Errors
/// [`EngineError::NotInitialized`] or the spec's own errors.
pub fn load_spec(layout: &Layout) -> Result<CompanySpec, EngineError> {
    if !layout.is_initialized() {
        return Err(EngineError::NotInitialized { dir: layout.dir.clone() });
    }
    Ok(CompanySpec::load_dir(&layout.spec_dir())?)
}

/// Creates the state database and a Paimon table for every table of `spec` (those that exist
/// are left as they are).
///
/// # Errors
/// Paimon errors.
pub(crate) async fn create_state_tables(catalog: &Catalog, spec: &CompanySpec) -> Result<(), EngineError> {
    catalog
        .paimon()
        .create_database(STATE_DB, true, HashMap::new())
        .await
        .map_err(paimon_err(STATE_DB, "create database"))?;
    for t in spec.tables.values() {
        let schema = state_schema(t).map_err(paimon_err(&t.name, "schema"))?;
        catalog
            .paimon()
            .create_table(TableId::state(&t.name).identifier(), schema, true)
            .await
            .map_err(paimon_err(&t.name, "create table"))?;
    }
    Ok(())
}

/// One livestate directory opened for writing: the front door to its record, its state tables
/// and their lookup index. Its parts are private so that what holds them together holds: events
/// enter only through [`Livestate::emit`] (typed against the spec, fsynced, handed to this
/// process's derivers), tables are written only by this directory's derivers and maintainers
/// (under its write lock and, on object storage, its lease), and reads measure lag against the
/// same record the derivers follow.
pub struct Livestate {
    layout: Layout,
    spec: CompanySpec,
    record: Record,
    catalog: Catalog,
    /// Each state table's current rows by key, as of its last commit.
    index: std::sync::Arc<Index>,
    /// The single-writer lease of an object-storage warehouse (`None` for a local one).
    lease: Option<std::sync::Arc<Lease>>,
    /// The derivers' progress as their loop last published it ([`Livestate::publish_status`]),
    /// fresher than the status file a serving process writes once a second.
    live_status: std::sync::Mutex<Option<std::sync::Arc<Status>>>,
    /// The events this process appended, typed, for its derivers (see `tail`).
    tail: std::sync::Arc<tail::Tail>,
    /// Every table's commit and writer locks in this process.
    locks: sink::TableLocks,
    _lock: WriteLock,
}

impl Livestate {
    /// Creates the record and the Paimon warehouse in `dir` from the spec in `spec_dir`. The spec
    /// is checked in full before anything is written.
    ///
    /// # Errors
    /// [`EngineError::Spec`] for a wrong spec (nothing is created); [`EngineError::AlreadyInitialized`];
    /// [`EngineError::Locked`]; I/O and Paimon errors.
    pub async fn init(dir: &Path, spec_dir: &Path) -> Result<Livestate, EngineError> {
        Livestate::init_with(dir, spec_dir, None).await
    }

    /// As [`Livestate::init`], with the warehouse at `warehouse` (`s3://bucket/prefix`) instead
    /// of `D/warehouse/`. The location is recorded in `D/warehouse.json`; the lease is taken
    /// before anything is written to the bucket.
    ///
    /// # Errors
    /// As [`Livestate::init`]; [`EngineError::BadWarehouse`] for a location that does not parse;
    /// [`EngineError::LeaseHeld`] when another writer holds the warehouse.
    pub async fn init_with(
        dir: &Path,
        spec_dir: &Path,
        warehouse: Option<&str>,
    ) -> Result<Livestate, EngineError> {
        let warehouse = warehouse.map(S3Location::parse).transpose()?;
        let spec = CompanySpec::load_dir(spec_dir)?;
        for t in spec.tables.values() {
            state_schema(t).map_err(|source| EngineError::Paimon {
                table: t.name.clone(),
                what: "check schema",
                source,
            })?;
        }
        let layout = Layout::new(dir)?;
        if layout.is_initialized() {
            return Err(EngineError::AlreadyInitialized { dir: layout.dir });
        }
        std::fs::create_dir_all(&layout.dir).map_err(io_err(&layout.dir))?;
        let lock = WriteLock::acquire(&layout)?;
        // The lease first: a warehouse another writer holds refuses the init before anything
        // is written to the directory.
        let lease = match &warehouse {
            None => None,
            Some(loc) => {
                let config = WarehouseConfig { uri: loc.uri(), writer: uuid::Uuid::new_v4().to_string() };
                let lease = Lease::acquire(loc, &config.writer, lease::ttl_from_env()).await?;
                Some((std::sync::Arc::new(lease), config))
            }
        };
        let staging = layout.dir.join("spec.tmp");
        let _ = std::fs::remove_dir_all(&staging);
        layout::copy_spec_files(spec_dir, &staging)?;
        let lease = match lease {
            None => {
                let warehouse = layout.warehouse_dir();
                std::fs::create_dir_all(&warehouse).map_err(io_err(&warehouse))?;
                None
            }
            Some((lease, config)) => {
                layout.store_warehouse_config(&config)?;
                Some(lease)
            }
        };
        let catalog = open_catalog(&layout)?;
        create_state_tables(&catalog, &spec).await?;
        catalog
            .paimon()
            .create_database(RECORD_DB, true, HashMap::new())
            .await
            .map_err(paimon_err(RECORD_DB, "create database"))?;
        let archive = archive_schema().map_err(paimon_err(ARCHIVE_TABLE, "schema"))?;
        catalog
            .paimon()
            .create_table(TableId::archive().identifier(), archive, true)
            .await
            .map_err(paimon_err(ARCHIVE_TABLE, "create table"))?;
        let ls = Livestate::assemble(layout, spec, catalog, lease, lock)?;
        // The spec directory appears last: its presence marks a complete initialisation.
        std::fs::rename(&staging, ls.layout.spec_dir()).map_err(io_err(&staging))?;
        Ok(ls)
    }

    /// Opens an initialised directory for writing, taking its lock.
    ///
    /// # Errors
    /// [`EngineError::NotInitialized`], [`EngineError::Locked`], record and Paimon errors.
    pub async fn open(dir: &Path) -> Result<Livestate, EngineError> {
        let layout = Layout::new(dir)?;
        if !layout.is_initialized() && !layout.spec_swap_pending() {
            return Err(EngineError::NotInitialized { dir: layout.dir });
        }
        let lock = WriteLock::acquire(&layout)?;
        // Under the lock: a spec replacement a crash cut short is completed (or its leftovers
        // removed) before the spec is read.
        layout.finish_spec_swap();
        let spec = load_spec(&layout)?;
        let lease = match (layout.warehouse()?, layout.warehouse_config()?) {
            (Warehouse::S3(loc), Some(config)) => {
                Some(std::sync::Arc::new(Lease::acquire(&loc, &config.writer, lease::ttl_from_env()).await?))
            }
            _ => None,
        };
        let catalog = open_catalog(&layout)?;
        Livestate::assemble(layout, spec, catalog, lease, lock)
    }

    /// Opens the record and the lookup index of `layout` and puts the process's parts together.
    fn assemble(
        layout: Layout,
        spec: CompanySpec,
        catalog: Catalog,
        lease: Option<std::sync::Arc<Lease>>,
        lock: WriteLock,
    ) -> Result<Livestate, EngineError> {
        let record = Record::open(&layout.record_dir())?;
        let index = std::sync::Arc::new(Index::open(&layout.index_dir(), &spec)?);
        let tail = std::sync::Arc::new(tail::Tail::new(record.next_offset()));
        Ok(Livestate {
            tail,
            locks: sink::TableLocks::default(),
            layout,
            spec,
            record,
            catalog,
            index,
            lease,
            live_status: Default::default(),
            _lock: lock,
        })
    }

    /// Validates JSON-lines events and appends them durably.
    ///
    /// Every line is checked first; unless `skip_invalid`, one bad line rejects the whole input
    /// and nothing is appended. Accepted events are then appended in chunks of [`EMIT_CHUNK`],
    /// each acknowledged after its fsync.
    ///
    /// # Errors
    /// [`EngineError::InvalidEvents`] listing every bad line; record errors (an id re-sent with
    /// different content among them). A record error after the first chunk leaves the earlier
    /// chunks recorded: [`Livestate::emit_with`] reports each chunk as it is acknowledged.
    pub fn emit(&self, input: &str, skip_invalid: bool) -> Result<EmitReport, EngineError> {
        self.emit_with(input, skip_invalid, |_| {})
    }

    /// As [`Livestate::emit`], calling `acknowledged` with each chunk's lines and offsets as soon
    /// as the chunk is durable, so a caller can report what was stored before a later chunk
    /// failed. Lines never passed to `acknowledged` were not recorded.
    ///
    /// # Errors
    /// As [`Livestate::emit`].
    pub fn emit_with(
        &self,
        input: &str,
        skip_invalid: bool,
        mut acknowledged: impl FnMut(&[(usize, Appended)]),
    ) -> Result<EmitReport, EngineError> {
        // The accepted events, already in the chunks they are appended in, each sized for the
        // lines left: grown by doubling and then moved into chunks, these events were copied
        // into fresh pages about a dozen times an append (a profile of the ingest's page faults).
        let lines = memchr::memchr_iter(b'\n', input.as_bytes()).count() + 1;
        let mut chunks: Vec<Vec<(usize, Event)>> = Vec::new();
        let mut bad = Vec::new();
        for (i, line) in input.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match Event::parse_line(line, &self.spec) {
                Ok(ev) => {
                    if chunks.last().is_none_or(|c| c.len() >= EMIT_CHUNK) {
                        chunks.push(Vec::with_capacity(lines.saturating_sub(i).min(EMIT_CHUNK)));
                    }
                    chunks.last_mut().expect("a chunk with room").push((i + 1, ev));
                }
                Err(error) => {
                    let id = serde_json::from_str::<serde_json::Value>(line)
                        .ok()
                        .and_then(|v| v.get("id").and_then(|x| x.as_str()).map(str::to_string));
                    bad.push(LineError { line: i + 1, id, error });
                }
            }
        }
        if !bad.is_empty() && !skip_invalid {
            return Err(EngineError::InvalidEvents(bad));
        }
        let mut report = EmitReport { skipped: bad, ..Default::default() };
        report.appended.reserve(chunks.iter().map(Vec::len).sum());
        for chunk in chunks {
            let start = report.appended.len();
            report.appended.extend(self.append_checked(chunk)?);
            acknowledged(&report.appended[start..]);
        }
        Ok(report)
    }

    /// Appends one event given as its envelope, checked against the spec as a line given to
    /// [`Livestate::emit`] is, without writing it out as a line to parse again: how the server
    /// records proposals and decisions.
    ///
    /// # Errors
    /// [`EngineError::InvalidEvents`] naming what does not fit (nothing is appended); record
    /// errors as [`Livestate::emit`].
    pub fn emit_envelope(&self, env: EventEnvelope) -> Result<Appended, EngineError> {
        let id = env.id.clone();
        let ev = Event::decode(env, &self.spec)
            .map_err(|error| EngineError::InvalidEvents(vec![LineError { line: 1, id: Some(id), error }]))?;
        let mut out = self.append_checked(vec![(1, ev)])?;
        Ok(out.pop().expect("one event was appended").1)
    }

    /// Appends checked events (with their line numbers) in one record write, then hands the new
    /// ones, typed, to this process's derivers (`tail`), so they are not parsed again.
    fn append_checked(&self, events: Vec<(usize, Event)>) -> Result<Vec<(usize, Appended)>, EngineError> {
        // Each event's data is written as JSON once: the record stores the text, the archive
        // row carries a copy.
        let news: Vec<_> = events.iter().map(|(_, ev)| ev.stored_envelope()).collect();
        let data: Vec<String> = news.iter().map(|n| n.data.as_str().to_string()).collect();
        // Flow control: a moment for following derivers to take what the tail would drop.
        self.tail.wait_for_room(news.len());
        let (out, recorded_at_ms) = self.record.append_timed(news)?;
        let lines = events.iter().map(|(line, _)| *line).zip(out.iter().copied()).collect();
        // Sized once: collected through the filter, the vector grew by doubling.
        let mut fresh = Vec::with_capacity(events.len());
        fresh.extend(
            events
                .into_iter()
                .zip(out)
                .zip(data)
                .filter(|((_, a), _)| !a.duplicate)
                .map(|(((_, ev), a), data)| decode::Decoded::appended(a.offset, recorded_at_ms, ev, data)),
        );
        self.tail.push(fresh);
        Ok(lines)
    }

    /// The spec the directory was initialised with (or last replaced by).
    pub fn spec(&self) -> &CompanySpec {
        &self.spec
    }

    /// Where the directory keeps what.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The record, to read (appends go through [`Livestate::emit`]).
    pub fn record(&self) -> RecordView<'_> {
        RecordView(&self.record)
    }

    /// The row of `table` whose primary key is `key` (values in primary-key order) as of the
    /// table's last commit, from the lookup index: what a lookup join of the next event reads.
    ///
    /// # Errors
    /// [`EngineError::UnknownTable`]; store errors, or a stored row that does not decode.
    pub fn current_row(&self, table: &str, key: &[Value]) -> Result<Option<Vec<Value>>, EngineError> {
        read::table_spec(&self.spec, table)?;
        self.index.get(table, &index::key_bytes(key.iter()))
    }

    /// Every row the lookup index holds for `table`, in key order: the table as of its last
    /// commit, as the index (not the files) has it.
    ///
    /// # Errors
    /// [`EngineError::UnknownTable`]; store errors, or a stored row that does not decode.
    pub fn indexed_rows(&self, table: &str) -> Result<Vec<Vec<Value>>, EngineError> {
        read::table_spec(&self.spec, table)?;
        self.index.rows(table)
    }

    /// What the lookup index's store holds in memory now (block cache and unflushed writes).
    pub fn index_memory(&self) -> livestate_record::StoreMemory {
        self.index.memory()
    }

    /// The triggers' firings and their consumers' cursors.
    pub fn firings(&self) -> FiringsView<'_> {
        FiringsView(&self.index)
    }

    /// Whether the warehouse is on object storage under a single-writer lease.
    pub fn leased(&self) -> bool {
        self.lease.is_some()
    }

    /// This process's reader: lag measured against its own record (see
    /// [`Livestate::lag_source`]), keys answered by its lookup index.
    pub fn reader(&self) -> Reader<'_> {
        Reader::new(&self.catalog, &self.spec, self.lag_source(), Some(&self.index))
    }

    /// Rows of a state table as `req` asks, with a receipt: a key's row from the lookup index,
    /// anything else from the table's files.
    ///
    /// # Errors
    /// As [`read::read`].
    pub async fn read(&self, req: &ReadRequest) -> Result<Rows, EngineError> {
        self.reader().read(req).await
    }

    /// Like [`Livestate::read`], always from the table's files (what another reader of the
    /// warehouse sees), never from the lookup index.
    ///
    /// # Errors
    /// As [`read::read`].
    pub async fn read_files(&self, req: &ReadRequest) -> Result<Rows, EngineError> {
        self.reader().without_index().read(req).await
    }

    /// Every row of the `record.events` archive table.
    ///
    /// # Errors
    /// As [`read::archive_rows`].
    pub async fn archive_rows(&self) -> Result<Vec<Vec<Value>>, EngineError> {
        // Not through `reader()`: the archive has no receipt, so no lag source to look up.
        read::archive_rows(&self.catalog).await
    }

    /// The Paimon table of a state table, by name, to inspect.
    ///
    /// # Errors
    /// [`EngineError::UnknownTable`], or Paimon errors opening it.
    pub async fn table(&self, name: &str) -> Result<paimon::Table, EngineError> {
        read::get_table(&self.catalog, &self.spec, name).await.map(|(t, _)| t)
    }

    /// Derives everything recorded up to the record's head into `derivers`' tables, committing
    /// every `commit_every` events and at the end; `progress` sees each chunk.
    ///
    /// # Errors
    /// As [`Derivers::catch_up`].
    pub async fn catch_up(
        &self,
        derivers: &mut Derivers,
        commit_every: u64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<DeriveReport, EngineError> {
        derivers.catch_up(&self.record, &self.spec, commit_every, progress).await
    }

    /// One step of continuous derivation (as [`Derivers::step`]).
    ///
    /// # Errors
    /// As [`Derivers::step`].
    pub async fn step(&self, derivers: &mut Derivers) -> Result<DeriveReport, EngineError> {
        derivers.step(&self.record, &self.spec).await
    }

    /// Commits `tables` through one offset at or past `target` (as [`Derivers::barrier`]).
    ///
    /// # Errors
    /// As [`Derivers::barrier`].
    pub async fn barrier(
        &self,
        derivers: &mut Derivers,
        tables: &[String],
        target: u64,
    ) -> Result<Barrier, EngineError> {
        derivers.barrier(&self.record, &self.spec, tables, target).await
    }

    /// Each table's snapshot, checked-through offset and lag, now (as [`Derivers::status`]).
    ///
    /// # Errors
    /// Record errors.
    pub fn status(&self, derivers: &Derivers) -> Result<Status, EngineError> {
        derivers.status(&self.record)
    }

    /// Opens the derivers of every table, each positioned after its last commit.
    ///
    /// # Errors
    /// Paimon errors.
    pub async fn derivers(&self) -> Result<Derivers, EngineError> {
        let target = derive::Target {
            catalog: &self.catalog,
            layout: &self.layout,
            fence: self.fence(),
            archive: true,
        };
        Derivers::open(target, &self.spec, &self.index, &self.tail, &self.locks).await
    }

    /// Every table this directory writes: the state tables livestate derives in spec order
    /// (not the `derived_by = "external"` ones), then the `record.events` archive.
    pub fn table_names(&self) -> Vec<String> {
        let mut names: Vec<String> =
            self.spec.tables.values().filter(|t| t.derived_here()).map(|t| t.name.clone()).collect();
        names.push(TableId::archive().full_name());
        names
    }

    /// Compaction, expiry and orphan cleanup of a state table (by name) or of `record.events`.
    /// This process holds the directory's write lock, so nothing else commits meanwhile.
    ///
    /// # Errors
    /// An unknown table, a table another engine derives ([`EngineError::BadRequest`]: its
    /// deriver compacts and expires it), or a maintenance option of the table that cannot be used.
    pub async fn maintainer(&self, table: &str) -> Result<livestate_lsm::Maintainer, EngineError> {
        let bare = table.strip_prefix("state.").unwrap_or(table);
        if self.spec.table(bare).is_some_and(|t| !t.derived_here()) {
            return Err(EngineError::BadRequest {
                table: bare.to_string(),
                message: "derived_by = \"external\": the engine deriving it compacts and expires it; \
                          livestate does not write it"
                    .into(),
            });
        }
        self.open_maintainer(table).await
    }

    /// Maintainers of the tables another engine derives (`derived_by = "external"`), by name, for
    /// pinning and deleting tags only: livestate never compacts or expires them.
    ///
    /// # Errors
    /// Paimon errors opening a table.
    pub async fn external_maintainers(
        &self,
    ) -> Result<HashMap<String, livestate_lsm::Maintainer>, EngineError> {
        let mut out = HashMap::new();
        for t in self.spec.tables.values().filter(|t| !t.derived_here()) {
            out.insert(t.name.clone(), self.open_maintainer(&t.name).await?);
        }
        Ok(out)
    }

    async fn open_maintainer(&self, table: &str) -> Result<livestate_lsm::Maintainer, EngineError> {
        let archive = TableId::archive();
        let (t, full) = if table == archive.full_name() {
            let t = self.catalog.table(archive.identifier()).await.map_err(paimon_err(table, "open"))?;
            (t, table.to_string())
        } else {
            let bare = table.strip_prefix("state.").unwrap_or(table);
            let (t, ts) = read::get_table(&self.catalog, &self.spec, bare).await?;
            (t, TableId::state(&ts.name).full_name())
        };
        let lock = self.locks.commit(&full);
        Ok(livestate_lsm::Maintainer::new(t, full, lock)?.with_fence(self.fence()))
    }

    /// Ends this process's writing: gives up the warehouse lease of an object-storage warehouse
    /// (see [`Lease::release`]) so another directory may take it at once. Nothing for a local
    /// warehouse. Call it after the last commit.
    ///
    /// # Errors
    /// [`EngineError::Lease`] when the store cannot be reached (the lease then expires by itself).
    pub async fn release_lease(&self) -> Result<(), EngineError> {
        match &self.lease {
            Some(l) => l.release().await,
            None => Ok(()),
        }
    }

    /// What every commit, tag write and deletion of this process checks first: the warehouse
    /// lease on object storage, nothing for a local warehouse (the directory lock suffices).
    pub fn fence(&self) -> Option<livestate_lsm::SharedFence> {
        self.lease.clone().map(|l| l as livestate_lsm::SharedFence)
    }

    /// How this process measures lag: against its own record, with how far the derivers checked
    /// it taken from what their loop last published in this process, or else the status file
    /// (read from disk on every call: a process that serves reads publishes before it serves).
    pub fn lag_source(&self) -> LagSource<'_> {
        let live = self.live_status.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        LagSource::Record(&self.record, live.or_else(|| Status::load(&self.layout).map(std::sync::Arc::new)))
    }

    /// Makes `status` what this process's receipts measure lag from (see [`Livestate::lag_source`]):
    /// a serving process publishes its derivers' progress after every step, so a receipt does not
    /// trail the tables by the second between status files.
    pub fn publish_status(&self, status: Status) {
        *self.live_status.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(std::sync::Arc::new(status));
    }
}

/// Read access to a directory's record ([`Livestate::record`]): offsets, events and the
/// store's health. Appends go through [`Livestate::emit`], which types each event against the
/// spec and hands it to this process's derivers.
#[derive(Clone, Copy)]
pub struct RecordView<'a>(&'a Record);

impl RecordView<'_> {
    /// The offset the next appended event gets: every offset below it is recorded.
    pub fn next_offset(&self) -> u64 {
        self.0.next_offset()
    }

    /// Up to `limit` events from offset `from` on, in offset order.
    ///
    /// # Errors
    /// As [`Record::read`].
    pub fn read(&self, from: u64, limit: usize) -> Result<Vec<RecordedEvent>, RecordError> {
        self.0.read(from, limit)
    }

    /// The event at `offset`, if recorded.
    ///
    /// # Errors
    /// As [`Record::get`].
    pub fn get(&self, offset: u64) -> Result<Option<RecordedEvent>, RecordError> {
        self.0.get(offset)
    }

    /// When the event at `offset` was recorded (ms since the epoch), if it was.
    ///
    /// # Errors
    /// As [`Record::recorded_at_ms`].
    pub fn recorded_at_ms(&self, offset: u64) -> Result<Option<i64>, RecordError> {
        self.0.recorded_at_ms(offset)
    }

    /// Why the record refuses appends, once a write or fsync failed.
    pub fn refusing_appends(&self) -> Option<RecordError> {
        self.0.refusing_appends()
    }

    /// What the record's store holds in memory.
    pub fn memory(&self) -> livestate_record::StoreMemory {
        self.0.memory()
    }
}

/// The triggers' firings and each consumer's cursor ([`Livestate::firings`]). Firings are made
/// by the derivers' commits; a consumer reads what lies past its cursor and moves the cursor
/// once it has handed the firings on.
#[derive(Clone, Copy)]
pub struct FiringsView<'a>(&'a Index);

impl FiringsView<'_> {
    /// Up to `limit` firings of `trigger` after `consumer`'s cursor, in firing order.
    ///
    /// # Errors
    /// Store errors, or a stored firing that does not decode.
    pub fn pending(
        &self,
        trigger: &str,
        consumer: &str,
        limit: usize,
    ) -> Result<Vec<triggers::Firing>, EngineError> {
        self.0.pending(trigger, consumer, limit)
    }

    /// Moves `consumer`'s cursor on `trigger` to `seq`: the firings up to it are handed on.
    ///
    /// # Errors
    /// Store errors.
    pub fn ack(&self, trigger: &str, consumer: &str, seq: u64) -> Result<(), EngineError> {
        self.0.ack(trigger, consumer, seq)
    }

    /// The sequence number of `trigger`'s latest firing (0 when it never fired).
    ///
    /// # Errors
    /// Store errors.
    pub fn last_seq(&self, trigger: &str) -> Result<u64, EngineError> {
        self.0.last_seq(trigger)
    }
}

/// Event input as it arrived, as the text [`Livestate::emit`] takes: a byte-order mark at the
/// very start is dropped, and each line that is not UTF-8 is left empty (so every other line
/// keeps its number) and returned as a bad line named by its number.
pub fn decode_lines(input: &[u8]) -> (String, Vec<LineError>) {
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    let mut text = String::with_capacity(input.len());
    let mut not_utf8 = Vec::new();
    for (i, raw) in input.split(|b| *b == b'\n').enumerate() {
        if i > 0 {
            text.push('\n');
        }
        match std::str::from_utf8(raw) {
            Ok(line) => text.push_str(line),
            Err(e) => not_utf8.push(LineError {
                line: i + 1,
                id: None,
                error: livestate_spec::EventError::new(
                    "(line)",
                    format!(
                        "not UTF-8: byte {:#04x} at column {}",
                        raw[e.valid_up_to()],
                        e.valid_up_to() + 1
                    ),
                ),
            }),
        }
    }
    (text, not_utf8)
}
