//! The lookup index's stored rows (docs/formats/index.md, "Rows"): each value a tag byte and
//! its bytes, after a version byte that no JSON text starts with, so rows an older livestate
//! stored as JSON arrays are still read (and written anew in this encoding at their next
//! change).
//!
//! ```text
//! row   := 0xB2 value*                  one value per column, in column order
//! value := 0x00                         null
//!        | 0x01 | 0x02                  false | true
//!        | 0x03 i64                     int
//!        | 0x04 i128 u8                 decimal: mantissa, scale
//!        | 0x05 u32 bytes               string: length, UTF-8
//!        | 0x06 i64                     timestamp: milliseconds since the epoch, UTC
//! ```
//!
//! Integers are little-endian. Every value has exactly one encoding, so a row holding a value
//! holds its encoding's bytes ([`Needle`]: [`Index::rows_matching`](crate::index::Index::rows_matching)
//! narrows scans by that).

use livestate_spec::types::millis_to_timestamp;
use livestate_spec::{Value, ValueType};
use rust_decimal::Decimal;

/// The first byte of a row in this encoding (a JSON array starts with `[`).
pub(crate) const VERSION: u8 = 0xB2;

const NULL: u8 = 0x00;
const FALSE: u8 = 0x01;
const TRUE: u8 = 0x02;
const INT: u8 = 0x03;
const DECIMAL: u8 = 0x04;
const STRING: u8 = 0x05;
const TIMESTAMP: u8 = 0x06;

/// The stored bytes of `row`.
pub(crate) fn encode(row: &[Value]) -> Vec<u8> {
    let strings: usize = row.iter().map(|v| if let Value::String(s) = v { s.len() } else { 0 }).sum();
    let mut out = Vec::with_capacity(1 + row.len() * 9 + strings);
    out.push(VERSION);
    for v in row {
        push(&mut out, v);
    }
    out
}

/// Appends the encoding of one value.
fn push(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Int(i) => {
            out.push(INT);
            out.extend_from_slice(&i.to_le_bytes());
        }
        Value::Decimal(d) => {
            out.push(DECIMAL);
            out.extend_from_slice(&d.mantissa().to_le_bytes());
            out.push(u8::try_from(d.scale()).expect("a decimal's scale is at most 28"));
        }
        Value::String(s) => {
            out.push(STRING);
            let len = u32::try_from(s.len()).expect("a stored string is under 4 GiB");
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        Value::Timestamp(t) => {
            out.push(TIMESTAMP);
            out.extend_from_slice(&t.timestamp_millis().to_le_bytes());
        }
    }
}

/// The encoding of `v` alone: the bytes every stored row holding `v` contains.
fn needle(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    push(&mut out, v);
    out
}

/// A value looked for in stored rows without decoding them, in whichever encoding each row
/// has (rows an older livestate stored as JSON stay until their key changes).
pub(crate) struct Needle {
    binary: memchr::memmem::Finder<'static>,
    json: memchr::memmem::Finder<'static>,
}

impl Needle {
    /// A needle for `v`, when its bytes narrow a scan: strings, integers and booleans, each of
    /// which has exactly one encoding in either format (other values are left to the caller).
    pub fn new(v: &Value) -> Option<Needle> {
        if !matches!(v, Value::String(_) | Value::Int(_) | Value::Bool(_)) {
            return None;
        }
        let json = serde_json::to_vec(&v.to_json()).expect("values encode");
        Some(Needle {
            binary: memchr::memmem::Finder::new(&needle(v)).into_owned(),
            json: memchr::memmem::Finder::new(&json).into_owned(),
        })
    }

    /// Whether the stored row `bytes` may hold the value: false only when it cannot.
    pub fn found_in(&self, bytes: &[u8]) -> bool {
        let finder = if bytes.first() == Some(&VERSION) { &self.binary } else { &self.json };
        finder.find(bytes).is_some()
    }
}

/// Decodes a stored row of a table whose columns have `types`: this encoding, or a JSON array
/// an older livestate stored.
///
/// # Errors
/// A message saying what does not decode.
pub(crate) fn decode(bytes: &[u8], types: &[ValueType]) -> Result<Vec<Value>, String> {
    let Some((&VERSION, mut rest)) = bytes.split_first() else {
        return Value::row_from_json(bytes, types);
    };
    let mut row = Vec::with_capacity(types.len());
    while !rest.is_empty() {
        let (v, tail) = value(rest).map_err(|e| format!("value {}: {e}", row.len() + 1))?;
        row.push(v);
        rest = tail;
    }
    if row.len() != types.len() {
        return Err(format!("{} values for a table of {} columns", row.len(), types.len()));
    }
    Ok(row)
}

