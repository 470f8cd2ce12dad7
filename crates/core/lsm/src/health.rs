//! A table's shape: files, levels and sorted runs per bucket, snapshots and tags.

use crate::error::{paimon_err, Result};
use crate::files::{live_files, Version};
use crate::pick::sorted_runs;
use crate::Maintainer;

/// One bucket of the latest snapshot.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BucketHealth {
    pub bucket: i32,
    pub files: usize,
    pub sorted_runs: usize,
    /// Files per level, index = level.
    pub files_per_level: Vec<usize>,
    pub bytes: u64,
    pub rows: i64,
}

/// A tag and the snapshot it pins.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TagInfo {
    pub name: String,
    pub snapshot_id: i64,
}

/// The shape of a table right now.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableHealth {
    pub latest_snapshot: Option<i64>,
    pub earliest_snapshot: Option<i64>,
    pub snapshots: usize,
    pub buckets: Vec<BucketHealth>,
    pub tags: Vec<TagInfo>,
}

impl Maintainer {
    /// Files, levels and sorted runs per bucket of the latest snapshot, snapshots and tags.
    ///
    /// # Errors
    /// Reading snapshots, tags or manifests failed.
    /// When the latest snapshot's files are damaged, [`crate::LsmError::Damaged`] names them.
    pub async fn health(&self) -> Result<TableHealth> {
        let r = self.health_undiagnosed().await;
        self.checked(r).await
    }

    /// [`Maintainer::health`] before a failure is diagnosed (checked for damaged files).
    async fn health_undiagnosed(&self) -> Result<TableHealth> {
        let name = self.name.as_str();
        let sm = self.table.snapshot_manager();
        let ids = sm.list_all_ids().await.map_err(paimon_err(name, "list snapshots"))?;
        let mut h = TableHealth {
            latest_snapshot: ids.last().copied(),
            earliest_snapshot: ids.first().copied(),
            snapshots: ids.len(),
            ..TableHealth::default()
        };
        if let Some(&latest) = ids.last() {
            for b in live_files(&self.table, name, &Version::Snapshot(latest)).await? {
                let max_level = b.files.iter().map(|f| f.level).max().unwrap_or(0);
                let mut per_level = vec![0; usize::try_from(max_level).unwrap_or(0) + 1];
                for f in &b.files {
                    per_level[usize::try_from(f.level).unwrap_or(0)] += 1;
                }
                h.buckets.push(BucketHealth {
                    bucket: b.bucket,
                    files: b.files.len(),
                    sorted_runs: sorted_runs(&b.files).len(),
                    files_per_level: per_level,
                    bytes: b.files.iter().map(|f| u64::try_from(f.file_size).unwrap_or(0)).sum(),
                    rows: b.files.iter().map(|f| f.row_count).sum(),
                });
            }
        }
        for (tag, snap) in crate::tags::list(&self.table, name, self.tags()).await? {
            h.tags.push(TagInfo { name: tag, snapshot_id: snap.id() });
        }
        Ok(h)
    }
}
