//! COMPACT and OVERWRITE snapshots: a delta manifest that deletes the replaced files and adds
//! their replacements, on top of a base manifest list that is merged into one manifest when it
//! has grown past `manifest.merge-min-count`. Built only from the `paimon` crate's public spec
//! API.

use paimon::spec::{
    BinaryRow, CommitKind, DataFileMeta, DataType, FileKind, Manifest, ManifestEntry, ManifestFileMeta,
    ManifestList, Snapshot,
};
use paimon::Table;
use serde::de::DeserializeOwned;

use crate::error::{paimon_err, LsmError, Result};
use crate::files::{live_files, BucketFiles, Version};
use crate::stats::MinMax;

/// Version of the manifest entries written here (as the crate writes them).
const MANIFEST_ENTRY_VERSION: i32 = 2;
/// Entries per merged base manifest file.
const ENTRIES_PER_MANIFEST: usize = 50_000;
/// Commit user of compaction snapshots; the derivers' own snapshots stay recognisable.
pub const COMPACT_USER: &str = "livestate-compact";
/// Attempts before a commit that keeps losing the race for the next snapshot id gives up.
const COMMIT_ATTEMPTS: usize = 10;

/// What a compaction or an overwrite changed in one bucket.
#[derive(Debug, Clone)]
pub(crate) struct BucketChange {
    pub bucket: BucketFiles,
    pub deleted: Vec<DataFileMeta>,
    pub added: Vec<DataFileMeta>,
}

/// A manifest entry with the bucket it belongs to and its kind (which `ManifestEntry` keeps
/// to itself).
type Entry<'a> = (ManifestEntry, &'a BucketFiles, FileKind);

fn entry<'a>(kind: FileKind, b: &'a BucketFiles, file: &DataFileMeta) -> Entry<'a> {
    let e = ManifestEntry::new(
        kind,
        b.partition.to_serialized_bytes(),
        b.bucket,
        b.total_buckets,
        file.clone(),
        MANIFEST_ENTRY_VERSION,
    );
    (e, b, kind)
}

/// Min, max and null count of each partition column over `partitions`, as manifests store them.
fn partition_stats<T: DeserializeOwned>(table: &Table, name: &str, partitions: &[&BinaryRow]) -> Result<T> {
    let fields = table.schema().partition_fields();
    let types: Vec<DataType> = fields.iter().map(|f| f.data_type().clone()).collect();
    let mut acc = MinMax::new(fields.len());
    for p in partitions.iter().filter(|_| !fields.is_empty()) {
        for (i, ty) in types.iter().enumerate() {
            acc.add(i, p.get_datum(i, ty).map_err(paimon_err(name, "partition value"))?);
        }
    }
    acc.finish(&types).map_err(|message| LsmError::Refused { table: name.into(), message })
}

