//! One long-lived Paimon writer per table whose commit identifier is the record offset it reflects.

use std::sync::Arc;

use arrow_schema::Schema as ArrowSchema;
use livestate_lsm::{CommitLock, Maintainer};
use paimon::catalog::Identifier;
use paimon::spec::Snapshot;
use paimon::{Catalog, FileSystemCatalog, Table, TableCommit, TableWrite};

use crate::error::{paimon_err, EngineError};
use crate::rows::{self, KindRow};
use crate::schema::COMMIT_USER;

/// Rows buffered before they are handed to the Paimon writer.
const WRITE_BATCH_ROWS: usize = 8192;

/// A table being derived: the writer stays open across commits (a new `TableWrite` rescans every
/// manifest), rows are buffered, and each commit's identifier is the record offset below which
/// every event is reflected. Resuming after a crash starts at that offset, so nothing is lost or
/// applied twice.
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
    /// When the oldest event not yet committed was recorded (ms since the epoch).
    pub oldest_uncommitted_ms: Option<i64>,
    /// Taken by every commit to the table, data or compaction.
    commit_lock: CommitLock,
    /// Compaction, expiry and orphan cleanup of this table.
    pub maintainer: Maintainer,
}

/// The latest snapshot written by livestate (its deriver or its compaction, which carries the
/// deriver's identifier forward), scanning back past snapshots of other writers.
///
/// # Errors
/// Paimon I/O errors.
pub async fn latest_own_snapshot(table: &Table) -> paimon::Result<Option<Snapshot>> {
    let sm = table.snapshot_manager();
    let Some(latest) = sm.get_latest_snapshot_id().await? else {
        return Ok(None);
    };
    let earliest = sm.earliest_snapshot_id().await?.unwrap_or(latest);
    for id in (earliest..=latest).rev() {
        match sm.get_snapshot(id).await {
            Ok(s) if s.commit_user() == COMMIT_USER || s.commit_user() == livestate_lsm::COMPACT_USER => {
                return Ok(Some(s))
            }
            Ok(_) | Err(paimon::Error::SnapshotNotExist { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

impl TableSink {
    pub async fn open(
        catalog: &FileSystemCatalog,
        db: &str,
        name: &str,
        with_kind: bool,
    ) -> Result<TableSink, EngineError> {
        let full = format!("{db}.{name}");
        let table = catalog.get_table(&Identifier::new(db, name)).await.map_err(paimon_err(&full, "open"))?;
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
        let maintainer = Maintainer::new(table.clone(), full.clone(), commit_lock.clone())?;
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
            oldest_uncommitted_ms: None,
            commit_lock,
            maintainer,
        })
    }

    pub async fn push(&mut self, row: KindRow, recorded_at_ms: i64) -> Result<(), EngineError> {
        self.pending.push(row);
        self.oldest_uncommitted_ms.get_or_insert(recorded_at_ms);
        if self.pending.len() >= WRITE_BATCH_ROWS {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), EngineError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = rows::to_batch(&self.schema, &self.pending)
            .map_err(|message| EngineError::Arrow { table: self.name.clone(), message })?;
        self.write.write_arrow_batch(&batch).await.map_err(paimon_err(&self.name, "write"))?;
        self.pending.clear();
        self.dirty = true;
        Ok(())
    }

    /// Commits everything applied so far as reflecting every event below `self.position`.
    /// Returns the new snapshot id, or `None` when nothing changed.
    pub async fn commit(&mut self) -> Result<Option<i64>, EngineError> {
        self.flush().await?;
        if !self.dirty {
            self.committed = self.position;
            return Ok(None);
        }
        let messages = self.write.prepare_commit().await.map_err(paimon_err(&self.name, "prepare commit"))?;
        let identifier = i64::try_from(self.position).expect("record offsets fit i64");
        let _guard = self.commit_lock.lock().await;
        self.commit
            .commit_with_identifier(messages, identifier)
            .await
            .map_err(paimon_err(&self.name, "commit"))?;
        self.dirty = false;
        self.committed = self.position;
        self.oldest_uncommitted_ms = None;
        let id = self
            .table
            .snapshot_manager()
            .get_latest_snapshot_id()
            .await
            .map_err(paimon_err(&self.name, "read snapshot"))?;
        self.snapshot_id = id;
        Ok(id)
    }
}
