//! Why a query was not answered.

use std::error::Error;
use std::time::Duration;

use datafusion::error::DataFusionError;
use livestate_api::{ErrorCode, ErrorKind};

/// A cause of more than one type (DataFusion's, the tokenizer's, the engine's, I/O, a panic's
/// message): kept whole, so a caller can downcast it.
pub type Cause = Box<dyn Error + Send + Sync + 'static>;

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
    /// `source` is DataFusion's error, the tokenizer's, or (for a table that does not exist
    /// in a `VERSION AS OF`) livestate's own message.
    #[error("the query cannot be planned: {source}")]
    Plan { source: Cause },
    /// The plan holds an operator that is not a read. A String: it is livestate's own
    /// description of the operator, not a stringified error.
    #[error("refused: only read-only queries are allowed, and this plan contains {0}")]
    NotReadOnly(String),
    /// A `VERSION AS OF` names a snapshot or tag that does not exist. `at` names the table and
    /// version (empty when `source` names them itself); `source` is the engine's or paimon's
    /// error.
    #[error("{}", version_message(at, source))]
    Version { at: String, source: Cause },
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
    #[error("the query was stopped: {}", exhausted_message(source))]
    Memory { source: DataFusionError },
    /// A function would have built a value larger than the limit (`repeat`, `lpad`, …).
    #[error("the query was stopped: {}", value_limit_message(source))]
    ValueTooLarge { source: DataFusionError },
    /// Too many queries run already; retrying later can help.
    #[error("{}", busy_message(.0))]
    Busy(Busy),
    /// All running queries together hold the memory that queries may take; retrying later
    /// can help.
    #[error("the query was stopped: {}; retry later", exhausted_message(source))]
    Overloaded { source: DataFusionError },
    /// The query failed on the values it computed: a division by zero, a cast that does not
    /// fit, an arithmetic overflow. The caller's error, like a plan error.
    #[error("the query failed on its data: {}", source.find_root())]
    Data { source: DataFusionError },
    /// Running the plan failed. `context` says what livestate was doing when it is not the
    /// plan itself (`starting the SQL threads: `, …; else empty); `source` is DataFusion's
    /// error, Arrow's, JSON's, the thread pool's, or a panic's message.
    #[error("running the query: {context}{source}")]
    Exec { context: &'static str, source: Cause },
    #[error(transparent)]
    Engine(Box<livestate_engine::EngineError>),
}

fn version_message(at: &str, source: &Cause) -> String {
    if at.is_empty() {
        source.to_string()
    } else {
        format!("{at}: {source}")
    }
}

/// The memory pool's own message, without DataFusion's `Resources exhausted: ` before it.
fn exhausted_message(e: &DataFusionError) -> String {
    match e.find_root() {
        DataFusionError::ResourcesExhausted(m) => m.clone(),
        other => other.to_string(),
    }
}

/// The bounded function's own message, without the DataFusion errors wrapped around it.
fn value_limit_message(e: &DataFusionError) -> String {
    let mut source: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(v) = s.downcast_ref::<ValueLimit>() {
            return v.0.clone();
        }
        source = s.source();
    }
    e.to_string()
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
        e: DataFusionError,
        other: impl FnOnce(DataFusionError) -> SqlError,
    ) -> SqlError {
        use datafusion::arrow::error::ArrowError;
        let mut source: Option<&(dyn Error + 'static)> = Some(&e);
        while let Some(s) = source {
            if s.downcast_ref::<ValueLimit>().is_some() {
                return SqlError::ValueTooLarge { source: e };
            }
            source = s.source();
        }
        let root = e.find_root();
        match root {
            DataFusionError::ResourcesExhausted(m) if m.starts_with(ALL_QUERIES_MEMORY) => {
                return SqlError::Overloaded { source: e }
            }
            DataFusionError::ResourcesExhausted(_) => return SqlError::Memory { source: e },
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
            SqlError::Data { source: e }
        } else {
            other(e)
        }
    }

    /// [`SqlError::Plan`] of any error.
    pub(crate) fn plan(e: impl Into<Cause>) -> SqlError {
        SqlError::Plan { source: e.into() }
    }

    /// [`SqlError::Exec`] of any error, after `context`.
    pub(crate) fn exec(context: &'static str, e: impl Into<Cause>) -> SqlError {
        SqlError::Exec { context, source: e.into() }
    }

    /// Whose failure this is: the caller's query (it does not plan, is not a read, is too
    /// long, too complex, too slow or too large, or failed on its own values) is input; too many
    /// queries at once, or all of them holding the memory queries may take, is unavailable (the
    /// same query may succeed later); a failure running a plan is internal.
    pub fn kind(&self) -> ErrorKind {
        match self {
            SqlError::Plan { .. }
            | SqlError::NotReadOnly(_)
            | SqlError::Version { .. }
            | SqlError::TextTooLong { .. }
            | SqlError::TooComplex(_)
            | SqlError::Timeout(_)
            | SqlError::Memory { .. }
            | SqlError::ValueTooLarge { .. }
            | SqlError::Data { .. } => ErrorKind::Input,
            SqlError::Busy(_) | SqlError::Overloaded { .. } => ErrorKind::Unavailable,
            SqlError::Exec { .. } => ErrorKind::Internal,
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

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    fn datafusion_source(e: &SqlError) -> &DataFusionError {
        Error::source(e).and_then(|s| s.downcast_ref::<DataFusionError>()).expect("a DataFusion source")
    }

    #[tokio::test]
    async fn a_query_over_a_missing_table_keeps_datafusions_planning_error() {
        let ctx = SessionContext::new();
        let e = ctx.state().create_logical_plan("SELECT nope FROM missing").await.unwrap_err();
        let e = SqlError::of_datafusion(e, SqlError::plan);
        assert!(matches!(datafusion_source(&e).find_root(), DataFusionError::Plan(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "the query cannot be planned: Error during planning: table 'datafusion.public.missing' not found"
        );
        assert_eq!(e.kind(), ErrorKind::Input);
    }

    #[tokio::test]
    async fn a_division_by_zero_keeps_datafusions_error_and_names_the_arrow_root() {
        let ctx = SessionContext::new();
        let e = ctx.sql("SELECT 1 / 0").await.unwrap().collect().await.unwrap_err();
        let e = SqlError::of_datafusion(e, |e| SqlError::exec("", e));
        assert!(matches!(e, SqlError::Data { .. }), "{e:?}");
        assert!(matches!(datafusion_source(&e).find_root(), DataFusionError::ArrowError(..)), "{e:?}");
        assert_eq!(e.to_string(), "the query failed on its data: Arrow error: Divide by zero error");
        assert_eq!(e.kind(), ErrorKind::Input);
    }

    #[test]
    fn a_failure_running_the_plan_keeps_datafusions_execution_error() {
        let e = DataFusionError::Execution("the stream broke".into());
        let e = SqlError::of_datafusion(e, |e| SqlError::exec("", e));
        assert!(matches!(datafusion_source(&e), DataFusionError::Execution(m) if m == "the stream broke"));
        assert_eq!(e.to_string(), "running the query: Execution error: the stream broke");
        assert_eq!(e.kind(), ErrorKind::Internal);
    }
}
