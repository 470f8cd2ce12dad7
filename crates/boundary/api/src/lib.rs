//! The typed wire data of livestate's HTTP API, defined once: the server serializes these
//! types and documents them in its OpenAPI document (feature `openapi`), and the client
//! deserializes the same types. Routes move here from `serde_json::Value` one by one.
//!
//! [`ErrorKind`] is also the vocabulary every crate's error classifies itself in, so this crate
//! sits below all of them and depends on serde alone.

pub mod error;
pub mod event;
pub mod health;
pub mod principal;
pub mod proposal;
pub mod read;
pub mod sheet;

pub use error::{ErrorBody, ErrorCode, ErrorKind};
