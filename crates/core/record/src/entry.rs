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
///
/// `data` is held as its JSON text, the bytes the stored entry will carry, so an event is
/// serialized once on its way in: [`NewEvent::new`] writes it from a map, and
/// [`NewEvent::with_data_json`] takes text a caller already wrote (the engine writes it from the
/// typed event) after checking that it is one JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub id: String,
    pub event_type: String,
    pub occurred_at: String,
    pub causation: Option<String>,
    data: String,
}

impl NewEvent {
    /// An event whose `data` is this map.
    pub fn new(
        id: impl Into<String>,
        event_type: impl Into<String>,
        occurred_at: impl Into<String>,
        causation: Option<String>,
        data: &serde_json::Map<String, serde_json::Value>,
    ) -> NewEvent {
        NewEvent {
            id: id.into(),
            event_type: event_type.into(),
            occurred_at: occurred_at.into(),
            causation,
            data: serde_json::to_string(data).expect("serialising JSON into memory cannot fail"),
        }
    }

    /// An event whose `data` is `data_json`, the JSON text of an object, stored as it is (write
    /// it compact with sorted keys, as `serde_json` writes a map, to keep entries canonical).
    ///
    /// # Errors
    /// [`RecordError::BadData`] when the text is not one JSON object.
    pub fn with_data_json(
        id: impl Into<String>,
        event_type: impl Into<String>,
        occurred_at: impl Into<String>,
        causation: Option<String>,
        data_json: String,
    ) -> Result<NewEvent, RecordError> {
        let id = id.into();
        // A scan that checks the syntax without building anything.
        let checked = serde_json::from_str::<serde::de::IgnoredAny>(&data_json).map_err(|e| e.to_string());
        let reason = match checked {
            Ok(_) if data_json.starts_with('{') => None,
            Ok(_) => Some("not a JSON object".to_string()),
            Err(e) => Some(e),
        };
        if let Some(reason) = reason {
            return Err(RecordError::BadData { id, reason });
        }
        Ok(NewEvent {
            id,
            event_type: event_type.into(),
            occurred_at: occurred_at.into(),
            causation,
            data: data_json,
        })
    }

    /// The JSON text of `data`, as the entry stores it.
    pub fn data_json(&self) -> &str {
        &self.data
    }

    /// Whether `stored` carries the same content (the idempotency check for a re-sent id).
    /// The data are compared as values, not as text.
    pub fn same_content(&self, stored: &RecordedEvent) -> bool {
        self.event_type == stored.event_type
            && self.occurred_at == stored.occurred_at
            && self.causation == stored.causation
            && serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&self.data)
                .is_ok_and(|data| data == stored.data)
    }
}

impl RecordedEvent {
    /// The stored bytes of `ev`: the version byte, then the JSON object of
    /// `docs/formats/record.md` (fields in this order, `causation` only when set, `data` as
    /// the event carries its text).
    pub(crate) fn encode(ev: &NewEvent, recorded_at_ms: i64) -> Vec<u8> {
        let mut out = Vec::with_capacity(96 + ev.id.len() + ev.event_type.len() + ev.data.len());
        out.push(ENTRY_VERSION);
        let text = |out: &mut Vec<u8>, s: &str| {
            serde_json::to_writer(&mut *out, s).expect("serialising JSON into memory cannot fail")
        };
        out.extend_from_slice(b"{\"id\":");
        text(&mut out, &ev.id);
        out.extend_from_slice(b",\"type\":");
        text(&mut out, &ev.event_type);
        out.extend_from_slice(b",\"occurred_at\":");
        text(&mut out, &ev.occurred_at);
        out.extend_from_slice(b",\"recorded_at_ms\":");
        out.extend_from_slice(recorded_at_ms.to_string().as_bytes());
        if let Some(c) = &ev.causation {
            out.extend_from_slice(b",\"causation\":");
            text(&mut out, c);
        }
        out.extend_from_slice(b",\"data\":");
        out.extend_from_slice(ev.data.as_bytes());
        out.push(b'}');
        out
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
            data: serde_json::Map<String, serde_json::Value>,
        }
        let o: Owned = entry_json(offset, bytes)?;
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
            let ev = NewEvent::new(
                "e\\1",
                "inventory.stock_counted",
                "2026-01-01T00:00:00.000Z",
                causation.clone(),
                &data(),
            );
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
            assert!(ev.same_content(&back));
            assert_eq!((back.offset, back.recorded_at_ms, back.causation), (9, -17, causation));
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
    fn data_text_that_is_not_one_json_object_is_refused_by_name() {
        for (text, why) in
            [("[1]", "not a JSON object"), ("{\"a\":", "EOF"), ("{} {}", "trailing"), ("", "EOF")]
        {
            let e = NewEvent::with_data_json("e1", "t.x", "2026-01-01T00:00:00.000Z", None, text.into())
                .unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, RecordError::BadData { ref id, .. } if id == "e1"), "{msg}");
            assert!(msg.contains(why), "{text:?}: {msg}");
        }
        let ok = NewEvent::with_data_json("e1", "t.x", "2026-01-01T00:00:00.000Z", None, r#"{"a":1}"#.into())
            .unwrap();
        assert_eq!(ok.data_json(), r#"{"a":1}"#);
    }

    #[test]
    fn same_content_compares_data_as_values_not_text() {
        let a = NewEvent::with_data_json(
            "e1",
            "t.x",
            "2026-01-01T00:00:00.000Z",
            None,
            r#"{"b":2, "a":1}"#.into(),
        )
        .unwrap();
        let stored = RecordedEvent::decode(
            0,
            &RecordedEvent::encode(
                &NewEvent::new("e1", "t.x", "2026-01-01T00:00:00.000Z", None, &{
                    let mut m = serde_json::Map::new();
                    m.insert("a".into(), serde_json::json!(1));
                    m.insert("b".into(), serde_json::json!(2));
                    m
                }),
                0,
            ),
        )
        .unwrap();
        assert!(a.same_content(&stored));
        let c = NewEvent::with_data_json(
            "e1",
            "t.x",
            "2026-01-01T00:00:00.000Z",
            None,
            r#"{"a":1,"b":3}"#.into(),
        )
        .unwrap();
        assert!(!c.same_content(&stored));
    }
}
