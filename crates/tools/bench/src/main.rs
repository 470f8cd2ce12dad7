//! `livestate-bench`: see the crate docs and docs/BENCHMARKS.md.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use livestate_bench::workdir::WorkDirArgs;
use livestate_bench::workload::WorkloadArgs;
use livestate_bench::{ab, engine, parts, run, soak};

/// The allocator `livestate` itself uses, so livestate's steps here run as they do there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "livestate-bench",
    about = "livestate, PostgreSQL 15 and pypaimon 2.1.0 on the same events, side by side in one run",
    after_help = "Examples:\n  scripts/bench            full run (1M events, 100k item-locations; about half an hour)\n  scripts/bench --quick    checks the harness in under two minutes\n  scripts/bench soak       livestate serve for 10 minutes at a steady load: memory, lag, latencies\n  scripts/bench ab --base OLD-BUILD\n                           this build's ingest against OLD-BUILD's, in turns\n  scripts/bench parts      the ingest's per-event parts, each alone on one core"
)]
struct Cli {
    #[command(subcommand)]
    child: Option<Step>,
    /// A small run that checks every step works (CI); the figures mean little
    #[arg(long)]
    quick: bool,
    /// Events in the workload [default: 1,000,000; quick: 20,000]
    #[arg(long)]
    events: Option<u64>,
    /// Distinct item-locations (stock rows) [default: 100,000; quick: 3,000]
    #[arg(long)]
    item_locations: Option<usize>,
    /// Events per append (livestate) and per transaction (PostgreSQL); each size is one ingest of
    /// every contender (pypaimon: the largest only, its fastest). Later steps read the first's tables
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    batch: Vec<usize>,
    /// Small commits for the LSM steady state [default: 10,000; quick: 100]
    #[arg(long)]
    commits: Option<u64>,
    /// Seconds of each freshness run [default: 20; quick: 2]
    #[arg(long)]
    freshness_seconds: Option<f64>,
    /// Event rates of the freshness runs
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    rates: Vec<u64>,
    /// In-process point lookups [default: 100,000; quick: 2,000]
    #[arg(long)]
    lookups: Option<usize>,
    /// Workload seed
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[command(flatten)]
    work_dir: WorkDirArgs,
    /// Python with pypaimon 2.1.0
    #[arg(long, env = "LIVESTATE_PYTHON", default_value = "python3")]
    python: String,
    /// Run livestate only, without PostgreSQL and pypaimon
    #[arg(long)]
    no_peers: bool,
    /// Also write every figure as JSON here
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The soak, the A/B of two builds, and livestate's steps, which the benchmark runs in child
/// processes.
#[derive(Subcommand)]
enum Step {
    /// Ingest the same workload with two builds of livestate-bench in turns (the order swapped
    /// every round) and print each run's seconds, CPU seconds, commits and peak memory beside
    /// the medians: what a change to the hot path did, on a machine whose speed drifts.
    Ab {
        /// The build before the change (a livestate-bench binary)
        #[arg(long)]
        base: PathBuf,
        /// The build with the change [default: this binary]
        #[arg(long)]
        new: Option<PathBuf>,
        /// Events per append
        #[arg(long, default_value_t = 10_000)]
        batch: usize,
        /// Runs of each build
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Every table's freshness budget, in place of the workload's (`1m`, say): long
        /// budgets close windows at their key limit, so both builds commit as often and the
        /// CPU per event is compared alone
        #[arg(long)]
        budget: Option<livestate_spec::Freshness>,
        #[command(flatten)]
        workload: WorkloadArgs,
        #[command(flatten)]
        work_dir: WorkDirArgs,
        /// Also write every run as JSON here
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Time the ingest's per-event parts (parse, mappings, the record's text) each alone on one
    /// core, in microseconds of CPU per event, beside the columnar design's budget
    Parts {
        #[command(flatten)]
        workload: WorkloadArgs,
        /// Rounds of each part
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Events per append
        #[arg(long, default_value_t = 10_000)]
        batch: usize,
        /// Also write every figure as JSON here
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Run `livestate serve` for minutes at a steady load of events, reads, proposals and
    /// decisions; report its memory (first vs last minute), each table's lag against its budget,
    /// and request latencies. Exits 1 when a request failed, a table went over budget or memory
    /// grew.
    Soak {
        #[command(flatten)]
        options: soak::Options,
        /// Also write every figure (and every memory sample) as JSON here
        #[arg(long)]
        json: Option<PathBuf>,
    },
    #[command(hide = true, name = "child-ingest")]
    Ingest {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        spec: PathBuf,
        #[arg(long)]
        events: PathBuf,
        #[arg(long)]
        batch: usize,
    },
    #[command(hide = true, name = "child-digests")]
    Digests {
        #[arg(long)]
        dir: PathBuf,
    },
    #[command(hide = true, name = "child-reads")]
    Reads(Lookups),
    /// Point reads of `stock` over HTTP alone (a fresh `livestate serve` on an ingested
    /// directory), for A/B runs and profiles of that step.
    #[command(hide = true, name = "child-http")]
    Http(Lookups),
    /// Full scans of `stock` alone, from its files and through the lookup index, on an ingested
    /// directory, for A/B runs and profiles of that step.
    #[command(hide = true, name = "child-scans")]
    Scans {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 9)]
        times: usize,
        /// The state table to scan.
        #[arg(long, default_value = "stock")]
        table: String,
    },
    #[command(hide = true, name = "child-freshness")]
    Freshness {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        item_locations: usize,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        rate: u64,
        #[arg(long)]
        seconds: f64,
    },
    #[command(hide = true, name = "child-steady")]
    Steady {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        item_locations: usize,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        commits: u64,
        #[arg(long)]
        lookups: usize,
    },
}

