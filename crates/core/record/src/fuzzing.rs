//! What the `event_decoder` fuzz target in `fuzz/` calls, kept here so a stable test can replay
//! every input it found (`tests/fuzz_regressions.rs`) without cargo-fuzz.

use livestate_spec::{CompanySpec, DataJson, Event};

use crate::entry::RecordedEvent;

/// Feeds `bytes` to the event path end to end and returns how many event lines were accepted:
///
/// 1. as a stored record entry, decoded as the record reads one back (a decoded entry must
///    encode and decode to itself);
/// 2. as a `POST /v1/events` body or `livestate emit` input: UTF-8, then each line checked
///    against `spec` (`livestate_spec::fuzzing::event_line`); each accepted event is then
///    encoded as the record stores it, decoded, and typed again as derivation does, which must
///    give the same event and rows.
///
/// # Panics
/// When an accepted event or a decoded entry breaks those invariants: such an event would be
/// recorded and then stop derivation.
pub fn event_input(spec: &CompanySpec, bytes: &[u8]) -> usize {
    stored_entry(bytes);
    let Ok(text) = std::str::from_utf8(bytes) else { return 0 };
    let mut accepted = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some(event) = livestate_spec::fuzzing::event_line(spec, line) else { continue };
        accepted += 1;
        let env = event.envelope();
        // The data text the engine writes from the typed event is the map's, byte for byte.
        let new = event.stored_envelope();
        assert_eq!(
            new.data,
            DataJson::of(&env.data),
            "{line:?}: the typed event's data text differs from its envelope's"
        );
        DataJson::parse(new.data.as_str().to_string())
            .unwrap_or_else(|e| panic!("accepted {line:?}, but its data text is not one object: {e}"));
        let offset = i as u64;
        let stored = RecordedEvent::decode(offset, &RecordedEvent::encode(&new, 1_772_438_400_000))
            .unwrap_or_else(|e| panic!("accepted {line:?}, but its stored entry does not decode: {e}"));
        assert!(stored.same_content(&new), "{line:?} changed in the record: {stored:?}");
        assert_eq!(stored.event, env, "{line:?} reads back from the record as another envelope");
        let derived = Event::decode(stored.event, spec)
            .unwrap_or_else(|e| panic!("accepted {line:?}, but derivation refuses it: {e}"));
        assert_eq!(derived, event, "{line:?} reads back from the record as another event");
        if let Err(e) = derived.row_ops_with(spec, offset, &|_, _| None) {
            panic!("accepted {line:?}, but derivation cannot apply it: {e}");
        }
    }
    accepted
}

/// Decodes `bytes` as a stored entry; one that decodes must survive re-encoding.
fn stored_entry(bytes: &[u8]) {
    let Ok(ev) = RecordedEvent::decode(3, bytes) else { return };
    let again = RecordedEvent::decode(3, &RecordedEvent::encode(&ev.event.to_stored(), ev.recorded_at_ms))
        .unwrap_or_else(|e| panic!("a decoded entry does not decode once re-encoded: {e}"));
    assert_eq!(again, ev, "a decoded entry changed when re-encoded");
}
