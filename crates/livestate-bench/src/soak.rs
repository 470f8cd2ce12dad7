//! The soak: `livestate serve` on the example company for minutes at a steady load, watched from
//! outside as a user would watch it.
//!
//! Modules emit at a steady rate through `POST /v1/events` (each module with its own token); an
//! agent reads rows and makes consistent multi-table reads at steady rates and proposes now and then,
//! citing what it read; a person decides every third proposal. Every few seconds the server's
//! memory (PSS of its process tree) and every table's receipt from `GET /v1/tables` (lag, budget,
//! within budget) are sampled. The report compares memory in the first window after the warm-up
//! with the last window, gives each table's largest lag against its budget, and the latency of
//! every kind of request.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use livestate_client::Client;
use livestate_sim::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::error::{BenchError, Result};
use crate::http::livestate_bin;
use crate::memory::{pss_kib, tree};
use crate::process::Serving;
use crate::stats::Latencies;
use crate::workload::{key, Generator};

const WHO: &str = "livestate serve (soak)";

/// The spec the soak serves: the example company, as `livestate demo` runs it.
const SPEC: [(&str, &str); 4] = [
    ("events.toml", include_str!("../../../examples/company/events.toml")),
    ("tables.toml", include_str!("../../../examples/company/tables.toml")),
    ("mappings.toml", include_str!("../../../examples/company/mappings.toml")),
    ("triggers.toml", include_str!("../../../examples/company/triggers.toml")),
];

/// The modules that emit the workload's events, each with its own token.
const MODULES: [&str; 4] = ["inventory", "commerce", "procurement", "operations"];

/// Memory counts as flat when the last window is at most this much above the first...
pub const FLAT_MIB: f64 = 30.0;
/// ...or this fraction above it, whichever allows more.
pub const FLAT_FRACTION: f64 = 0.10;

/// What to run (the options of `livestate-bench soak`).
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Length of the measured run, after the initial load
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// Events per second through POST /v1/events
    #[arg(long, default_value_t = 1000)]
    pub rate: u64,
    /// Point reads per second (one stock row each)
    #[arg(long, default_value_t = 50)]
    pub read_rate: u64,
    /// Consistent reads per second (stock and open_orders as of one offset; each commits both)
    #[arg(long, default_value_t = 1.0)]
    pub consistent_rate: f64,
    /// Seconds between two proposals (every third is decided)
    #[arg(long, default_value_t = 2.0)]
    pub proposal_seconds: f64,
    /// Seconds between two samples of memory and lag
    #[arg(long, default_value_t = 5.0)]
    pub sample_seconds: f64,
    /// Distinct item-locations (stock rows), counted before the run
    #[arg(long, default_value_t = 10_000)]
    pub item_locations: usize,
    /// Workload seed
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Work directory (removed afterwards unless --keep) [default: a new one under the temp dir]
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// Keep the work directory (the data directory and the server's log)
    #[arg(long)]
    pub keep: bool,
    /// Serve this spec directory instead of the example company's (same events; tables
    /// stock, open_orders and approval_inbox), e.g. to soak other table options
    #[arg(long)]
    pub spec: Option<PathBuf>,
}

/// Everything a soak measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Soak {
    pub date: String,
    pub commit: String,
    pub machine: String,
    pub seconds: f64,
    pub rate: u64,
    pub achieved_rate: f64,
    pub read_rate: u64,
    pub consistent_rate: f64,
    pub proposal_seconds: f64,
    pub item_locations: usize,
    pub counts: Counts,
    /// Failed requests by kind, and the first messages.
    pub errors: Errors,
    pub latencies: RequestLatencies,
    pub memory: Memory,
    pub tables: Vec<TableLag>,
}

/// Requests that succeeded.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counts {
    /// Events the server acknowledged during the measured run.
    pub events: u64,
    pub emits: u64,
    pub point_reads: u64,
    pub consistent_reads: u64,
    pub proposals: u64,
    pub decisions: u64,
    pub samples: u64,
}

/// Failed requests.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Errors {
    pub total: u64,
    pub by_kind: BTreeMap<String, u64>,
    /// The first few messages, to say what failed.
    pub first: Vec<String>,
}

/// Latency of each kind of request, as the caller saw it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RequestLatencies {
    pub emit: Latencies,
    pub point_read: Latencies,
    pub consistent_read: Latencies,
    pub proposal: Latencies,
    /// From a proposal's answer (its event is in the record) to the first point read of
    /// `approval_inbox` (budget 1 s) that shows it: freshness as an agent sees it.
    pub proposal_visible: Latencies,
    pub decision: Latencies,
    /// `GET /v1/tables`, the sampler's own request.
    pub tables: Latencies,
}