/// The point-read steps' arguments: an ingested directory, its item-locations, how many reads.
#[derive(clap::Args)]
struct Lookups {
    #[arg(long)]
    dir: PathBuf,
    #[arg(long)]
    item_locations: usize,
    #[arg(long)]
    lookups: usize,
}

/// Events per commit in the LSM steady state.
const EVENTS_PER_COMMIT: usize = 10;

fn json(v: &impl serde::Serialize) -> livestate_bench::Result<()> {
    println!("{}", serde_json::to_string(v).expect("figures serialize"));
    Ok(())
}

fn write_json(path: &std::path::Path, v: &impl serde::Serialize) -> livestate_bench::Result<()> {
    let text = serde_json::to_string_pretty(v).expect("figures serialize");
    std::fs::write(path, text).map_err(|source| livestate_bench::BenchError::Io {
        what: "write",
        path: path.to_path_buf(),
        source,
    })
}

async fn main_async(cli: Cli) -> livestate_bench::Result<()> {
    match cli.child {
        Some(Step::Ingest { dir, spec, events, batch }) => {
            json(&engine::ingest(&dir, &spec, &events, batch).await?)
        }
        Some(Step::Digests { dir }) => json(&engine::digests_of(&dir).await?),
        Some(Step::Reads(Lookups { dir, item_locations, lookups })) => {
            json(&engine::reads_of(&dir, item_locations, lookups).await?)
        }
        Some(Step::Http(Lookups { dir, item_locations, lookups })) => {
            let got = livestate_bench::http::lookups(&dir, item_locations, lookups).await?;
            json(&serde_json::json!({"latencies": got.latencies, "serve_pss_mib": got.serve_pss_mib}))
        }
        Some(Step::Scans { dir, times, table }) => json(&engine::scans_of(&dir, &table, times).await?),
        Some(Step::Freshness { dir, item_locations, seed, rate, seconds }) => {
            json(&engine::freshness(&dir, item_locations, seed, rate, seconds).await?)
        }
        Some(Step::Steady { dir, item_locations, seed, commits, lookups }) => {
            json(&engine::steady(&dir, item_locations, seed, commits, EVENTS_PER_COMMIT, lookups).await?)
        }
        Some(Step::Ab { base, new, batch, rounds, budget, workload, work_dir, json }) => {
            let new = match new {
                Some(n) => n,
                None => std::env::current_exe().map_err(|source| livestate_bench::BenchError::Io {
                    what: "locate",
                    path: "this binary".into(),
                    source,
                })?,
            };
            let o = ab::Options { base, new, batch, rounds, budget, workload, work_dir };
            let results = ab::run(&o)?;
            println!("{}", results.markdown());
            if let Some(path) = json {
                write_json(&path, &results)?;
            }
            Ok(())
        }
        Some(Step::Parts { workload, rounds, batch, json }) => {
            let results = parts::run(&parts::Options { workload, rounds, batch })?;
            println!("{}", results.markdown());
            if let Some(path) = json {
                write_json(&path, &results)?;
            }
            Ok(())
        }
        Some(Step::Soak { options, json }) => {
            let results = soak::run(&options).await?;
            println!("{}", results.markdown());
            if let Some(path) = json {
                write_json(&path, &results)?;
            }
            if results.healthy() {
                Ok(())
            } else {
                Err(livestate_bench::BenchError::Peer {
                    peer: "soak",
                    message: "a request failed, a table went over its budget or memory grew (see above)"
                        .into(),
                })
            }
        }
        None => {
            let o = run::Options {
                quick: cli.quick,
                seed: cli.seed,
                events: cli.events,
                item_locations: cli.item_locations,
                batches: cli.batch,
                commits: cli.commits,
                freshness_seconds: cli.freshness_seconds,
                rates: cli.rates,
                lookups: cli.lookups,
                work_dir: cli.work_dir,
                python: cli.python,
                peers: !cli.no_peers,
            };
            let results = run::run(&o).await?;
            println!("{}", results.markdown());
            if let Some(path) = cli.json {
                write_json(&path, &results)?;
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    match rt.block_on(main_async(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            // As the livestate binary: 2 when the caller can fix it (a wrong path, argument or
            // spec), 1 otherwise.
            if e.kind().is_callers() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
