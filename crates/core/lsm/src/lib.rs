//! Keeps Paimon primary-key tables healthy, as Java Paimon does, in Paimon's own format.
//!
//! The `paimon` crate writes every commit as new level-0 files and never compacts or expires
//! anything. This crate adds the missing maintenance on top of its public spec API:
//!
//! - [`Maintainer::compact`]: Paimon's universal compaction per bucket (or a full compaction),
//!   committed as a `COMPACT` snapshot whose delta manifest deletes the inputs and adds the
//!   outputs; small manifests are merged on the way. Append tables get their consecutive
//!   small files merged instead ([`append`]).
//! - [`Maintainer::expire`]: snapshot expiry under `snapshot.num-retained.*` and
//!   `snapshot.time-retained`, tag expiry, and deletion of every file only expired snapshots
//!   and tags referenced.
//! - [`Maintainer::remove_orphans`]: files nothing references (a crash mid-commit leaves them)
//!   older than a safety window.
//! - [`Maintainer::health`]: files, sorted runs and levels per bucket, snapshots and tags.
//! - [`verify_table`]: every file each snapshot and tag needs exists, has the size its metadata
//!   records and decodes (Paimon keeps no checksums); [`check_version`] does the same for the
//!   latest snapshot (or a given version), to name the damaged file when a read fails.
//!
//! One process writes a table. Within it, data commits and compaction commits take the same
//! [`CommitLock`], and compaction only ever merges the newest sorted runs, so sequence
//! numbers stay monotonic while writers keep committing.

pub mod append;
mod commit;
mod error;
mod expire;
mod fence;
mod files;
mod health;
pub mod kvfile;
mod level0;
pub mod merge;
mod options;
mod orphan;
pub mod pick;
mod refs;
mod rewrite;
mod stats;
pub(crate) mod tags;
mod verify;

use std::sync::Arc;

use paimon::Table;

pub use commit::COMPACT_USER;
pub use error::Problem;
pub use error::{describe_paimon, LsmError, Result};
pub use expire::ExpireReport;
pub use fence::{Fence, FenceFuture, SharedFence};
pub use files::{live_files, BucketFiles, Version};
pub use health::{BucketHealth, TableHealth, TagInfo};
pub use level0::Level0Writer;
pub use options::{parse_duration, parse_memory_size, AppendOptions, CompactionOptions, ExpireOptions};
pub use orphan::OrphanReport;
pub use tags::READ_AT_ONCE as TAGS_READ_AT_ONCE;
pub use verify::{check_version, verify_table, TableCheck};

use crate::commit::{commit_compact, commit_overwrite, BucketChange};
use crate::error::paimon_err;
use crate::pick::{sorted_runs, Picker};
use crate::rewrite::Rewrite;

/// Serialises the commits of one table within the process (data commits and compactions).
pub type CommitLock = Arc<tokio::sync::Mutex<()>>;

/// How much to compact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactMode {
    /// What universal compaction picks; nothing when every bucket is within its triggers.
    Auto,
    /// Every bucket into one sorted run at the top level, deletes dropped.
    Full,
    /// The newest `n` sorted runs of each bucket that has more than one, written one level
    /// above the next run left alone (Java's forced size-ratio pick). Deletes are kept unless
    /// nothing older remains.
    NewestRuns(usize),
}

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CompactReport {
    /// The COMPACT snapshot committed, if anything changed.
    pub snapshot_id: Option<i64>,
    pub buckets: usize,
    pub files_in: usize,
    pub files_out: usize,
    pub rows_in: i64,
    pub rows_out: i64,
    /// Bytes of the files written.
    pub bytes_out: i64,
}

/// What an overwrite from another table did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct OverwriteReport {
    /// The OVERWRITE snapshot committed.
    pub snapshot_id: i64,
    /// Data files copied from the source and now live.
    pub files: usize,
    pub rows: i64,
    pub bytes: i64,
}

/// Bytes copied at a time between two tables' files.
const COPY_CHUNK: u64 = 8 << 20;

