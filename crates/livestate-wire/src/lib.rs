//! The typed wire data of livestate's HTTP API, defined once: the server serializes these
//! types and documents them in its OpenAPI document (feature `openapi`), and the client
//! deserializes the same types. Routes move here from `serde_json::Value` one by one.

pub mod sheet;
