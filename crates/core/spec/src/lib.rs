//! The company spec of livestate: what events exist, which state tables derive from them, and how.
//!
//! A spec is a directory of TOML files. [`CompanySpec::load_dir`] reads and checks it as a whole,
//! reporting every problem with its file and location before anything is written. [`Event`]
//! checks an incoming event against its declared type, and [`Event::row_ops`] turns it into the
//! rows its mappings write.
//!
//! ```
//! use livestate_spec::{CompanySpec, Event};
//! let spec = CompanySpec::from_sources(&[("c.toml".into(), r#"
//!     [events."inventory.counted"]
//!     fields = { item = "string", qty = "int" }
//!     [tables.stock]
//!     primary_key = ["item"]
//!     freshness = "5m"
//!     columns = { item = "string", on_hand = "int" }
//!     [[mappings]]
//!     event = "inventory.counted"
//!     table = "stock"
//!     set = { item = "item", on_hand = "qty" }
//! "#.to_string())]).unwrap();
//! let ev = Event::parse_line(
//!     r#"{"id":"e1","type":"inventory.counted","occurred_at":"2026-01-01T00:00:00Z","data":{"item":"bolt","qty":5}}"#,
//!     &spec,
//! ).unwrap();
//! assert_eq!(ev.row_ops(&spec, 0).unwrap().len(), 1);
//! ```

pub mod advice;
pub mod company;
pub mod decision;
mod error;
pub mod event;
mod event_data;
pub mod expr;
pub mod freshness;
/// Entry points of the fuzz targets (`fuzz/`), replayed by `tests/fuzz_regressions.rs`.
#[doc(hidden)]
pub mod fuzzing;
pub mod merge;
pub mod options;
pub mod program;
pub mod types;

pub use company::{
    Action, CompanySpec, DerivedBy, EventType, FieldSpec, Lookup, Mapping, MergeEngine, TableSpec, Trigger,
};
pub use decision::{DecisionInput, DecisionKind, RuleStep, StepResult};
pub use error::{EventError, Problem, SpecError};
pub use event::{module_of, DataJson, Event, EventData, EventEnvelope, FieldLayout, Fields, LineHead, RowOp};
pub use freshness::Freshness;
pub use merge::Merger;
pub use types::{Value, ValueType};
