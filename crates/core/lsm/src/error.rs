//! The one error type of this crate. A leaf: it imports nothing of the crate's logic.

use livestate_api::ErrorKind;

/// One file of a table that failed its check.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// The file's path (or the table's, for a problem of no single file).
    pub file: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

/// What can go wrong while maintaining a table. Every variant names the table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LsmError {
    /// The Paimon crate failed while doing `what`.
    #[error("table {table}: {what}: {}", describe_paimon(.source))]
    Paimon {
        table: String,
        what: &'static str,
        #[source]
        source: paimon::Error,
    },
    /// A data file could not be read, merged or written.
    #[error("table {table}: file {file}: {message}")]
    DataFile { table: String, file: String, message: String },
    /// A table option livestate relies on has a value it cannot use.
    #[error("table {table}: option `{key}` = `{value}`: {message}")]
    Option { table: String, key: String, value: String, message: String },
    /// The table is in a state maintenance refuses to touch (nothing is changed).
    #[error("table {table}: {message}")]
    Refused { table: String, message: String },
    /// Files of the table are missing, have another size than their metadata records, or do not
    /// decode. `cause` is the failure that led to checking, when there was one.
    #[error(
        "table {table} is damaged: {}{}",
        .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
        .cause.as_ref().map(|c| format!(" (while: {c})")).unwrap_or_default()
    )]
    Damaged {
        table: String,
        problems: Vec<Problem>,
        #[source]
        cause: Option<Box<LsmError>>,
    },
    /// This process no longer owns the table's writes ([`crate::Fence`]): nothing was written.
    #[error("table {table}: {what} refused: {reason}")]
    Fenced { table: String, what: &'static str, reason: String },
}

impl LsmError {
    /// Whose failure this is: a table fenced off from this process is unavailable to it (another
    /// process owns the writes now); everything else is livestate's, including a table state
    /// maintenance refuses to touch (no request of a caller leads there).
    pub fn kind(&self) -> ErrorKind {
        match self {
            LsmError::Fenced { .. } => ErrorKind::Unavailable,
            LsmError::Refused { .. }
            | LsmError::Paimon { .. }
            | LsmError::DataFile { .. }
            | LsmError::Option { .. }
            | LsmError::Damaged { .. } => ErrorKind::Internal,
        }
    }

    /// [`LsmError::DataFile`]: `file` of `table` could not be read, merged or written.
    pub(crate) fn data_file(table: &str, file: &str, message: impl std::fmt::Display) -> LsmError {
        LsmError::DataFile { table: table.to_string(), file: file.to_string(), message: message.to_string() }
    }
}

/// Maps a Paimon error to [`LsmError::Paimon`] for `table`.
pub(crate) fn paimon_err<'a>(
    table: &'a str,
    what: &'static str,
) -> impl FnOnce(paimon::Error) -> LsmError + 'a {
    move |source| LsmError::Paimon { table: table.to_string(), what, source }
}

pub type Result<T, E = LsmError> = std::result::Result<T, E>;

/// A Paimon error in words. Its own `Display` quotes its cause with `Debug`, which for an
/// I/O error is a multi-line dump (with a backtrace when `RUST_BACKTRACE` is set); here the cause
/// is quoted with `Display`, which still names the file and the operating system's error.
pub fn describe_paimon(e: &paimon::Error) -> String {
    use paimon::Error as P;
    match e {
        P::IoUnexpected { message, source } => format!("{message}: {source}"),
        P::DataInvalid { message, source: Some(source) }
        | P::UnexpectedError { message, source: Some(source) } => format!("{message}: {source}"),
        P::DataInvalid { message, source: None } | P::UnexpectedError { message, source: None } => {
            message.clone()
        }
        P::DataUnexpected { message, source } => format!("{message}: {source}"),
        P::ParquetDataUnexpected { message, source } => format!("{message}: {source}"),
        other => other.to_string(),
    }
}
