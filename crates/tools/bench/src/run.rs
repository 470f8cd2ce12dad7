//! The whole run: the workload, then livestate, PostgreSQL and pypaimon one after another on the
//! same machine and the same events, then the table.
//!
//! livestate's steps run in child processes of this one (the same binary, hidden subcommands), so
//! each has its own memory figure and no step warms another's caches in process.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::de::DeserializeOwned;

use crate::digest::{disagreement, TableDigest};
use crate::engine::{Freshness, Ingest, Reads, Steady};
use crate::error::{BenchError, Result};
use crate::memory::{tree, Sampler};
use crate::process::answer;
use crate::report::{IngestRun, Ours, Pypaimon, Results};
use crate::stats::Scanned;
use crate::workdir::{WorkDir, WorkDirArgs};
use crate::workload::{key, Generator};
use crate::{http, postgres, pypaimon};

/// The benchmark spec: the example company's events, three state tables.
pub(crate) const SPEC: [(&str, &str); 3] = [
    ("events.toml", include_str!("../../../../examples/company/events.toml")),
    ("tables.toml", include_str!("../spec/tables.toml")),
    ("mappings.toml", include_str!("../spec/mappings.toml")),
];

/// What to run; `None` takes the mode's default.
#[derive(Debug, Clone)]
pub struct Options {
    pub quick: bool,
    pub seed: u64,
    pub events: Option<u64>,
    pub item_locations: Option<usize>,
    /// Events per append / transaction; one ingest of each contender per size.
    pub batches: Vec<usize>,
    pub commits: Option<u64>,
    pub freshness_seconds: Option<f64>,
    pub rates: Vec<u64>,
    pub lookups: Option<usize>,
    pub work_dir: WorkDirArgs,
    pub python: String,
    pub peers: bool,
}

struct Plan {
    events: u64,
    item_locations: usize,
    commits: u64,
    freshness_seconds: f64,
    lookups: usize,
    http_lookups: usize,
    pg_lookups: usize,
    py_lookups: usize,
}

impl Options {
    fn plan(&self) -> Plan {
        let (events, il, commits, fresh, lookups, http, py) = if self.quick {
            (20_000, 3_000, 100, 2.0, 2_000, 300, 10)
        } else {
            (1_000_000, 100_000, 10_000, 20.0, 100_000, 10_000, 50)
        };
        let lookups = self.lookups.unwrap_or(lookups);
        Plan {
            events: self.events.unwrap_or(events),
            item_locations: self.item_locations.unwrap_or(il),
            commits: self.commits.unwrap_or(commits),
            freshness_seconds: self.freshness_seconds.unwrap_or(fresh),
            lookups,
            http_lookups: http.min(lookups),
            pg_lookups: http.min(lookups),
            py_lookups: py,
        }
    }
}

fn step(n: &mut usize, what: &str) -> Instant {
    *n += 1;
    eprintln!("[{n}] {what}");
    Instant::now()
}

fn done(t: Instant) {
    eprintln!("    done in {:.1} s", t.elapsed().as_secs_f64());
}

/// Runs the hidden subcommand `name` of this binary with `--flag value` pairs. Returns its
/// answer with the peak PSS of the child, in MiB.
fn child<T: DeserializeOwned>(name: &str, flags: &[(&str, String)]) -> Result<(T, f64)> {
    let me = std::env::current_exe().map_err(BenchError::io("locate", "this binary"))?;
    answer(&mut step_command(&me, name, flags), "livestate", name)
}

/// `binary`'s hidden step `name` with `flags`, its allocator set up as the `livestate` binary
/// sets it (livestate-cli's `tune_allocator`): freed memory returned at once, no transparent
/// huge pages. Through mimalloc's environment here; with the kernel's THP in `madvise` mode that
/// is all the process flag adds.
pub(crate) fn step_command(binary: &Path, name: &str, flags: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(binary);
    cmd.arg(name).stderr(Stdio::inherit());
    cmd.env("MIMALLOC_PURGE_DELAY", "0").env("MIMALLOC_ALLOW_THP", "0");
    for (flag, value) in flags {
        cmd.arg(format!("--{flag}")).arg(value);
    }
    cmd
}

fn s(v: impl ToString) -> String {
    v.to_string()
}

pub(crate) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| t.lines().next().and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
        .map_or(0.0, |kib| kib as f64 / 1024.0 / 1024.0);
    format!("{cores} cores ({cpu}), {mem:.0} GiB")
}

