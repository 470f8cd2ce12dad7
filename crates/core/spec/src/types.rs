//! Column and field types, and the typed values that flow from events into table rows.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDateTime, TimeZone, Utc};
use rust_decimal::Decimal;

/// The largest decimal precision a column may declare (what `rust_decimal` represents exactly).
pub const MAX_DECIMAL_PRECISION: u8 = 28;

/// The type of an event field or a table column.
///
/// Maps onto Paimon types: `string` → STRING, `int` → BIGINT, `decimal(p,s)` → DECIMAL(p,s),
/// `bool` → BOOLEAN, `timestamp` → TIMESTAMP(3) (UTC, millisecond precision).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    String,
    Int,
    Decimal { precision: u8, scale: u8 },
    Bool,
    Timestamp,
}

impl ValueType {
    /// Whether a value of type `from` may be stored in a slot of this type without loss.
    pub fn accepts(self, from: ValueType) -> bool {
        match (self, from) {
            (a, b) if a == b => true,
            (ValueType::Decimal { .. }, ValueType::Int | ValueType::Decimal { .. }) => true,
            _ => false,
        }
    }

    /// Whether arithmetic is defined on this type.
    pub fn is_numeric(self) -> bool {
        matches!(self, ValueType::Int | ValueType::Decimal { .. })
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueType::String => f.write_str("string"),
            ValueType::Int => f.write_str("int"),
            ValueType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
            ValueType::Bool => f.write_str("bool"),
            ValueType::Timestamp => f.write_str("timestamp"),
        }
    }
}

impl FromStr for ValueType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        match t {
            "string" => return Ok(ValueType::String),
            "int" => return Ok(ValueType::Int),
            "bool" => return Ok(ValueType::Bool),
            "timestamp" => return Ok(ValueType::Timestamp),
            "decimal" => return Ok(ValueType::Decimal { precision: 18, scale: 2 }),
            _ => {}
        }
        if let Some(args) = t.strip_prefix("decimal(").and_then(|r| r.strip_suffix(')')) {
            let mut parts = args.split(',').map(str::trim);
            let p = parts.next().and_then(|p| p.parse::<u8>().ok());
            let s = parts.next().and_then(|s| s.parse::<u8>().ok());
            if let (Some(precision), Some(scale), None) = (p, s, parts.next()) {
                if precision == 0 || precision > MAX_DECIMAL_PRECISION {
                    return Err(format!(
                        "decimal precision {precision} is out of range 1..={MAX_DECIMAL_PRECISION}"
                    ));
                }
                if scale > precision {
                    return Err(format!("decimal scale {scale} exceeds precision {precision}"));
                }
                return Ok(ValueType::Decimal { precision, scale });
            }
            return Err(format!("`{t}` is not of the form decimal(precision,scale)"));
        }
        Err(format!("unknown type `{t}` (expected string, int, decimal(p,s), bool or timestamp)"))
    }
}

