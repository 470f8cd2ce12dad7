//! livestate against what a user would pick instead, on the same machine and the same events:
//! PostgreSQL tables fed by upserts, and Paimon tables written from Python with pypaimon.
//!
//! One seeded workload ([`workload`]) goes through livestate ([`engine`], in child processes;
//! [`http`] for lookups through `livestate serve`), then [`postgres`], then [`pypaimon`];
//! [`report`] prints each figure with livestate's ratio to each peer. This crate is never a
//! dependency of the others, so the peers' clients stay out of normal builds.
//! [`soak`] runs `livestate serve` for minutes at a steady load and watches its memory and lag.
//! [`ab`] runs two builds' ingests in turns, for what a change to the hot path did; [`parts`]
//! times the ingest's per-event parts alone on one core.
//! How to run it and what a run showed: docs/BENCHMARKS.md.

pub mod ab;
pub mod digest;
pub mod engine;
mod error;
pub mod http;
pub mod limit;
pub mod memory;
pub mod parts;
pub mod postgres;
mod process;
pub mod pypaimon;
pub mod report;
pub mod run;
pub mod soak;
pub mod stats;
pub mod workdir;
pub mod workload;

pub use error::{BenchError, Result};
