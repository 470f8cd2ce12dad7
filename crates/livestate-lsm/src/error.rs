//! The one error type of this crate.

/// What can go wrong while maintaining a table. Every variant names the table.
#[derive(Debug, thiserror::Error)]
pub enum LsmError {
    /// The Paimon crate failed while doing `what`.
    #[error("table {table}: {what}: {source}")]
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
}

/// Maps a Paimon error to [`LsmError::Paimon`] for `table`.
pub(crate) fn paimon_err<'a>(
    table: &'a str,
    what: &'static str,
) -> impl FnOnce(paimon::Error) -> LsmError + 'a {
    move |source| LsmError::Paimon { table: table.to_string(), what, source }
}

pub type Result<T, E = LsmError> = std::result::Result<T, E>;
