//! The spec's TOML as written, before any check.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::Deserialize;

use crate::decision::RawDecision;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    #[serde(default)]
    pub(super) events: IndexMap<String, RawEvent>,
    #[serde(default)]
    pub(super) tables: IndexMap<String, RawTable>,
    #[serde(default)]
    pub(super) mappings: Vec<RawMapping>,
    #[serde(default)]
    pub(super) triggers: IndexMap<String, RawTrigger>,
    #[serde(default)]
    pub(super) decisions: IndexMap<String, RawDecision>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTrigger {
    pub(super) table: String,
    pub(super) description: Option<String>,
    pub(super) when: String,
    pub(super) rearm: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEvent {
    pub(super) description: Option<String>,
    pub(super) fields: IndexMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTable {
    pub(super) description: Option<String>,
    pub(super) primary_key: Vec<String>,
    pub(super) freshness: String,
    pub(super) columns: IndexMap<String, String>,
    #[serde(default)]
    pub(super) options: BTreeMap<String, toml::Value>,
    pub(super) derived_by: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMapping {
    pub(super) event: String,
    pub(super) table: String,
    #[serde(default)]
    pub(super) action: Option<String>,
    /// Table → its key columns → expressions over the event.
    #[serde(default)]
    pub(super) lookup: IndexMap<String, IndexMap<String, String>>,
    pub(super) when: Option<String>,
    pub(super) set: IndexMap<String, String>,
}
