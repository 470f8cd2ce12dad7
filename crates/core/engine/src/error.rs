use std::path::PathBuf;

use livestate_api::{ErrorCode, ErrorKind};
use livestate_record::RecordError;
use livestate_spec::{EventError, SpecError};

/// One rejected input line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line number in the input.
    pub line: usize,
    pub id: Option<String>,
    pub error: EventError,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.id {
            Some(id) => write!(f, "line {} (id `{id}`): {}", self.line, self.error),
            None => write!(f, "line {}: {}", self.line, self.error),
        }
    }
}

/// Errors of the state-table engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The lookup index's store could not be read or written.
    #[error("lookup index of table {table}: {source}")]
    Index {
        table: String,
        #[source]
        source: fjall::Error,
    },
    /// An entry of the lookup index does not decode (a row, a firing), or the index lacks a
    /// table the spec declares: the index is damaged or from another version.
    #[error("lookup index of table {table}: {message}")]
    IndexCorrupt { table: String, message: String },
    /// The table's merge engine cannot be built from its checked spec (a livestate bug: the
    /// spec's checks should have refused it).
    #[error("table {table}: its merge engine: {message}")]
    Merge { table: String, message: String },
    /// Compaction, expiry or orphan cleanup failed.
    #[error(transparent)]
    Maintenance(#[from] livestate_lsm::LsmError),
    /// A Paimon operation on a table failed.
    #[error("paimon table {table}: {what}: {}", livestate_lsm::describe_paimon(.source))]
    Paimon {
        table: String,
        what: &'static str,
        #[source]
        source: paimon::Error,
    },
    /// Arrow refused data livestate built or read (a projection, a merge, a batch).
    #[error("table {table}: arrow data: {source}")]
    Arrow {
        table: String,
        #[source]
        source: arrow_schema::ArrowError,
    },
    /// Data does not have the shape livestate writes or reads: a column of a type it does not
    /// handle, a value that does not fit its column, a change row without a row kind.
    #[error("table {table}: arrow data: {message}")]
    ArrowShape { table: String, message: String },
    /// A task of livestate's own (a table's commit, the archive's writer, a read of part of a
    /// table) panicked or was cancelled.
    #[error("{what} failed: {source}")]
    Task {
        what: String,
        #[source]
        source: tokio::task::JoinError,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Another process owns the directory's writes.
    #[error("{dir} is in use by another livestate process ({holder}); stop it or wait for it to finish")]
    Locked { dir: PathBuf, holder: String },
    #[error("{dir} is not a livestate directory (run `livestate init --dir {dir}` first)")]
    NotInitialized { dir: PathBuf },
    #[error("{dir} is already initialised; choose another --dir or remove it")]
    AlreadyInitialized { dir: PathBuf },
    #[error("unknown table `{name}` (tables: {})", .known.join(", "))]
    UnknownTable { name: String, known: Vec<String> },
    #[error("unknown trigger `{name}` (triggers: {})", if .known.is_empty() { "none declared".to_string() } else { .known.join(", ") })]
    UnknownTrigger { name: String, known: Vec<String> },
    /// Some input lines were invalid; nothing of the batch was appended.
    #[error("{} invalid event(s), nothing was appended:\n{}", .0.len(), .0.iter().map(|e| format!("  {e}")).collect::<Vec<_>>().join("\n"))]
    InvalidEvents(Vec<LineError>),
    /// A `--key` or similar argument does not fit the table.
    #[error("table {table}: {message}")]
    BadRequest { table: String, message: String },
    /// A recorded event could not be derived. Derivation stops rather than skip it.
    #[error("the event at record offset {offset} cannot be derived: {message}")]
    Derivation { offset: u64, message: String },
    /// A recorded event does not type against the spec (the record and the spec disagree).
    /// Derivation stops rather than skip it.
    #[error("the event at record offset {offset} cannot be derived: {source}")]
    Undecodable {
        offset: u64,
        #[source]
        source: EventError,
    },
    /// The warehouse does not match the spec it was initialised with.
    #[error("table {table}: {message}")]
    Mismatch { table: String, message: String },
    /// An operation on a table failed and checking the table found files that are missing,
    /// have another size than their metadata records, or do not decode.
    #[error(
        "table {table} is damaged: {} (while: {cause})",
        .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    Damaged {
        table: String,
        problems: Vec<livestate_lsm::Problem>,
        #[source]
        cause: Box<EngineError>,
    },
    /// A `--warehouse` location (or the recorded one) that cannot be used.
    #[error("warehouse {uri}: {message}")]
    BadWarehouse { uri: String, message: String },
    /// Another writer holds the object-storage warehouse's lease.
    #[error(
        "the warehouse is in use by another livestate writer: {uri} is held by writer {owner} (pid {pid}, epoch {epoch}) for {expires_in_ms} ms more; stop it or wait for its lease to expire"
    )]
    LeaseHeld { uri: String, owner: String, pid: u32, epoch: u64, expires_in_ms: i64 },
    /// The warehouse lease was lost, or the store does not support what a lease needs.
    #[error("warehouse lease {uri}: {message}")]
    Lease { uri: String, message: String },
    /// The store holding the warehouse lease could not be reached or refused a request.
    #[error("warehouse lease {uri}: {what}: {source}")]
    LeaseStore {
        uri: String,
        what: &'static str,
        #[source]
        source: Box<opendal::Error>,
    },
}

