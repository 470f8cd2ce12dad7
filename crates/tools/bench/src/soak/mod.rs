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
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use livestate_client::Client;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use crate::error::{BenchError, Result};
use crate::http::livestate_bin;
use crate::process::Serving;
use crate::stats::Latencies;
use crate::workload::Generator;

use load::{emit, emitter, proposer, reader};
use sample::{lags, memory, sample};

mod load;
mod report;
mod sample;

pub use sample::{Memory, TableLag};

const WHO: &str = "livestate serve (soak)";

/// The spec the soak serves: the example company, as `livestate demo` runs it.
const SPEC: [(&str, &str); 4] = [
    ("events.toml", include_str!("../../../../../examples/company/events.toml")),
    ("tables.toml", include_str!("../../../../../examples/company/tables.toml")),
    ("mappings.toml", include_str!("../../../../../examples/company/mappings.toml")),
    ("triggers.toml", include_str!("../../../../../examples/company/triggers.toml")),
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
    /// Orders open at once: the book is filled to this many before the run and stays there
    /// (a placement when it is full closes an order instead), as a business's book does, so the
    /// run measures a steady state. 0: no bound, the book grows about 40 orders a second at
    /// 1,000 events/s, and with it `open_orders` and the cost of every read filtering it (the
    /// workload of the earlier passes and of the comparison with PostgreSQL)
    #[arg(long, default_value_t = 20_000)]
    pub order_book: usize,
    /// Workload seed
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    #[command(flatten)]
    pub work_dir: crate::workdir::WorkDirArgs,
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
    /// The bound of the order book (0: none), and the orders open at the end.
    #[serde(default)]
    pub order_book: usize,
    #[serde(default)]
    pub open_orders_at_end: usize,
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
    /// Orders the emitter's book holds open.
    open_orders: usize,
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

/// Runs the soak and returns what it measured.
///
/// # Errors
/// The `livestate` binary missing or failing to start; the server not answering. Failed
/// requests during the run are counted in [`Soak::errors`], not returned.
pub async fn run(o: &Options) -> Result<Soak> {
    let work = crate::workdir::WorkDir::create(&o.work_dir, "livestate-soak")?;
    run_in(o, work.path()).await
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
    if o.order_book > 0 {
        generator = generator.with_order_book(o.order_book);
    }
    let t: Shared = Arc::default();
    let mut left = o.item_locations;
    while left > 0 {
        let n = left.min(1000);
        let events: Vec<Value> = (0..n).map(|_| generator.next_event()).collect();
        emit(&modules, &events, &t).await;
        left -= n;
    }
    // The order book, filled before the run.
    if o.order_book > 0 {
        eprintln!("soak: opening {} orders", o.order_book);
    }
    while generator.open_orders() < o.order_book {
        let n = (o.order_book - generator.open_orders()).min(1000);
        let events: Vec<Value> = (0..n).map(|_| generator.place_order()).collect();
        emit(&modules, &events, &t).await;
    }
    if let Some(e) = tally(&t).errors.first.first() {
        return Err(BenchError::peer(WHO, format!("the initial load failed: {e}")));
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
        order_book: o.order_book,
        open_orders_at_end: tally.open_orders,
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
