//! Checking a table's files against its metadata: what `livestate verify` runs, and what names
//! the damaged file when reading a table fails.
//!
//! Paimon keeps no checksum of its files, so what can be checked is what the metadata records:
//! every snapshot and tag parses; every manifest list it names exists and decodes; every
//! manifest exists, has the size its `ManifestFileMeta` records and decodes; every data and
//! changelog file a version sees exists, has the size its `DataFileMeta` records, and decodes
//! page by page into the number of rows the metadata records.

use std::collections::{BTreeMap, HashMap};

use paimon::spec::{DataFileMeta, Manifest, ManifestEntry, ManifestFileMeta, ManifestList, Snapshot};
use paimon::Table;

use crate::error::Problem;
use crate::error::{describe_paimon, LsmError, Result};
use crate::files::{live_files, Version};

/// What checking a table found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableCheck {
    pub table: String,
    pub snapshots: usize,
    pub tags: usize,
    pub manifest_lists: usize,
    pub manifests: usize,
    pub data_files: usize,
    pub problems: Vec<Problem>,
}

fn damaged(table: &str, file: &str, message: String) -> LsmError {
    LsmError::Damaged {
        table: table.into(),
        problems: vec![Problem { file: file.into(), message }],
        cause: None,
    }
}

/// Reads a manifest list, naming it when it is missing or does not decode.
///
/// # Errors
/// [`LsmError::Damaged`] naming the file.
pub(crate) async fn read_manifest_list(
    table: &Table,
    name: &str,
    list: &str,
) -> Result<Vec<ManifestFileMeta>> {
    let path = table.snapshot_manager().manifest_path(list);
    ManifestList::read(table.file_io(), &path)
        .await
        .map_err(|e| damaged(name, &path, format!("manifest list does not decode: {}", describe_paimon(&e))))
}

/// Reads a manifest after checking its size against the `ManifestFileMeta` that names it, so a
/// truncated manifest is refused even where it would still decode.
///
/// # Errors
/// [`LsmError::Damaged`] naming the file.
pub(crate) async fn read_manifest(
    table: &Table,
    name: &str,
    meta: &ManifestFileMeta,
) -> Result<Vec<ManifestEntry>> {
    let path = check_manifest_size(table, name, meta).await?;
    Manifest::read(table.file_io(), &path)
        .await
        .map_err(|e| damaged(name, &path, format!("manifest does not decode: {}", describe_paimon(&e))))
}

/// Checks that a manifest exists with the size its `ManifestFileMeta` records; its path.
///
/// # Errors
/// [`LsmError::Damaged`] naming the file.
pub(crate) async fn check_manifest_size(
    table: &Table,
    name: &str,
    meta: &ManifestFileMeta,
) -> Result<String> {
    let path = table.snapshot_manager().manifest_path(meta.file_name());
    let status = table.file_io().get_status(&path).await.map_err(|e| {
        damaged(name, &path, format!("manifest is missing or unreadable: {}", describe_paimon(&e)))
    })?;
    if i64::try_from(status.size).ok() != Some(meta.file_size()) {
        return Err(damaged(
            name,
            &path,
            format!(
                "manifest is {} bytes but its manifest list records {} (truncated or overwritten)",
                status.size,
                meta.file_size()
            ),
        ));
    }
    Ok(path)
}

/// Files of the table's bucket directories by name: (path, size).
async fn bucket_files(table: &Table, name: &str) -> Result<HashMap<String, (String, u64)>> {
    let root = table.location().trim_end_matches('/');
    let all = table.file_io().list_status_recursive(root).await.map_err(|e| {
        damaged(name, root, format!("the table directory cannot be listed: {}", describe_paimon(&e)))
    })?;
    Ok(all
        .into_iter()
        .filter(|s| !s.is_dir && s.path.split('/').any(|part| part.starts_with("bucket-")))
        .filter_map(|s| Some((s.path.rsplit('/').next()?.to_string(), (s.path, s.size))))
        .collect())
}

/// The checks of one table, remembering files already checked (versions share most files).
struct Checker<'a> {
    table: &'a Table,
    name: &'a str,
    files: HashMap<String, (String, u64)>,
    lists: HashMap<String, bool>,
    manifests: HashMap<String, Option<Vec<ManifestEntry>>>,
    data: HashMap<String, bool>,
    problems: Vec<Problem>,
}

