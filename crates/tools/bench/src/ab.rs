//! Two builds of `livestate-bench` on the same ingest, in turns: what a change to the hot path
//! did, measured on a machine whose speed drifts.
//!
//! The project's 2-core machines drift by up to a quarter within an hour (docs/BENCHMARKS.md,
//! seventeenth pass), so two builds timed one after the other compare two moments, not two
//! builds. `livestate-bench ab` writes one workload, then runs each build's `child-ingest` on a
//! fresh directory in turns, the order swapped every round, and reports every run beside the
//! medians: the ingest's seconds, the process's CPU seconds, its commits and its peak memory.
//! The commits are there because a cheaper commit path is partly spent on more commits (a table
//! commits once its oldest event is an eighth of its budget old), so seconds alone can hide a
//! change.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use livestate_spec::Freshness;
use serde::{Deserialize, Serialize};

use crate::engine::Ingest;
use crate::error::{BenchError, Result};
use crate::process::{answer, children_cpu_seconds};
use crate::run::{step_command, write_events, write_spec};
use crate::stats::median;
use crate::workdir::{WorkDir, WorkDirArgs};
use crate::workload::WorkloadArgs;

/// What to compare.
#[derive(Debug, Clone)]
pub struct Options {
    /// The build before the change (a `livestate-bench` binary).
    pub base: PathBuf,
    /// The build with the change.
    pub new: PathBuf,
    pub batch: usize,
    /// Runs of each build.
    pub rounds: usize,
    /// Every table's freshness budget in place of the workload spec's, when given.
    pub budget: Option<Freshness>,
    pub workload: WorkloadArgs,
    pub work_dir: WorkDirArgs,
}

/// Which of the two builds a run used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Build {
    Base,
    New,
}

/// One ingest by one build.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub build: Build,
    /// From 1.
    pub round: usize,
    pub ingest: Ingest,
    /// CPU time of the ingest's process, user and system, every thread (its setup included).
    pub cpu_seconds: f64,
    /// Peak PSS of the ingest's process, sampled from outside.
    pub peak_pss_mib: f64,
}

/// A figure of a run, as the report prints it.
struct Figure {
    name: &'static str,
    of: fn(&Run) -> f64,
    decimals: usize,
}

const FIGURES: [Figure; 4] = [
    Figure { name: "ingest s", of: |r| r.ingest.seconds, decimals: 2 },
    Figure { name: "CPU s (user + sys)", of: |r| r.cpu_seconds, decimals: 2 },
    Figure { name: "commits", of: |r| r.ingest.commits as f64, decimals: 0 },
    Figure { name: "peak PSS MiB", of: |r| r.peak_pss_mib, decimals: 0 },
];

/// Every run of both builds, in the order they ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ab {
    pub base: PathBuf,
    pub new: PathBuf,
    pub batch: usize,
    pub events: u64,
    pub runs: Vec<Run>,
}

impl Ab {
    /// The runs of `build`, in round order.
    pub fn runs_of(&self, build: Build) -> impl Iterator<Item = &Run> {
        self.runs.iter().filter(move |r| r.build == build)
    }

    /// The median of `figure` over the runs of `build`.
    pub fn median(&self, build: Build, figure: impl Fn(&Run) -> f64) -> f64 {
        median(&mut self.runs_of(build).map(figure).collect::<Vec<_>>())
    }

    /// Each build's runs and medians, and the new build's medians over the base's.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "A/B: `child-ingest`, {} events, {} per append, {} rounds, the order swapped every round\n\
             base: {}\nnew:  {}\n\n| build | figure | each round | median |\n|---|---|---|---:|\n",
            self.events,
            self.batch,
            self.runs_of(Build::Base).count(),
            self.base.display(),
            self.new.display(),
        );
        for (build, name) in [(Build::Base, "base"), (Build::New, "new")] {
            for Figure { name: figure, of, decimals } in FIGURES {
                let each: Vec<String> =
                    self.runs_of(build).map(|r| format!("{:.decimals$}", of(r))).collect();
                let _ = writeln!(
                    out,
                    "| {name} | {figure} | {} | {:.decimals$} |",
                    each.join(", "),
                    self.median(build, of)
                );
            }
        }
        out.push_str("\nnew / base, medians:");
        for Figure { name: figure, of, .. } in FIGURES {
            let ratio = self.median(Build::New, of) / self.median(Build::Base, of);
            let _ = write!(out, " {figure} {ratio:.3};");
        }
        out.pop();
        out.push('\n');
        out
    }
}