impl EngineError {
    /// Whose failure this is, decided here once for every caller (the server's status, the
    /// CLI's exit code): a spec, line, key or location that does not fit is input, an unknown
    /// table or trigger is not found, a reused id or an initialised directory a conflict, a
    /// directory or warehouse another process holds (or a record refusing writes until
    /// restarted) unavailable, and a failure of files, stores or libraries internal.
    pub fn kind(&self) -> ErrorKind {
        match self {
            EngineError::Spec(e) => e.kind(),
            EngineError::Record(e) => e.kind(),
            EngineError::Maintenance(e) => e.kind(),
            EngineError::InvalidEvents(_)
            | EngineError::BadRequest { .. }
            | EngineError::NotInitialized { .. }
            | EngineError::BadWarehouse { .. } => ErrorKind::Input,
            EngineError::UnknownTable { .. } | EngineError::UnknownTrigger { .. } => ErrorKind::NotFound,
            EngineError::AlreadyInitialized { .. } => ErrorKind::Conflict,
            EngineError::Locked { .. }
            | EngineError::LeaseHeld { .. }
            | EngineError::Lease { .. }
            | EngineError::LeaseStore { .. } => ErrorKind::Unavailable,
            EngineError::Index { .. }
            | EngineError::IndexCorrupt { .. }
            | EngineError::Merge { .. }
            | EngineError::Paimon { .. }
            | EngineError::Arrow { .. }
            | EngineError::ArrowShape { .. }
            | EngineError::Task { .. }
            | EngineError::Undecodable { .. }
            | EngineError::Io { .. }
            | EngineError::Derivation { .. }
            | EngineError::Mismatch { .. }
            | EngineError::Damaged { .. } => ErrorKind::Internal,
        }
    }

    /// The code an answer carries: the kind's, or `insufficient_storage` when the record
    /// refused events because the disk or quota is full (nothing was stored).
    pub fn code(&self) -> ErrorCode {
        match self {
            EngineError::Record(r) => r.code(),
            other => other.kind().code(),
        }
    }
}

pub(crate) fn paimon_err<'a>(
    table: &'a str,
    what: &'static str,
) -> impl FnOnce(paimon::Error) -> EngineError + 'a {
    move |source| EngineError::Paimon { table: table.to_string(), what, source }
}

pub(crate) fn arrow_err(table: &str) -> impl Fn(arrow_schema::ArrowError) -> EngineError + '_ {
    move |source| EngineError::Arrow { table: table.to_string(), source }
}

pub(crate) fn shape_err(table: &str) -> impl Fn(String) -> EngineError + '_ {
    move |message| EngineError::ArrowShape { table: table.to_string(), message }
}

pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> EngineError + '_ {
    move |source| EngineError::Io { path: path.to_path_buf(), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_error() -> LineError {
        LineError { line: 3, id: Some("e3".into()), error: EventError::new("data.qty", "not an integer") }
    }

    #[test]
    fn each_error_says_whose_failure_it_is_and_the_code_it_answers() {
        let dir = PathBuf::from("/data/ls");
        let cases: Vec<(EngineError, ErrorKind, ErrorCode)> = vec![
            (EngineError::InvalidEvents(vec![line_error()]), ErrorKind::Input, ErrorCode::BadRequest),
            (
                EngineError::BadRequest { table: "stock".into(), message: "key `item` missing".into() },
                ErrorKind::Input,
                ErrorCode::BadRequest,
            ),
            (EngineError::Spec(SpecError::Invalid(Vec::new())), ErrorKind::Input, ErrorCode::BadRequest),
            (
                EngineError::UnknownTable { name: "stok".into(), known: vec!["stock".into()] },
                ErrorKind::NotFound,
                ErrorCode::NotFound,
            ),
            (
                EngineError::Record(RecordError::IdConflict { id: "e1".into(), offset: 7 }),
                ErrorKind::Conflict,
                ErrorCode::Conflict,
            ),
            (EngineError::AlreadyInitialized { dir: dir.clone() }, ErrorKind::Conflict, ErrorCode::Conflict),
            (
                EngineError::Locked { dir: dir.clone(), holder: "pid 7".into() },
                ErrorKind::Unavailable,
                ErrorCode::Unavailable,
            ),
            (
                EngineError::Record(RecordError::WriteFailed {
                    path: dir.clone(),
                    reason: "fsync failed".into(),
                    out_of_space: false,
                }),
                ErrorKind::Unavailable,
                ErrorCode::Unavailable,
            ),
            (
                EngineError::Record(RecordError::Poisoned {
                    path: dir.clone(),
                    reason: "No space left on device".into(),
                    out_of_space: true,
                }),
                ErrorKind::Unavailable,
                ErrorCode::InsufficientStorage,
            ),
            (
                EngineError::Derivation { offset: 9, message: "no such column".into() },
                ErrorKind::Internal,
                ErrorCode::Internal,
            ),
            (
                EngineError::Io { path: dir.clone(), source: std::io::Error::other("denied") },
                ErrorKind::Internal,
                ErrorCode::Internal,
            ),
            (
                EngineError::Merge { table: "stock".into(), message: "no sequence group".into() },
                ErrorKind::Internal,
                ErrorCode::Internal,
            ),
            (
                EngineError::Undecodable { offset: 3, source: EventError::new("data.qty", "not an integer") },
                ErrorKind::Internal,
                ErrorCode::Internal,
            ),
            (
                EngineError::Arrow {
                    table: "stock".into(),
                    source: arrow_schema::ArrowError::InvalidArgumentError("lengths differ".into()),
                },
                ErrorKind::Internal,
                ErrorCode::Internal,
            ),
            (
                EngineError::Lease { uri: "s3://b/w".into(), message: "the lease was taken over".into() },
                ErrorKind::Unavailable,
                ErrorCode::Unavailable,
            ),
        ];
        for (e, kind, code) in cases {
            assert_eq!((e.kind(), e.code()), (kind, code), "{e}");
        }
    }

    #[test]
    fn a_cause_from_another_library_stays_typed_as_the_errors_source() {
        use std::error::Error as _;
        let e = EngineError::Undecodable { offset: 3, source: EventError::new("data.qty", "not an integer") };
        assert!(e.source().and_then(|s| s.downcast_ref::<EventError>()).is_some(), "{e}");
        let e = EngineError::Arrow {
            table: "stock".into(),
            source: arrow_schema::ArrowError::InvalidArgumentError("lengths differ".into()),
        };
        assert!(e.source().and_then(|s| s.downcast_ref::<arrow_schema::ArrowError>()).is_some(), "{e}");
    }

    #[test]
    fn damage_found_after_a_failure_keeps_the_failure_typed_as_its_cause() {
        use std::error::Error as _;
        let problem =
            livestate_lsm::Problem { file: "bucket-0/data-1.parquet".into(), message: "missing".into() };
        let failure = EngineError::UnknownTable { name: "stok".into(), known: vec!["stock".into()] };
        let text = failure.to_string();
        let e = EngineError::Damaged {
            table: "state.stock".into(),
            problems: vec![problem.clone()],
            cause: Box::new(failure),
        };
        assert_eq!(e.to_string(), format!("table state.stock is damaged: {problem} (while: {text})"));
        // The source is the boxed error itself (a `Box<EngineError>`), whole.
        let cause = e.source().and_then(|s| s.downcast_ref::<Box<EngineError>>()).expect("the cause, typed");
        assert!(matches!(**cause, EngineError::UnknownTable { .. }));
        assert_eq!(e.kind(), ErrorKind::Internal);

        let lsm = livestate_lsm::LsmError::Refused { table: "state.stock".into(), message: "busy".into() };
        let damaged = livestate_lsm::LsmError::Damaged {
            table: "state.stock".into(),
            problems: vec![problem],
            cause: Some(Box::new(lsm)),
        };
        assert!(damaged.to_string().ends_with("(while: table state.stock: busy)"), "{damaged}");
        let cause = damaged.source().and_then(|s| s.downcast_ref::<Box<livestate_lsm::LsmError>>());
        assert!(matches!(cause.map(|c| &**c), Some(livestate_lsm::LsmError::Refused { .. })));
    }
}
