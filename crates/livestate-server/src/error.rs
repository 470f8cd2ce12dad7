//! Errors: why the server could not run ([`ServerError`]) and what a request gets back when it
//! cannot be served ([`ApiError`]: a status and a JSON message naming the problem).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use livestate_engine::{is_input_error, EngineError};
use serde_json::json;

use crate::auth::{Permission, Principal, Unauthenticated};
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

/// An API error: a status and a message naming the problem.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into() }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, message)
    }

    pub fn internal(message: impl std::fmt::Display) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message.to_string())
    }

    /// 403 naming the permission `who` lacks.
    pub fn forbidden(who: &Principal, missing: &Permission) -> ApiError {
        ApiError::new(
            StatusCode::FORBIDDEN,
            format!("{} may not do this: it lacks permission `{missing}`", who.name),
        )
    }

    pub fn unauthenticated(why: &Unauthenticated) -> ApiError {
        let message = match why {
            Unauthenticated::Missing => "no token: send `Authorization: Bearer <token>`".to_string(),
            Unauthenticated::Unknown => "the token is not valid (unknown or revoked)".to_string(),
            Unauthenticated::Broken(e) => {
                format!("no token is accepted until the principals file is fixed: {e}")
            }
        };
        ApiError::new(StatusCode::UNAUTHORIZED, message)
    }
}

/// The stable, machine-readable name of an error answer's status: what a caller matches on
/// (the `error` message is for people and may change wording).
pub fn error_code(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::UNAUTHORIZED => "unauthenticated",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        StatusCode::CONFLICT => "conflict",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::TOO_MANY_REQUESTS => "too_many_requests",
        StatusCode::NOT_IMPLEMENTED => "not_implemented",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        StatusCode::INSUFFICIENT_STORAGE => "insufficient_storage",
        s if s.is_client_error() => "client_error",
        _ => "internal",
    }
}

/// Numbers the internal errors this process answered, so the log line that holds the cause can
/// be found from the answer the caller saw.
static INCIDENTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = error_code(self.status);
        let body = if code == "internal" {
            // The cause of an internal error names paths, files and library internals: it goes
            // to the server's log, and the caller gets the incident number that finds it there.
            let incident = INCIDENTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::error!(incident, status = %self.status, error = %self.message, "internal error answered");
            json!({
                "error": format!(
                    "internal error (incident {incident}); the server's log holds the cause under this number"
                ),
                "code": code,
                "incident": incident,
            })
        } else {
            json!({"error": self.message, "code": code})
        };
        let mut r = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("a valid header"));
        }
        r
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        let status = match &e {
            EngineError::UnknownTable { .. } | EngineError::UnknownTrigger { .. } => StatusCode::NOT_FOUND,
            EngineError::Record(livestate_engine::RecordError::IdConflict { .. }) => StatusCode::CONFLICT,
            EngineError::Record(r) if r.is_write_failure() => record_write_status(r),
            e if is_input_error(e) => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

impl From<livestate_engine::RecordError> for ApiError {
    fn from(e: livestate_engine::RecordError) -> ApiError {
        if e.is_write_failure() {
            return ApiError::new(record_write_status(&e), e.to_string());
        }
        ApiError::internal(e)
    }
}

/// Events the record could not store (nothing acknowledged): 507 when the disk is full, 503
/// otherwise. Either way the record refuses appends until the server restarts.
fn record_write_status(e: &livestate_engine::RecordError) -> StatusCode {
    if e.is_out_of_space() {
        StatusCode::INSUFFICIENT_STORAGE
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        ApiError::internal(e)
    }
}

/// A JSON body read with a message naming what is wrong with it (field, line, column) instead of
/// the framework's default.
pub fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty; a JSON object is expected"));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("request body: {e}")))
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
        let text = body["error"].as_str().expect("error text");
        assert!(!text.contains("/var/lib") && !text.contains("Permission"), "the cause leaked: {text}");
        let incident = body["incident"].as_u64().expect("incident number");
        assert!(text.contains(&format!("incident {incident}")), "{text}");
        let (_, next) = body_of(ApiError::internal(cause)).await;
        assert!(next["incident"].as_u64().expect("incident") > incident, "incidents are numbered apart");
    }

    #[tokio::test]
    async fn caller_errors_keep_their_message_and_carry_a_stable_code() {
        let (status, body) = body_of(ApiError::bad_request("data.qty: not an integer")).await;
        assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("bad_request")));
        assert_eq!(body["error"], "data.qty: not an integer");
        let (_, body) = body_of(ApiError::conflict("key reused")).await;
        assert_eq!(body["code"], "conflict");
        let (_, body) = body_of(ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "disk full")).await;
        assert_eq!(
            (body["code"].as_str(), body["error"].as_str()),
            (Some("insufficient_storage"), Some("disk full"))
        );
        assert!(body.get("incident").is_none());
    }
}
