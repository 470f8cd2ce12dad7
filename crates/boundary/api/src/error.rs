//! Failures, classified once: the [`ErrorKind`] every crate's error reports through its own
//! `kind()`, and the [`ErrorBody`] every error answer of the HTTP API carries.
//!
//! A crate decides the kind of each of its errors where the error is defined. The server maps a
//! kind to an HTTP status and an [`ErrorCode`] in one place, the CLI to an exit code in one
//! place; neither looks inside another crate's error to decide whose fault it is.

use serde::{Deserialize, Serialize};

/// Whose failure an error is, and whether the same request can succeed later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ErrorKind {
    /// The request does not fit: a bad event line, argument, key, query or spec. The caller
    /// fixes it; sending it again unchanged fails again.
    Input,
    /// The request names something that does not exist: a table, trigger, proposal, snapshot
    /// or tag.
    NotFound,
    /// The request contradicts what is stored: an event id or idempotency key reused with other
    /// content, a proposal decided already, a directory initialised already.
    Conflict,
    /// The request is fine but cannot be served now: too many at once, a record that refuses
    /// writes until restarted, a directory or warehouse another process holds. Retrying later
    /// can succeed.
    Unavailable,
    /// livestate failed: a damaged or unreadable file, a failed library call, a bug. The detail
    /// is in the log; the caller can only report it.
    Internal,
}

impl ErrorKind {
    /// Whether the same request, unchanged, may succeed later.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorKind::Unavailable)
    }

    /// Whether the caller has to change something (input, not found, conflict).
    pub fn is_callers(self) -> bool {
        matches!(self, ErrorKind::Input | ErrorKind::NotFound | ErrorKind::Conflict)
    }

    /// The code an answer of this kind carries, unless the server names a finer one.
    pub fn code(self) -> ErrorCode {
        match self {
            ErrorKind::Input => ErrorCode::BadRequest,
            ErrorKind::NotFound => ErrorCode::NotFound,
            ErrorKind::Conflict => ErrorCode::Conflict,
            ErrorKind::Unavailable => ErrorCode::Unavailable,
            ErrorKind::Internal => ErrorCode::Internal,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ErrorKind::Input => "input",
            ErrorKind::NotFound => "not found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
        })
    }
}

/// The stable, machine-readable name of an error answer: what a program matches on (the
/// message is for people and may change wording). docs/api.md lists them with their statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ErrorCode {
    /// 400: a parameter, body, event line or query that does not fit (named in the message).
    BadRequest,
    /// 401: no token, or one that is not valid.
    Unauthenticated,
    /// 403: the caller's role may not do this.
    Forbidden,
    /// 404: no such table, trigger, proposal, decision kind, snapshot or route.
    NotFound,
    /// 405: the route does not take this method.
    MethodNotAllowed,
    /// 408: the body did not arrive in time, or a query ran past its time limit.
    RequestTimeout,
    /// 409: an event id or idempotency key reused with other content, a second decision.
    Conflict,
    /// 413: a body or query text over its limit.
    PayloadTooLarge,
    /// 415: a body of a type the route does not read.
    UnsupportedMediaType,
    /// 429: too many requests of this kind at once, or too many failed authentications.
    TooManyRequests,
    /// 501: the spec declares nothing that serves this route.
    NotImplemented,
    /// 503: the request is fine but cannot be served now; retry later.
    Unavailable,
    /// 507: the disk is full; nothing of the request was stored.
    InsufficientStorage,
    /// 500: livestate failed; the answer carries an incident number, the log the cause.
    Internal,
}

impl ErrorCode {
    /// The code's HTTP status.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::Conflict => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::TooManyRequests => 429,
            ErrorCode::NotImplemented => 501,
            ErrorCode::Unavailable => 503,
            ErrorCode::InsufficientStorage => 507,
            ErrorCode::Internal => 500,
        }
    }

    /// The code of an HTTP status this API answers; `None` for one it never answers.
    pub fn of_status(status: u16) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.status() == status)
    }

    /// Whether the same request, unchanged, may succeed later.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::RequestTimeout
                | ErrorCode::TooManyRequests
                | ErrorCode::Unavailable
                | ErrorCode::InsufficientStorage
        )
    }

    /// The kind of failure the code stands for.
    pub fn kind(self) -> ErrorKind {
        match self {
            ErrorCode::NotFound => ErrorKind::NotFound,
            ErrorCode::Conflict => ErrorKind::Conflict,
            ErrorCode::TooManyRequests | ErrorCode::Unavailable | ErrorCode::InsufficientStorage => {
                ErrorKind::Unavailable
            }
            ErrorCode::Internal => ErrorKind::Internal,
            _ => ErrorKind::Input,
        }
    }

    /// The code as it appears on the wire (`bad_request`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::Conflict => "conflict",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::TooManyRequests => "too_many_requests",
            ErrorCode::NotImplemented => "not_implemented",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::InsufficientStorage => "insufficient_storage",
            ErrorCode::Internal => "internal",
        }
    }

    /// Every code, in the order docs/api.md lists them.
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::BadRequest,
        ErrorCode::Unauthenticated,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::RequestTimeout,
        ErrorCode::Conflict,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::TooManyRequests,
        ErrorCode::NotImplemented,
        ErrorCode::Unavailable,
        ErrorCode::InsufficientStorage,
        ErrorCode::Internal,
    ];
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every error answer's body: why the request was not served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Error))]
pub struct ErrorBody {
    /// What a program matches on.
    pub code: ErrorCode,
    /// The problem in words, naming the field, line, table or limit; for an internal error only
    /// the incident number, never the cause.
    pub message: String,
    /// Whether the same request, unchanged, may succeed later (`Retry-After` says when, where
    /// the server knows).
    pub retryable: bool,
    /// On an internal error: the number the server's log holds its cause under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<u64>,
}

impl ErrorBody {
    /// A body for `code`, retryable as the code is.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorBody {
        ErrorBody { code, message: message.into(), retryable: code.is_retryable(), incident: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_status_and_its_wire_name() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::of_status(code.status()), Some(code), "{code}");
            let text = serde_json::to_string(&code).expect("serializes");
            assert_eq!(text, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<ErrorCode>(&text).expect("parses"), code);
        }
        assert_eq!(ErrorCode::of_status(418), None);
    }

    const KINDS: [ErrorKind; 5] = [
        ErrorKind::Input,
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
    ];

    #[test]
    fn each_kind_answers_a_code_of_the_same_kind() {
        for kind in KINDS {
            assert_eq!(kind.code().kind(), kind, "{kind}");
        }
    }

    #[test]
    fn only_an_unavailable_kind_is_retryable_as_is_its_code() {
        for kind in KINDS {
            assert_eq!(kind.is_retryable(), kind == ErrorKind::Unavailable, "{kind}");
            assert_eq!(kind.code().is_retryable(), kind.is_retryable(), "{kind}");
        }
    }

    #[test]
    fn a_body_without_an_incident_leaves_the_field_out() {
        let body = ErrorBody::new(ErrorCode::TooManyRequests, "too many SQL queries");
        let v = serde_json::to_value(&body).expect("serializes");
        assert_eq!(
            v,
            serde_json::json!({"code": "too_many_requests", "message": "too many SQL queries", "retryable": true})
        );
        assert_eq!(serde_json::from_value::<ErrorBody>(v).expect("parses"), body);
    }
}
