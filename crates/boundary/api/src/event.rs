//! Events on the wire: what `POST /v1/events` answers for the lines it recorded.

use serde::{Deserialize, Serialize};

/// One recorded line of a `POST /v1/events` body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AppendedLine {
    /// The line's number in the body, from 1 (blank lines count).
    pub line: usize,
    /// The event's record offset (a re-sent id reports its original offset).
    pub offset: u64,
    /// True when the id was already recorded with the same content: nothing was appended.
    pub duplicate: bool,
}

/// The answer of `POST /v1/events`: each line's offset, in input order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventsAnswer {
    /// Every line of the body that holds an event.
    pub appended: Vec<AppendedLine>,
}