impl<'a> Checker<'a> {
    async fn new(table: &'a Table, name: &'a str) -> Result<Checker<'a>> {
        Ok(Checker {
            table,
            name,
            files: bucket_files(table, name).await?,
            lists: HashMap::new(),
            manifests: HashMap::new(),
            data: HashMap::new(),
            problems: Vec::new(),
        })
    }

    fn problem(&mut self, file: &str, message: String) {
        self.problems.push(Problem { file: file.into(), message });
    }

    fn absorb(&mut self, e: LsmError) {
        match e {
            LsmError::Damaged { problems, .. } => self.problems.extend(problems),
            other => self.problem(self.table.location(), other.to_string()),
        }
    }

    /// Checks one manifest list and its manifests; the entries when all of them read.
    async fn list(&mut self, list: &str) -> Option<Vec<ManifestEntry>> {
        let metas = match read_manifest_list(self.table, self.name, list).await {
            Ok(m) => {
                self.lists.insert(list.to_string(), true);
                m
            }
            Err(e) => {
                if self.lists.insert(list.to_string(), false).is_none() {
                    self.absorb(e);
                }
                return None;
            }
        };
        let mut entries = Vec::new();
        let mut whole = true;
        for meta in &metas {
            let known = self.manifests.get(meta.file_name()).cloned();
            let read = match known {
                Some(r) => r,
                None => {
                    let r = match read_manifest(self.table, self.name, meta).await {
                        Ok(es) => Some(es),
                        Err(e) => {
                            self.absorb(e);
                            None
                        }
                    };
                    self.manifests.insert(meta.file_name().to_string(), r.clone());
                    r
                }
            };
            match read {
                Some(es) => entries.extend(es),
                None => whole = false,
            }
        }
        whole.then_some(entries)
    }

    /// Checks a data or changelog file named by `version`.
    async fn data_file(&mut self, f: &DataFileMeta, version: &str) {
        if self.data.contains_key(&f.file_name) {
            return;
        }
        let ok = match self.files.get(&f.file_name).cloned() {
            None => {
                let dir = self.table.location().trim_end_matches('/');
                self.problem(
                    &format!("{dir}/bucket-?/{}", f.file_name),
                    format!("missing (named by {version})"),
                );
                false
            }
            Some((path, size)) if i64::try_from(size).ok() != Some(f.file_size) => {
                self.problem(
                    &path,
                    format!(
                        "{size} bytes but its metadata records {} (truncated or overwritten; named by {version})",
                        f.file_size
                    ),
                );
                false
            }
            Some((path, _)) => match parquet_rows(self.table, &path).await {
                Ok(rows) if rows == f.row_count || f.row_count < 0 => true,
                Ok(rows) => {
                    self.problem(
                        &path,
                        format!("holds {rows} rows but its metadata records {}", f.row_count),
                    );
                    false
                }
                Err(message) => {
                    self.problem(&path, message);
                    false
                }
            },
        };
        self.data.insert(f.file_name.clone(), ok);
    }

    /// Checks everything version `label` (a snapshot or tag) needs to be read.
    async fn version(&mut self, snapshot: &Snapshot, version: Version, label: &str) {
        let mut whole = true;
        for list in [snapshot.base_manifest_list(), snapshot.delta_manifest_list()] {
            whole &= self.list(list).await.is_some();
        }
        if let Some(list) = snapshot.changelog_manifest_list() {
            let path = self.table.snapshot_manager().manifest_path(list);
            if let (Some(expected), Ok(status)) =
                (snapshot.changelog_manifest_list_size(), self.table.file_io().get_status(&path).await)
            {
                if i64::try_from(status.size).ok() != Some(expected) {
                    self.problem(
                        &path,
                        format!("manifest list is {} bytes but {label} records {expected}", status.size),
                    );
                }
            }
            match self.list(list).await {
                Some(entries) => {
                    for e in entries {
                        self.data_file(e.file(), label).await;
                    }
                }
                None => whole = false,
            }
        }
        if !whole {
            return;
        }
        match live_files(self.table, self.name, &version).await {
            Ok(buckets) => {
                for b in buckets {
                    for f in &b.files {
                        self.data_file(f, label).await;
                    }
                }
            }
            Err(e) => self.problem(self.table.location(), format!("{label} cannot be planned: {e}")),
        }
    }
}

/// The number of rows a parquet file holds, every page decoded (a page that does not decompress
/// or decode fails the check; Paimon's parquet files carry no page checksums, so a changed byte
/// that still decodes is not found).
async fn parquet_rows(table: &Table, path: &str) -> std::result::Result<i64, String> {
    let bytes = table
        .file_io()
        .new_input(path)
        .map_err(|e| format!("unreadable: {}", describe_paimon(&e)))?
        .read()
        .await
        .map_err(|e| format!("unreadable: {}", describe_paimon(&e)))?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| format!("not a readable parquet file: {e}"))?
        .build()
        .map_err(|e| format!("not a readable parquet file: {e}"))?;
    let mut rows = 0i64;
    for batch in reader {
        let batch = batch.map_err(|e| format!("a page does not decode after {rows} rows: {e}"))?;
        rows += i64::try_from(batch.num_rows()).unwrap_or(i64::MAX);
    }
    Ok(rows)
}

