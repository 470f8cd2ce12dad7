//! The per-event cost of the ingest's parts, each on its own on one core: what a slice of the
//! columnar derivation (docs/columnar-derivation.md) must bring down, measured against that
//! design's budget.
//!
//! The ingest runs its parts on two cores at once, interleaved with the commit tasks and the
//! stores' workers, so a whole-process profile spreads them thinly. Here each part runs alone
//! over the same workload (the benchmark's events, in memory), timed with the process's CPU
//! clock (every thread, so a store's background work counts), in rounds; the median round is
//! reported in microseconds per event:
//!
//! - **parse**: `Event::parse_line` of every line, as `emit` does (the envelope, the typed
//!   fields, and the checks, which dry-run every mapping);
//! - **map**: `Event::row_ops` of every parsed event, as derivation does (lookups answered
//!   "no row");
//! - **stored**: `Event::stored_envelope`, the JSON text the record appends;
//! - **append**: those envelopes appended to a fresh record in batches of `batch`, each batch
//!   checked against the id index and fsynced, as an acknowledged append is.

use std::time::Duration;

use livestate_spec::{CompanySpec, Event};
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::stats::median;
use crate::workdir::{WorkDir, WorkDirArgs};
use crate::workload::{Generator, WorkloadArgs};

/// What to measure over.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub workload: WorkloadArgs,
    pub rounds: usize,
    /// Events per append.
    pub batch: usize,
}

/// One part's cost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part {
    pub name: String,
    /// What the part does, in words.
    pub what: String,
    /// Median round's CPU microseconds per event.
    pub us_per_event: f64,
    /// Every round's, in order.
    pub rounds_us_per_event: Vec<f64>,
    /// The design's budget for the slice this part belongs to, if it has one of its own.
    pub budget_us: Option<f64>,
}

/// The parts measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Parts {
    pub events: u64,
    pub parts: Vec<Part>,
}

impl Parts {
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "Parts of the ingest, each alone on one core, {} events (median round, CPU time):\n\n\
             | part | µs per event | rounds | budget µs | what |\n|---|---:|---|---:|---|\n",
            self.events
        );
        for p in &self.parts {
            let rounds: Vec<String> = p.rounds_us_per_event.iter().map(|r| format!("{r:.3}")).collect();
            let budget = p.budget_us.map_or_else(|| "-".into(), |b| format!("{b:.1}"));
            out.push_str(&format!(
                "| {} | {:.3} | {} | {} | {} |\n",
                p.name,
                p.us_per_event,
                rounds.join(", "),
                budget,
                p.what
            ));
        }
        out
    }
}

/// The CPU time this process has used, every thread.
fn process_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &raw mut ts) };
    assert_eq!(rc, 0, "the process CPU clock is readable");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `f` once per round, returning each round's CPU microseconds per event.
fn rounds(n: usize, events: u64, mut f: impl FnMut(usize) -> Result<()>) -> Result<Vec<f64>> {
    (0..n)
        .map(|round| {
            let start = process_cpu();
            f(round)?;
            Ok((process_cpu() - start).as_secs_f64() * 1e6 / events.max(1) as f64)
        })
        .collect()
}

/// Appends `events` to a fresh record in `dir` in batches of `batch`, then removes it.
fn append_all(dir: &std::path::Path, events: &[Event], batch: usize) -> Result<()> {
    let record = livestate_record::Record::open(dir)
        .map_err(|e| BenchError::peer("parts", format!("open a record in {}: {e}", dir.display())))?;
    for chunk in events.chunks(batch.max(1)) {
        let stored = chunk.iter().map(Event::stored_envelope).collect();
        let appended = record.append(stored).map_err(|e| BenchError::peer("parts", e.to_string()))?;
        assert_eq!(appended.len(), chunk.len(), "every event appended");
    }
    drop(record);
    std::fs::remove_dir_all(dir).map_err(BenchError::io("remove", dir))
}

fn part(name: &str, what: &str, budget_us: Option<f64>, rounds_us_per_event: Vec<f64>) -> Part {
    let us_per_event = median(&mut rounds_us_per_event.clone());
    Part { name: name.into(), what: what.into(), us_per_event, rounds_us_per_event, budget_us }
}

/// The benchmark spec, loaded.
///
/// # Errors
/// Never for the spec this crate carries; a load error names the problem.
pub fn spec() -> Result<CompanySpec> {
    let sources: Vec<(std::path::PathBuf, String)> =
        crate::run::SPEC.iter().map(|(name, text)| ((*name).into(), (*text).to_string())).collect();
    CompanySpec::from_sources(&sources).map_err(|e| BenchError::Usage(format!("the benchmark spec: {e}")))
}

/// Measures every part.
///
/// # Errors
/// An event of the workload that the spec refuses (a harness bug), or no rounds asked for.
pub fn run(o: &Options) -> Result<Parts> {
    if o.rounds == 0 || o.workload.events == 0 {
        return Err(BenchError::Usage("parts needs at least one round and one event".into()));
    }
    let spec = spec()?;
    let mut g = Generator::new(o.workload.seed, o.workload.item_locations, "e");
    let lines: Vec<String> = (0..o.workload.events).map(|_| g.next_event().to_string()).collect();
    let parse_lines = |lines: &[String]| -> Result<Vec<Event>> {
        lines
            .iter()
            .map(|l| Event::parse_line(l, &spec).map_err(|e| BenchError::peer("parts", e.to_string())))
            .collect()
    };
    let events = parse_lines(&lines)?;
    let n = o.workload.events;
    // A batch at a time, each dropped before the next, as `emit` holds them.
    let parse = rounds(o.rounds, n, |_| {
        for chunk in lines.chunks(o.batch.max(1)) {
            std::hint::black_box(parse_lines(chunk)?);
        }
        Ok(())
    })?;
    let map = rounds(o.rounds, n, |_| {
        for (offset, e) in events.iter().enumerate() {
            std::hint::black_box(e.row_ops(&spec, offset as u64).expect("checked at parse"));
        }
        Ok(())
    })?;
    let stored = rounds(o.rounds, n, |_| {
        for e in &events {
            std::hint::black_box(e.stored_envelope());
        }
        Ok(())
    })?;
    let work = WorkDir::create(&WorkDirArgs::default(), "livestate-bench-parts")?;
    let append =
        rounds(o.rounds, n, |round| append_all(&work.path().join(round.to_string()), &events, o.batch))?;
    Ok(Parts {
        events: n,
        parts: vec![
            part(
                "parse",
                "Event::parse_line: envelope, typed fields, checks (mappings dry-run)",
                Some(0.8),
                parse,
            ),
            part(
                "map",
                "Event::row_ops: every mapping of the event, as derivation runs them",
                Some(0.5),
                map,
            ),
            part("stored", "Event::stored_envelope: the JSON text the record appends", None, stored),
            part(
                "append",
                "the record's text appended in batches: id checks, entries, fsync (stored included)",
                Some(1.0),
                append,
            ),
        ],
    })
}
