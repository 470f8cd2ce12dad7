use std::fmt;
use std::path::PathBuf;

/// One thing wrong with a spec, located by file and a dotted path such as `tables.stock.columns.qty`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub at: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.file.display(), self.at, self.message)
    }
}

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The spec directory or a file in it could not be read.
    #[error("cannot read spec {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The spec was read but is wrong; every problem found is listed.
    #[error("the spec has {} problem(s):\n{}", .0.len(), .0.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Problem>),
}

impl SpecError {
    /// Both are the caller's to fix: a spec path that cannot be read, or a spec that is wrong.
    pub fn kind(&self) -> livestate_api::ErrorKind {
        livestate_api::ErrorKind::Input
    }
}

/// What is wrong with one event line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct EventError {
    /// The offending field: `type`, `id`, `data.qty`, `mapping stock`, ...
    pub field: String,
    pub reason: String,
}

impl EventError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        EventError { field: field.into(), reason: reason.into() }
    }

    /// Always the caller's: the line does not fit the spec.
    pub fn kind(&self) -> livestate_api::ErrorKind {
        livestate_api::ErrorKind::Input
    }
}
