//! Errors: why the server could not run ([`ServerError`]) and what a request gets back when it
//! cannot be served ([`ApiError`]: a stable code, its status, and a message naming the problem).
//! Whose fault a failure is was decided by the crate that defines the error (its `kind()`);
//! this module only turns the kind, or a finer code, into the answer.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use livestate_api::{ErrorBody, ErrorCode, ErrorKind};
use livestate_engine::EngineError;

use crate::store::StoreError;

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("serving HTTP: {0}")]
    Io(#[from] std::io::Error),
    #[error("configuration: {0}")]
    Config(String),
}

impl ServerError {
    /// Whose failure this is: the engine's or the store's own kind, a configuration that does
    /// not fit is input, and failing to serve HTTP (the address taken, say) is unavailable.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ServerError::Engine(e) => e.kind(),
            ServerError::Store(e) => e.kind(),
            ServerError::Io(_) => ErrorKind::Unavailable,
            ServerError::Config(_) => ErrorKind::Input,
        }
    }
}

/// An API error: a stable code (which gives the status) and a message naming the problem.
#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError { code, message: message.into() }
    }

    /// The answer for an error of `kind`: the one place a kind becomes a code and a status.
    pub fn of_kind(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError::new(kind.code(), message)
    }

    /// The HTTP status the code answers with.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).expect("every code's status is a valid status")
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Conflict, message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Unavailable, message)
    }

    pub fn internal(message: impl std::fmt::Display) -> ApiError {
        ApiError::new(ErrorCode::Internal, message.to_string())
    }

    /// The answer for a status that a layer below the handlers chose (the framework's own
    /// refusals): its code, or `bad_request`/`internal` for a status the API does not name.
    pub fn of_status(status: StatusCode, message: impl Into<String>) -> ApiError {
        let code = ErrorCode::of_status(status.as_u16()).unwrap_or(if status.is_client_error() {
            ErrorCode::BadRequest
        } else {
            ErrorCode::Internal
        });
        ApiError::new(code, message)
    }
}

/// Numbers the internal errors this process answered, so the log line that holds the cause can
/// be found from the answer the caller saw.
static INCIDENTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = if self.code == ErrorCode::Internal {
            // The cause of an internal error names paths, files and library internals: it goes
            // to the server's log, and the caller gets the incident number that finds it there.
            let incident = INCIDENTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::error!(incident, %status, error = %self.message, "internal error answered");
            ErrorBody {
                incident: Some(incident),
                ..ErrorBody::new(
                    self.code,
                    format!(
                        "internal error (incident {incident}); the server's log holds the cause under this number"
                    ),
                )
            }
        } else {
            ErrorBody::new(self.code, self.message)
        };
        let mut r = (status, Json(body)).into_response();
        if self.code == ErrorCode::Unauthenticated {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("a valid header"));
        }
        r
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        ApiError::new(e.code(), e.to_string())
    }
}

impl From<livestate_engine::RecordError> for ApiError {
    fn from(e: livestate_engine::RecordError) -> ApiError {
        ApiError::new(e.code(), e.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            StoreError::Record(r) => r.into(),
            other => ApiError::of_kind(other.kind(), other.to_string()),
        }
    }
}

impl From<livestate_sql::SqlError> for ApiError {
    fn from(e: livestate_sql::SqlError) -> ApiError {
        ApiError::new(e.code(), e.to_string())
    }
}

/// A JSON body read with a message naming what is wrong with it (field, line, column) instead of
/// the framework's default.
pub fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty; a JSON object is expected"));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            ApiError::bad_request(format!("request body: {}", e.inner()))
        } else {
            ApiError::bad_request(format!("request body: {path}: {}", e.inner()))
        }
    })?;
    de.end().map_err(|e| ApiError::bad_request(format!("request body: {e}")))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(e: ApiError) -> (StatusCode, serde_json::Value) {
        let r = e.into_response();
        let status = r.status();
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 20).await.expect("body");
        (status, serde_json::from_slice(&bytes).expect("JSON"))
    }

    #[tokio::test]
    async fn internal_error_answers_an_incident_not_its_cause() {
        let cause = "reading /var/lib/livestate/warehouse/state.db/stock/manifest-7: Permission denied";
        let (status, body) = body_of(ApiError::internal(cause)).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["code"], "internal");
        let text = body["message"].as_str().expect("error text");
        assert!(!text.contains("/var/lib") && !text.contains("Permission"), "the cause leaked: {text}");
        let incident = body["incident"].as_u64().expect("incident number");
        assert!(text.contains(&format!("incident {incident}")), "{text}");
        let (_, next) = body_of(ApiError::internal(cause)).await;
        assert!(next["incident"].as_u64().expect("incident") > incident, "incidents are numbered apart");
    }

    #[test]
    fn a_body_that_does_not_fit_is_refused_naming_the_field() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Body {
            risk: livestate_api::proposal::Risk,
        }
        let e = parse_body::<Body>(br#"{"risk": {"level": "extreme"}}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest);
        assert!(
            e.message.starts_with("request body: risk.level: unknown variant `extreme`"),
            "{}",
            e.message
        );
        let e = parse_body::<Body>(br#"{"risk": {"level": "low"}} trailing"#).unwrap_err();
        assert!(e.message.contains("trailing characters"), "{}", e.message);
        assert!(parse_body::<Body>(br#"{"risk": {"level": "low"}}"#).is_ok());
    }

    #[tokio::test]
    async fn caller_errors_keep_their_message_and_carry_a_stable_code() {
        let (status, body) = body_of(ApiError::bad_request("data.qty: not an integer")).await;
        assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("bad_request")));
        assert_eq!(body["message"], "data.qty: not an integer");
        assert_eq!(body["retryable"], false);
        let (_, body) = body_of(ApiError::conflict("key reused")).await;
        assert_eq!(body["code"], "conflict");
        let (status, body) = body_of(ApiError::new(ErrorCode::InsufficientStorage, "disk full")).await;
        assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE);
        assert_eq!(
            (body["code"].as_str(), body["message"].as_str(), body["retryable"].as_bool()),
            (Some("insufficient_storage"), Some("disk full"), Some(true))
        );
        assert!(body.get("incident").is_none());
    }
}
