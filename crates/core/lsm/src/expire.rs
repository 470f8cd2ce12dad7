//! Snapshot and tag expiry.
//!
//! Java Paimon's rules: keep at least `snapshot.num-retained.min` snapshots and at most
//! `snapshot.num-retained.max`, and expire the ones in between once they are older than
//! `snapshot.time-retained`. A tag expires when its own retention (or
//! `tag.default-time-retained`) has passed since it was created.
//!
//! A file is deleted only if an expiring snapshot or tag named it and no retained snapshot or
//! tag does. Data files live over one contiguous range of snapshots (added once, deleted
//! once), so a file an expired snapshot saw is still needed exactly when the new earliest
//! snapshot or a kept tag sees it. The EARLIEST hint moves first and snapshot files go before
//! the data they referenced: a crash part-way leaves only unreferenced files, which
//! [`Maintainer::remove_orphans`] collects.

use std::collections::{HashMap, HashSet};

use paimon::spec::Snapshot;

use crate::error::{paimon_err, Result};
use crate::files::Version;
use crate::refs::{data_file_paths, snapshot_refs, version_refs, Refs};
use crate::Maintainer;

/// What an expiry removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExpireReport {
    pub snapshots: u64,
    pub tags: Vec<String>,
    pub data_files: u64,
    pub manifest_files: u64,
    /// The earliest snapshot afterwards.
    pub earliest: Option<i64>,
}

impl Maintainer {
    /// Expires snapshots and tags past their retention and deletes the files only they
    /// referenced, in batches of `snapshot.expire.limit` so commits are never held up.
    /// `progress(done, total)` counts snapshots expired.
    ///
    /// # Errors
    /// Reading snapshots, manifests or listing files failed. What was deleted before the
    /// failure stays deleted; nothing a retained snapshot or tag needs is touched.
    /// When the latest snapshot's files are damaged, [`crate::LsmError::Damaged`] names them.
    pub async fn expire(&self, now_ms: i64, progress: impl FnMut(u64, u64)) -> Result<ExpireReport> {
        let r = self.expire_undiagnosed(now_ms, progress).await;
        self.checked(r).await
    }

    /// [`Maintainer::expire`] before a failure is diagnosed (checked for damaged files).
    async fn expire_undiagnosed(
        &self,
        now_ms: i64,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<ExpireReport> {
        let _expiring = self.expiring.lock().await;
        let name = self.name.as_str();
        let sm = self.table.snapshot_manager();
        let mut report = ExpireReport::default();
        let mut paths = None;
        let ids = sm.list_all_ids().await.map_err(paimon_err(name, "list snapshots"))?;
        let (Some(&earliest), Some(&latest)) = (ids.first(), ids.last()) else {
            return Ok(report);
        };

        let target = self.expire_target(&ids, now_ms).await?;
        // Tags: which expire, and what the kept ones hold on to. A tag on a snapshot at or
        // after `target` needs nothing beyond what the retained snapshots keep, so only older
        // tags are planned, once per snapshot.
        let tags = crate::tags::list_with_metadata(&self.table, name, self.tags()).await?;
        let mut kept_refs = Refs::default();
        let mut expired_refs = Refs::default();
        let mut planned: HashSet<(i64, bool)> = HashSet::new();
        for (tag, snap, created_ms, retained_s) in &tags {
            let retained_ms = retained_s.map(|s| (s * 1000.0) as i64).or(self
                .expire
                .tag_default_retained
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)));
            let expired =
                matches!((created_ms, retained_ms), (Some(c), Some(r)) if c.saturating_add(r) < now_ms);
            if expired {
                report.tags.push(tag.clone());
            }
            if snap.id() >= target || !planned.insert((snap.id(), expired)) {
                continue;
            }
            let refs = version_refs(&self.table, name, snap, &Version::Tag(tag.clone())).await?;
            if expired {
                expired_refs.extend(refs);
            } else {
                kept_refs.extend(refs);
            }
        }