pub(crate) fn commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(rev)
            if git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty()) =>
        {
            format!("{rev} + local changes")
        }
        Some(rev) => rev,
        None => "unknown".into(),
    }
}

/// Writes `count` events of the seeded workload over `item_locations` to `work/events.jsonl`;
/// returns its path.
pub(crate) fn write_events(work: &Path, seed: u64, count: u64, item_locations: usize) -> Result<PathBuf> {
    let events = work.join("events.jsonl");
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(&events).map_err(BenchError::io("create", &events))?);
    let mut g = Generator::new(seed, item_locations, "e");
    for _ in 0..count {
        writeln!(out, "{}", g.next_event()).map_err(BenchError::io("write", &events))?;
    }
    out.flush().map_err(BenchError::io("write", &events))?;
    Ok(events)
}

/// Writes the benchmark spec to `work/spec`; returns its path.
pub(crate) fn write_spec(work: &Path) -> Result<PathBuf> {
    let spec = work.join("spec");
    std::fs::create_dir_all(&spec).map_err(BenchError::io("create", &spec))?;
    for (name, text) in SPEC {
        std::fs::write(spec.join(name), text).map_err(BenchError::io("write", spec.join(name)))?;
    }
    Ok(spec)
}

/// Writes the workload and the lookup keys; returns their paths.
fn write_workload(work: &Path, seed: u64, p: &Plan) -> Result<(PathBuf, PathBuf)> {
    let events = write_events(work, seed, p.events, p.item_locations)?;
    let keys = work.join("keys.jsonl");
    let text: String = (0..p.py_lookups.max(p.lookups))
        .map(|j| {
            let (item, loc) = key((j * 7919) % p.item_locations.max(1));
            format!("{}\n", serde_json::json!([item, loc]))
        })
        .collect();
    std::fs::write(&keys, text).map_err(BenchError::io("write", &keys))?;
    Ok((events, keys))
}

/// Runs everything and returns the results.
///
/// # Errors
/// Any step failing (a missing peer among them; pass `peers: false` to skip the peers).
pub async fn run(o: &Options) -> Result<Results> {
    let p = o.plan();
    let work = WorkDir::create(&o.work_dir, "livestate-bench")?;
    // PostgreSQL runs as its own user when we are root: it must be able to enter the directory.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(BenchError::io("chmod", work.path()))?;
    run_in(o, &p, work.path()).await
}

