//! Checking the record as a whole: every table file block by block, then every event and id
//! entry read back (what `livestate verify` runs on the record).

use std::path::Path;

use crate::error::{describe, RecordError};
use crate::record::Record;
use crate::store_check::check_files;

/// What checking a whole record found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecordCheck {
    /// Events read and decoded.
    pub events: u64,
    /// Table files checked block by block.
    pub files: usize,
    /// Everything found wrong, each naming a file, a keyspace or an offset.
    pub problems: Vec<String>,
}

impl RecordCheck {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the record in `dir` as a whole: every table file block by block
/// ([`check_files`]); then, if the store opens, every event of `events` is read and decoded in
/// offset order (offsets dense from 0) and every entry of `ids` must point at an event with that
/// id (and every event must have its id entry).
///
/// Opening needs the directory to itself: call it without another [`Record`] open on `dir`.
pub fn check_record(dir: &Path) -> RecordCheck {
    let files = check_files(dir);
    let mut out = RecordCheck {
        files: files.files,
        problems: files.problems.iter().map(ToString::to_string).collect(),
        ..Default::default()
    };
    let record = match Record::open(dir) {
        Ok(r) => r,
        Err(e) => {
            // A damaged-store error repeats the file problems found above; say it only opened badly.
            out.problems.push(match e {
                RecordError::DamagedSegment { file, position, reason } => {
                    format!("{}: at byte {position}: {reason}; the record does not open", file.display())
                }
                RecordError::Damaged { error, .. } => {
                    format!("{}: the record does not open: {}", dir.display(), describe(&error))
                }
                other => format!("{}: the record does not open: {other}", dir.display()),
            });
            return out;
        }
    };
    let (events, problems) = record.check_contents();
    out.events = events;
    out.problems.extend(problems);
    out
}

impl Record {
    /// Reads every event and every id entry; returns the number of events and what is wrong.
    fn check_contents(&self) -> (u64, Vec<String>) {
        let inner = self.inner();
        let at = |keyspace: &str| format!("{} (keyspace `{keyspace}`)", inner.path.display());
        let mut problems = Vec::new();
        let mut ids_of_events = std::collections::HashMap::new();
        let mut expected = 0u64;
        let mut complete = true;
        for kv in inner.events.iter() {
            let (k, v) = match kv.into_inner() {
                Ok(kv) => kv,
                Err(e) => {
                    problems.push(format!(
                        "{}: reading stops after offset {expected}: {}",
                        at("events"),
                        describe(&e)
                    ));
                    complete = false;
                    break;
                }
            };
            let Some(offset) = crate::record::decode_offset(&k) else {
                problems.push(format!("{}: a key that is not an offset ({} bytes)", at("events"), k.len()));
                continue;
            };
            if offset != expected {
                problems.push(format!("{}: offsets jump from {expected} to {offset}", at("events")));
            }
            expected = offset + 1;
            match crate::RecordedEvent::decode(offset, &v) {
                Ok(ev) => {
                    ids_of_events.insert(ev.event.id, offset);
                }
                Err(e) => problems.push(format!("{}: {e}", at("events"))),
            }
        }
        if complete && expected != inner.segments_from {
            problems.push(format!(
                "{}: the events end at offset {expected}, but segments begin at {}",
                at("events"),
                inner.segments_from
            ));
            expected = inner.segments_from;
        }
        if complete {
            complete =
                crate::segment::check(&inner.segments, &mut expected, &mut problems, &mut |offset, bytes| {
                    match crate::RecordedEvent::decode(offset, bytes) {
                        Ok(ev) => {
                            ids_of_events.insert(ev.event.id, offset);
                            None
                        }
                        Err(e) => Some(e.to_string()),
                    }
                });
        }
        if !complete {
            // The id index is checked against complete events only.
            return (expected, problems);
        }
        let mut indexed = 0usize;
        for kv in inner.ids.iter() {
            let (k, v) = match kv.into_inner() {
                Ok(kv) => kv,
                Err(e) => {
                    problems.push(format!("{}: reading failed: {}", at("ids"), describe(&e)));
                    break;
                }
            };
            let id = String::from_utf8_lossy(&k).into_owned();
            match (crate::record::decode_offset(&v), ids_of_events.get(&id)) {
                (Some(o), Some(&at_offset)) if o == at_offset => indexed += 1,
                (Some(o), Some(&at_offset)) => problems.push(format!(
                    "{}: id `{id}` points at offset {o}, but the event with that id is at offset {at_offset}",
                    at("ids")
                )),
                (Some(o), None) => problems
                    .push(format!("{}: id `{id}` points at offset {o}, but no event has that id", at("ids"))),
                (None, _) => problems.push(format!("{}: the entry of id `{id}` is not an offset", at("ids"))),
            }
        }
        if indexed < ids_of_events.len() {
            problems.push(format!(
                "{}: {} of {} event(s) have no id entry pointing at them",
                at("ids"),
                ids_of_events.len() - indexed,
                ids_of_events.len()
            ));
        }
        const SHOWN: usize = 20;
        if problems.len() > SHOWN {
            let more = problems.len() - SHOWN;
            problems.truncate(SHOWN);
            problems.push(format!("{}: and {more} more problem(s) like these", inner.path.display()));
        }
        (expected, problems)
    }
}