        let total = u64::try_from((target - earliest).max(0)).unwrap_or(0);
        let mut from = earliest;
        let mut first_batch = true;
        while from < target || (first_batch && !report.tags.is_empty()) {
            first_batch = false;
            let to = target.min(from + i64::try_from(self.expire.expire_limit).unwrap_or(i64::MAX));
            let mut candidates = Refs::default();
            if from < to {
                let first = sm.get_snapshot(from).await.map_err(paimon_err(name, "read snapshot"))?;
                candidates.extend(version_refs(&self.table, name, &first, &Version::Snapshot(from)).await?);
                for id in from..=to {
                    if let Some(s) = self.snapshot(id).await? {
                        candidates.extend(snapshot_refs(&self.table, name, &s, id > from).await?);
                    }
                }
            }
            self.fenced("expiry").await?;
            if !report.tags.is_empty() && from == earliest {
                candidates.extend(std::mem::take(&mut expired_refs));
                for tag in &report.tags {
                    self.delete_tag_file(tag).await?;
                }
            }
            let to_snapshot =
                sm.get_snapshot(to.max(from)).await.map_err(paimon_err(name, "read snapshot"))?;
            let keep = self.keep_at(&to_snapshot, &kept_refs).await?;
            if from < to {
                sm.write_earliest_hint(to).await.map_err(paimon_err(name, "write earliest hint"))?;
                for id in from..to {
                    sm.delete_snapshot(id).await.map_err(paimon_err(name, "delete snapshot"))?;
                    report.snapshots += 1;
                }
            }
            self.delete_unreferenced(&candidates, &keep, &mut paths, &mut report).await?;
            progress(report.snapshots, total);
            from = to.max(from);
            if from >= target {
                break;
            }
        }
        report.earliest = Some(target.max(earliest).min(latest));
        Ok(report)
    }

    /// Pins snapshot `snapshot_id` with tag `tag` (kept for `time_retained`, in Paimon's
    /// duration format, e.g. `400 d`; for good when `None`), under the expiry lock so the
    /// snapshot cannot expire between the check and the tag. Re-pinning the same snapshot under
    /// the same name is a no-op.
    ///
    /// # Errors
    /// [`crate::LsmError::Refused`] when the snapshot does not exist (never written, or
    /// expired) or the tag already names another snapshot; Paimon errors.
    pub async fn pin(&self, tag: &str, snapshot_id: i64, time_retained: Option<&str>) -> Result<Snapshot> {
        let _expiring = self.expiring.lock().await;
        let name = self.name.as_str();
        let refused = |message: String| crate::LsmError::Refused { table: name.into(), message };
        // An existing tag first: pinning again what is pinned (a retry after a crash) succeeds even
        // once the snapshot itself has expired, since the tag keeps its files.
        let tm = self.table.tag_manager();
        if let Some(existing) = tm.get(tag).await.map_err(paimon_err(name, "read tag"))? {
            if existing.id() == snapshot_id {
                return Ok(existing);
            }
            return Err(refused(format!("tag `{tag}` already names snapshot {}", existing.id())));
        }
        let sm = self.table.snapshot_manager();
        // The snapshot itself, not a listing of all of them (an hour of snapshots is thousands of
        // files, and this runs for every proposal); the listing only names what is kept when the
        // snapshot cannot be read.
        let snapshot = match sm.get_snapshot(snapshot_id).await {
            Ok(snapshot) => snapshot,
            Err(e) => {
                let ids = sm.list_all_ids().await.map_err(paimon_err(name, "list snapshots"))?;
                if ids.contains(&snapshot_id) {
                    return Err(paimon_err(name, "read snapshot")(e));
                }
                let kept = match (ids.first(), ids.last()) {
                    (Some(a), Some(b)) => format!("snapshots kept: {a}..={b}"),
                    _ => "the table has no snapshot yet".into(),
                };
                return Err(refused(format!("there is no snapshot {snapshot_id} ({kept})")));
            }
        };
        self.fenced("tag write").await?;
        tm.create_with_retention(tag, &snapshot, time_retained)
            .await
            .map_err(paimon_err(name, "create tag"))?;
        Ok(snapshot)
    }

    /// Deletes tag `tag` and the files only it referenced (Paimon's tag deletion).
    ///
    /// # Errors
    /// The tag does not exist, or reading manifests or deleting files failed.
    pub async fn delete_tag(&self, tag: &str) -> Result<ExpireReport> {
        let _expiring = self.expiring.lock().await;
        let name = self.name.as_str();
        let sm = self.table.snapshot_manager();
        let tm = self.table.tag_manager();
        let mut report = ExpireReport::default();
        let mut paths = None;
        let tagged = tm.get(tag).await.map_err(paimon_err(name, "read tag"))?.ok_or_else(|| {
            crate::LsmError::Refused { table: name.into(), message: format!("there is no tag `{tag}`") }
        })?;
        let earliest = sm.list_all_ids().await.map_err(paimon_err(name, "list snapshots"))?.first().copied();
        let candidates = match earliest {
            // A tag on a retained snapshot holds nothing that snapshot does not.
            Some(e) if tagged.id() < e => {
                version_refs(&self.table, name, &tagged, &Version::Tag(tag.into())).await?
            }
            _ => Refs::default(),
        };
        let mut kept_refs = Refs::default();
        if let Some(e) = earliest {
            for (other, snap) in crate::tags::list(&self.table, name, self.tags()).await? {
                if other != tag && snap.id() < e {
                    kept_refs.extend(version_refs(&self.table, name, &snap, &Version::Tag(other)).await?);
                }
            }
        }
        self.fenced("tag deletion").await?;
        self.delete_tag_file(tag).await?;
        report.tags.push(tag.to_string());
        if let Some(e) = earliest {
            let earliest_snapshot = sm.get_snapshot(e).await.map_err(paimon_err(name, "read snapshot"))?;
            let keep = self.keep_at(&earliest_snapshot, &kept_refs).await?;
            self.delete_unreferenced(&candidates, &keep, &mut paths, &mut report).await?;
        }
        report.earliest = earliest;
        Ok(report)
    }

    /// What must stay once `earliest` is the oldest snapshot and `kept_tags` (tags older than
    /// it) remain: everything `earliest` sees or names, and everything those tags see.
    async fn keep_at(&self, earliest: &Snapshot, kept_tags: &Refs) -> Result<Refs> {
        let name = self.name.as_str();
        let mut keep = version_refs(&self.table, name, earliest, &Version::Snapshot(earliest.id())).await?;
        keep.data.extend(kept_tags.data.iter().cloned());
        keep.manifests.extend(kept_tags.manifests.iter().cloned());
        keep.extend(snapshot_refs(&self.table, name, earliest, false).await?);
        Ok(keep)
    }

    /// Deletes the candidate files `keep` does not name.
    /// `paths` caches the table's data file paths: listed once per expiry, when first needed
    /// (the files deleted are old ones, so a listing taken earlier in the run has them).
    async fn delete_unreferenced(
        &self,
        candidates: &Refs,
        keep: &Refs,
        paths: &mut Option<HashMap<String, String>>,
        report: &mut ExpireReport,
    ) -> Result<()> {
        let name = self.name.as_str();
        self.fenced("file deletion").await?;
        let io = self.table.file_io();
        if paths.is_none() && candidates.data.iter().any(|d| !keep.data.contains(d)) {
            *paths = Some(data_file_paths(&self.table, name).await?);
        }
        let empty = HashMap::new();
        let paths = paths.as_ref().unwrap_or(&empty);
        for file in candidates.data.difference(&keep.data) {
            if let Some(path) = paths.get(file) {
                io.delete_file(path).await.map_err(paimon_err(name, "delete data file"))?;
                report.data_files += 1;
            }
        }
        for file in candidates.manifests.difference(&keep.manifests) {
            let path = self.table.snapshot_manager().manifest_path(file);
            if io.exists(&path).await.map_err(paimon_err(name, "stat manifest"))? {
                io.delete_file(&path).await.map_err(paimon_err(name, "delete manifest"))?;
                report.manifest_files += 1;
            }
        }
        Ok(())
    }

    async fn snapshot(&self, id: i64) -> Result<Option<Snapshot>> {
        match self.table.snapshot_manager().get_snapshot(id).await {
            Ok(s) => Ok(Some(s)),
            Err(paimon::Error::SnapshotNotExist { .. }) => Ok(None),
            Err(e) => Err(paimon_err(&self.name, "read snapshot")(e)),
        }
    }

    /// The snapshot that becomes the earliest (Java's `ExpireSnapshotsImpl` rule).
    async fn expire_target(&self, ids: &[i64], now_ms: i64) -> Result<i64> {
        let (earliest, latest) = (ids[0], ids[ids.len() - 1]);
        let retained_max = i64::try_from(self.expire.retained_max).unwrap_or(i64::MAX);
        let retained_min = i64::try_from(self.expire.retained_min).unwrap_or(i64::MAX);
        let min = latest.saturating_sub(retained_max).saturating_add(1).max(earliest);
        let max_exclusive = latest.saturating_sub(retained_min).saturating_add(1);
        let older_than = now_ms - i64::try_from(self.expire.time_retained.as_millis()).unwrap_or(i64::MAX);
        for id in min..max_exclusive {
            if let Some(s) = self.snapshot(id).await? {
                if i64::try_from(s.time_millis()).unwrap_or(i64::MAX) >= older_than {
                    return Ok(id.max(earliest));
                }
            }
        }
        Ok(max_exclusive.max(min).max(earliest))
    }
}