/// A typed value. Timestamps carry millisecond precision.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    String(String),
    Int(i64),
    Decimal(Decimal),
    Bool(bool),
    Timestamp(DateTime<Utc>),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Converts a JSON value into a value of type `ty`, rejecting anything that does not fit.
    ///
    /// # Errors
    /// A message naming the expected type and what was found.
    pub fn from_json(json: &serde_json::Value, ty: ValueType) -> Result<Value, String> {
        use serde_json::Value as J;
        if json.is_null() {
            return Ok(Value::Null);
        }
        match ty {
            ValueType::String => match json {
                J::String(s) => Ok(Value::String(s.clone())),
                other => Err(format!("expected a string, found {}", json_kind(other))),
            },
            ValueType::Int => match json {
                J::Number(n) => n
                    .as_i64()
                    .map(Value::Int)
                    .ok_or_else(|| format!("expected a whole number fitting 64 bits, found {n}")),
                J::String(s) => s
                    .trim()
                    .parse::<i64>()
                    .map(Value::Int)
                    .map_err(|_| format!("expected a whole number, found \"{s}\"")),
                other => Err(format!("expected a whole number, found {}", json_kind(other))),
            },
            ValueType::Decimal { precision, scale } => {
                let d = match json {
                    J::Number(n) => exact_decimal(&n.to_string())
                        .map_err(|why| format!("number {n} is not a representable decimal: {why}"))?,
                    J::String(s) => return decimal_text(s, precision, scale),
                    other => return Err(format!("expected a decimal number, found {}", json_kind(other))),
                };
                fit_decimal(d, precision, scale).map(Value::Decimal)
            }
            ValueType::Bool => match json {
                J::Bool(b) => Ok(Value::Bool(*b)),
                other => Err(format!("expected true or false, found {}", json_kind(other))),
            },
            ValueType::Timestamp => match json {
                J::String(s) => parse_timestamp(s).map(Value::Timestamp),
                other => Err(format!("expected an RFC 3339 timestamp string, found {}", json_kind(other))),
            },
        }
    }

    /// A row stored as a JSON array ([`Value::json_array`]'s text), one value per column of
    /// `types`, each typed as [`Value::from_json`] types it.
    ///
    /// # Errors
    /// A message: the text is not a JSON array, holds a value per column of another count, or
    /// a value does not fit its column's type.
    pub fn row_from_json(text: &[u8], types: &[ValueType]) -> Result<Vec<Value>, String> {
        crate::event_data::typed_array(text, types)
    }

    /// Renders the value as JSON the way `livestate read --json` and the interop tests print it:
    /// decimals as strings in plain notation, timestamps as `YYYY-MM-DDTHH:MM:SS.mmm` (UTC).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::String(s) => serde_json::Value::String(s.clone()),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Decimal(d) => serde_json::Value::String(d.to_string()),
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Timestamp(t) => serde_json::Value::String(format_timestamp(t)),
        }
    }

    /// Appends the JSON text of [`Value::to_json`] to `out`, byte for byte the same, without
    /// building a `serde_json::Value` first (the lookup index's keys and rows are these bytes).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => out.extend_from_slice(b"null"),
            Value::String(s) => {
                serde_json::to_writer(&mut *out, s).expect("writing JSON into memory cannot fail")
            }
            Value::Int(i) => {
                serde_json::to_writer(&mut *out, i).expect("writing JSON into memory cannot fail")
            }
            Value::Decimal(d) => serde_json::to_writer(&mut *out, &d.to_string())
                .expect("writing JSON into memory cannot fail"),
            Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Timestamp(t) => {
                out.push(b'"');
                push_timestamp(out, t);
                out.push(b'"');
            }
        }
    }

    /// The JSON array of `values` ([`Value::write_json`] of each), as `serde_json::to_vec` of
    /// their [`Value::to_json`] array writes it.
    pub fn json_array<'a>(values: impl IntoIterator<Item = &'a Value>) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.push(b'[');
        for (i, v) in values.into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            v.write_json(&mut out);
        }
        out.push(b']');
        out
    }

    /// The value's type, `None` for null.
    pub fn value_type(&self) -> Option<ValueType> {
        Some(match self {
            Value::Null => return None,
            Value::String(_) => ValueType::String,
            Value::Int(_) => ValueType::Int,
            Value::Decimal(d) => {
                ValueType::Decimal { precision: MAX_DECIMAL_PRECISION, scale: d.scale() as u8 }
            }
            Value::Bool(_) => ValueType::Bool,
            Value::Timestamp(_) => ValueType::Timestamp,
        })
    }

    /// Coerces the value into a column of type `ty` (int into decimal, decimal rescaled).
    ///
    /// # Errors
    /// A message when the value does not fit the column.
    pub fn coerce(self, ty: ValueType) -> Result<Value, String> {
        match (self, ty) {
            (Value::Null, _) => Ok(Value::Null),
            (Value::Int(i), ValueType::Decimal { precision, scale }) => {
                fit_decimal(Decimal::from(i), precision, scale).map(Value::Decimal)
            }
            (Value::Decimal(d), ValueType::Decimal { precision, scale }) => {
                fit_decimal(d, precision, scale).map(Value::Decimal)
            }
            (v, ty) => {
                if v.value_type().is_some_and(|vt| ty.accepts(vt)) {
                    Ok(v)
                } else {
                    Err(format!("a {} value does not fit a {ty} column", v.type_name()))
                }
            }
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::String(_) => "string",
            Value::Int(_) => "int",
            Value::Decimal(_) => "decimal",
            Value::Bool(_) => "bool",
            Value::Timestamp(_) => "timestamp",
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::String(s) => f.write_str(s),
            Value::Int(i) => write!(f, "{i}"),
            Value::Decimal(d) => write!(f, "{d}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Timestamp(t) => f.write_str(&format_timestamp(t)),
        }
    }
}

