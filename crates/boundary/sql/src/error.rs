//! Why a query was not answered.

use std::time::Duration;

use livestate_api::{ErrorCode, ErrorKind};

/// Where the query text passed one of its shape limits (see [`crate::shape`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// `nesting depth`, `tokens` or `items in one list`.
    pub what: &'static str,
    pub found: usize,
    pub limit: usize,
    pub line: u64,
    pub column: u64,
}

/// Which concurrency limit turned a query away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Busy {
    /// All callers together run `limit` queries.
    All { limit: usize },
    /// This principal runs `limit` queries.
    Principal { name: String, limit: usize },
}

/// Why a query was not answered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqlError {
    /// The query does not parse or plan (unknown table or column, syntax, two statements).
    #[error("the query cannot be planned: {0}")]
    Plan(String),
    /// The plan holds an operator that is not a read.
    #[error("refused: only read-only queries are allowed, and this plan contains {0}")]
    NotReadOnly(String),
    /// A `VERSION AS OF` names a snapshot or tag that does not exist.
    #[error("{0}")]
    Version(String),
    /// The query text is longer than the limit.
    #[error("the query text is {bytes} bytes, over the limit of {limit}")]
    TextTooLong { bytes: usize, limit: String },
    /// The query text nests too deep, or has too many tokens or list items.
    #[error(
        "the query is refused before planning: its {} reaches {} at line {}, column {}, over the limit of {}",
        .0.what, .0.found, .0.line, .0.column, .0.limit
    )]
    TooComplex(Shape),
    /// Planning and running took longer than the time limit; the work was stopped.
    #[error("the query ran longer than {0:?} and was stopped")]
    Timeout(Duration),
    /// The query needed more memory than one query may take.
    #[error("the query was stopped: {0}")]
    Memory(String),
    /// A function would have built a value larger than the limit (`repeat`, `lpad`, …).
    #[error("the query was stopped: {0}")]
    ValueTooLarge(String),
    /// Too many queries run already; retrying later can help.
    #[error("{}", busy_message(.0))]
    Busy(Busy),
    /// All running queries together hold the memory that queries may take; retrying later
    /// can help.
    #[error("the query was stopped: {0}; retry later")]
    Overloaded(String),
    /// The query failed on the values it computed: a division by zero, a cast that does not
    /// fit, an arithmetic overflow. The caller's error, like a plan error.
    #[error("the query failed on its data: {0}")]
    Data(String),
    #[error("running the query: {0}")]
    Exec(String),
    #[error(transparent)]
    Engine(Box<livestate_engine::EngineError>),
}

fn busy_message(b: &Busy) -> String {
    match b {
        Busy::All { limit } => {
            format!("too many SQL queries: {limit} are running, the limit for all callers; retry later")
        }
        Busy::Principal { name, limit } => {
            format!("too many SQL queries: {name} runs {limit} already, the limit per principal; retry later")
        }
    }
}

impl From<livestate_engine::EngineError> for SqlError {
    fn from(e: livestate_engine::EngineError) -> SqlError {
        SqlError::Engine(Box::new(e))
    }
}

/// How a function's value limit is reported through DataFusion (as its external error).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ValueLimit(pub(crate) String);

/// The start of the message with which the pool shared by all queries refuses memory.
pub(crate) const ALL_QUERIES_MEMORY: &str = "the memory all queries together may take";

impl SqlError {
    /// An error of planning or running a query: [`SqlError::Data`] when its root is a value the
    /// query computed (division by zero, a failed cast, an overflow), a limit's error when a
    /// limit stopped it, else `other`.
    pub(crate) fn of_datafusion(
        e: &datafusion::error::DataFusionError,
        other: fn(String) -> SqlError,
    ) -> SqlError {
        use datafusion::arrow::error::ArrowError;
        use datafusion::error::DataFusionError;
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(s) = source {
            if let Some(v) = s.downcast_ref::<ValueLimit>() {
                return SqlError::ValueTooLarge(v.0.clone());
            }
            source = s.source();
        }
        let root = e.find_root();
        match root {
            DataFusionError::ResourcesExhausted(m) if m.starts_with(ALL_QUERIES_MEMORY) => {
                return SqlError::Overloaded(m.clone())
            }
            DataFusionError::ResourcesExhausted(m) => return SqlError::Memory(m.clone()),
            _ => {}
        }
        let data = match root {
            DataFusionError::ArrowError(a, _) => matches!(
                a.as_ref(),
                ArrowError::DivideByZero
                    | ArrowError::CastError(_)
                    | ArrowError::ArithmeticOverflow(_)
                    | ArrowError::ParseError(_)
            ),
            _ => false,
        };
        if data {
            SqlError::Data(root.to_string())
        } else {
            other(e.to_string())
        }
    }

    /// Whose failure this is: the caller's query (it does not plan, is not a read, is too
    /// long, too complex, too slow or too large, or failed on its own values) is input; too many
    /// queries at once, or all of them holding the memory queries may take, is unavailable (the
    /// same query may succeed later); a failure running a plan is internal.
    pub fn kind(&self) -> ErrorKind {
        match self {
            SqlError::Plan(_)
            | SqlError::NotReadOnly(_)
            | SqlError::Version(_)
            | SqlError::TextTooLong { .. }
            | SqlError::TooComplex(_)
            | SqlError::Timeout(_)
            | SqlError::Memory(_)
            | SqlError::ValueTooLarge(_)
            | SqlError::Data(_) => ErrorKind::Input,
            SqlError::Busy(_) | SqlError::Overloaded(_) => ErrorKind::Unavailable,
            SqlError::Exec(_) => ErrorKind::Internal,
            SqlError::Engine(e) => e.kind(),
        }
    }

    /// The code an answer carries: the kind's, or a finer one for a limit (text too long,
    /// time limit, too many queries at once).
    pub fn code(&self) -> ErrorCode {
        match self {
            SqlError::TextTooLong { .. } => ErrorCode::PayloadTooLarge,
            SqlError::Timeout(_) => ErrorCode::RequestTimeout,
            SqlError::Busy(_) => ErrorCode::TooManyRequests,
            SqlError::Engine(e) => e.code(),
            other => other.kind().code(),
        }
    }

    /// Whether the same query may succeed later, unchanged.
    pub fn is_retryable(&self) -> bool {
        self.kind().is_retryable()
    }
}