/// The server's memory over the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Memory {
    /// Seconds since the measured run started, and the PSS of the server's process tree in MiB.
    pub samples: Vec<(f64, f64)>,
    /// Length of the warm-up and of each compared window (a minute, or a fifth of a shorter run).
    pub window_seconds: f64,
    /// Mean PSS in the first window after the warm-up.
    pub first_window_mib: f64,
    /// Mean PSS in the last window.
    pub last_window_mib: f64,
    pub growth_mib: f64,
    pub growth_fraction: f64,
    /// Least-squares slope of PSS after the warm-up, MiB per minute.
    pub slope_mib_per_minute: f64,
    /// The same over the second half of the run only: near zero when memory rose to a ceiling
    /// (caches and buffers filling) and stayed, positive when it keeps growing.
    #[serde(default)]
    pub second_half_slope_mib_per_minute: f64,
    pub peak_mib: f64,
    /// Growth within [`FLAT_MIB`] or [`FLAT_FRACTION`], whichever allows more.
    pub flat: bool,
    /// Seconds since the measured run started, and what the server's embedded stores held in
    /// memory (block caches and unflushed writes, as `GET /v1/health` reports them) in MiB.
    #[serde(default)]
    pub store_samples: Vec<(f64, f64)>,
    /// Mean of the stores' memory in the first window after the warm-up.
    #[serde(default)]
    pub stores_first_window_mib: f64,
    /// Mean of the stores' memory in the last window.
    #[serde(default)]
    pub stores_last_window_mib: f64,
    /// Seconds since the measured run started, and the heap in use (allocated, not freed) as
    /// `GET /v1/health` reports it, in MiB; empty when the server does not count it.
    #[serde(default)]
    pub heap_samples: Vec<(f64, f64)>,
    /// Mean heap in use in the first window after the warm-up.
    #[serde(default)]
    pub heap_first_window_mib: f64,
    /// Mean heap in use in the last window.
    #[serde(default)]
    pub heap_last_window_mib: f64,
}

/// One table's lag over the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TableLag {
    pub table: String,
    pub budget: String,
    /// The budget in milliseconds; `None` for a nightly budget (its allowance moves).
    pub budget_ms: Option<u64>,
    pub samples: u64,
    pub max_lag_ms: u64,
    /// Samples whose receipt said the table was outside its budget.
    pub over_budget_samples: u64,
    pub snapshots_at_end: u64,
    pub tags_at_end: u64,
}

impl TableLag {
    /// Within budget at every sample.
    pub fn within_budget(&self) -> bool {
        self.over_budget_samples == 0
    }
}

/// Shared by the load tasks: counts, errors and latencies.
#[derive(Default)]
struct Tally {
    counts: Counts,
    errors: Errors,
    emit: Vec<Duration>,
    point_read: Vec<Duration>,
    consistent_read: Vec<Duration>,
    proposal: Vec<Duration>,
    proposal_visible: Vec<Duration>,
    decision: Vec<Duration>,
    tables: Vec<Duration>,
}

impl Tally {
    fn error(&mut self, kind: &str, message: impl std::fmt::Display) {
        self.errors.total += 1;
        *self.errors.by_kind.entry(kind.to_string()).or_default() += 1;
        if self.errors.first.len() < 10 {
            self.errors.first.push(format!("{kind}: {message}"));
        }
    }
}

type Shared = Arc<Mutex<Tally>>;

fn tally(t: &Shared) -> std::sync::MutexGuard<'_, Tally> {
    t.lock().expect("no holder panics")
}