/// Maintenance of one table. Cheap to clone; clones share the locks.
#[derive(Clone)]
pub struct Maintainer {
    table: Table,
    name: String,
    compaction: CompactionOptions,
    expire: ExpireOptions,
    commit_lock: CommitLock,
    /// One compaction of the table at a time.
    compacting: Arc<tokio::sync::Mutex<()>>,
    /// One expiry (or tag deletion) of the table at a time. Expiry and compaction may overlap:
    /// compaction only deletes files live in the latest snapshot, expiry only files no
    /// retained snapshot sees.
    expiring: Arc<tokio::sync::Mutex<()>>,
    /// Checked before every commit, tag write and deletion (none by default).
    fence: Option<SharedFence>,
    /// Tags read before (none by default: every listing reads every tag file).
    tag_cache: Option<Arc<tags::TagCache>>,
}

impl Maintainer {
    /// Maintenance for `table`, named `name` in messages, committing under `commit_lock`.
    ///
    /// # Errors
    /// A maintenance option of the table has a value that cannot be used.
    pub fn new(table: Table, name: impl Into<String>, commit_lock: CommitLock) -> Result<Maintainer> {
        let name = name.into();
        let opts = table.schema().options();
        Ok(Maintainer {
            compaction: CompactionOptions::from_table(&name, opts)?,
            expire: ExpireOptions::from_table(&name, opts)?,
            table,
            name,
            commit_lock,
            compacting: Arc::default(),
            expiring: Arc::default(),
            fence: None,
            tag_cache: None,
        })
    }

    /// Keeps the tags this maintainer (and its clones) has read, so listing them again (health,
    /// expiry, orphan removal, tag deletion) reads only tag files it has not seen. Only for a
    /// table this process alone writes tags of: a tag another process replaces under the same
    /// name would go unseen. Default = off.
    pub fn with_tag_cache(mut self) -> Maintainer {
        self.tag_cache = Some(Arc::default());
        self
    }

    /// Tags held by the tag cache (0 without one).
    pub fn cached_tags(&self) -> usize {
        self.tag_cache.as_ref().map_or(0, |c| c.len())
    }

    fn tags(&self) -> Option<&tags::TagCache> {
        self.tag_cache.as_deref()
    }

    /// Deletes tag `tag` and forgets it.
    async fn delete_tag_file(&self, tag: &str) -> Result<()> {
        if let Some(c) = self.tags() {
            c.forget(tag);
        }
        self.table.tag_manager().delete(tag).await.map_err(paimon_err(&self.name, "delete tag"))
    }

    /// Checks `fence` before every snapshot commit, tag write and file deletion. Default = none.
    pub fn with_fence(mut self, fence: Option<SharedFence>) -> Maintainer {
        self.fence = fence;
        self
    }

