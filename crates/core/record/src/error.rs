use std::path::{Path, PathBuf};

use livestate_api::{ErrorCode, ErrorKind};

/// A file of an embedded store that failed its check.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileProblem {
    pub file: PathBuf,
    pub message: String,
}

impl std::fmt::Display for FileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.message)
    }
}

/// Errors of the record. The store's own error is kept in `error` fields and described in the
/// message (its own `Display` is a debug dump), so it is not repeated as a `source`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The embedded store could not be opened or read (an I/O error, a missing file, ...).
    #[error("record store at {}: {}", .path.display(), describe(.error))]
    Store { path: PathBuf, error: fjall::Error },
    /// Stored data failed a check of the embedded store (a block checksum, a truncated or
    /// garbled file): the record is damaged. `files` names the damaged files when they could be
    /// found (see `check_files`).
    #[error("{}", damaged_message(.path, *.keyspace, .files, .error))]
    Damaged {
        path: PathBuf,
        /// `events` or `ids`, when the failing read was in one keyspace.
        keyspace: Option<&'static str>,
        files: Vec<FileProblem>,
        error: fjall::Error,
    },
    /// Reading or writing a segment file (or its directory) failed.
    #[error("record segment {}: {error}", .file.display())]
    SegmentIo { file: PathBuf, error: std::io::Error },
    /// A segment file (or the record's `format` file) failed a check: a frame cut short, a
    /// CRC-32C that does not match, a group without its end below what was acknowledged.
    #[error("the record is damaged: {} at byte {position}: {reason}", .file.display())]
    DamagedSegment { file: PathBuf, position: u64, reason: String },
    /// A stored entry could not be decoded: the record is damaged or was written by a newer version.
    #[error("record entry at offset {offset} is unreadable: {reason}")]
    Corrupt { offset: u64, reason: String },
    /// An event id was recorded before with different content.
    #[error("event id `{id}` was already recorded at offset {offset} with different content")]
    IdConflict { id: String, offset: u64 },
    /// Storing this request failed (the disk is full, a write or an fsync failed): nothing of it
    /// is acknowledged, and the record refuses every later append until it is opened again.
    #[error(
        "the record at {} could not store the events, none of them is acknowledged: {reason}; \
         it refuses further appends until it is reopened (restart the process){}",
        .path.display(),
        if *.out_of_space { " once space is freed" } else { "" }
    )]
    WriteFailed { path: PathBuf, reason: String, out_of_space: bool },
    /// The record refused the write because an earlier write failed (see
    /// [`RecordError::WriteFailed`]); nothing is accepted until it is opened again.
    #[error(
        "the record at {} refuses appends since an earlier write failed ({reason}); nothing was \
         stored; restart the process to reopen it{}",
        .path.display(),
        if *.out_of_space { " once space is freed" } else { "" }
    )]
    Poisoned { path: PathBuf, reason: String, out_of_space: bool },
}

impl RecordError {
    /// Whether storing failed (now or earlier) so that nothing was acknowledged: a full disk, a
    /// failed write or fsync. The caller may retry the same events after a restart.
    pub fn is_write_failure(&self) -> bool {
        matches!(self, RecordError::WriteFailed { .. } | RecordError::Poisoned { .. })
    }

    /// Whose failure this is: a reused id is a conflict, a refused write is unavailable until
    /// the record is reopened (the events may be sent again then), the rest is internal.
    pub fn kind(&self) -> ErrorKind {
        match self {
            RecordError::IdConflict { .. } => ErrorKind::Conflict,
            RecordError::WriteFailed { .. } | RecordError::Poisoned { .. } => ErrorKind::Unavailable,
            RecordError::Store { .. }
            | RecordError::Damaged { .. }
            | RecordError::SegmentIo { .. }
            | RecordError::DamagedSegment { .. }
            | RecordError::Corrupt { .. } => ErrorKind::Internal,
        }
    }

    /// The code an answer carries: `insufficient_storage` when the disk or quota is full,
    /// else the kind's.
    pub fn code(&self) -> ErrorCode {
        if self.is_out_of_space() {
            ErrorCode::InsufficientStorage
        } else {
            self.kind().code()
        }
    }