/// Checks every snapshot from the earliest to the latest (their ids must be contiguous) and
/// every tag of `table` (named `name`), and lists every damaged or missing file.
///
/// # Errors
/// Only when the table's directory cannot be listed at all; everything else is a problem in
/// the result.
pub async fn verify_table(table: &Table, name: &str) -> Result<TableCheck> {
    let mut c = Checker::new(table, name).await?;
    let sm = table.snapshot_manager();
    let mut out = TableCheck { table: name.to_string(), ..TableCheck::default() };
    let ids = match sm.list_all_ids().await {
        Ok(ids) => ids,
        Err(e) => {
            c.problem(&sm.snapshot_dir(), format!("snapshots cannot be listed: {}", describe_paimon(&e)));
            Vec::new()
        }
    };
    for pair in ids.windows(2) {
        if pair[1] != pair[0] + 1 {
            c.problem(
                &sm.snapshot_path(pair[0] + 1),
                format!("missing: snapshots jump from {} to {}", pair[0], pair[1]),
            );
        }
    }
    for &id in &ids {
        out.snapshots += 1;
        match sm.get_snapshot(id).await {
            Ok(s) => c.version(&s, Version::Snapshot(id), &format!("snapshot {id}")).await,
            Err(e) => {
                c.problem(&sm.snapshot_path(id), format!("snapshot does not read: {}", describe_paimon(&e)))
            }
        }
    }
    let tm = table.tag_manager();
    match tm.list_all_names().await {
        Ok(names) => {
            for tag in names {
                out.tags += 1;
                match tm.get(&tag).await {
                    Ok(Some(s)) => c.version(&s, Version::Tag(tag.clone()), &format!("tag {tag}")).await,
                    Ok(None) => c.problem(&tm.tag_path(&tag), "tag disappeared while checking".into()),
                    Err(e) => {
                        c.problem(&tm.tag_path(&tag), format!("tag does not read: {}", describe_paimon(&e)))
                    }
                }
            }
        }
        Err(e) => c.problem(&tm.tag_directory(), format!("tags cannot be listed: {}", describe_paimon(&e))),
    }
    out.manifest_lists = c.lists.len();
    out.manifests = c.manifests.len();
    out.data_files = c.data.len();
    // One problem per file, in path order.
    let mut by_file: BTreeMap<(String, String), ()> = BTreeMap::new();
    for p in c.problems {
        by_file.insert((p.file, p.message), ());
    }
    out.problems = by_file.into_keys().map(|(file, message)| Problem { file, message }).collect();
    Ok(out)
}

/// The damaged or missing files of one version of the table: a snapshot or tag, or the latest
/// snapshot (what readers and writers use) when `version` is `None`. Empty when it checks out,
/// or when the table has no snapshot.
pub async fn check_version(table: &Table, name: &str, version: Option<&Version>) -> Vec<Problem> {
    let mut c = match Checker::new(table, name).await {
        Ok(c) => c,
        Err(LsmError::Damaged { problems, .. }) => return problems,
        Err(e) => return vec![Problem { file: table.location().to_string(), message: e.to_string() }],
    };
    let sm = table.snapshot_manager();
    let tm = table.tag_manager();
    match version {
        Some(Version::Tag(tag)) => match tm.get(tag).await {
            Ok(Some(s)) => c.version(&s, Version::Tag(tag.clone()), &format!("tag {tag}")).await,
            Ok(None) => {}
            Err(e) => c.problem(&tm.tag_path(tag), format!("tag does not read: {}", describe_paimon(&e))),
        },
        Some(Version::Snapshot(id)) => match sm.get_snapshot(*id).await {
            Ok(s) => c.version(&s, Version::Snapshot(*id), &format!("snapshot {id}")).await,
            Err(e) => {
                c.problem(&sm.snapshot_path(*id), format!("snapshot does not read: {}", describe_paimon(&e)))
            }
        },
        None => match sm.get_latest_snapshot_id().await {
            Ok(Some(id)) => match sm.get_snapshot(id).await {
                Ok(s) => c.version(&s, Version::Snapshot(id), &format!("snapshot {id}")).await,
                Err(e) => c.problem(
                    &sm.snapshot_path(id),
                    format!("snapshot does not read: {}", describe_paimon(&e)),
                ),
            },
            Ok(None) => {}
            Err(e) => c.problem(
                &sm.snapshot_dir(),
                format!("the latest snapshot cannot be found: {}", describe_paimon(&e)),
            ),
        },
    }
    c.problems
}