/// Sets every table of the spec in `spec_dir` to the freshness `budget`.
///
/// # Errors
/// The tables file cannot be read or written, or it has a table without a `freshness` line
/// (the workload's spec changed shape: nothing is run on a spec only partly set).
fn set_budgets(spec_dir: &Path, budget: Freshness) -> Result<()> {
    let path = spec_dir.join("tables.toml");
    let text = std::fs::read_to_string(&path).map_err(BenchError::io("read", &path))?;
    // A table's own header (`[tables.stock]`), not one of its sub-tables (`[tables.stock.options]`).
    let tables = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("[tables.")?.strip_suffix(']'))
        .filter(|name| !name.contains('.'))
        .count();
    let mut set = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|l| match l.trim_start().starts_with("freshness =") {
            true => {
                set += 1;
                format!("freshness = \"{budget}\"")
            }
            false => l.to_string(),
        })
        .collect();
    if set == 0 || set != tables {
        return Err(BenchError::Usage(format!(
            "{}: {set} freshness lines for {tables} tables; cannot set every table's budget",
            path.display()
        )));
    }
    std::fs::write(&path, lines.join("\n") + "\n").map_err(BenchError::io("write", &path))
}

/// Writes the workload, then ingests it with each build in turns.
///
/// # Errors
/// A caller's fault (no rounds, a build that is not a file); a run that fails, with its output's
/// last lines.
pub fn run(o: &Options) -> Result<Ab> {
    if o.rounds == 0 || o.batch == 0 || o.workload.events == 0 {
        return Err(BenchError::Usage(
            "ab needs at least one round, one event and one event per append".into(),
        ));
    }
    for b in [&o.base, &o.new] {
        if !b.is_file() {
            return Err(BenchError::Usage(format!("{} is not a livestate-bench binary", b.display())));
        }
    }
    let work = WorkDir::create(&o.work_dir, "livestate-ab")?;
    run_in(o, work.path())
}

fn run_in(o: &Options, work: &Path) -> Result<Ab> {
    let events = write_events(work, o.workload.seed, o.workload.events, o.workload.item_locations)?;
    let spec = write_spec(work)?;
    if let Some(budget) = o.budget {
        set_budgets(&spec, budget)?;
    }
    let dir = work.join("livestate");
    let mut runs = Vec::with_capacity(2 * o.rounds);
    for round in 1..=o.rounds {
        let order = if round % 2 == 1 { [Build::Base, Build::New] } else { [Build::New, Build::Base] };
        for build in order {
            let binary = if build == Build::Base { &o.base } else { &o.new };
            let _ = std::fs::remove_dir_all(&dir);
            let flags = [
                ("dir", dir.to_string_lossy().to_string()),
                ("spec", spec.to_string_lossy().to_string()),
                ("events", events.to_string_lossy().to_string()),
                ("batch", o.batch.to_string()),
            ];
            let what = format!("child-ingest of {}", binary.display());
            // Measured from here, so that a base built before this command is measured alike.
            let cpu_before = children_cpu_seconds();
            let (ingest, peak_pss_mib): (Ingest, f64) =
                answer(&mut step_command(binary, "child-ingest", &flags), "livestate", &what)?;
            let cpu_seconds = children_cpu_seconds() - cpu_before;
            eprintln!(
                "round {round}, {build:?}: {:.2} s, {cpu_seconds:.2} CPU s, {} commits",
                ingest.seconds, ingest.commits
            );
            runs.push(Run { build, round, ingest, cpu_seconds, peak_pss_mib });
        }
    }
    Ok(Ab { base: o.base.clone(), new: o.new.clone(), batch: o.batch, events: o.workload.events, runs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_given_to_ab_is_every_table_budget_in_the_spec_the_builds_load() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = write_spec(tmp.path()).unwrap();
        let minute: Freshness = "1m".parse().unwrap();
        set_budgets(&spec, minute).unwrap();
        let loaded = livestate_spec::CompanySpec::load_dir(&spec).unwrap();
        assert_eq!(loaded.tables.len(), 3);
        for t in loaded.tables.values() {
            assert_eq!(t.freshness, minute, "table {}", t.name);
        }
    }

    #[test]
    fn a_spec_with_a_table_lacking_a_budget_line_is_refused_not_half_set() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = write_spec(tmp.path()).unwrap();
        let path = spec.join("tables.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let first = text.lines().position(|l| l.starts_with("freshness =")).unwrap();
        let without: Vec<&str> =
            text.lines().enumerate().filter(|(i, _)| *i != first).map(|(_, l)| l).collect();
        std::fs::write(&path, without.join("\n")).unwrap();
        let e = set_budgets(&spec, "1m".parse().unwrap()).unwrap_err().to_string();
        assert!(e.contains("2 freshness lines for 3 tables"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), without.join("\n"), "nothing written");
    }
}