    /// Whether the write failed because the disk (or the user's quota) is full.
    pub fn is_out_of_space(&self) -> bool {
        matches!(
            self,
            RecordError::WriteFailed { out_of_space: true, .. }
                | RecordError::Poisoned { out_of_space: true, .. }
        )
    }
}

fn damaged_message(
    path: &Path,
    keyspace: Option<&str>,
    files: &[FileProblem],
    error: &fjall::Error,
) -> String {
    let mut m = format!("the record at {} is damaged", path.display());
    if let Some(k) = keyspace {
        m.push_str(&format!(" (keyspace `{k}`)"));
    }
    m.push_str(&format!(": {}", describe(error)));
    if files.is_empty() {
        m.push_str("; no single damaged file was found (run `livestate verify`)");
    }
    for f in files {
        m.push_str(&format!("; {f}"));
    }
    m
}

/// Whether a store error means stored bytes failed a check (as opposed to an I/O failure).
pub(crate) fn is_damage(e: &fjall::Error) -> bool {
    use fjall::Error as F;
    use fjall::LsmError as L;
    match e {
        F::Storage(L::Io(io)) | F::Io(io) => {
            matches!(io.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData)
        }
        F::Storage(
            L::ChecksumMismatch { .. }
            | L::Decompress(_)
            | L::InvalidVersion(_)
            | L::Unrecoverable
            | L::InvalidTag(_)
            | L::InvalidTrailer
            | L::InvalidHeader(_)
            | L::Utf8(_),
        )
        | F::JournalRecovery(_)
        | F::InvalidVersion(_)
        | F::Decompress(_)
        | F::InvalidTrailer
        | F::InvalidTag(_)
        | F::Unrecoverable => true,
        _ => false,
    }
}

/// A failed write in words, and whether the disk or the quota is full.
pub(crate) fn write_failure(e: &RecordError) -> (String, bool) {
    match e {
        RecordError::Store { error, .. } | RecordError::Damaged { error, .. } => {
            (describe(error), is_out_of_space(error))
        }
        RecordError::SegmentIo { file, error } => {
            (format!("{}: {error}", file.display()), io_out_of_space(error))
        }
        other => (other.to_string(), false),
    }
}

/// Whether an I/O error says the disk or the quota is full.
pub(crate) fn is_out_of_space(e: &fjall::Error) -> bool {
    match e {
        fjall::Error::Io(io) | fjall::Error::Storage(fjall::LsmError::Io(io)) => io_out_of_space(io),
        _ => false,
    }
}

fn io_out_of_space(io: &std::io::Error) -> bool {
    io.kind() == std::io::ErrorKind::StorageFull
        || io.kind() == std::io::ErrorKind::QuotaExceeded
        || matches!(io.raw_os_error(), Some(28 | 122))
}

/// A store error in words: the OS error text for I/O, what failed for a check.
pub(crate) fn describe(e: &fjall::Error) -> String {
    use fjall::Error as F;
    use fjall::LsmError as L;
    match e {
        F::Io(io) | F::Storage(L::Io(io)) => io.to_string(),
        F::Storage(L::ChecksumMismatch { got, expected }) => format!(
            "checksum mismatch (xxh3 stored {:x}, computed {:x}): stored bytes changed",
            expected.into_u128(),
            got.into_u128()
        ),
        F::Storage(L::Decompress(c)) | F::Decompress(c) => format!("a {c:?} block does not decompress"),
        F::Storage(L::InvalidHeader(what)) => format!("invalid {what} header"),
        F::Storage(L::InvalidTrailer) | F::InvalidTrailer => "invalid file trailer".into(),
        F::Storage(L::InvalidTag((what, tag))) | F::InvalidTag((what, tag)) => {
            format!("invalid {what} tag {tag}")
        }
        F::Storage(L::InvalidVersion(v)) => format!("unknown format version {v}"),
        F::InvalidVersion(v) => format!("unknown format version {v:?}"),
        F::Storage(L::Unrecoverable) | F::Unrecoverable => {
            "the store cannot be recovered (a file is missing, truncated or unreadable)".into()
        }
        F::JournalRecovery(j) => format!("the journal is damaged ({j:?})"),
        F::Poisoned => "an earlier write or fsync failed; the store accepts no more writes".into(),
        other => format!("{other:?}"),
    }
}
