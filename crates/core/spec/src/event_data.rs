//! An event's `data` typed against its event type, from its JSON text or from a parsed map.
//!
//! [`crate::Event::parse_line`] takes `data` as JSON text and types each field straight from
//! it: no `serde_json` map is built, strings are borrowed from the line until the field's value
//! takes them, and whole numbers become [`Value::Int`] without the detour through
//! `serde_json::Number` (which, with the `arbitrary_precision` feature the `paimon` crate turns
//! on, keeps every number as a string and parses it again). A profile of the ingest had the
//! envelope's map at about half of `parse_line`. Whatever the fast paths do not cover (a
//! fraction, an object, a string in a number field) is typed by [`Value::from_json`], so the
//! answers and error messages are those of a parsed map, which [`typed_map`] types the same way.

use std::borrow::Cow;
use std::fmt;

use indexmap::IndexMap;
use serde::de::{self, Deserializer as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::company::{EventType, FieldSpec};
use crate::error::EventError;
use crate::event::Fields;
use crate::types::{decimal_text, parse_timestamp, Value, ValueType};

/// One field's value as it was read, before it is typed.
enum Raw<'de> {
    Null,
    Str(Cow<'de, str>),
    Int(i64),
    Uint(u64),
    Bool(bool),
    /// Anything else, as `serde_json` reads it (a fraction, an array, an object).
    Other(serde_json::Value),
}

impl Raw<'_> {
    fn into_json(self) -> serde_json::Value {
        match self {
            Raw::Null => serde_json::Value::Null,
            Raw::Str(s) => serde_json::Value::String(s.into_owned()),
            Raw::Int(i) => i.into(),
            Raw::Uint(u) => u.into(),
            Raw::Bool(b) => serde_json::Value::Bool(b),
            Raw::Other(v) => v,
        }
    }

    /// The value of a field of type `ty`: what [`Value::from_json`] makes of the same JSON.
    fn typed(self, ty: ValueType) -> Result<Value, String> {
        match (self, ty) {
            (Raw::Null, _) => Ok(Value::Null),
            (Raw::Str(s), ValueType::String) => Ok(Value::String(s.into_owned())),
            (Raw::Str(s), ValueType::Timestamp) => parse_timestamp(&s).map(Value::Timestamp),
            (Raw::Int(i), ValueType::Int) => Ok(Value::Int(i)),
            (Raw::Uint(u), ValueType::Int) if i64::try_from(u).is_ok() => Ok(Value::Int(u as i64)),
            (Raw::Bool(b), ValueType::Bool) => Ok(Value::Bool(b)),
            (Raw::Str(s), ValueType::Decimal { precision, scale }) => decimal_text(&s, precision, scale),
            (raw, ty) => Value::from_json(&raw.into_json(), ty),
        }
    }
}

