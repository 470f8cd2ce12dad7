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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, Json(json!({"error": self.message}))).into_response();
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
