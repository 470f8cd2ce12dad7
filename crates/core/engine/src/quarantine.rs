//! Row operations the derivers could not make, set aside so that no single event stops
//! derivation (docs/formats/quarantine.md).
//!
//! An acknowledged event stays in the record whatever happens to it later. When one of its
//! mappings fails at derivation (an overflow against a looked-up row, a value that does not fit
//! its column, a key that would be null), that row operation is *quarantined*: written to
//! `D/quarantine.jsonl` with the table, the offset, the event and the message, and skipped; every
//! other row operation of the event, and every later event, goes on. The file holds one JSON line
//! per quarantined operation and is made durable before any commit or status that covers its
//! offset, so a restart that derives the same events again finds the same failures and the same
//! file: at open, entries at or past a table's committed position are dropped, because those
//! events are derived again.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{io_err, EngineError};
use crate::layout::Layout;

/// The longest line read back from the quarantine file (an event line is at most 1 MiB, and an
/// entry holds its id and type, not its data).
const MAX_LINE: usize = 64 << 10;

/// The longest message kept for an entry (ids and types are bounded by the spec's own limits).
const MAX_MESSAGE: usize = 4 << 10;

/// One row operation that was not derived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quarantined {
    /// The state table (`stock`).
    pub table: String,
    /// The event's record offset.
    pub offset: u64,
    pub event_id: String,
    pub event_type: String,
    /// Why the row operation failed (the mapping and the column, with the values).
    pub message: String,
}

/// A table's quarantined operations: how many, and the latest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableQuarantine {
    pub count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<Quarantined>,
}

/// The quarantine file of one directory, open for the derivers.
pub(crate) struct Quarantine {
    path: PathBuf,
    /// Entries not yet written and synced.
    pending: Vec<Quarantined>,
    by_table: BTreeMap<String, TableQuarantine>,
}

impl Quarantine {
    /// Reads `D/quarantine.jsonl`, keeping the entries below each table's position in
    /// `positions` (by name in the spec; a table not named keeps all of its entries). The
    /// others are dropped from the file: their events are derived again.
    ///
    /// # Errors
    /// [`EngineError::Io`], also for a line that does not parse.
    pub fn open(layout: &Layout, positions: &HashMap<String, u64>) -> Result<Quarantine, EngineError> {
        let path = layout.quarantine_file();
        let mut q = Quarantine { path: path.clone(), pending: Vec::new(), by_table: BTreeMap::new() };
        let mut kept = Vec::new();
        let mut dropped = false;
        let whole = read_lines(&path, |entry, line| {
            if positions.get(&entry.table).is_some_and(|&p| entry.offset >= p) {
                dropped = true;
            } else {
                kept.extend_from_slice(line);
                q.note(entry);
            }
        })?;
        // A last line cut by a crash before its sync: its table's commit never happened.
        if dropped || whole == Some(false) {
            rewrite(&path, &kept)?;
        }
        Ok(q)
    }

    fn note(&mut self, entry: Quarantined) {
        let t = self.by_table.entry(entry.table.clone()).or_default();
        t.count += 1;
        // Only the latest is kept in memory; the file has every entry.
        t.latest = Some(entry);
    }

    /// Sets a row operation aside; it is written at the next [`Quarantine::flush`]. A message
    /// longer than [`MAX_MESSAGE`] is cut (it can quote an event's values), so every line reads
    /// back within [`MAX_LINE`].
    pub fn add(&mut self, mut entry: Quarantined) {
        if entry.message.len() > MAX_MESSAGE {
            let mut end = MAX_MESSAGE;
            while !entry.message.is_char_boundary(end) {
                end -= 1;
            }
            entry.message.truncate(end);
            entry.message.push_str(" …");
        }
        tracing::warn!(
            table = %entry.table, offset = entry.offset, event = %entry.event_id,
            "row operation quarantined: {}", entry.message
        );
        self.pending.push(entry.clone());
        self.note(entry);
    }

    /// Appends the pending entries and syncs the file; a no-op when there are none. Called
    /// before anything that covers their offsets (a commit, the status file) is written.
    ///
    /// # Errors
    /// [`EngineError::Io`].
    pub fn flush(&mut self) -> Result<(), EngineError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        for e in &self.pending {
            serde_json::to_writer(&mut bytes, e).expect("an entry serialises");
            bytes.push(b'\n');
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(io_err(&self.path))?;
        file.write_all(&bytes).map_err(io_err(&self.path))?;
        file.sync_data().map_err(io_err(&self.path))?;
        self.pending.clear();
        Ok(())
    }