    /// # Errors
    /// [`LsmError::Fenced`] when the fence refuses `what`.
    pub(crate) async fn fenced(&self, what: &'static str) -> Result<()> {
        match &self.fence {
            Some(f) => {
                f.check().await.map_err(|reason| LsmError::Fenced { table: self.name.clone(), what, reason })
            }
            None => Ok(()),
        }
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn compaction_options(&self) -> &CompactionOptions {
        &self.compaction
    }

    fn picker(&self) -> Picker {
        Picker {
            trigger: self.compaction.trigger,
            max_size_amp_percent: self.compaction.max_size_amp_percent,
            size_ratio: self.compaction.size_ratio,
            max_level: self.compaction.max_level(),
        }
    }

    fn append_picker(&self) -> append::AppendPicker {
        let opts = &self.compaction.append;
        append::AppendPicker {
            small: opts.small_file_size,
            target: opts.target_file_size,
            min_files: opts.min_file_num,
            max_files: opts.max_file_num,
            size_ratio: self.compaction.size_ratio,
        }
    }

    fn is_primary_key(&self) -> bool {
        !self.table.schema().primary_keys().is_empty()
    }

    /// Compacts the table's buckets and commits the result as one COMPACT snapshot.
    /// `progress(done, total)` is called after each bucket is looked at.
    ///
    /// # Errors
    /// Reading, merging or writing failed, or the commit lost the race for the next snapshot
    /// too often. Files written by a failed compaction are removed; the table is unchanged.
    /// When the latest snapshot's files are damaged, [`LsmError::Damaged`] names them.
    pub async fn compact(
        &self,
        mode: CompactMode,
        progress: impl FnMut(usize, usize),
    ) -> Result<CompactReport> {
        let r = self.compact_undiagnosed(mode, progress).await;
        self.checked(r).await
    }

    /// `r`, with a failure explained by [`Maintainer::diagnosed`].
    async fn checked<T>(&self, r: Result<T>) -> Result<T> {
        match r {
            Ok(v) => Ok(v),
            Err(e) => Err(self.diagnosed(e).await),
        }
    }

    /// `e`, or, when the latest snapshot has damaged files, [`LsmError::Damaged`] naming them
    /// with `e` as the cause.
    pub async fn diagnosed(&self, e: LsmError) -> LsmError {
        if matches!(e, LsmError::Damaged { .. }) {
            return e;
        }
        let problems = check_version(&self.table, &self.name, None).await;
        if problems.is_empty() {
            e
        } else {
            LsmError::Damaged { table: self.name.clone(), problems, cause: Some(Box::new(e)) }
        }
    }

    /// [`Maintainer::compact`] before a failure is diagnosed (checked for damaged files).
    async fn compact_undiagnosed(
        &self,
        mode: CompactMode,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<CompactReport> {
        let _compacting = self.compacting.lock().await;
        let sm = self.table.snapshot_manager();
        let Some(snapshot_id) =
            sm.get_latest_snapshot_id().await.map_err(paimon_err(&self.name, "read latest snapshot"))?
        else {
            return Ok(CompactReport::default());
        };
        if self.table.schema().options().get("file.format").is_some_and(|f| f != "parquet") {
            return Err(LsmError::Refused {
                table: self.name.clone(),
                message: "compaction writes parquet; this table uses another file.format".into(),
            });
        }
        if !self.is_primary_key() {
            return self.compact_append(mode, snapshot_id, progress).await;
        }
        let engine = merge::merge_engine(self.table.schema().options());
        let (first_row, deduplicate) = (engine == "first-row", engine == "deduplicate");
        let pick = merge::Pick::for_options(self.table.schema().options());
        let buckets = live_files(&self.table, &self.name, &Version::Snapshot(snapshot_id)).await?;
        let picker = self.picker();
        let mut changes: Vec<BucketChange> = Vec::new();
        let total = buckets.len();
        for (i, bucket) in buckets.into_iter().enumerate() {
            let runs = sorted_runs(&bucket.files);
            let unit = match mode {
                CompactMode::Auto => picker.pick(&runs),
                CompactMode::Full => picker.full(&runs),
                CompactMode::NewestRuns(n) => picker.newest(&runs, n),
            };
            if let Some(mut unit) = unit {
                let files_of = |rs: &[pick::SortedRun]| {
                    rs.iter()
                        .flat_map(|r| r.files.iter().map(|&f| bucket.files[f].clone()))
                        .collect::<Vec<_>>()
                };
                // Partial-update and aggregation merges are not associative across a delete
                // (a merged "delete, then insert" would read as a plain insert over older
                // runs), so a pick holding deletes takes every run.
                if !deduplicate
                    && unit.runs < runs.len()
                    && files_of(&runs[..unit.runs]).iter().any(|f| f.delete_row_count.unwrap_or(1) > 0)
                {
                    unit = pick::CompactUnit { runs: runs.len(), output_level: picker.max_level };
                }
                let inputs = files_of(&runs[..unit.runs]);
                let older = files_of(&runs[unit.runs..]);
                let highest = bucket.files.iter().map(|f| f.level).max().unwrap_or(0);
                let job = Rewrite {
                    table: &self.table,
                    name: &self.name,
                    bucket: &bucket,
                    inputs,
                    snapshot_id,
                    output_level: unit.output_level,
                    drop_delete: unit.output_level != 0 && unit.output_level >= highest,
                    first_row,
                    pick,
                    target_file_size: self.compaction.target_file_size,
                    older,
                };
                match job.run().await {
                    Ok(added) => {
                        let deleted = job.inputs.clone();
                        drop(job);
                        changes.push(BucketChange { bucket, deleted, added });
                    }
                    Err(e) => {
                        self.discard(&changes).await;
                        return Err(e);
                    }
                }
            }
            progress(i + 1, total);
        }
        self.commit_changes(changes).await
    }

    /// Append tables: consecutive small files merged in write order (see the `append`
    /// module), committed with the manifests merged as for primary-key tables.
    async fn compact_append(
        &self,
        mode: CompactMode,
        snapshot_id: i64,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<CompactReport> {
        append::check_table(&self.table, &self.name)?;
        let picker = self.append_picker();
        let buckets = live_files(&self.table, &self.name, &Version::Snapshot(snapshot_id)).await?;
        let mut changes: Vec<BucketChange> = Vec::new();
        let total = buckets.len();
        for (i, bucket) in buckets.into_iter().enumerate() {
            let order = append::write_order(&bucket.files);
            let sizes: Vec<u64> =
                order.iter().map(|&f| u64::try_from(bucket.files[f].file_size).unwrap_or(0)).collect();
            let picks = match mode {
                CompactMode::Auto => picker.pick(&sizes),
                CompactMode::Full => picker.full(&sizes),
                CompactMode::NewestRuns(n) => picker.newest(&sizes, n),
            };
            let mut change = BucketChange { bucket, deleted: Vec::new(), added: Vec::new() };
            for range in picks {
                let job = append::AppendRewrite {
                    table: &self.table,
                    name: &self.name,
                    bucket: &change.bucket,
                    inputs: order[range].iter().map(|&f| change.bucket.files[f].clone()).collect(),
                    target_file_size: picker.target,
                };
                match job.run().await {
                    Ok(files) => {
                        let inputs = job.inputs;
                        change.added.extend(files);
                        change.deleted.extend(inputs);
                    }
                    Err(e) => {
                        changes.push(change);
                        self.discard(&changes).await;
                        return Err(e);
                    }
                }
            }
            if !change.deleted.is_empty() {
                changes.push(change);
            }
            progress(i + 1, total);
        }
        self.commit_changes(changes).await
    }

    /// Commits `changes` as one COMPACT snapshot (merging the manifests when due), or removes
    /// their new files when the commit fails.
    async fn commit_changes(&self, changes: Vec<BucketChange>) -> Result<CompactReport> {
        let result = {
            let _commit = self.commit_lock.lock().await;
            match self.fenced("compaction commit").await {
                Ok(()) => {
                    commit_compact(
                        &self.table,
                        &self.name,
                        &changes,
                        self.compaction.manifest_merge_min_count,
                    )
                    .await
                }
                Err(e) => Err(e),
            }
        };
        match result {
            Ok(id) => {
                let mut report =
                    CompactReport { snapshot_id: id, buckets: changes.len(), ..Default::default() };
                for c in &changes {
                    report.files_in += c.deleted.len();
                    report.files_out += c.added.len();
                    report.rows_in += c.deleted.iter().map(|f| f.row_count).sum::<i64>();
                    report.rows_out += c.added.iter().map(|f| f.row_count).sum::<i64>();
                    report.bytes_out += c.added.iter().map(|f| f.file_size).sum::<i64>();
                }
                Ok(report)
            }
            Err(e) => {
                self.discard(&changes).await;
                Err(e)
            }
        }
    }

    /// Replaces the table's contents with `source`'s latest snapshot: `source`'s live data
    /// files are copied into this table's bucket directories and committed as one OVERWRITE
    /// snapshot by `user` with `identifier`, which deletes every file live before. `source`
    /// must have this table's schema and bucket count (a twin derived from the same spec; the
    /// files keep their levels and sequence numbers, which are consistent among themselves).
    /// Earlier snapshots and tags keep their own files.
    ///
    /// # Errors
    /// [`LsmError::Refused`] for a source whose bucket count differs or whose files live
    /// outside its bucket directories; copy and commit errors (the copied files are removed
    /// again and the table is unchanged).
    pub async fn overwrite_from(
        &self,
        source: &Table,
        user: &str,
        identifier: i64,
    ) -> Result<OverwriteReport> {
        let _compacting = self.compacting.lock().await;
        let refused = |message: String| LsmError::Refused { table: self.name.clone(), message };
        let buckets_of = |t: &Table| t.schema().options().get("bucket").cloned();
        if buckets_of(source) != buckets_of(&self.table) {
            return Err(refused(format!(
                "the source has bucket = {:?}, this table {:?}",
                buckets_of(source),
                buckets_of(&self.table)
            )));
        }
        let source_buckets = match source
            .snapshot_manager()
            .get_latest_snapshot_id()
            .await
            .map_err(paimon_err(&self.name, "read the source's latest snapshot"))?
        {
            Some(id) => live_files(source, &self.name, &Version::Snapshot(id)).await?,
            None => Vec::new(),
        };
        let (from_root, to_root) =
            (source.location().trim_end_matches('/'), self.table.location().trim_end_matches('/'));
        let mut added: Vec<BucketFiles> = Vec::with_capacity(source_buckets.len());
        let mut report = OverwriteReport::default();
        let copied = async {
            for b in source_buckets {
                let relative = b.bucket_path.strip_prefix(from_root).ok_or_else(|| {
                    refused(format!("the source's bucket {} lies outside its table directory", b.bucket_path))
                })?;
                let to = BucketFiles { bucket_path: format!("{to_root}{relative}"), ..b.clone() };
                self.table
                    .file_io()
                    .mkdirs(&to.bucket_path)
                    .await
                    .map_err(paimon_err(&self.name, "create bucket"))?;
                added.push(BucketFiles { files: Vec::new(), ..to.clone() });
                for f in &b.files {
                    if f.external_path.is_some() || !f.extra_files.is_empty() {
                        return Err(refused(format!(
                            "the source's file {} has external or extra files",
                            f.file_name
                        )));
                    }
                    self.copy_file(
                        source,
                        &f.data_file_path(&b.bucket_path),
                        &f.data_file_path(&to.bucket_path),
                    )
                    .await?;
                    added.last_mut().expect("pushed above").files.push(f.clone());
                    report.files += 1;
                    report.rows += f.row_count;
                    report.bytes += f.file_size;
                }
            }
            Ok::<(), LsmError>(())
        }
        .await;
        let committed = match copied {
            Err(e) => Err(e),
            Ok(()) => {
                let _commit = self.commit_lock.lock().await;
                match self.fenced("overwrite commit").await {
                    Ok(()) => {
                        commit_overwrite(
                            &self.table,
                            &self.name,
                            &added,
                            user,
                            identifier,
                            self.compaction.manifest_merge_min_count,
                        )
                        .await
                    }
                    Err(e) => Err(e),
                }
            }
        };
        match committed {
            Ok(id) => {
                report.snapshot_id = id;
                Ok(report)
            }
            Err(e) => {
                for b in &added {
                    for f in &b.files {
                        let _ = self.table.file_io().delete_file(&f.data_file_path(&b.bucket_path)).await;
                    }
                }
                Err(e)
            }
        }
    }

    /// Copies one file from `source`'s storage to this table's, a chunk at a time.
    async fn copy_file(&self, source: &Table, from: &str, to: &str) -> Result<()> {
        use paimon::io::FileRead;
        let input =
            source.file_io().new_input(from).map_err(paimon_err(&self.name, "open the source file"))?;
        let size = input.metadata().await.map_err(paimon_err(&self.name, "stat the source file"))?.size;
        let reader = input.reader().await.map_err(paimon_err(&self.name, "read the source file"))?;
        let output = self.table.file_io().new_output(to).map_err(paimon_err(&self.name, "create a file"))?;
        let mut writer = output.writer().await.map_err(paimon_err(&self.name, "create a file"))?;
        let mut at = 0;
        while at < size {
            let end = size.min(at + COPY_CHUNK);
            let bytes = reader.read(at..end).await.map_err(paimon_err(&self.name, "read the source file"))?;
            writer.write(bytes).await.map_err(paimon_err(&self.name, "write a file"))?;
            at = end;
        }
        writer.close().await.map_err(paimon_err(&self.name, "write a file"))
    }

    /// Removes the output files of compactions that will not be committed.
    async fn discard(&self, changes: &[BucketChange]) {
        for c in changes {
            for f in &c.added {
                let _ = self.table.file_io().delete_file(&f.data_file_path(&c.bucket.bucket_path)).await;
            }
        }
    }
}
