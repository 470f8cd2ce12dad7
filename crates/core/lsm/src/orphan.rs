//! Orphan cleanup: files in the table directory that no snapshot or tag references.
//!
//! A crash between writing files and committing them (a data commit, a compaction, an expiry
//! cut short) leaves such files behind. Files younger than the safety window are left alone:
//! they may belong to a commit still in progress.

use std::time::Duration;

use crate::error::{paimon_err, Result};
use crate::files::Version;
use crate::refs::{snapshot_refs, version_refs, Refs};
use crate::Maintainer;

/// What an orphan sweep removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct OrphanReport {
    pub files: u64,
    pub bytes: u64,
}

impl Maintainer {
    /// Deletes data files, manifests and snapshot leftovers that no snapshot or tag references
    /// and that were last modified more than `older_than` before `now_ms`.
    ///
    /// # Errors
    /// Listing the table or reading a snapshot's manifests failed; nothing is deleted then.
    /// When the latest snapshot's files are damaged, [`crate::LsmError::Damaged`] names them.
    pub async fn remove_orphans(&self, older_than: Duration, now_ms: i64) -> Result<OrphanReport> {
        let r = self.remove_orphans_undiagnosed(older_than, now_ms).await;
        self.checked(r).await
    }

    /// [`Maintainer::remove_orphans`] before a failure is diagnosed (checked for damaged files).
    async fn remove_orphans_undiagnosed(&self, older_than: Duration, now_ms: i64) -> Result<OrphanReport> {
        // A compaction's outputs are unreferenced until it commits: sweep alone.
        let _compacting = self.compacting.lock().await;
        let _expiring = self.expiring.lock().await;
        let name = self.name.as_str();
        let sm = self.table.snapshot_manager();
        let mut report = OrphanReport::default();
        let cutoff = now_ms - i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX);
        let root = self.table.location().trim_end_matches('/').to_string();
        // List before reading references: a file committed after the listing is not in it.
        let listing = self
            .table
            .file_io()
            .list_status_recursive(&root)
            .await
            .map_err(paimon_err(name, "list table files"))?;
        self.fenced("orphan removal").await?;
        let ids = sm.list_all_ids().await.map_err(paimon_err(name, "list snapshots"))?;
        let mut keep = Refs::default();
        if let Some(&earliest) = ids.first() {
            let first = sm.get_snapshot(earliest).await.map_err(paimon_err(name, "read snapshot"))?;
            keep.extend(version_refs(&self.table, name, &first, &Version::Snapshot(earliest)).await?);
            for &id in &ids[1..] {
                let s = sm.get_snapshot(id).await.map_err(paimon_err(name, "read snapshot"))?;
                keep.extend(snapshot_refs(&self.table, name, &s, true).await?);
            }
        }
        // An empty tag file is one a crash cut before its first byte (livestate now writes tags
        // through a temporary file and a rename, but an older writer wrote them in place): it
        // pins nothing, and no Paimon reader accepts it. Its temporary file likewise.
        for status in listing.iter().filter(|s| !s.is_dir) {
            let Some(file) = in_table(&root, &status.path).strip_prefix("tag/") else { continue };
            let old_enough = status.last_modified.is_some_and(|m| m.timestamp_millis() <= cutoff);
            let cut = (file.starts_with("tag-") && status.size == 0)
                || (file.starts_with(".tag-") && file.ends_with(".tmp"));
            if old_enough && cut {
                self.table
                    .file_io()
                    .delete_file(&status.path)
                    .await
                    .map_err(paimon_err(name, "delete a tag file cut by a crash"))?;
                if let Some(tag) = file.strip_prefix("tag-") {
                    if let Some(cache) = self.tags() {
                        cache.forget(tag);
                    }
                }
                report.files += 1;
            }
        }
        for (tag, snap) in crate::tags::list(&self.table, name, self.tags()).await? {
            keep.extend(version_refs(&self.table, name, &snap, &Version::Tag(tag)).await?);
        }
        let earliest = ids.first().copied();
        for status in listing.into_iter().filter(|s| !s.is_dir) {
            let Some(modified) = status.last_modified else { continue };
            if modified.timestamp_millis() > cutoff {
                continue;
            }
            let rel = in_table(&root, &status.path);
            let file = rel.rsplit('/').next().unwrap_or(rel);
            let orphan = if rel.split('/').any(|p| p.starts_with("bucket-")) {
                !keep.data.contains(file)
            } else if let Some(m) = rel.strip_prefix("manifest/") {
                !keep.manifests.contains(m)
            } else if let Some(s) = rel.strip_prefix("snapshot/") {
                // A snapshot below the earliest (an expiry cut short) or a temporary file.
                match s.strip_prefix("snapshot-").and_then(|n| n.parse::<i64>().ok()) {
                    Some(id) => earliest.is_some_and(|e| id < e),
                    None => s.contains(".tmp"),
                }
            } else {
                false
            };
            if orphan {
                self.table
                    .file_io()
                    .delete_file(&status.path)
                    .await
                    .map_err(paimon_err(name, "delete orphan"))?;
                report.files += 1;
                report.bytes += status.size;
            }
        }
        Ok(report)
    }
}

/// A listed path relative to the table's directory `root` (`tag/tag-x`, `bucket-0/data-…`).
fn in_table<'a>(root: &str, path: &'a str) -> &'a str {
    path.strip_prefix(root).unwrap_or(path).trim_start_matches('/')
}
