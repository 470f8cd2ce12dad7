//! Checking an embedded store file by file, and the record as a whole: what `livestate verify`
//! runs, and what names the damaged file when a read fails a check.
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
use crate::record::Record;

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

/// What checking a whole record found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecordCheck {
    /// Events read and decoded.
    pub events: u64,
    /// Table files checked block by block.
    pub files: usize,
    /// Everything found wrong, each naming a file, a keyspace or an offset.
    pub problems: Vec<String>,
}

impl RecordCheck {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the record in `dir` as a whole: every table file block by block
/// ([`check_files`]); then, if the store opens, every event of `events` is read and decoded in
/// offset order (offsets dense from 0) and every entry of `ids` must point at an event with that
/// id (and every event must have its id entry).
///
/// Opening needs the directory to itself: call it without another [`Record`] open on `dir`.
pub fn check_record(dir: &Path) -> RecordCheck {
    let files = check_files(dir);
    let mut out = RecordCheck {
        files: files.files,
        problems: files.problems.iter().map(ToString::to_string).collect(),
        ..Default::default()
    };
    let record = match Record::open(dir) {
        Ok(r) => r,
        Err(e) => {
            // A damaged-store error repeats the file problems found above; say it only opened badly.
            out.problems.push(match e {
                RecordError::Damaged { error, .. } => {
                    format!("{}: the record does not open: {}", dir.display(), describe(&error))
                }
                other => format!("{}: the record does not open: {other}", dir.display()),
            });
            return out;
        }
    };
    let (events, problems) = record.check_contents();
    out.events = events;
    out.problems.extend(problems);
    out
}

impl Record {
    /// Reads every event and every id entry; returns the number of events and what is wrong.
    fn check_contents(&self) -> (u64, Vec<String>) {
        let inner = self.inner();
        let at = |keyspace: &str| format!("{} (keyspace `{keyspace}`)", inner.path.display());
        let mut problems = Vec::new();
        let mut ids_of_events = std::collections::HashMap::new();
        let mut expected = 0u64;
        let mut complete = true;
        for kv in inner.events.iter() {
            let (k, v) = match kv.into_inner() {
                Ok(kv) => kv,
                Err(e) => {
                    problems.push(format!(
                        "{}: reading stops after offset {expected}: {}",
                        at("events"),
                        describe(&e)
                    ));
                    complete = false;
                    break;
                }
            };
            let Some(offset) = crate::record::decode_offset(&k) else {
                problems.push(format!("{}: a key that is not an offset ({} bytes)", at("events"), k.len()));
                continue;
            };
            if offset != expected {
                problems.push(format!("{}: offsets jump from {expected} to {offset}", at("events")));
            }
            expected = offset + 1;
            match crate::RecordedEvent::decode(offset, &v) {
                Ok(ev) => {
                    ids_of_events.insert(ev.id, offset);
                }
                Err(e) => problems.push(format!("{}: {e}", at("events"))),
            }
        }
        if !complete {
            // The id index is checked against complete events only.
            return (expected, problems);
        }
        let mut indexed = 0usize;
        for kv in inner.ids.iter() {
            let (k, v) = match kv.into_inner() {
                Ok(kv) => kv,
                Err(e) => {
                    problems.push(format!("{}: reading failed: {}", at("ids"), describe(&e)));
                    break;
                }
            };
            let id = String::from_utf8_lossy(&k).into_owned();
            match (crate::record::decode_offset(&v), ids_of_events.get(&id)) {
                (Some(o), Some(&at_offset)) if o == at_offset => indexed += 1,
                (Some(o), Some(&at_offset)) => problems.push(format!(
                    "{}: id `{id}` points at offset {o}, but the event with that id is at offset {at_offset}",
                    at("ids")
                )),
                (Some(o), None) => problems
                    .push(format!("{}: id `{id}` points at offset {o}, but no event has that id", at("ids"))),
                (None, _) => problems.push(format!("{}: the entry of id `{id}` is not an offset", at("ids"))),
            }
        }
        if indexed < ids_of_events.len() {
            problems.push(format!(
                "{}: {} of {} event(s) have no id entry pointing at them",
                at("ids"),
                ids_of_events.len() - indexed,
                ids_of_events.len()
            ));
        }
        const SHOWN: usize = 20;
        if problems.len() > SHOWN {
            let more = problems.len() - SHOWN;
            problems.truncate(SHOWN);
            problems.push(format!("{}: and {more} more problem(s) like these", inner.path.display()));
        }
        (expected, problems)
    }
}