/// Parses decimal text (`12.50`, `-3`, `1.5e3`, `25E-2`) exactly: a number with more
/// significant digits than a decimal holds (28) is refused, never rounded.
///
/// # Errors
/// A message saying why the text is not an exact decimal.
pub fn exact_decimal(text: &str) -> Result<Decimal, String> {
    let (base, exp) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    let unsigned = base.strip_prefix(['-', '+']).unwrap_or(base);
    let numeric = unsigned.chars().any(|c| c.is_ascii_digit())
        && unsigned.chars().all(|c| c.is_ascii_digit() || c == '.')
        && unsigned.matches('.').count() <= 1;
    if !numeric {
        return Err("not a decimal number".into());
    }
    let too_many = || format!("more than {MAX_DECIMAL_PRECISION} significant digits would be rounded");
    // Trailing zeros of a fraction are exact whatever their number (`0.1000…0` is 0.1); the
    // value keeps the scale it was written with while a decimal can hold it.
    let places = base.split_once('.').map_or(0, |(_, f)| f.len());
    let trimmed = if places > 0 { base.trim_end_matches('0').trim_end_matches('.') } else { base };
    let mut d = Decimal::from_str_exact(trimmed).map_err(|_| too_many())?;
    if places <= MAX_DECIMAL_PRECISION as usize {
        d.rescale(places as u32);
    }
    let Some(exp) = exp else { return Ok(d) };
    let exp: i32 = exp.parse().map_err(|_| format!("exponent `{exp}` is not a whole number"))?;
    // `d` holds at most 28 digits, so this reads them without rounding; a scale past 28 or a
    // value past the largest decimal is an error, not a rounding.
    Decimal::from_scientific(&format!("{d}e{exp}")).map_err(|_| too_many())
}

/// Rescales `d` to `scale` and checks it fits `precision` digits. Rounding is refused.
///
/// # Errors
/// A message when digits would be lost or the value is too large.
pub fn fit_decimal(d: Decimal, precision: u8, scale: u8) -> Result<Decimal, String> {
    let mut r = d.normalize();
    if r.scale() > u32::from(scale) {
        return Err(format!("{d} has more than {scale} decimal places"));
    }
    r.rescale(u32::from(scale));
    if r.scale() != u32::from(scale) {
        return Err(format!("{d} cannot be represented with scale {scale}"));
    }
    let digits = r.mantissa().unsigned_abs().checked_ilog10().map_or(1, |l| l + 1);
    if digits > u32::from(precision) {
        return Err(format!("{d} does not fit decimal({precision},{scale})"));
    }
    Ok(r)
}

/// A decimal column's value from the text of a JSON string (`"12.50"`), as
/// [`Value::from_json`] and the typing of event data both read it.
pub(crate) fn decimal_text(s: &str, precision: u8, scale: u8) -> Result<Value, String> {
    let d =
        exact_decimal(s.trim()).map_err(|why| format!("expected a decimal number, found \"{s}\": {why}"))?;
    fit_decimal(d, precision, scale).map(Value::Decimal)
}

/// Parses an RFC 3339 timestamp (or a naive `YYYY-MM-DDTHH:MM:SS[.fff]`, taken as UTC),
/// truncated to milliseconds. In UTC it must fall in the years 0000 to 9999, the years RFC 3339
/// can write: livestate stores timestamps in UTC, so one that an offset moves outside them
/// (`9999-12-31T23:59:59-01:00`) could be accepted but never read back.
///
/// # Errors
/// A message quoting the text that is not a timestamp, or whose UTC year is out of range.
pub fn parse_timestamp(s: &str) -> Result<DateTime<Utc>, String> {
    match stored_timestamp(s.trim().as_bytes()) {
        Some(t) => Ok(t),
        None => general_timestamp(s),
    }
}

/// [`parse_timestamp`] through chrono's parsers, for every form.
fn general_timestamp(s: &str) -> Result<DateTime<Utc>, String> {
    let parsed = DateTime::parse_from_rfc3339(s.trim())
        .map(|t| t.with_timezone(&Utc))
        .or_else(|_| {
            NaiveDateTime::parse_from_str(s.trim(), "%Y-%m-%dT%H:%M:%S%.f").map(|n| Utc.from_utc_datetime(&n))
        })
        .map_err(|_| format!("\"{s}\" is not an RFC 3339 timestamp (e.g. 2026-03-01T08:00:00Z)"))?;
    if !(0..=9999).contains(&parsed.year()) {
        return Err(format!(
            "\"{s}\" is in the year {} in UTC; timestamps are from year 0000 to 9999",
            parsed.year()
        ));
    }
    Ok(millis_to_timestamp(parsed.timestamp_millis()))
}

