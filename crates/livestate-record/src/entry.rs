//! The stored form of one recorded event. See `docs/formats/record.md`.

use serde::{Deserialize, Serialize};

use crate::error::RecordError;

/// Format version byte that leads every stored value.
pub const ENTRY_VERSION: u8 = 1;

/// One event as the record keeps it: the canonical envelope plus when it was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedEvent {
    pub offset: u64,
    pub id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    /// RFC 3339, UTC, milliseconds.
    pub occurred_at: String,
    /// Milliseconds since the epoch at which the event was acknowledged.
    pub recorded_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation: Option<String>,
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// What a caller asks the record to append: everything but the offset and the recording time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub id: String,
    pub event_type: String,
    pub occurred_at: String,
    pub causation: Option<String>,
    pub data: serde_json::Map<String, serde_json::Value>,
}

impl NewEvent {
    /// Whether `stored` carries the same content (the idempotency check for a re-sent id).
    pub fn same_content(&self, stored: &RecordedEvent) -> bool {
        self.event_type == stored.event_type
            && self.occurred_at == stored.occurred_at
            && self.causation == stored.causation
            && self.data == stored.data
    }
}

#[derive(Serialize)]
struct Wire<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    event_type: &'a str,
    occurred_at: &'a str,
    recorded_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    causation: Option<&'a str>,
    data: &'a serde_json::Map<String, serde_json::Value>,
}

impl RecordedEvent {
    pub(crate) fn encode(ev: &NewEvent, recorded_at_ms: i64) -> Vec<u8> {
        let wire = Wire {
            id: &ev.id,
            event_type: &ev.event_type,
            occurred_at: &ev.occurred_at,
            recorded_at_ms,
            causation: ev.causation.as_deref(),
            data: &ev.data,
        };
        let mut out = Vec::with_capacity(128);
        out.push(ENTRY_VERSION);
        serde_json::to_writer(&mut out, &wire).expect("serialising JSON into memory cannot fail");
        out
    }

    pub(crate) fn decode(offset: u64, bytes: &[u8]) -> Result<RecordedEvent, RecordError> {
        let corrupt = |reason: String| RecordError::Corrupt { offset, reason };
        match bytes.first() {
            Some(&ENTRY_VERSION) => {}
            Some(v) => return Err(corrupt(format!("unknown entry version {v}"))),
            None => return Err(corrupt("empty entry".into())),
        }
        #[derive(Deserialize)]
        struct Owned {
            id: String,
            #[serde(rename = "type")]
            event_type: String,
            occurred_at: String,
            recorded_at_ms: i64,
            causation: Option<String>,
            data: serde_json::Map<String, serde_json::Value>,
        }
        let o: Owned = serde_json::from_slice(&bytes[1..]).map_err(|e| corrupt(e.to_string()))?;
        Ok(RecordedEvent {
            offset,
            id: o.id,
            event_type: o.event_type,
            occurred_at: o.occurred_at,
            recorded_at_ms: o.recorded_at_ms,
            causation: o.causation,
            data: o.data,
        })
    }
}
