//! The stored form of one recorded event. See `docs/formats/record.md`.

use livestate_spec::{DataJson, EventData, EventEnvelope};
use serde::Deserialize;

use crate::error::RecordError;

/// Format version byte that leads every stored value.
pub const ENTRY_VERSION: u8 = 1;

/// One event as the record keeps it: its envelope, where it sits and when it was recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEvent {
    pub offset: u64,
    /// Milliseconds since the epoch at which the event was acknowledged.
    pub recorded_at_ms: i64,
    /// The envelope as it was appended, `data` as a map.
    pub event: EventEnvelope,
}

impl RecordedEvent {
    /// Whether `new` carries the same content as this stored event (the idempotency check for
    /// a re-sent id). The data are compared as values, not as text.
    pub fn same_content(&self, new: &EventEnvelope<DataJson>) -> bool {
        let stored = &self.event;
        new.event_type == stored.event_type
            && new.occurred_at == stored.occurred_at
            && new.causation == stored.causation
            && new.data.to_map() == stored.data
    }

    /// The stored bytes of `ev`: the version byte, then the JSON object of
    /// `docs/formats/record.md` (fields in this order, `causation` only when set, `data` as
    /// the event carries its text).
    pub(crate) fn encode(ev: &EventEnvelope<DataJson>, recorded_at_ms: i64) -> Vec<u8> {
        let mut out = Vec::new();
        Self::encode_into(ev, recorded_at_ms, &mut out);
        out
    }

    /// The stored bytes of `ev` (as `encode` returns them), appended to `out`.
    pub(crate) fn encode_into(ev: &EventEnvelope<DataJson>, recorded_at_ms: i64, out: &mut Vec<u8>) {
        let data = ev.data.as_str();
        out.reserve(96 + ev.id.len() + ev.event_type.len() + data.len());
        out.push(ENTRY_VERSION);
        let text = |out: &mut Vec<u8>, s: &str| {
            serde_json::to_writer(&mut *out, s).expect("serialising JSON into memory cannot fail")
        };
        out.extend_from_slice(b"{\"id\":");
        text(out, &ev.id);
        out.extend_from_slice(b",\"type\":");
        text(out, &ev.event_type);
        out.extend_from_slice(b",\"occurred_at\":");
        text(out, &ev.occurred_at);
        out.extend_from_slice(b",\"recorded_at_ms\":");
        std::io::Write::write_fmt(out, format_args!("{recorded_at_ms}"))
            .expect("writing into memory cannot fail");
        if let Some(c) = &ev.causation {
            out.extend_from_slice(b",\"causation\":");
            text(out, c);
        }
        out.extend_from_slice(b",\"data\":");
        out.extend_from_slice(data.as_bytes());
        out.push(b'}');
    }

    /// When the entry `bytes` (at `offset`) was recorded, read without decoding the rest: a
    /// read's receipt asks this of every answer's offset, and decoding the whole event (its data
    /// into a `serde_json` map) was most of that.
    pub(crate) fn decode_recorded_at(offset: u64, bytes: &[u8]) -> Result<i64, RecordError> {
        #[derive(Deserialize)]
        struct Head {
            recorded_at_ms: i64,
        }
        let h: Head = entry_json(offset, bytes)?;
        Ok(h.recorded_at_ms)
    }

    pub(crate) fn decode(offset: u64, bytes: &[u8]) -> Result<RecordedEvent, RecordError> {
        #[derive(Deserialize)]
        struct Owned {
            id: String,
            #[serde(rename = "type")]
            event_type: String,
            occurred_at: String,
            recorded_at_ms: i64,
            causation: Option<String>,
            data: EventData,
        }
        let o: Owned = entry_json(offset, bytes)?;
        let event = EventEnvelope {
            id: o.id,
            event_type: o.event_type,
            occurred_at: o.occurred_at,
            data: o.data,
            causation: o.causation,
        };
        Ok(RecordedEvent { offset, recorded_at_ms: o.recorded_at_ms, event })
    }
}