impl<'de> Deserialize<'de> for Raw<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Raw<'de>, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Raw<'de>, E> {
        Ok(Raw::Null)
    }
    fn visit_none<E>(self) -> Result<Raw<'de>, E> {
        Ok(Raw::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Raw<'de>, E> {
        Ok(Raw::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Raw<'de>, E> {
        Ok(Raw::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Raw<'de>, E> {
        Ok(Raw::Uint(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Raw<'de>, E> {
        Ok(Raw::Other(v.into()))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Raw<'de>, E> {
        Ok(Raw::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Raw<'de>, E> {
        Ok(Raw::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Raw<'de>, E> {
        Ok(Raw::Str(Cow::Owned(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Raw<'de>, A::Error> {
        serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Raw::Other)
    }
    // Objects, and (with `arbitrary_precision`) every number that is not a whole number within
    // 64 bits: `serde_json` hands those over as a one-entry map that `serde_json::Value` reads
    // back as the number, digits kept.
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Raw<'de>, A::Error> {
        serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map)).map(Raw::Other)
    }
}

/// An object key, borrowed from the text unless it holds escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Key<'de>, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// The fields of one `data` object, by the event type's field order, and the first of its
/// unknown names in sorted order (the one a sorted map would name first).
struct Read<'de> {
    slots: Vec<Option<Raw<'de>>>,
    unknown: Option<String>,
}

impl<'de> Read<'de> {
    fn new(fields: usize) -> Read<'de> {
        Read { slots: (0..fields).map(|_| None).collect(), unknown: None }
    }

    /// Keeps the value of the field at `index`; a repeated name keeps its last value, as a
    /// parsed map does.
    fn known(&mut self, index: usize, raw: Raw<'de>) {
        self.slots[index] = Some(raw);
    }

    /// Notes a name the type does not have, keeping the smallest.
    fn unknown(&mut self, name: Cow<'_, str>) {
        if self.unknown.as_deref().is_none_or(|u| name.as_ref() < u) {
            self.unknown = Some(name.into_owned());
        }
    }
}

struct DataVisitor<'t> {
    fields: &'t IndexMap<String, FieldSpec>,
}

impl<'de> Visitor<'de> for DataVisitor<'_> {
    type Value = Read<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of the event type's fields")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Read<'de>, A::Error> {
        let mut read = Read::new(self.fields.len());
        while let Some(Key(name)) = map.next_key()? {
            match self.fields.get_index_of(name.as_ref()) {
                Some(i) => read.known(i, map.next_value()?),
                None => {
                    read.unknown(name);
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(read)
    }
}

/// A JSON array of one value per column of `types` (a stored row, as [`Value::json_array`]
/// writes it), each typed as [`Value::from_json`] types it, without a `serde_json` value between.
pub(crate) fn typed_array(text: &[u8], types: &[ValueType]) -> Result<Vec<Value>, String> {
    let raw: Vec<Raw<'_>> = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    if raw.len() != types.len() {
        return Err(format!("{} values for {} columns", raw.len(), types.len()));
    }
    raw.into_iter().zip(types).map(|(r, t)| r.typed(*t)).collect()
}

/// Types the JSON text of a `data` object against `ty`.
///
/// # Errors
/// An [`EventError`] naming `data` when the text is not an object, else the field: unknown to
/// the type, of the wrong type, or required and missing.
pub(crate) fn typed_text(text: &str, ty: &EventType) -> Result<Fields, EventError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let read = de
        .deserialize_map(DataVisitor { fields: &ty.fields })
        .map_err(|e| EventError::new("data", format!("must be an object of `{}`'s fields: {e}", ty.name)))?;
    finish(read, ty)
}

/// Types a parsed `data` map against `ty`, as [`typed_text`] types its text.
///
/// # Errors
/// As [`typed_text`].
pub(crate) fn typed_map(
    data: serde_json::Map<String, serde_json::Value>,
    ty: &EventType,
) -> Result<Fields, EventError> {
    let mut read = Read::new(ty.fields.len());
    for (name, v) in data {
        match ty.fields.get_index_of(&name) {
            Some(i) => read.known(i, Raw::Other(v)),
            None => read.unknown(Cow::Owned(name)),
        }
    }
    finish(read, ty)
}

fn finish(read: Read<'_>, ty: &EventType) -> Result<Fields, EventError> {
    if let Some(k) = read.unknown {
        return Err(EventError::new(format!("data.{k}"), format!("`{}` has no field `{k}`", ty.name)));
    }
    let mut values = Vec::with_capacity(ty.fields.len());
    for ((name, f), raw) in ty.fields.iter().zip(read.slots) {
        let v = match raw {
            Some(raw) => raw.typed(f.ty).map_err(|e| EventError::new(format!("data.{name}"), e))?,
            None => Value::Null,
        };
        if f.required && v.is_null() {
            return Err(EventError::new(
                format!("data.{name}"),
                format!("required {} field is missing", f.ty),
            ));
        }
        values.push(v);
    }
    Ok(Fields::new(std::sync::Arc::clone(&ty.layout), values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ValueType;

    fn ty() -> EventType {
        let field = |ty, required| FieldSpec { ty, required };
        EventType::new(
            "inventory.counted".into(),
            "inventory".into(),
            None,
            [
                ("item".to_string(), field(ValueType::String, true)),
                ("qty".to_string(), field(ValueType::Int, false)),
                ("price".to_string(), field(ValueType::Decimal { precision: 10, scale: 2 }, false)),
                ("at".to_string(), field(ValueType::Timestamp, false)),
                ("ok".to_string(), field(ValueType::Bool, false)),
            ]
            .into_iter()
            .collect(),
        )
    }

    /// Both ways of typing, which must agree on every input, answers and messages alike.
    fn both(text: &str) -> Result<Fields, String> {
        let ty = ty();
        let from_text = typed_text(text, &ty).map_err(|e| e.to_string());
        let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text).unwrap();
        let from_map = typed_map(map, &ty).map_err(|e| e.to_string());
        assert_eq!(from_text, from_map, "{text}");
        from_text
    }

    #[test]
    fn text_and_a_parsed_map_type_the_same_fields_the_same_way() {
        let ok = both(
            r#"{"qty": 7, "item": "bolt \"7\"", "price": 12.50, "at": "2026-01-01T00:00:00Z", "ok": true}"#,
        )
        .unwrap();
        assert_eq!(
            ok.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            ["item", "qty", "price", "at", "ok"],
            "the type's order"
        );
        assert_eq!(ok["item"], Value::String("bolt \"7\"".into()));
        assert_eq!(ok["qty"], Value::Int(7));
        // A JSON number keeps its digits on the way to a decimal.
        assert_eq!(ok["price"].to_json(), serde_json::json!("12.50"));
        // Numbers given as strings, big numbers, negative zero, nulls, a repeated name.
        let ok = both(r#"{"item": "a", "qty": "-12", "price": "3", "at": null, "ok": null}"#).unwrap();
        assert_eq!((&ok["qty"], &ok["at"]), (&Value::Int(-12), &Value::Null));
        assert_eq!(both(r#"{"item": "a", "qty": -0}"#).unwrap()["qty"], Value::Int(0));
        assert_eq!(both(r#"{"item": "a", "qty": 1, "qty": 2}"#).unwrap()["qty"], Value::Int(2));
        assert_eq!(
            both(r#"{"item": "a", "qty": -9223372036854775808}"#).unwrap()["qty"],
            Value::Int(i64::MIN)
        );
    }

    #[test]
    fn text_and_a_parsed_map_refuse_the_same_inputs_with_the_same_message() {
        for (text, message) in [
            (
                r#"{"item": "a", "zeta": 1, "beta": [1]}"#,
                "data.beta: `inventory.counted` has no field `beta`",
            ),
            (r#"{"qty": 1}"#, "data.item: required string field is missing"),
            (r#"{"item": null}"#, "data.item: required string field is missing"),
            (r#"{"item": 5}"#, "data.item: expected a string, found a number"),
            (r#"{"item": "a", "qty": 1.5}"#, "data.qty: expected a whole number fitting 64 bits, found 1.5"),
            (
                r#"{"item": "a", "qty": 9223372036854775808}"#,
                "data.qty: expected a whole number fitting 64 bits, found 9223372036854775808",
            ),
            (r#"{"item": "a", "qty": {"n": 1}}"#, "data.qty: expected a whole number, found an object"),
            (r#"{"item": "a", "ok": "yes"}"#, "data.ok: expected true or false, found a string"),
            (r#"{"item": "a", "at": "yesterday"}"#, "data.at:"),
            (r#"{"item": "a", "price": 1.005}"#, "data.price:"),
        ] {
            let got = both(text).unwrap_err();
            assert!(got.starts_with(message), "{text}: {got}");
        }
    }

    #[test]
    fn data_that_is_not_an_object_is_named_as_such() {
        for text in ["5", "null", "[1]", r#""x""#] {
            let e = typed_text(text, &ty()).unwrap_err().to_string();
            assert!(e.starts_with("data: must be an object of `inventory.counted`'s fields"), "{text}: {e}");
        }
    }

    /// A stored row typed from its text, compared with each value typed from a parsed map.
    fn row_both(text: &str, types: &[ValueType]) -> Result<Vec<Value>, String> {
        let from_text = Value::row_from_json(text.as_bytes(), types);
        let parsed: Vec<serde_json::Value> = serde_json::from_str(text).unwrap();
        if parsed.len() == types.len() {
            let from_map: Result<Vec<Value>, String> =
                parsed.iter().zip(types).map(|(j, t)| Value::from_json(j, *t)).collect();
            assert_eq!(from_text, from_map, "{text}");
        }
        from_text
    }

    #[test]
    fn a_stored_row_reads_back_as_written_and_as_a_parsed_map_types_it() {
        let types = [
            ValueType::String,
            ValueType::Int,
            ValueType::Decimal { precision: 10, scale: 2 },
            ValueType::Timestamp,
            ValueType::Bool,
        ];
        let row = vec![
            Value::String("bolt \"7\" \u{e9}".into()),
            Value::Int(i64::MIN),
            Value::Decimal(rust_decimal::Decimal::new(-1250, 2)),
            Value::Timestamp(crate::types::millis_to_timestamp(1_767_225_600_123)),
            Value::Bool(false),
        ];
        let text = String::from_utf8(Value::json_array(&row)).unwrap();
        assert_eq!(row_both(&text, &types).unwrap(), row);
        let nulls = vec![Value::Null; 5];
        let text = String::from_utf8(Value::json_array(&nulls)).unwrap();
        assert_eq!(row_both(&text, &types).unwrap(), nulls);
        // What a map refuses, the text refuses with the same message.
        for bad in [
            r#"["a", 1.5, "1.00", "2026-01-01T00:00:00.000", true]"#,
            r#"["a", 1, "1.001", "2026-01-01T00:00:00.000", true]"#,
            r#"["a", 1, "123456789.00", "2026-01-01T00:00:00.000", true]"#,
            r#"["a", 1, "x", "2026-01-01T00:00:00.000", true]"#,
            r#"["a", 1, "1.00", "2026-02-30T00:00:00.000", true]"#,
            r#"[1, 1, "1.00", "2026-01-01T00:00:00.000", true]"#,
        ] {
            assert!(row_both(bad, &types).is_err(), "{bad}");
        }
        let e = Value::row_from_json(br#"["a", 1]"#, &types).unwrap_err();
        assert_eq!(e, "2 values for 5 columns");
        assert!(Value::row_from_json(b"{}", &types).is_err());
    }
}
