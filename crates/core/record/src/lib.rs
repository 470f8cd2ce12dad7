//! The record: every event the modules emit, kept for good, append-only, each with an offset.
//!
//! [`Record`] stores events in an embedded LSM store (fjall) keyed by offset, with an id index
//! for idempotency. An append returns only after the batch is fsynced; concurrent appends share
//! one fsync (group commit). The on-disk layout is described in `docs/formats/record.md`.
//! A failed write or fsync is never acknowledged and makes the record refuse appends until it is
//! reopened; [`check_record`] checks every stored file and entry (`livestate verify`).
//!
//! ```
//! use livestate_record::Record;
//! use livestate_spec::{DataJson, EventEnvelope};
//! let dir = tempfile::tempdir().unwrap();
//! let record = Record::open(dir.path()).unwrap();
//! let ev = EventEnvelope {
//!     id: "e1".into(),
//!     event_type: "inventory.stock_counted".into(),
//!     occurred_at: "2026-01-01T00:00:00.000Z".into(),
//!     data: DataJson::of(&serde_json::Map::new()),
//!     causation: None,
//! };
//! let first = record.append(vec![ev.clone()]).unwrap();
//! let again = record.append(vec![ev]).unwrap();
//! assert_eq!(first[0].offset, again[0].offset);
//! assert!(again[0].duplicate);
//! ```

mod check;
mod entry;
mod error;
/// Entry point of the `event_decoder` fuzz target (`fuzz/`), replayed by `tests/fuzz_regressions.rs`.
#[doc(hidden)]
pub mod fuzzing;
pub mod memory;
mod record;
mod segment;
mod store_check;

pub use check::{check_record, RecordCheck};
pub use entry::{RecordedEvent, ENTRY_VERSION};
pub use error::{FileProblem, RecordError};
pub use memory::StoreMemory;
pub use record::{Appended, Record, RecordStats};
pub use store_check::{check_files, FilesCheck};