/// Writes one manifest file holding `entries` and describes it for a manifest list.
async fn write_manifest(
    table: &Table,
    name: &str,
    entries: &[Entry<'_>],
    created: &mut Vec<String>,
) -> Result<ManifestFileMeta> {
    let sm = table.snapshot_manager();
    let file_name = format!("manifest-{}-0", uuid::Uuid::new_v4());
    let path = sm.manifest_path(&file_name);
    let plain: Vec<ManifestEntry> = entries.iter().map(|(e, _, _)| e.clone()).collect();
    created.push(path.clone());
    Manifest::write(table.file_io(), &path, &plain).await.map_err(paimon_err(name, "write manifest"))?;
    let size = table.file_io().get_status(&path).await.map_err(paimon_err(name, "stat manifest"))?.size;
    let mut added = 0;
    let mut deleted = 0;
    let mut schema_id = table.schema().id();
    let (mut min_bucket, mut max_bucket, mut min_level, mut max_level) = (None, None, None, None);
    for (e, b, _) in entries {
        if e.file().level < 0 {
            continue;
        }
        schema_id = schema_id.max(e.file().schema_id);
        min_bucket = Some(min_bucket.map_or(b.bucket, |m: i32| m.min(b.bucket)));
        max_bucket = Some(max_bucket.map_or(b.bucket, |m: i32| m.max(b.bucket)));
        min_level = Some(min_level.map_or(e.file().level, |m: i32| m.min(e.file().level)));
        max_level = Some(max_level.map_or(e.file().level, |m: i32| m.max(e.file().level)));
    }
    for (_, _, kind) in entries {
        match kind {
            FileKind::Add => added += 1,
            FileKind::Delete => deleted += 1,
        }
    }
    let partitions: Vec<&BinaryRow> = entries.iter().map(|(_, b, _)| &b.partition).collect();
    Ok(ManifestFileMeta::new(
        file_name,
        i64::try_from(size).expect("manifest size fits i64"),
        added,
        deleted,
        partition_stats(table, name, &partitions)?,
        schema_id,
    )
    .with_bucket_level_stats(min_bucket, max_bucket, min_level, max_level))
}

async fn write_list(
    table: &Table,
    name: &str,
    metas: &[ManifestFileMeta],
    created: &mut Vec<String>,
) -> Result<String> {
    let list_name = format!("manifest-list-{}-0", uuid::Uuid::new_v4());
    let path = table.snapshot_manager().manifest_path(&list_name);
    created.push(path.clone());
    ManifestList::write(table.file_io(), &path, metas)
        .await
        .map_err(paimon_err(name, "write manifest list"))?;
    Ok(list_name)
}

/// Every manifest file the snapshot's base and delta lists name.
pub(crate) async fn data_manifests(table: &Table, name: &str, s: &Snapshot) -> Result<Vec<ManifestFileMeta>> {
    let mut all = Vec::new();
    for list in [s.base_manifest_list(), s.delta_manifest_list()] {
        all.extend(crate::verify::read_manifest_list(table, name, list).await?);
    }
    Ok(all)
}

/// Commits `changes` (possibly none) as a COMPACT snapshot, merging the base manifests into
/// one when there are at least `merge_min_count` of them. Returns the new snapshot id, or
/// `None` when there was nothing to commit.
///
/// The caller holds the table's commit lock.
pub(crate) async fn commit_compact(
    table: &Table,
    name: &str,
    changes: &[BucketChange],
    merge_min_count: usize,
) -> Result<Option<i64>> {
    let sm = table.snapshot_manager();
    for _ in 0..COMMIT_ATTEMPTS {
        let latest =
            sm.get_latest_snapshot().await.map_err(paimon_err(name, "read latest snapshot"))?.ok_or_else(
                || LsmError::Refused { table: name.into(), message: "the table has no snapshot".into() },
            )?;
        let previous = data_manifests(table, name, &latest).await?;
        let merge = previous.len() >= merge_min_count;
        if changes.is_empty() && !merge {
            return Ok(None);
        }
        let how =
            How { kind: CommitKind::COMPACT, user: COMPACT_USER, identifier: latest.commit_identifier() };
        let base = if merge { Base::Merged } else { Base::Previous(previous) };
        if let Some(id) = attempt(table, name, changes, Some(&latest), base, &how).await? {
            return Ok(Some(id));
        }
    }
    Err(LsmError::Refused {
        table: name.into(),
        message: format!("gave up committing compaction after {COMMIT_ATTEMPTS} attempts lost the race for the next snapshot"),
    })
}

/// Commits an OVERWRITE snapshot by `user` with `identifier`: every data file live in the
/// latest snapshot is deleted and `added` (files already in the table's bucket directories) takes
/// their place. Returns the new snapshot id. The table's earlier snapshots and tags keep their
/// files (expiry removes them once nothing references them).
///
/// The caller holds the table's commit lock.
pub(crate) async fn commit_overwrite(
    table: &Table,
    name: &str,
    added: &[BucketFiles],
    user: &str,
    identifier: i64,
    merge_min_count: usize,
) -> Result<i64> {
    let sm = table.snapshot_manager();
    for _ in 0..COMMIT_ATTEMPTS {
        let latest = sm.get_latest_snapshot().await.map_err(paimon_err(name, "read latest snapshot"))?;
        let (previous, live) = match &latest {
            Some(s) => (
                data_manifests(table, name, s).await?,
                live_files(table, name, &Version::Snapshot(s.id())).await?,
            ),
            None => (Vec::new(), Vec::new()),
        };
        let mut changes: Vec<BucketChange> = live
            .into_iter()
            .map(|b| BucketChange { deleted: b.files.clone(), added: Vec::new(), bucket: b })
            .collect();
        for b in added {
            match changes
                .iter_mut()
                .find(|c| c.bucket.bucket == b.bucket && c.bucket.partition == b.partition)
            {
                Some(c) => c.added.extend(b.files.iter().cloned()),
                None => changes.push(BucketChange {
                    bucket: b.clone(),
                    deleted: Vec::new(),
                    added: b.files.clone(),
                }),
            }
        }
        let base = if previous.len() >= merge_min_count { Base::Merged } else { Base::Previous(previous) };
        let how = How { kind: CommitKind::OVERWRITE, user, identifier };
        if let Some(id) = attempt(table, name, &changes, latest.as_ref(), base, &how).await? {
            return Ok(id);
        }
    }
    Err(LsmError::Refused {
        table: name.into(),
        message: format!("gave up committing the overwrite after {COMMIT_ATTEMPTS} attempts lost the race for the next snapshot"),
    })
}

/// The base manifests of a new snapshot.
enum Base {
    /// The previous snapshot's base and delta manifests, as they are.
    Previous(Vec<ManifestFileMeta>),
    /// New manifests holding one `ADD` entry per file live in the previous snapshot.
    Merged,
}

/// The kind, user and identifier of a snapshot written here.
struct How<'a> {
    kind: CommitKind,
    user: &'a str,
    identifier: i64,
}

