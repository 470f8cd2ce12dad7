//! The benchmark's one error type.

use std::path::PathBuf;

use livestate_api::ErrorKind;

/// Why a benchmark step could not run. Each names the step, so a failed run says where.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("livestate: {0}")]
    Engine(Box<livestate_engine::EngineError>),
    #[error("PostgreSQL: {}", pg_message(.0))]
    Postgres(#[from] tokio_postgres::Error),
    #[error("{peer}: {message}")]
    Peer { peer: &'static str, message: String },
    #[error("livestate over HTTP: {0}")]
    Http(Box<livestate_client::ClientError>),
    /// The command line asks for something that cannot run.
    #[error("{0}")]
    Usage(String),
}

impl From<livestate_engine::EngineError> for BenchError {
    fn from(e: livestate_engine::EngineError) -> Self {
        BenchError::Engine(Box::new(e))
    }
}

impl From<livestate_client::ClientError> for BenchError {
    fn from(e: livestate_client::ClientError) -> Self {
        BenchError::Http(Box::new(e))
    }
}

impl BenchError {
    pub(crate) fn io(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> BenchError {
        let path = path.into();
        move |source| BenchError::Io { what, path, source }
    }

    pub(crate) fn peer(peer: &'static str, message: impl Into<String>) -> BenchError {
        BenchError::Peer { peer, message: message.into() }
    }

    /// Whose failure this is: livestate's errors report their own kind; a command line that
    /// cannot run is the caller's; PostgreSQL that cannot be reached (not started, refusing connections) is unavailable; a file the run cannot
    /// write, a peer's wrong answer or an unhealthy soak is internal.
    pub fn kind(&self) -> ErrorKind {
        match self {
            BenchError::Engine(e) => e.kind(),
            BenchError::Http(e) => e.kind(),
            BenchError::Usage(_) => ErrorKind::Input,
            BenchError::Postgres(e) if e.as_db_error().is_none() => ErrorKind::Unavailable,
            BenchError::Postgres(_) | BenchError::Io { .. } | BenchError::Peer { .. } => ErrorKind::Internal,
        }
    }
}

/// The server's own message when there is one (`db error` alone says nothing).
fn pg_message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!(
            "{}: {}{}",
            db.code().code(),
            db.message(),
            db.detail().map(|d| format!(" ({d})")).unwrap_or_default()
        ),
        None => e.to_string(),
    }
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_says_whose_failure_it_is() {
        let unknown =
            livestate_engine::EngineError::UnknownTable { name: "stok".into(), known: vec!["stock".into()] };
        let cases = [
            (BenchError::from(unknown), ErrorKind::NotFound),
            (BenchError::io("write", "/tmp/x")(std::io::Error::other("denied")), ErrorKind::Internal),
            (BenchError::peer("PostgreSQL", "digests differ"), ErrorKind::Internal),
            (BenchError::Usage("no rounds".into()), ErrorKind::Input),
        ];
        for (e, kind) in cases {
            assert_eq!(e.kind(), kind, "{e}");
        }
    }
}
