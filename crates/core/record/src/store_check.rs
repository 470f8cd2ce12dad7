//! Checking an embedded store file by file: what `livestate verify` runs on every store, and
//! what names the damaged file when a read fails a check.
//!
//! fjall keeps each keyspace as an LSM tree whose table files (`keyspaces/<id>/tables/<n>`) are
//! made of blocks, each with an xxh3 checksum of its bytes and a checksum of its header; a
//! table's trailer (table of contents) carries its own checksum. Reading a table file on its
//! own with lsm-tree's table reader checks the trailer, the metadata, index and filter blocks,
//! and then every data block.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::FileProblem;
use crate::error::{describe, is_damage, RecordError};

/// The error for a failed store call on the record at `path`: when the failure is a failed
/// check of stored bytes, the store's files are checked so the error names the damaged ones
/// ([`RecordError::Damaged`]); otherwise [`RecordError::Store`]. Costs nothing unless a call failed.
pub(crate) fn store_error(path: &Path) -> impl FnOnce(fjall::Error) -> RecordError + '_ {
    move |error| {
        if is_damage(&error) {
            let files = check_files(path).problems;
            RecordError::Damaged { path: path.to_path_buf(), keyspace: None, files, error }
        } else {
            RecordError::Store { path: path.to_path_buf(), error }
        }
    }
}

/// Like [`store_error`] for a read in one keyspace.
pub(crate) fn read_error<'a>(
    path: &'a Path,
    keyspace: &'static str,
) -> impl FnOnce(fjall::Error) -> RecordError + 'a {
    move |error| match store_error(path)(error) {
        RecordError::Damaged { path, files, error, .. } => {
            RecordError::Damaged { path, keyspace: Some(keyspace), files, error }
        }
        other => other,
    }
}

/// What checking a store's files found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct FilesCheck {
    /// Table files checked.
    pub files: usize,
    pub problems: Vec<FileProblem>,
}

/// Checks every table file of the fjall database in `dir` on its own: its trailer, metadata,
/// index and filter blocks, and every data block against its checksum. Works whether or not the
/// database can be opened (a truncated table file keeps it from opening). The journal is not
/// covered here: fjall checks each journal batch's checksum when the database is opened.
pub fn check_files(dir: &Path) -> FilesCheck {
    let mut out = FilesCheck::default();
    let cache = Arc::new(lsm_tree::Cache::with_capacity_bytes(1 << 20));
    let keyspaces = dir.join("keyspaces");
    for ks in sorted_entries(&keyspaces, &mut out.problems) {
        let tables = ks.join("tables");
        if !tables.is_dir() {
            continue;
        }
        for file in sorted_entries(&tables, &mut out.problems) {
            out.files += 1;
            if let Err(e) = check_table_file(&file, &cache) {
                out.problems.push(FileProblem { file, message: e });
            }
        }
    }
    out
}

fn sorted_entries(dir: &Path, problems: &mut Vec<FileProblem>) -> Vec<PathBuf> {
    let read = match std::fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            problems.push(FileProblem { file: dir.to_path_buf(), message: format!("cannot list: {e}") });
            return Vec::new();
        }
    };
    let mut paths: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths
}

fn check_table_file(file: &Path, cache: &Arc<lsm_tree::Cache>) -> Result<(), String> {
    let table = lsm_tree::Table::recover(
        file.to_path_buf(),
        lsm_tree::Checksum::from_raw(0),
        0,
        0,
        Arc::clone(cache),
        None,
        true,
        true,
    )
    .map_err(|e| format!("unreadable table file: {}", describe(&fjall::Error::Storage(e))))?;
    let scanner = table
        .scan()
        .map_err(|e| format!("unreadable table file: {}", describe(&fjall::Error::Storage(e))))?;
    for item in scanner {
        item.map_err(|e| format!("damaged data block: {}", describe(&fjall::Error::Storage(e))))?;
    }
    Ok(())
}
