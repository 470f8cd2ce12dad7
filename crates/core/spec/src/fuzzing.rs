//! What the fuzz targets in `fuzz/` call, kept here so a stable test can replay every input they
//! found (`tests/fuzz_regressions.rs`) without cargo-fuzz.
//!
//! Each function takes arbitrary bytes and must return, never panic, overflow the stack or hang;
//! where an input is accepted, each also checks an invariant the rest of livestate relies on and
//! panics (the finding a fuzzer reports) when it does not hold.

use std::path::PathBuf;

use crate::company::CompanySpec;
use crate::error::SpecError;
use crate::event::{Event, EventEnvelope};
use crate::expr::Expr;
use crate::types::{Value, ValueType};

/// The line that separates two spec files in a [`spec_input`].
pub const FILE_SEPARATOR: &str = "%%";

/// The line after which a [`spec_input`] holds event lines to check against the spec it built.
pub const EVENTS_SEPARATOR: &str = "%% events";

/// Checks one event line against `spec` as `livestate emit` and `POST /v1/events` do, and returns
/// the event when it is accepted.
///
/// For an accepted event it also checks what derivation relies on: the canonical envelope the
/// record stores (as a value and as JSON text) is accepted again as the same event, and its
/// mappings apply cleanly at any offset.
///
/// # Panics
/// When an accepted event breaks one of those invariants: such an event would be recorded and
/// then stop derivation.
pub fn event_line(spec: &CompanySpec, line: &str) -> Option<Event> {
    // The server reads each line's type first, to check the caller may emit it.
    let _type = serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("type").and_then(serde_json::Value::as_str).map(str::to_string));
    let event = Event::parse_line(line, spec).ok()?;
    let envelope = event.envelope();
    let again = Event::check(envelope.clone(), spec).unwrap_or_else(|e| {
        panic!("accepted {line:?}, but its stored envelope {envelope:?} is refused: {e}")
    });
    assert_eq!(again, event, "the stored envelope of {line:?} reads back as another event");
    let text = serde_json::to_string(&envelope).expect("an envelope serialises");
    let parsed: EventEnvelope = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the stored envelope of {line:?} is not JSON it reads back: {e}"));
    assert_eq!(parsed, envelope, "the stored envelope of {line:?} changed through JSON text");
    for offset in [0, 1, u64::from(u32::MAX), i64::MAX as u64] {
        if let Err(e) = event.row_ops(spec, offset) {
            panic!("accepted {line:?}, but its mappings fail at offset {offset}: {e}");
        }
        // The compiled programs answer as the expressions evaluated by name.
        let none = |_: &str, _: &[Value]| None;
        assert_eq!(
            event.row_ops_each(spec, offset, &none),
            event.row_ops_by_name(spec, offset, &none),
            "the compiled mappings of {line:?} differ from the expressions at offset {offset}"
        );
    }
    Some(event)
}

/// Splits `bytes` into spec files at lines `%%` ([`FILE_SEPARATOR`]) and loads them as one spec
/// the way `CompanySpec::load_dir` does; event lines after a line `%% events`
/// ([`EVENTS_SEPARATOR`]) are then checked against it with [`event_line`].
///
/// # Errors
/// The spec's [`SpecError`].
///
/// # Panics
/// As [`event_line`].
pub fn spec_input(bytes: &[u8]) -> Result<CompanySpec, SpecError> {
    let text = String::from_utf8_lossy(bytes);
    let (files, events) = split_once_line(&text, EVENTS_SEPARATOR).unwrap_or((&text, ""));
    let mut sources = Vec::new();
    let mut rest = files;
    loop {
        let (file, after) = split_once_line(rest, FILE_SEPARATOR).unwrap_or((rest, ""));
        sources.push((PathBuf::from(format!("spec-{}.toml", sources.len())), file.to_string()));
        if after.is_empty() {
            break;
        }
        rest = after;
    }
    let spec = CompanySpec::from_sources(&sources)?;
    for line in events.lines().filter(|l| !l.trim().is_empty()) {
        event_line(&spec, line);
    }
    Ok(spec)
}

/// `text` before and after the first line that is exactly `separator`.
fn split_once_line<'a>(text: &'a str, separator: &str) -> Option<(&'a str, &'a str)> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']) == separator {
            return Some((&text[..at], &text[at + line.len()..]));
        }
        at += line.len();
    }
    None
}

/// Parses `bytes` as an expression (`where=` of a read, a mapping's `set` and `when`, a
/// trigger's `when`) and, when it parses, type-checks and evaluates it with a few names bound:
/// `i` an int, `d` a decimal, `s` a string, `b` a bool, `t` a timestamp and `n` a null int.
///
/// # Errors
/// The parser's message; a type or evaluation error is not an error of the input.
pub fn expr_input(bytes: &[u8]) -> Result<Expr, String> {
    let src = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let expr = Expr::parse(src)?;
    let _ = expr.names();
    let types = |n: &str| -> Option<ValueType> {
        Some(match n {
            "i" | "n" => ValueType::Int,
            "d" => ValueType::Decimal { precision: 12, scale: 2 },
            "s" => ValueType::String,
            "b" => ValueType::Bool,
            "t" => ValueType::Timestamp,
            _ => return None,
        })
    };
    let values = |n: &str| -> Option<Value> {
        Some(match n {
            "i" => Value::Int(-7),
            "n" => Value::Null,
            "d" => Value::Decimal(rust_decimal::Decimal::new(123_456, 2)),
            "s" => Value::String("bolt".into()),
            "b" => Value::Bool(true),
            "t" => Value::Timestamp(crate::types::millis_to_timestamp(1_772_438_400_000)),
            _ => return None,
        })
    };
    if expr.type_check(&types).is_ok() {
        let _ = expr.eval(&values);
        let _ = expr.holds(&values);
    }
    Ok(expr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_input_splits_files_and_checks_the_event_lines_after_the_marker() {
        let input = "[events.\"m.e\"]\nfields = { k = \"string\" }\n%%\n\
                     [tables.t]\nprimary_key = [\"k\"]\nfreshness = \"1s\"\ncolumns = { k = \"string\" }\n\
                     [[mappings]]\nevent = \"m.e\"\ntable = \"t\"\nset = { k = \"k\" }\n%% events\n\
                     {\"id\":\"1\",\"type\":\"m.e\",\"occurred_at\":\"2026-01-01T00:00:00Z\",\"data\":{\"k\":\"x\"}}\n";
        let spec = spec_input(input.as_bytes()).unwrap();
        assert_eq!(spec.events.len(), 1);
        assert_eq!(spec.tables.len(), 1);
        let SpecError::Invalid(problems) = spec_input(b"[tables.t]\n%%\nnot toml").unwrap_err() else {
            panic!("expected an invalid spec")
        };
        assert!(problems.iter().any(|p| p.file == std::path::Path::new("spec-1.toml")), "{problems:?}");
    }

    #[test]
    fn expr_input_refuses_invalid_utf8() {
        assert!(expr_input(b"i + \xff").unwrap_err().contains("not UTF-8"));
        assert!(expr_input(b"i + d > 3 and not b").is_ok());
    }
}
