use std::path::PathBuf;

/// Errors of the record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The embedded store failed (I/O, corruption detected by its checksums, ...).
    #[error("record store at {path}: {source}")]
    Store {
        path: PathBuf,
        #[source]
        source: fjall::Error,
    },
    /// A stored entry could not be decoded: the record is damaged or was written by a newer version.
    #[error("record entry at offset {offset} is unreadable: {reason}")]
    Corrupt { offset: u64, reason: String },
    /// An event id was recorded before with different content.
    #[error("event id `{id}` was already recorded at offset {offset} with different content")]
    IdConflict { id: String, offset: u64 },
    /// The record was closed after an earlier write failure; nothing more is accepted.
    #[error("the record refused the write because an earlier write failed: {0}")]
    Poisoned(String),
}

impl RecordError {
    pub(crate) fn store(path: &std::path::Path) -> impl FnOnce(fjall::Error) -> RecordError + '_ {
        move |source| RecordError::Store { path: path.to_path_buf(), source }
    }
}