    /// A table's quarantined operations so far (by name in the spec).
    pub fn of(&self, table: &str) -> Option<&TableQuarantine> {
        self.by_table.get(table)
    }
}

/// Every entry of a directory's quarantine file, in the order they were set aside (for
/// `livestate quarantine` and the API). Lines cut by a crash are skipped.
///
/// # Errors
/// [`EngineError::Io`], also for a line that does not parse.
pub fn entries(layout: &Layout, table: Option<&str>, limit: usize) -> Result<Vec<Quarantined>, EngineError> {
    let mut out = std::collections::VecDeque::new();
    read_lines(&layout.quarantine_file(), |entry, _| {
        if table.is_none_or(|t| t == entry.table) {
            out.push_back(entry);
            if out.len() > limit {
                out.pop_front();
            }
        }
    })?;
    Ok(out.into())
}

/// Replaces `table`'s entries in a directory's quarantine file with `entries` (a
/// re-derivation's), keeping every other table's; the file is rewritten whole and renamed into
/// place, so a crash leaves either version. The directory's writer must not be running.
///
/// # Errors
/// [`EngineError::Io`], also for a line that does not parse.
pub fn replace<'e>(
    layout: &Layout,
    table: &str,
    entries: impl IntoIterator<Item = &'e Quarantined>,
) -> Result<(), EngineError> {
    let path = layout.quarantine_file();
    let mut kept = Vec::new();
    let mut changed = false;
    read_lines(&path, |entry, line| {
        if entry.table == table {
            changed = true;
        } else {
            kept.extend_from_slice(line);
        }
    })?;
    for e in entries {
        serde_json::to_writer(&mut kept, e).expect("an entry serialises");
        kept.push(b'\n');
        changed = true;
    }
    if changed {
        rewrite(&path, &kept)?;
    }
    Ok(())
}

/// Replaces the quarantine file at `path` with `lines` whole: written beside it, synced, then
/// renamed over it, so a crash leaves either version.
fn rewrite(path: &Path, lines: &[u8]) -> Result<(), EngineError> {
    let tmp = path.with_extension("jsonl.tmp");
    let mut out = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
    out.write_all(lines).map_err(io_err(&tmp))?;
    out.sync_data().map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

/// Calls `each` with every whole line of the quarantine file at `path`, parsed and as read
/// (newline included), in file order. `None` when there is no file; `Some(false)` when its last
/// line was cut (no newline: a crash before its sync), which is not passed on.
///
/// # Errors
/// [`EngineError::Io`], also for a line that does not parse or is longer than [`MAX_LINE`].
fn read_lines(path: &Path, mut each: impl FnMut(Quarantined, &[u8])) -> Result<Option<bool>, EngineError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(EngineError::Io { path: path.to_path_buf(), source: e }),
    };
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line).map_err(io_err(path))?;
        if n == 0 {
            return Ok(Some(true));
        }
        if line.last() != Some(&b'\n') {
            if n > MAX_LINE {
                return Err(damaged(path, "a line longer than 64 KiB"));
            }
            return Ok(Some(false));
        }
        let entry: Quarantined = serde_json::from_slice(&line[..line.len() - 1])
            .map_err(|e| damaged(path, &format!("a line that is not an entry: {e}")))?;
        each(entry, &line);
    }
}

fn damaged(path: &Path, what: &str) -> EngineError {
    EngineError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the quarantine file holds {what}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_is_cut_so_its_line_reads_back_and_the_file_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path()).unwrap();
        let mut q = Quarantine::open(&layout, &HashMap::new()).unwrap();
        let long = "é".repeat(100_000);
        q.add(Quarantined {
            table: "stock".into(),
            offset: 7,
            event_id: "e7".into(),
            event_type: "m.a".into(),
            message: format!("column `x`: {long}"),
        });
        q.flush().unwrap();
        let read = entries(&layout, None, 10).unwrap();
        assert_eq!(read.len(), 1);
        assert!(read[0].message.len() <= MAX_MESSAGE + 4 && read[0].message.ends_with(" …"));
        // Reopened with stock committed past it: kept; with stock behind it: dropped.
        let kept = Quarantine::open(&layout, &HashMap::from([("stock".to_string(), 8)])).unwrap();
        assert_eq!(kept.of("stock").map(|t| t.count), Some(1));
        let dropped = Quarantine::open(&layout, &HashMap::from([("stock".to_string(), 7)])).unwrap();
        assert_eq!(dropped.of("stock"), None);
        assert!(entries(&layout, None, 10).unwrap().is_empty(), "the file was rewritten without it");
    }
}