async fn cleanup(table: &Table, created: &[String]) {
    for p in created {
        let _ = table.file_io().delete_file(p).await;
    }
}

/// One attempt to publish the next snapshot: its id, or `None` when another commit took that id
/// first. The manifests it wrote are removed unless it published.
async fn attempt(
    table: &Table,
    name: &str,
    changes: &[BucketChange],
    latest: Option<&Snapshot>,
    base: Base,
    how: &How<'_>,
) -> Result<Option<i64>> {
    let mut created = Vec::new();
    let r = write_snapshot(table, name, changes, latest, base, how, &mut created).await;
    if !matches!(r, Ok(Some(_))) {
        cleanup(table, &created).await;
    }
    r
}

async fn write_snapshot(
    table: &Table,
    name: &str,
    changes: &[BucketChange],
    latest: Option<&Snapshot>,
    base: Base,
    how: &How<'_>,
    created: &mut Vec<String>,
) -> Result<Option<i64>> {
    let base = if let Base::Previous(previous) = base {
        previous
    } else {
        let id = latest.map_or(0, Snapshot::id);
        let live = live_files(table, name, &Version::Snapshot(id)).await?;
        // Every compacted file must still be live, or another compaction got there first.
        for c in changes {
            let here = live.iter().find(|b| b.bucket == c.bucket.bucket && b.partition == c.bucket.partition);
            for f in &c.deleted {
                if !here.is_some_and(|b| b.files.iter().any(|g| g.file_name == f.file_name)) {
                    return Err(LsmError::Refused {
                        table: name.into(),
                        message: format!(
                            "file {} is no longer live; another compaction changed the bucket",
                            f.file_name
                        ),
                    });
                }
            }
        }
        let entries: Vec<Entry<'_>> =
            live.iter().flat_map(|b| b.files.iter().map(move |f| entry(FileKind::Add, b, f))).collect();
        let mut metas = Vec::new();
        for chunk in entries.chunks(ENTRIES_PER_MANIFEST) {
            metas.push(write_manifest(table, name, chunk, created).await?);
        }
        metas
    };
    let (delta_list, delta_rows) = write_delta(table, name, changes, created).await?;
    let base_list = write_list(table, name, &base, created).await?;
    // A table without a snapshot gets snapshot 1, with an empty base.
    let snapshot = Snapshot::builder()
        .version(3)
        .uuid(Some(uuid::Uuid::new_v4().to_string()))
        .id(latest.map_or(1, |l| l.id() + 1))
        .schema_id(latest.map_or(table.schema().id(), Snapshot::schema_id))
        .base_manifest_list(base_list)
        .delta_manifest_list(delta_list)
        .commit_user(how.user.to_string())
        .commit_identifier(how.identifier)
        .commit_kind(how.kind.clone())
        .time_millis(u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0))
        .total_record_count(
            latest.map_or(Some(delta_rows), |l| l.total_record_count().map(|t| t + delta_rows)),
        )
        .delta_record_count(Some(delta_rows))
        .watermark(latest.and_then(Snapshot::watermark))
        .statistics(latest.and_then(|l| l.statistics().map(str::to_string)))
        .next_row_id(latest.and_then(Snapshot::next_row_id))
        .index_manifest(latest.and_then(|l| l.index_manifest().map(str::to_string)))
        .build();
    let committed = table
        .snapshot_manager()
        .commit_snapshot(&snapshot)
        .await
        .map_err(paimon_err(name, "commit snapshot"))?;
    Ok(committed.then_some(snapshot.id()))
}

/// Writes the delta manifest of `changes` (deletes, then adds, per bucket) and its list; the
/// list's name and the rows it adds less the rows it deletes.
async fn write_delta(
    table: &Table,
    name: &str,
    changes: &[BucketChange],
    created: &mut Vec<String>,
) -> Result<(String, i64)> {
    let delta_entries: Vec<Entry<'_>> = changes
        .iter()
        .flat_map(|c| {
            c.deleted
                .iter()
                .map(|f| entry(FileKind::Delete, &c.bucket, f))
                .chain(c.added.iter().map(|f| entry(FileKind::Add, &c.bucket, f)))
        })
        .collect();
    let delta = if delta_entries.is_empty() {
        Vec::new()
    } else {
        vec![write_manifest(table, name, &delta_entries, created).await?]
    };
    let delta_list = write_list(table, name, &delta, created).await?;
    let rows = |files: &[DataFileMeta]| files.iter().map(|f| f.row_count).sum::<i64>();
    Ok((delta_list, changes.iter().map(|c| rows(&c.added) - rows(&c.deleted)).sum()))
}
