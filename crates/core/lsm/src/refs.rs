//! Which files a snapshot or tag references: the bookkeeping behind expiry and orphan cleanup.

use std::collections::{HashMap, HashSet};

use paimon::spec::{ManifestFileMeta, Snapshot};
use paimon::Table;

use crate::error::{paimon_err, Result};
use crate::files::{live_files, Version};
use crate::verify::{check_manifest_size, read_manifest, read_manifest_list};

/// File names (data files, manifests, manifest lists) a set of versions references.
#[derive(Debug, Default)]
pub(crate) struct Refs {
    pub data: HashSet<String>,
    pub manifests: HashSet<String>,
}

impl Refs {
    pub fn extend(&mut self, other: Refs) {
        self.data.extend(other.data);
        self.manifests.extend(other.manifests);
    }
}

async fn read_list(table: &Table, name: &str, list: &str) -> Result<Vec<ManifestFileMeta>> {
    read_manifest_list(table, name, list).await
}

/// The data files a manifest names. Its size is checked first: a truncated manifest that still
/// decodes would otherwise hide files from expiry and orphan cleanup, which then delete them.
async fn entry_names(table: &Table, name: &str, manifest: &ManifestFileMeta) -> Result<Vec<String>> {
    let entries = read_manifest(table, name, manifest).await?;
    Ok(entries.iter().map(|e| e.file().file_name.clone()).collect())
}

/// The manifest lists and manifests of a snapshot, plus the data files its delta and
/// changelog name (files it added, deleted or produced).
pub(crate) async fn snapshot_refs(
    table: &Table,
    name: &str,
    s: &Snapshot,
    with_delta_files: bool,
) -> Result<Refs> {
    let mut refs = Refs::default();
    let lists = [Some(s.base_manifest_list()), Some(s.delta_manifest_list()), s.changelog_manifest_list()];
    for (i, list) in lists.into_iter().enumerate() {
        let Some(list) = list else { continue };
        refs.manifests.insert(list.to_string());
        for m in read_list(table, name, list).await? {
            // Delta (1) and changelog (2) manifests name the files this snapshot touched.
            if with_delta_files && i > 0 {
                refs.data.extend(entry_names(table, name, &m).await?);
            }
            refs.manifests.insert(m.file_name().to_string());
        }
    }
    if let Some(index) = s.index_manifest() {
        refs.manifests.insert(index.to_string());
    }
    Ok(refs)
}

/// Everything a retained version needs to stay readable: its live data files, its changelog
/// files and its manifests.
pub(crate) async fn version_refs(table: &Table, name: &str, s: &Snapshot, version: &Version) -> Result<Refs> {
    let mut refs = Refs::default();
    // Paimon's planning below does not check sizes: a truncated manifest that still decodes
    // would hide live files, which expiry or orphan cleanup would then delete.
    for list in [s.base_manifest_list(), s.delta_manifest_list()] {
        for m in read_list(table, name, list).await? {
            check_manifest_size(table, name, &m).await?;
        }
    }
    for b in live_files(table, name, version).await? {
        refs.data.extend(b.files.into_iter().map(|f| f.file_name));
    }
    let mut own = snapshot_refs(table, name, s, false).await?;
    if let Some(list) = s.changelog_manifest_list() {
        for m in read_list(table, name, list).await? {
            own.data.extend(entry_names(table, name, &m).await?);
        }
    }
    refs.extend(own);
    Ok(refs)
}

/// Paths of every data file in the table's bucket directories, by file name.
pub(crate) async fn data_file_paths(table: &Table, name: &str) -> Result<HashMap<String, String>> {
    let root = table.location().trim_end_matches('/');
    let all =
        table.file_io().list_status_recursive(root).await.map_err(paimon_err(name, "list table files"))?;
    Ok(all
        .into_iter()
        .filter(|s| !s.is_dir && s.path.split('/').any(|part| part.starts_with("bucket-")))
        .filter_map(|s| {
            let file = s.path.rsplit('/').next()?.to_string();
            Some((file, s.path))
        })
        .collect())
}