fn livestate(bin: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(bin).args(args).output().map_err(BenchError::io("run", bin))?;
    if !out.status.success() {
        let message =
            format!("livestate {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
        return Err(BenchError::peer(WHO, message));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Tokens of the soak's principals.
struct Tokens {
    modules: BTreeMap<&'static str, String>,
    agent: String,
    person: String,
}

/// Creates the data directory from `spec` (default: the example company's) and issues the tokens.
fn prepare(bin: &Path, work: &Path, spec: Option<&Path>) -> Result<(PathBuf, Tokens)> {
    let spec = match spec {
        Some(dir) => dir.to_path_buf(),
        None => {
            let dir = work.join("spec");
            std::fs::create_dir_all(&dir).map_err(BenchError::io("create", &dir))?;
            for (name, text) in SPEC {
                std::fs::write(dir.join(name), text).map_err(BenchError::io("write", dir.join(name)))?;
            }
            dir
        }
    };
    let dir = work.join("livestate");
    let d = dir.to_string_lossy().to_string();
    livestate(bin, &["init", "--dir", &d, "--spec", &spec.to_string_lossy()])?;
    let mut modules = BTreeMap::new();
    for m in MODULES {
        modules.insert(m, livestate(bin, &["token", "add", "--dir", &d, &format!("module:{m}")])?);
    }
    let agent = livestate(bin, &["token", "add", "--dir", &d, "agent:soak"])?;
    let person = livestate(bin, &["token", "add", "--dir", &d, "person:soak", "--scope", "procurement"])?;
    Ok((dir, Tokens { modules, agent, person }))
}

/// Posts `events` grouped by module, each group with its module's token. Returns how many were
/// acknowledged.
async fn emit(clients: &BTreeMap<&'static str, Client>, events: &[Value], t: &Shared) -> u64 {
    let mut by_module: BTreeMap<&str, String> = BTreeMap::new();
    for e in events {
        let module = e["type"].as_str().and_then(|ty| ty.split_once('.')).map_or("", |(m, _)| m);
        let body = by_module.entry(module).or_default();
        body.push_str(&e.to_string());
        body.push('\n');
    }
    let mut acknowledged = 0;
    for (module, body) in by_module {
        let Some(client) = clients.get(module) else {
            tally(t).error("emit", format!("no token for module `{module}`"));
            continue;
        };
        let start = Instant::now();
        let answer = client.emit(&body).await;
        let took = start.elapsed();
        let mut t = tally(t);
        match answer {
            Ok(a) => {
                let n = a["appended"].as_array().map_or(0, Vec::len) as u64;
                acknowledged += n;
                t.counts.emits += 1;
                t.emit.push(took);
            }
            Err(e) => t.error("emit", e),
        }
    }
    acknowledged
}

/// Waits until `due`, unless the run is stopped first. True when stopped.
async fn wait_until(due: tokio::time::Instant, stop: &mut watch::Receiver<bool>) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep_until(due) => *stop.borrow(),
        _ = stop.changed() => true,
    }
}

/// Emits `rate` events a second, in ten appends a second, until stopped.
async fn emitter(
    clients: BTreeMap<&'static str, Client>,
    mut generator: Generator,
    rate: u64,
    t: Shared,
    mut stop: watch::Receiver<bool>,
) {
    const TICK: Duration = Duration::from_millis(100);
    let per_tick = (rate as f64 * TICK.as_secs_f64()).round().max(1.0) as usize;
    let start = tokio::time::Instant::now();
    for tick in 0u32.. {
        if wait_until(start + TICK * tick, &mut stop).await {
            return;
        }
        let events: Vec<Value> = (0..per_tick).map(|_| generator.next_event()).collect();
        let n = emit(&clients, &events, &t).await;
        tally(&t).counts.events += n;
    }
}

/// Reads at `rate` a second until stopped: consistent reads of stock and open_orders for one
/// item when `consistent`, else point reads of one stock row.
async fn reader(
    agent: Client,
    item_locations: usize,
    seed: u64,
    rate: f64,
    consistent: bool,
    t: Shared,
    mut stop: watch::Receiver<bool>,
) {
    let every = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let mut rng = Rng(seed);
    let start = tokio::time::Instant::now();
    for n in 0u32.. {
        if wait_until(start + every * n, &mut stop).await {
            return;
        }
        let (item, loc) = key(rng.below(item_locations as u64) as usize);
        let begin = Instant::now();
        if consistent {
            let tables = [
                json!({"table": "stock", "keys": {"item": item, "location": loc}}),
                json!({"table": "open_orders", "where": format!("item == '{item}'"), "limit": 50}),
            ];
            let answer = agent.consistent_read(&tables).await;
            let took = begin.elapsed();
            let mut t = tally(&t);
            match answer {
                Ok(a) if a["results"].as_array().is_some_and(|r| r.len() == 2) => {
                    t.counts.consistent_reads += 1;
                    t.consistent_read.push(took);
                }
                Ok(a) => t.error("consistent_read", format!("unexpected answer {a}")),
                Err(e) => t.error("consistent_read", e),
            }
        } else {
            let answer = agent.rows("stock", &[("item", &item), ("location", loc)]).await;
            let took = begin.elapsed();
            let mut t = tally(&t);
            match answer {
                Ok(a) if a["receipt"]["snapshot_id"].is_i64() || a["rows"].is_array() => {
                    t.counts.point_reads += 1;
                    t.point_read.push(took);
                }
                Ok(a) => t.error("point_read", format!("unexpected answer {a}")),
                Err(e) => t.error("point_read", e),
            }
        }
    }
}

/// Proposes every `every` until stopped, citing a stock row it just read; the person decides
/// every third proposal (approving and rejecting in turn).
async fn proposer(
    agent: Client,
    person: Client,
    item_locations: usize,
    seed: u64,
    every: Duration,
    t: Shared,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = Rng(seed);
    let start = tokio::time::Instant::now();
    for n in 1u32.. {
        if wait_until(start + every * n, &mut stop).await {
            return;
        }
        let (item, loc) = key(rng.below(item_locations as u64) as usize);
        let read = match agent.rows("stock", &[("item", &item), ("location", loc)]).await {
            Ok(r) => r,
            Err(e) => {
                tally(&t).error("proposal_read", e);
                continue;
            }
        };
        let Some(snapshot_id) = read["receipt"]["snapshot_id"].as_i64() else {
            continue; // stock has no snapshot yet: nothing to cite
        };
        let rows: Vec<Value> = read["rows"].as_array().cloned().unwrap_or_default();
        let proposal = json!({
            "kind": "replenishment_order",
            "module": "procurement",
            "summary": format!("Soak: order 10 x {item} for {loc}"),
            "action": {"item": item, "location": loc, "qty": 10, "supplier": "acme-parts"},
            "sources": [{
                "table": "stock", "snapshot_id": snapshot_id, "offset": read["receipt"]["offset"],
                "keys": [{"item": item, "location": loc}], "rows": rows,
            }],
            "rule": {"name": "soak", "version": "1", "parameters": {}, "text": "order 10 of whatever was read"},
            "risk": {"level": "low", "reasons": ["soak test"]},
            "idempotency_key": format!("soak-{seed}-{n}"),
        });
        let begin = Instant::now();
        let created = agent.propose(&proposal).await;
        let took = begin.elapsed();
        let id = {
            let mut t = tally(&t);
            match created {
                Ok(c) => {
                    t.counts.proposals += 1;
                    t.proposal.push(took);
                    c["id"].as_str().map(str::to_string)
                }
                Err(e) => {
                    t.error("proposal", e);
                    None
                }
            }
        };
        let Some(id) = id else { continue };
        visible(&agent, &id, &t).await;
        if n % 3 == 0 {
            let approve = n % 6 == 0;
            let begin = Instant::now();
            let decided = person.decide(&id, approve, "soak decision").await;
            let took = begin.elapsed();
            let mut t = tally(&t);
            match decided {
                Ok(_) => {
                    t.counts.decisions += 1;
                    t.decision.push(took);
                }
                Err(e) => t.error("decision", e),
            }
        }
    }
}

/// Reads `approval_inbox` for proposal `id` every 20 ms until its row is there, and records how
/// long that took (an error after 10 s).
async fn visible(agent: &Client, id: &str, t: &Shared) {
    let begin = Instant::now();
    while begin.elapsed() < Duration::from_secs(10) {
        match agent.rows("approval_inbox", &[("proposal_id", id)]).await {
            Ok(a) if a["rows"].as_array().is_some_and(|r| !r.is_empty()) => {
                tally(t).proposal_visible.push(begin.elapsed());
                return;
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => {
                tally(t).error("proposal_visible", e);
                return;
            }
        }
    }
    tally(t).error("proposal_visible", format!("proposal {id} not in approval_inbox after 10 s"));
}

/// One look at the server: when, its memory, and every table's receipt and health.
struct Sample {
    at: f64,
    pss_mib: f64,
    /// Block caches and unflushed writes of the server's embedded stores.
    stores_mib: f64,
    /// Heap in use, when the server counts it.
    heap_mib: Option<f64>,
    tables: Vec<Value>,
}

/// The sum of every store's block cache and write buffers in a `GET /v1/health` answer.
fn stores_mib(health: &Value) -> Option<f64> {
    let stores = health.get("stores")?.as_object()?;
    let mut bytes = 0u64;
    for store in stores.values() {
        bytes += store.get("block_cache_bytes")?.as_u64()? + store.get("write_buffer_bytes")?.as_u64()?;
    }
    Some(bytes as f64 / (1024.0 * 1024.0))
}

async fn sample(server_pid: u32, agent: &Client, start: Instant, t: &Shared) -> Option<Sample> {
    let pss: u64 = tree(server_pid).into_iter().filter_map(pss_kib).sum();
    let begin = Instant::now();
    let answer = agent.tables().await;
    let took = begin.elapsed();
    let health = agent.health().await;
    let mut t = tally(t);
    let (stores_mib, heap_mib) = match health {
        Ok(h) => match stores_mib(&h) {
            Some(mib) => (mib, h["heap_live_bytes"].as_u64().map(|b| b as f64 / (1024.0 * 1024.0))),
            None => {
                t.error("health", format!("no memory figures of the stores: {h}"));
                return None;
            }
        },
        Err(e) => {
            t.error("health", e);
            return None;
        }
    };
    match answer {
        Ok(Value::Array(tables)) => {
            t.counts.samples += 1;
            t.tables.push(took);
            Some(Sample {
                at: start.elapsed().as_secs_f64(),
                pss_mib: pss as f64 / 1024.0,
                stores_mib,
                heap_mib,
                tables,
            })
        }
        Ok(other) => {
            t.error("tables", format!("not a list of tables: {other}"));
            None
        }
        Err(e) => {
            t.error("tables", e);
            None
        }
    }
}

/// Runs the soak and returns what it measured.
///
/// # Errors
/// The `livestate` binary missing or failing to start; the server not answering. Failed
/// requests during the run are counted in [`Soak::errors`], not returned.
pub async fn run(o: &Options) -> Result<Soak> {
    let work = o
        .work
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("livestate-soak-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(BenchError::io("create", &work))?;
    let result = run_in(o, &work).await;
    if o.keep {
        eprintln!("kept {}", work.display());
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
    result
}

async fn run_in(o: &Options, work: &Path) -> Result<Soak> {
    let bin = livestate_bin()?;
    let (dir, tokens) = prepare(&bin, work, o.spec.as_deref())?;
    let port = crate::process::free_port()?;
    let listen = format!("127.0.0.1:{port}");
    let log = work.join("serve.log");
    let log_file = std::fs::File::create(&log).map_err(BenchError::io("create", &log))?;
    let child = Command::new(&bin)
        .args(["serve", "--dir", &dir.to_string_lossy(), "--listen", &listen])
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .map_err(BenchError::io("run", &bin))?;
    let serving = Serving(child);
    let pid = serving.0.id();
    let base = format!("http://{listen}");
    let agent = Client::new(&base, &tokens.agent)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while agent.whoami().await.is_err() {
        if Instant::now() > deadline {
            return Err(BenchError::peer(
                WHO,
                format!("did not answer within 60 s (log: {})", log.display()),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let person = agent.with_token(&tokens.person);
    let modules: BTreeMap<&'static str, Client> =
        tokens.modules.iter().map(|(m, tok)| (*m, agent.with_token(tok))).collect();

    // Every item-location counted once, before the measured run.
    eprintln!("soak: counting {} item-locations", o.item_locations);
    let mut generator = Generator::new(o.seed, o.item_locations, "soak-");
    let t: Shared = Arc::default();
    let mut left = o.item_locations;
    while left > 0 {
        let n = left.min(1000);
        let events: Vec<Value> = (0..n).map(|_| generator.next_event()).collect();
        emit(&modules, &events, &t).await;
        left -= n;
    }
    if let Some(e) = tally(&t).errors.first.first() {
        return Err(BenchError::peer(WHO, format!("the initial counts failed: {e}")));
    }
    let t: Shared = Arc::default();

    let length = Duration::from_secs_f64(o.minutes * 60.0);
    eprintln!(
        "soak: {:.1} min at {} events/s, {} point reads/s, {} consistent reads/s, a proposal every {} s",
        o.minutes, o.rate, o.read_rate, o.consistent_rate, o.proposal_seconds
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let start = Instant::now();
    let mut tasks = vec![tokio::spawn(emitter(modules, generator, o.rate, Arc::clone(&t), stop_rx.clone()))];
    // Two point readers, so one slow read does not hold up the rest, and a consistent reader.
    for (r, rate, consistent) in [
        (1, o.read_rate as f64 / 2.0, false),
        (2, o.read_rate as f64 / 2.0, false),
        (3, o.consistent_rate, true),
    ] {
        if rate > 0.0 {
            tasks.push(tokio::spawn(reader(
                agent.clone(),
                o.item_locations,
                o.seed ^ r,
                rate,
                consistent,
                Arc::clone(&t),
                stop_rx.clone(),
            )));
        }
    }
    tasks.push(tokio::spawn(proposer(
        agent.clone(),
        person,
        o.item_locations,
        o.seed ^ 0x50a4,
        Duration::from_secs_f64(o.proposal_seconds),
        Arc::clone(&t),
        stop_rx.clone(),
    )));
    let every = Duration::from_secs_f64(o.sample_seconds);
    let mut samples = Vec::new();
    let mut next = start;
    while start.elapsed() < length {
        next += every;
        tokio::time::sleep_until(tokio::time::Instant::from_std(next.min(start + length))).await;
        samples.extend(sample(pid, &agent, start, &t).await);
    }
    let _ = stop_tx.send(true);
    for task in tasks {
        task.await.map_err(|e| BenchError::peer(WHO, format!("a load task failed: {e}")))?;
    }
    let seconds = start.elapsed().as_secs_f64();
    samples.extend(sample(pid, &agent, start, &t).await);
    drop(serving);

    let mut tally = Arc::try_unwrap(t)
        .map_err(|_| BenchError::peer(WHO, "a load task outlived the run"))?
        .into_inner()
        .expect("no holder panics");
    Ok(Soak {
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        commit: crate::run::commit(),
        machine: crate::run::machine(),
        seconds,
        rate: o.rate,
        achieved_rate: tally.counts.events as f64 / seconds.max(1e-9),
        read_rate: o.read_rate,
        consistent_rate: o.consistent_rate,
        proposal_seconds: o.proposal_seconds,
        item_locations: o.item_locations,
        memory: memory(&samples, seconds),
        tables: lags(&samples),
        latencies: RequestLatencies {
            emit: Latencies::of(&mut tally.emit),
            point_read: Latencies::of(&mut tally.point_read),
            consistent_read: Latencies::of(&mut tally.consistent_read),
            proposal: Latencies::of(&mut tally.proposal),
            proposal_visible: Latencies::of(&mut tally.proposal_visible),
            decision: Latencies::of(&mut tally.decision),
            tables: Latencies::of(&mut tally.tables),
        },
        counts: tally.counts,
        errors: tally.errors,
    })
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Memory figures from `(seconds, MiB)` samples of a run `seconds` long.
fn memory(samples: &[Sample], seconds: f64) -> Memory {
    let points: Vec<(f64, f64)> = samples.iter().map(|s| (s.at, s.pss_mib)).collect();
    let stores: Vec<(f64, f64)> = samples.iter().map(|s| (s.at, s.stores_mib)).collect();
    let heap: Vec<(f64, f64)> = samples.iter().filter_map(|s| Some((s.at, s.heap_mib?))).collect();
    memory_of(points, stores, heap, seconds)
}

/// Mean of the samples taken between `from` and `to` seconds.
fn window_mean(points: &[(f64, f64)], from: f64, to: f64) -> f64 {
    mean(&points.iter().filter(|(at, _)| *at >= from && *at <= to).map(|(_, m)| *m).collect::<Vec<_>>())
}

/// Length of the warm-up and of each compared window in a run `seconds` long.
fn window_of(seconds: f64) -> f64 {
    (seconds / 5.0).min(60.0)
}

/// Memory figures from `(seconds, MiB)` samples of PSS, the stores' memory and the heap in use.
fn memory_of(
    points: Vec<(f64, f64)>,
    stores: Vec<(f64, f64)>,
    heap: Vec<(f64, f64)>,
    seconds: f64,
) -> Memory {
    let window = window_of(seconds);
    let first = window_mean(&points, window, 2.0 * window);
    let last = window_mean(&points, seconds - window, seconds);
    let growth = last - first;
    let fraction = if first > 0.0 { growth / first } else { 0.0 };
    let slope_from = |from: f64| {
        let after: Vec<(f64, f64)> = points.iter().copied().filter(|(at, _)| *at >= from).collect();
        let (mx, my) = (
            mean(&after.iter().map(|p| p.0).collect::<Vec<_>>()),
            mean(&after.iter().map(|p| p.1).collect::<Vec<_>>()),
        );
        let sxx: f64 = after.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
        let sxy: f64 = after.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
        if sxx > 0.0 {
            sxy / sxx * 60.0
        } else {
            0.0
        }
    };
    let slope = slope_from(window);
    Memory {
        window_seconds: window,
        first_window_mib: first,
        last_window_mib: last,
        growth_mib: growth,
        growth_fraction: fraction,
        slope_mib_per_minute: slope,
        second_half_slope_mib_per_minute: slope_from(seconds / 2.0),
        peak_mib: points.iter().map(|(_, m)| *m).fold(0.0, f64::max),
        flat: first > 0.0 && growth <= FLAT_MIB.max(FLAT_FRACTION * first),
        samples: points,
        stores_first_window_mib: window_mean(&stores, window, 2.0 * window),
        stores_last_window_mib: window_mean(&stores, seconds - window, seconds),
        store_samples: stores,
        heap_first_window_mib: window_mean(&heap, window, 2.0 * window),
        heap_last_window_mib: window_mean(&heap, seconds - window, seconds),
        heap_samples: heap,
    }
}

/// Each table's largest lag and how often it was over budget, from the samples' receipts.
fn lags(samples: &[Sample]) -> Vec<TableLag> {
    let mut out: Vec<TableLag> = Vec::new();
    for s in samples {
        for info in &s.tables {
            let name = info["name"].as_str().unwrap_or_default().to_string();
            let receipt = &info["receipt"];
            let budget = receipt["budget"].as_str().unwrap_or_default().to_string();
            let i = match out.iter().position(|l| l.table == name) {
                Some(i) => i,
                None => {
                    let budget_ms = match livestate_spec::Freshness::from_str(&budget) {
                        Ok(livestate_spec::Freshness::Within(d)) => Some(d.as_millis() as u64),
                        _ => None,
                    };
                    out.push(TableLag {
                        table: name,
                        budget,
                        budget_ms,
                        samples: 0,
                        max_lag_ms: 0,
                        over_budget_samples: 0,
                        snapshots_at_end: 0,
                        tags_at_end: 0,
                    });
                    out.len() - 1
                }
            };
            let l = &mut out[i];
            l.samples += 1;
            l.max_lag_ms = l.max_lag_ms.max(receipt["lag_ms"].as_u64().unwrap_or(0));
            l.over_budget_samples += u64::from(receipt["within_budget"] == Value::Bool(false));
            l.snapshots_at_end = info["health"]["snapshots"].as_u64().unwrap_or(0);
            l.tags_at_end = info["health"]["tags"].as_array().map_or(0, Vec::len) as u64;
        }
    }
    out
}

impl Soak {
    /// Every request of the run succeeded, every table stayed within its budget at every sample
    /// and memory was sampled and stayed flat.
    pub fn healthy(&self) -> bool {
        self.errors.total == 0
            && !self.tables.is_empty()
            && self.tables.iter().all(TableLag::within_budget)
            && self.memory.flat
    }

    /// The run as Markdown, ready for docs/BENCHMARKS.md.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "livestate soak, {}; commit {}; {}", self.date, self.commit, self.machine);
        let _ = writeln!(
            out,
            "{:.1} min of `livestate serve` (example company, {} item-locations): {} events/s asked, {:.0} achieved; \
             {} point reads/s; {} consistent reads/s of stock and open_orders; a proposal every {} s, every third decided\n",
            self.seconds / 60.0,
            self.item_locations,
            self.rate,
            self.achieved_rate,
            self.read_rate,
            self.consistent_rate,
            self.proposal_seconds
        );
        let m = &self.memory;
        let _ = writeln!(out, "| memory (PSS of the server) | MiB |");
        let _ = writeln!(out, "|---|---:|");
        let _ = writeln!(
            out,
            "| first window after warm-up ({:.0} s each), mean | {:.1} |",
            m.window_seconds, m.first_window_mib
        );
        let _ = writeln!(out, "| last window, mean | {:.1} |", m.last_window_mib);
        let _ = writeln!(out, "| growth | {:+.1} ({:+.1} %) |", m.growth_mib, m.growth_fraction * 100.0);
        let _ = writeln!(out, "| slope after warm-up, MiB/min | {:+.2} |", m.slope_mib_per_minute);
        let _ = writeln!(
            out,
            "| slope over the second half, MiB/min | {:+.2} |",
            m.second_half_slope_mib_per_minute
        );
        let _ = writeln!(out, "| peak | {:.1} |", m.peak_mib);
        let _ = writeln!(
            out,
            "| of which embedded stores' caches and unflushed writes, first → last window | {:.1} → {:.1} |",
            m.stores_first_window_mib, m.stores_last_window_mib
        );
        let _ = writeln!(
            out,
            "| the rest (PSS minus the stores), first → last window | {:.1} → {:.1} |",
            m.first_window_mib - m.stores_first_window_mib,
            m.last_window_mib - m.stores_last_window_mib
        );
        if !m.heap_samples.is_empty() {
            let _ = writeln!(
                out,
                "| heap in use (allocated, not freed; stores included), first → last window | {:.1} → {:.1} |",
                m.heap_first_window_mib, m.heap_last_window_mib
            );
        }
        let _ = writeln!(
            out,
            "| flat (growth ≤ {FLAT_MIB:.0} MiB or {:.0} %, whichever is larger) | {} |\n",
            FLAT_FRACTION * 100.0,
            if m.flat { "yes" } else { "no" }
        );
        let _ = writeln!(out, "| table | budget | max lag, ms | samples over budget | samples | snapshots at end | tags at end |");
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|");
        for l in &self.tables {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                l.table,
                l.budget,
                l.max_lag_ms,
                l.over_budget_samples,
                l.samples,
                l.snapshots_at_end,
                l.tags_at_end
            );
        }
        let _ = writeln!(out, "\n| request | count | p50, ms | p99, ms | max, ms | errors |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
        let l = &self.latencies;
        for (what, kind, lat) in [
            ("POST /v1/events (one module's share of a tick)", "emit", &l.emit),
            ("GET /v1/tables/stock/rows (one key)", "point_read", &l.point_read),
            ("POST /v1/reads (stock + open_orders)", "consistent_read", &l.consistent_read),
            ("POST /v1/proposals", "proposal", &l.proposal),
            (
                "proposal answered → visible in approval_inbox (budget 1s)",
                "proposal_visible",
                &l.proposal_visible,
            ),
            ("POST /v1/proposals/{id}/decision", "decision", &l.decision),
            ("GET /v1/tables (sampler)", "tables", &l.tables),
        ] {
            let errors = self.errors.by_kind.get(kind).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "| {what} | {} | {:.2} | {:.2} | {:.2} | {errors} |",
                lat.n,
                lat.p50_us / 1000.0,
                lat.p99_us / 1000.0,
                lat.max_us / 1000.0
            );
        }
        let c = &self.counts;
        let _ = writeln!(
            out,
            "\nevents acknowledged {}, appends {}, point reads {}, consistent reads {}, proposals {}, decisions {}, samples {}; errors {}",
            c.events, c.emits, c.point_reads, c.consistent_reads, c.proposals, c.decisions, c.samples, self.errors.total
        );
        for e in &self.errors.first {
            let _ = writeln!(out, "- {e}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stores_memory_is_the_sum_of_every_stores_cache_and_write_buffers() {
        let health = json!({"status": "ok", "stores": {
            "record": {"block_cache_bytes": 1 << 20, "block_cache_capacity_bytes": 16 << 20, "write_buffer_bytes": 2 << 20},
            "index": {"block_cache_bytes": 3 << 20, "block_cache_capacity_bytes": 32 << 20, "write_buffer_bytes": 0},
        }});
        assert_eq!(stores_mib(&health), Some(6.0));
        assert_eq!(stores_mib(&json!({"status": "ok"})), None);
    }

    #[test]
    fn memory_compares_the_first_window_after_warm_up_with_the_last() {
        // 10 minutes sampled every 5 s: 100 MiB during the warm-up minute, then a steady 120 MiB.
        let flat: Vec<(f64, f64)> =
            (0..=120).map(|i| (i as f64 * 5.0, if i < 12 { 100.0 } else { 120.0 })).collect();
        let m = memory_of(flat, Vec::new(), Vec::new(), 600.0);
        assert_eq!(m.window_seconds, 60.0);
        assert_eq!((m.first_window_mib, m.last_window_mib, m.growth_mib), (120.0, 120.0, 0.0));
        assert!(m.flat && m.slope_mib_per_minute.abs() < 1e-9, "{m:?}");
        // A leak of 10 MiB a minute after the warm-up is not flat.
        let leak: Vec<(f64, f64)> =
            (0..=120).map(|i| (i as f64 * 5.0, 100.0 + i as f64 * 5.0 / 6.0)).collect();
        // The stores' share is averaged over the same windows: here they fill from 10 to 40 MiB,
        // so they account for 30 of the leak's ~80 MiB.
        let stores: Vec<(f64, f64)> =
            (0..=120).map(|i| (i as f64 * 5.0, 10.0 + (i as f64 / 2.0).min(30.0))).collect();
        let m = memory_of(leak, stores, Vec::new(), 600.0);
        assert!(!m.flat, "{m:?}");
        assert_eq!(m.stores_last_window_mib, 40.0, "{m:?}");
        assert_eq!(m.stores_first_window_mib, 19.0, "{m:?}");
        assert!((m.slope_mib_per_minute - 10.0).abs() < 1e-6, "{m:?}");
        assert!((m.second_half_slope_mib_per_minute - 10.0).abs() < 1e-6, "{m:?}");
        // Caches filling for four minutes to a ceiling: not flat by the windows, but the second
        // half does not grow.
        let ceiling: Vec<(f64, f64)> =
            (0..=120).map(|i| (i as f64 * 5.0, 100.0 + (i.min(48) as f64) * 2.5)).collect();
        let m = memory_of(ceiling, Vec::new(), Vec::new(), 600.0);
        assert!(!m.flat && m.slope_mib_per_minute > 0.0, "{m:?}");
        assert!(m.second_half_slope_mib_per_minute.abs() < 1e-9, "{m:?}");
    }

    #[test]
    fn lags_keep_each_tables_largest_lag_and_count_samples_over_budget() {
        let table = |lag: u64, within: bool| {
            json!({"name": "stock", "receipt": {"budget": "1s", "lag_ms": lag, "within_budget": within},
                   "health": {"snapshots": 3, "tags": [{"name": "t"}]}})
        };
        let samples = vec![
            Sample { at: 0.0, pss_mib: 1.0, stores_mib: 0.0, heap_mib: None, tables: vec![table(200, true)] },
            Sample {
                at: 5.0,
                pss_mib: 1.0,
                stores_mib: 0.0,
                heap_mib: None,
                tables: vec![table(1500, false)],
            },
            Sample { at: 10.0, pss_mib: 1.0, stores_mib: 0.0, heap_mib: None, tables: vec![table(0, true)] },
        ];
        let l = lags(&samples);
        assert_eq!(l.len(), 1);
        assert_eq!(
            (l[0].budget_ms, l[0].max_lag_ms, l[0].over_budget_samples, l[0].samples),
            (Some(1000), 1500, 1, 3)
        );
        assert!(!l[0].within_budget());
    }
}