/// The entry `bytes` (at `offset`) read as `T` from its JSON, once its version byte is checked.
fn entry_json<'de, T: Deserialize<'de>>(offset: u64, bytes: &'de [u8]) -> Result<T, RecordError> {
    let corrupt = |reason: String| RecordError::Corrupt { offset, reason };
    match bytes.first() {
        Some(&ENTRY_VERSION) => {}
        Some(v) => return Err(corrupt(format!("unknown entry version {v}"))),
        None => return Err(corrupt("empty entry".into())),
    }
    serde_json::from_slice(&bytes[1..]).map_err(|e| corrupt(e.to_string()))
}
#[cfg(test)]
mod tests {
    use serde::Serialize;

    use super::*;

    fn data() -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("qty".into(), serde_json::json!(-3));
        m.insert("item".into(), serde_json::json!("part-\"7\"\n"));
        m.insert("price".into(), serde_json::json!("12.50"));
        m
    }

    #[test]
    fn an_entry_is_the_serde_encoding_of_its_fields_byte_for_byte() {
        // The format of docs/formats/record.md as serde wrote it before entries were written by
        // hand: the same field order, `causation` only when set.
        #[derive(Serialize)]
        struct Wire<'a> {
            id: &'a str,
            #[serde(rename = "type")]
            event_type: &'a str,
            occurred_at: &'a str,
            recorded_at_ms: i64,
            #[serde(skip_serializing_if = "Option::is_none")]
            causation: Option<&'a str>,
            data: &'a serde_json::Map<String, serde_json::Value>,
        }
        for causation in [None, Some("cause-\u{e9}".to_string())] {
            let ev = envelope("e\\1", causation.clone(), DataJson::of(&data()));
            let mut want = vec![ENTRY_VERSION];
            serde_json::to_writer(
                &mut want,
                &Wire {
                    id: "e\\1",
                    event_type: "inventory.stock_counted",
                    occurred_at: "2026-01-01T00:00:00.000Z",
                    recorded_at_ms: -17,
                    causation: causation.as_deref(),
                    data: &data(),
                },
            )
            .unwrap();
            let got = RecordedEvent::encode(&ev, -17);
            assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
            let back = RecordedEvent::decode(9, &got).unwrap();
            assert!(back.same_content(&ev));
            assert_eq!((back.offset, back.recorded_at_ms, back.event.causation), (9, -17, causation));
            assert_eq!(RecordedEvent::decode_recorded_at(9, &got).unwrap(), -17, "the head alone");
        }
    }

    #[test]
    fn the_recorded_time_alone_refuses_what_the_whole_decode_refuses() {
        for bad in [
            &b""[..],
            &[ENTRY_VERSION + 1, b'{', b'}'][..],
            &[ENTRY_VERSION, b'{', b'}'][..],
            &[ENTRY_VERSION, b'x'][..],
        ] {
            assert!(RecordedEvent::decode(3, bad).is_err());
            let e = RecordedEvent::decode_recorded_at(3, bad).unwrap_err();
            assert!(matches!(e, RecordError::Corrupt { offset: 3, .. }), "{e}");
        }
    }

    #[test]
    fn same_content_compares_data_as_values_not_text() {
        let stored = RecordedEvent::decode(
            0,
            &RecordedEvent::encode(&envelope("e1", None, text(r#"{"a":1,"b":2}"#)), 0),
        )
        .unwrap();
        assert!(stored.same_content(&envelope("e1", None, text(r#"{"b":2, "a":1}"#))));
        assert!(!stored.same_content(&envelope("e1", None, text(r#"{"a":1,"b":3}"#))));
    }

    fn text(json: &str) -> DataJson {
        DataJson::parse(json.into()).unwrap()
    }

    fn envelope(id: &str, causation: Option<String>, data: DataJson) -> EventEnvelope<DataJson> {
        EventEnvelope {
            id: id.into(),
            event_type: "inventory.stock_counted".into(),
            occurred_at: "2026-01-01T00:00:00.000Z".into(),
            data,
            causation,
        }
    }
}