/// The value at the start of `bytes`, and the bytes after it.
fn value(bytes: &[u8]) -> Result<(Value, &[u8]), String> {
    let (&tag, rest) = bytes.split_first().expect("called with bytes left");
    let take = |n: usize| -> Result<(&[u8], &[u8]), String> {
        (rest.len() >= n).then(|| rest.split_at(n)).ok_or_else(|| format!("cut short (tag {tag:#04x})"))
    };
    let i64_of = |b: &[u8]| i64::from_le_bytes(b.try_into().expect("eight bytes"));
    Ok(match tag {
        NULL => (Value::Null, rest),
        FALSE => (Value::Bool(false), rest),
        TRUE => (Value::Bool(true), rest),
        INT => {
            let (b, rest) = take(8)?;
            (Value::Int(i64_of(b)), rest)
        }
        DECIMAL => {
            let (b, rest) = take(17)?;
            let mantissa = i128::from_le_bytes(b[..16].try_into().expect("sixteen bytes"));
            let d =
                Decimal::try_from_i128_with_scale(mantissa, u32::from(b[16])).map_err(|e| e.to_string())?;
            (Value::Decimal(d), rest)
        }
        STRING => {
            let (len, rest) = take(4)?;
            let len = u32::from_le_bytes(len.try_into().expect("four bytes")) as usize;
            if rest.len() < len {
                return Err(format!("a string of {len} bytes with {} left", rest.len()));
            }
            let (s, rest) = rest.split_at(len);
            let s = std::str::from_utf8(s).map_err(|e| format!("a string that is not UTF-8: {e}"))?;
            (Value::String(s.to_string()), rest)
        }
        TIMESTAMP => {
            let (b, rest) = take(8)?;
            (Value::Timestamp(millis_to_timestamp(i64_of(b))), rest)
        }
        other => return Err(format!("unknown tag {other:#04x}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types() -> Vec<ValueType> {
        vec![
            ValueType::String,
            ValueType::Int,
            ValueType::Decimal { precision: 12, scale: 2 },
            ValueType::Bool,
            ValueType::Timestamp,
            ValueType::String,
        ]
    }

    #[test]
    fn every_value_type_reads_back_as_written_nulls_and_extremes_included() {
        let rows = [
            vec![
                Value::String("bolt, \"north\" ✓".into()),
                Value::Int(i64::MIN),
                Value::Decimal(Decimal::new(-123_456, 2)),
                Value::Bool(true),
                Value::Timestamp(millis_to_timestamp(1_700_000_000_123)),
                Value::String(String::new()),
            ],
            vec![
                Value::Null,
                Value::Int(i64::MAX),
                Value::Null,
                Value::Bool(false),
                Value::Null,
                Value::Null,
            ],
            vec![
                Value::String("\u{0}".repeat(3)),
                Value::Int(0),
                Value::Decimal(Decimal::MAX),
                Value::Null,
                Value::Timestamp(millis_to_timestamp(-1)),
                Value::String("x".repeat(70_000)),
            ],
        ];
        for row in rows {
            let bytes = encode(&row);
            assert_eq!(bytes[0], VERSION);
            let back = decode(&bytes, &types()).unwrap();
            assert_eq!(back, row);
            // Decimals keep their scale, not only their value.
            for (a, b) in back.iter().zip(&row) {
                if let (Value::Decimal(a), Value::Decimal(b)) = (a, b) {
                    assert_eq!(a.scale(), b.scale());
                }
            }
        }
    }

    #[test]
    fn a_row_stored_as_a_json_array_by_an_older_livestate_still_reads() {
        let row = vec![
            Value::String("bolt".into()),
            Value::Int(7),
            Value::Decimal(Decimal::new(150, 2)),
            Value::Bool(false),
            Value::Timestamp(millis_to_timestamp(1_700_000_000_000)),
            Value::Null,
        ];
        assert_eq!(decode(&Value::json_array(&row), &types()).unwrap(), row);
    }

    #[test]
    fn a_damaged_row_is_named_not_misread() {
        let good = encode(&[Value::String("bolt".into()), Value::Int(7)]);
        let two = [ValueType::String, ValueType::Int];
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (good[..good.len() - 3].to_vec(), "cut short"),
            ([&good[..], &[0x07]].concat(), "unknown tag 0x07"),
            (vec![VERSION, STRING, 9, 0, 0, 0, b'a'], "a string of 9 bytes"),
            (vec![VERSION, STRING, 1, 0, 0, 0, 0xff, NULL], "not UTF-8"),
            (vec![VERSION, NULL], "1 values for a table of 2 columns"),
            (vec![VERSION, DECIMAL, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 99, NULL], "scale"),
        ];
        for (bytes, expected) in cases {
            let e = decode(&bytes, &two).expect_err(expected);
            assert!(e.to_lowercase().contains(&expected.to_lowercase()), "{expected}: got {e}");
        }
    }

    #[test]
    fn a_row_holding_a_value_holds_its_needle() {
        let row = vec![Value::String("north".into()), Value::Int(42), Value::Bool(true)];
        let bytes = encode(&row);
        for v in &row {
            let n = needle(v);
            assert!(bytes.windows(n.len()).any(|w| w == n.as_slice()), "{v:?}");
        }
        let absent = needle(&Value::String("nort".into()));
        assert!(!bytes.windows(absent.len()).any(|w| w == absent.as_slice()), "a prefix is another string");
    }
}