async fn run_in(o: &Options, p: &Plan, work: &Path) -> Result<Results> {
    let mut n = 0;
    let py = if o.peers { Some(pypaimon::Peer::new(&o.python, work)?) } else { None };
    let t = step(&mut n, &format!("workload: {} events over {} item-locations", p.events, p.item_locations));
    let (events, keys) = write_workload(work, o.seed, p)?;
    let spec = write_spec(work)?;
    done(t);

    let batches: Vec<usize> = if o.batches.is_empty() { vec![1000] } else { o.batches.clone() };
    let mut ingests = Vec::new();
    for &batch in &batches {
        let dir = work.join(format!("livestate-{batch}"));
        let t =
            step(&mut n, &format!("livestate: append durably and derive every event, {batch} per append"));
        let (ingest, peak_pss_mib): (Ingest, f64) = child(
            "child-ingest",
            &[
                ("dir", dir.to_string_lossy().to_string()),
                ("spec", spec.to_string_lossy().to_string()),
                ("events", events.to_string_lossy().to_string()),
                ("batch", s(batch)),
            ],
        )?;
        let (digests, _): (Vec<TableDigest>, f64) =
            child("child-digests", &[("dir", dir.to_string_lossy().to_string())])?;
        if let Some((first, _)) = ingests.first().map(|r: &IngestRun| (&r.digests, ())) {
            if let Some(d) = disagreement(first, &digests) {
                return Err(BenchError::peer(
                    "livestate",
                    format!("ingests at two batch sizes disagree: {d}"),
                ));
            }
        }
        ingests.push(IngestRun { ingest, peak_pss_mib, digests });
        done(t);
    }
    let mut limits = Vec::new();
    for &batch in &batches {
        let t = step(
            &mut n,
            &format!("limit line: parse, append durably, merge and encode as Parquet, {batch} per append"),
        );
        limits.push(crate::limit::run(&events, &work.join("limit"), batch)?);
        done(t);
    }
    // The later steps read (and add to) the first ingest's directory.
    let dir = work.join(format!("livestate-{}", batches[0]));
    let dir_s = dir.to_string_lossy().to_string();
    let il = s(p.item_locations);
    let t = step(&mut n, "livestate: point lookups and full scans");
    let (reads, _): (Reads, f64) = child(
        "child-reads",
        &[("dir", dir_s.clone()), ("item-locations", il.clone()), ("lookups", s(p.lookups))],
    )?;
    done(t);
    let t = step(&mut n, "livestate: point lookups over HTTP (livestate serve)");
    let http::HttpLookups { latencies: http, serve_pss_mib: serve_pss } =
        http::lookups(&dir, p.item_locations, p.http_lookups).await?;
    done(t);
    let mut freshness = Vec::new();
    for rate in &o.rates {
        let t =
            step(&mut n, &format!("livestate: freshness at {rate} events/s for {} s", p.freshness_seconds));
        let (f, _): (Freshness, f64) = child(
            "child-freshness",
            &[
                ("dir", dir_s.clone()),
                ("item-locations", il.clone()),
                ("seed", s(o.seed)),
                ("rate", s(rate)),
                ("seconds", s(p.freshness_seconds)),
            ],
        )?;
        freshness.push(f);
        done(t);
    }
    let t = step(&mut n, &format!("livestate: {} small commits of stock (LSM steady state)", p.commits));
    let (steady, _): (Steady, f64) = child(
        "child-steady",
        &[
            ("dir", dir_s.clone()),
            ("item-locations", il.clone()),
            ("seed", s(o.seed)),
            ("commits", s(p.commits)),
            ("lookups", s(p.lookups)),
        ],
    )?;
    done(t);
    let ours = Ours { ingests, reads, http, serve_pss_mib: serve_pss, freshness, steady };

    let mut pg = None;
    let mut pyp = None;
    if let Some(py) = py {
        let server = postgres::Server::start(work)?;
        let mut c = postgres::ready(&server).await?;
        let text = std::fs::read_to_string(&events).map_err(BenchError::io("read", &events))?;
        let root = server.pid();
        let mut pg_ingests = Vec::new();
        for &batch in &batches {
            for mode in postgres::Mode::ALL {
                let t = step(&mut n, &format!("{}: the same events, {batch} per transaction", mode.label()));
                let sampler = Sampler::start(move || root.map(tree).unwrap_or_default());
                let ingested = postgres::ingest(&mut c, &text, batch, mode).await;
                let peak = sampler.stop();
                let postgres::Loaded { events: events_n, seconds, commits } = ingested?;
                let digests = postgres::digests(&c).await?;
                let ours = &ours.ingests[0].digests;
                if let Some(d) = disagreement(ours, &digests) {
                    return Err(BenchError::peer(
                        "PostgreSQL",
                        format!(
                            "{} at {batch} per transaction ended with other tables than livestate: {d}",
                            mode.label()
                        ),
                    ));
                }
                pg_ingests.push(postgres::Ingest {
                    mode,
                    batch,
                    events: events_n,
                    seconds,
                    commits,
                    peak_pss_mib: peak,
                    database_mib: postgres::size_mib(&c).await?,
                    digests,
                });
                done(t);
            }
        }
        drop(text);
        let t = step(&mut n, "PostgreSQL: point lookups and full scans of the last ingest's tables");
        let lookups = postgres::lookups(&server, p.item_locations, p.pg_lookups).await?;
        let Scanned { rows: scan_rows, seconds: scan_seconds } = postgres::scan(&c).await?;
        pg = Some(postgres::Figures {
            version: server.version.clone(),
            ingests: pg_ingests,
            lookups,
            scan_rows,
            scan_seconds,
        });
        drop(c);
        drop(server);
        done(t);

        let t = step(&mut n, "pypaimon: the same events into Paimon tables from Python (the largest batch)");
        let wh = work.join("pypaimon");
        let py_batch = *batches.iter().max().expect("at least one batch size");
        let write = py.write(&wh, &events, py_batch)?;
        let scan_own = py.scan(&wh, "bench", "stock")?;
        let scan_livestate = py.scan(&dir.join("warehouse"), "state", "stock")?;
        let lookups = py.lookups(&wh, "bench", &keys, p.py_lookups)?;
        pyp = Some(Pypaimon { batch: py_batch, write, scan_own, scan_livestate, lookups });
        done(t);
    }
    Ok(Results {
        mode: if o.quick { "quick".into() } else { "full".into() },
        machine: machine(),
        commit: commit(),
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        events: p.events,
        item_locations: p.item_locations,
        batches,
        limits,
        livestate: ours,
        postgres: pg,
        pypaimon: pyp,
    })
}
