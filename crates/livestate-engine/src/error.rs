use std::path::PathBuf;

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
    /// The lookup index could not be read or written.
    #[error("lookup index of table {table}: {message}")]
    Index { table: String, message: String },
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
    /// Building or decoding Arrow data failed.
    #[error("table {table}: arrow data: {message}")]
    Arrow { table: String, message: String },
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
    /// The warehouse does not match the spec it was initialised with.
    #[error("table {table}: {message}")]
    Mismatch { table: String, message: String },
    /// An operation on a table failed and checking the table found files that are missing,
    /// have another size than their metadata records, or do not decode.
    #[error(
        "table {table} is damaged: {} (while: {cause})",
        .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    Damaged { table: String, problems: Vec<livestate_lsm::Problem>, cause: String },
    /// A `--warehouse` location (or the recorded one) that cannot be used.
    #[error("warehouse {uri}: {message}")]
    BadWarehouse { uri: String, message: String },
    /// Another writer holds the object-storage warehouse's lease.
    #[error(
        "the warehouse is in use by another livestate writer: {uri} is held by writer {owner} (pid {pid}, epoch {epoch}) for {expires_in_ms} ms more; stop it or wait for its lease to expire"
    )]
    LeaseHeld { uri: String, owner: String, pid: u32, epoch: u64, expires_in_ms: i64 },
    /// The warehouse lease could not be taken, renewed or checked, or was lost.
    #[error("warehouse lease {uri}: {message}")]
    Lease { uri: String, message: String },
}

pub(crate) fn paimon_err<'a>(
    table: &'a str,
    what: &'static str,
) -> impl FnOnce(paimon::Error) -> EngineError + 'a {
    move |source| EngineError::Paimon { table: table.to_string(), what, source }
}

pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> EngineError + '_ {
    move |source| EngineError::Io { path: path.to_path_buf(), source }
}

/// `e`, or [`EngineError::Damaged`] when checking `version` of `table` (`None`: the latest
/// snapshot) finds damaged files: the failure of an operation on a table is explained by the
/// files it could not read. Costs nothing unless an operation failed.
pub(crate) async fn diagnose(
    table: &paimon::Table,
    name: &str,
    version: Option<&livestate_lsm::Version>,
    e: EngineError,
) -> EngineError {
    if matches!(
        e,
        EngineError::Damaged { .. } | EngineError::Maintenance(livestate_lsm::LsmError::Damaged { .. })
    ) {
        return e;
    }
    let problems = livestate_lsm::check_version(table, name, version).await;
    if problems.is_empty() {
        e
    } else {
        EngineError::Damaged { table: name.to_string(), problems, cause: e.to_string() }
    }
}