/// [`format_timestamp`]'s own form, `YYYY-MM-DDTHH:MM:SS.mmm`, with or without a `Z`, read
/// without a format string to interpret: every timestamp a stored row holds is in this form, and
/// the general parser took a quarter of a full read of the lookup index. `None` for anything
/// else (a leap second, an offset, other digits), which [`parse_timestamp`] reads the general way.
fn stored_timestamp(b: &[u8]) -> Option<DateTime<Utc>> {
    let b = match b {
        [head @ .., b'Z'] => head,
        _ => b,
    };
    if b.len() != 23
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
    {
        return None;
    }
    let num = |from: usize, to: usize| {
        b[from..to].iter().try_fold(0u32, |n, &c| c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0')))
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second, milli) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    if second > 59 {
        return None;
    }
    let date = chrono::NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, day)?;
    let time = date.and_hms_milli_opt(hour, minute, second, milli)?;
    Some(Utc.from_utc_datetime(&time))
}

/// The UTC timestamp `ms` milliseconds after the epoch (clamped into chrono's range).
pub fn millis_to_timestamp(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// `YYYY-MM-DDTHH:MM:SS.mmm`, UTC, no suffix: the form pypaimon and `livestate read` agree on.
pub fn format_timestamp(t: &DateTime<Utc>) -> String {
    let mut out = Vec::with_capacity(23);
    push_timestamp(&mut out, t);
    String::from_utf8(out).expect("a timestamp's text is ASCII")
}

/// Appends [`format_timestamp`]'s text to `out`, without a format string to interpret: this runs
/// for every timestamp the derivers key, index and encode.
pub fn push_timestamp(out: &mut Vec<u8>, t: &DateTime<Utc>) {
    use chrono::Timelike;
    let year = t.year();
    if !(0..=9999).contains(&year) {
        // Outside what RFC 3339 writes (never stored, see `parse_timestamp`): chrono's own text.
        out.extend_from_slice(t.format("%Y-%m-%dT%H:%M:%S%.3f").to_string().as_bytes());
        return;
    }
    let mut push = |sep: Option<u8>, n: u32, width: u32| {
        out.extend(sep);
        for p in (0..width).rev() {
            out.push(b'0' + (n / 10u32.pow(p) % 10) as u8);
        }
    };
    push(None, year.unsigned_abs(), 4);
    push(Some(b'-'), t.month(), 2);
    push(Some(b'-'), t.day(), 2);
    push(Some(b'T'), t.hour(), 2);
    push(Some(b':'), t.minute(), 2);
    push(Some(b':'), t.second(), 2);
    // A leap second's nanoseconds run past a second; chrono prints 1000+ milliseconds then too.
    let millis = t.nanosecond() / 1_000_000;
    push(Some(b'.'), millis, if millis >= 1000 { 4 } else { 3 });
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_type_name() {
        assert_eq!("string".parse::<ValueType>().unwrap(), ValueType::String);
        assert_eq!(
            "decimal(12, 2)".parse::<ValueType>().unwrap(),
            ValueType::Decimal { precision: 12, scale: 2 }
        );
        assert!("decimal(2,3)".parse::<ValueType>().unwrap_err().contains("exceeds"));
        assert!("varchar".parse::<ValueType>().unwrap_err().contains("unknown type `varchar`"));
    }

    #[test]
    fn a_decimal_with_more_digits_than_a_decimal_holds_is_refused_not_rounded() {
        let ty = ValueType::Decimal { precision: 10, scale: 2 };
        for text in ["0.10000000000000000000000000001", "1234567890123456789012345678901"] {
            let number: serde_json::Value = serde_json::from_str(text).unwrap();
            for json in [number, serde_json::json!(text)] {
                let err = Value::from_json(&json, ty).unwrap_err();
                assert!(err.contains("significant digits would be rounded"), "{json}: {err}");
            }
        }
        // Exact however it is written: trailing zeros, an exponent, a sign.
        for (text, want) in
            [("0.1000000000000000000000000000000", "0.10"), ("1.5e1", "15.00"), ("-25E-2", "-0.25")]
        {
            let number: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(Value::from_json(&number, ty).unwrap().to_json(), serde_json::json!(want), "{text}");
        }
        assert!(exact_decimal("1e-40").is_err());
        assert!(exact_decimal("1e40").is_err());
    }

    #[test]
    fn decimal_refuses_to_round() {
        let ty = ValueType::Decimal { precision: 6, scale: 2 };
        let ok = Value::from_json(&serde_json::json!("12.5"), ty).unwrap();
        assert_eq!(ok.to_json(), serde_json::json!("12.50"));
        assert!(Value::from_json(&serde_json::json!(1.234), ty).unwrap_err().contains("decimal places"));
        assert!(Value::from_json(&serde_json::json!(123456), ty).unwrap_err().contains("does not fit"));
    }

    #[test]
    fn the_stored_form_reads_as_the_general_parser_reads_it() {
        let mut texts: Vec<String> = [
            "2026-03-01T08:00:00.123",
            "2026-03-01T08:00:00.123Z",
            "0000-01-01T00:00:00.000",
            "9999-12-31T23:59:59.999Z",
            "2024-02-29T12:30:45.001",
            "2023-02-29T12:30:45.001",
            "2026-13-01T08:00:00.123",
            "2026-04-31T08:00:00.123",
            "2026-03-01T24:00:00.000",
            "2026-03-01T08:60:00.000",
            "2026-03-01T23:59:60.000",
            "2026-03-01 08:00:00.123",
            "2026-03-01T08:00:00.12",
            "2026-03-01T08:00:00.1234",
            "2026-03-01T08:00:00.123+01:00",
            "2026-0a-01T08:00:00.123",
            " 2026-03-01T08:00:00.123 ",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        let mut ms: i64 = -62_167_219_200_000; // 0000-01-01
        while ms < 253_402_300_799_999 {
            let stored = format_timestamp(&millis_to_timestamp(ms));
            assert!(
                stored_timestamp(stored.as_bytes()).is_some(),
                "{stored} is read without chrono's parser"
            );
            texts.push(stored);
            ms += 86_399_999 * 37 + 1;
        }
        for t in &texts {
            let general = general_timestamp(t);
            if let Some(fast) = stored_timestamp(t.trim().as_bytes()) {
                assert_eq!(Ok(fast), general, "{t}");
            }
            assert_eq!(parse_timestamp(t), general, "{t}");
        }
    }

    #[test]
    fn timestamps_are_utc_millis() {
        let v =
            Value::from_json(&serde_json::json!("2026-03-01T09:00:00.123456+01:00"), ValueType::Timestamp)
                .unwrap();
        assert_eq!(v.to_json(), serde_json::json!("2026-03-01T08:00:00.123"));
        assert!(Value::from_json(&serde_json::json!("yesterday"), ValueType::Timestamp).is_err());
    }

    #[test]
    fn timestamps_an_offset_moves_out_of_years_0000_to_9999_are_refused() {
        for (text, year) in [("9999-12-31T23:59:59-23:59", "10000"), ("0000-01-01T00:00:00+00:01", "-1")] {
            let e = parse_timestamp(text).unwrap_err();
            assert!(e.contains(&format!("in the year {year} in UTC")), "{e}");
        }
        for edge in ["9999-12-31T23:59:59.999Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59"] {
            let t = parse_timestamp(edge).unwrap();
            assert_eq!(parse_timestamp(&format_timestamp(&t)).unwrap(), t, "{edge} reads back");
        }
    }

    #[test]
    fn json_text_is_the_same_bytes_as_serde_json_writes_for_every_kind_of_value() {
        let t = |s: &str| Value::Timestamp(parse_timestamp(s).unwrap());
        let values = [
            Value::Null,
            Value::String("plain".into()),
            Value::String("quote \" backslash \\ newline \n tab \t nul \u{0} é ☃".into()),
            Value::Int(0),
            Value::Int(i64::MIN),
            Value::Int(i64::MAX),
            Value::Decimal(Decimal::new(-12345, 2)),
            Value::Bool(true),
            Value::Bool(false),
            t("2026-03-02T08:00:00Z"),
            t("0000-01-01T00:00:00Z"),
            t("0999-12-31T23:59:59.999Z"),
            t("9999-12-31T23:59:59.001Z"),
            t("1970-01-01T00:00:00.010Z"),
        ];
        for v in &values {
            let mut ours = Vec::new();
            v.write_json(&mut ours);
            assert_eq!(String::from_utf8(ours).unwrap(), serde_json::to_string(&v.to_json()).unwrap());
        }
        let theirs: Vec<serde_json::Value> = values.iter().map(Value::to_json).collect();
        assert_eq!(Value::json_array(&values), serde_json::to_vec(&theirs).unwrap());
        assert_eq!(Value::json_array(&[]), b"[]");
        for v in &values[9..] {
            let Value::Timestamp(ts) = v else { unreachable!() };
            assert_eq!(format_timestamp(ts), ts.format("%Y-%m-%dT%H:%M:%S%.3f").to_string());
        }
    }

    #[test]
    fn int_rejects_fractions_and_text() {
        assert!(Value::from_json(&serde_json::json!(1.5), ValueType::Int).is_err());
        assert!(Value::from_json(&serde_json::json!("x"), ValueType::Int).is_err());
        assert_eq!(Value::from_json(&serde_json::json!(7), ValueType::Int).unwrap(), Value::Int(7));
    }
}
