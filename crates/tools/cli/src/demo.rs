//! `livestate demo`: the example company, live, in one process. The server runs embedded; the
//! simulated modules, the two agents and (with `--approve auto`) an approving person all talk
//! to it over HTTP with their own tokens, exactly as separate programs would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use livestate_agents::procurement::ProcurementAgent;
use livestate_agents::work_queue::WorkQueueAgent;
use livestate_agents::Narration;
use livestate_client::{Client, ProposalStatus};
use livestate_sim::live::{module_of, Company, Happened, Tally};
use serde_json::Value;
use tokio::sync::mpsc;

/// Marks a directory this demo created (and may therefore wipe on the next run).
const MARKER: &str = "livestate-demo.marker";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Approve {
    /// A demo person approves every proposal as it arrives.
    Auto,
    /// Proposals wait for you (decide with the person token over the API).
    Manual,
}

#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub dir: PathBuf,
    pub seed: u64,
    pub items: usize,
    pub rate: f64,
    pub duration: Option<Duration>,
    pub approve: Approve,
    pub listen: String,
    pub blocked_after: Duration,
}

/// What a demo run did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub seconds: f64,
    pub events_recorded: u64,
    pub shortages: u64,
    pub proposals: BTreeMap<String, u64>,
    pub modules: Tally,
}

enum Line {
    Agent(Narration),
    Module(Happened),
    Approved(String, String),
    Note(String),
}

const PRINCIPALS: [(&str, &[&str], &str); 8] = [
    ("person:demo", &["*"], "decides every module's proposals"),
    ("agent:procurement", &[], "reads, subscribes, proposes replenishment orders"),
    ("agent:work-queue", &[], "reads, proposes job moves"),
    ("module:inventory", &[], "emits inventory events"),
    ("module:commerce", &[], "emits commerce events"),
    ("module:procurement", &[], "emits procurement events, pulls its outbox"),
    ("module:operations", &[], "emits operations events, pulls its outbox"),
    ("admin", &[], "reads everything, manages"),
];

fn prepare(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        if !dir.join(MARKER).exists() {
            bail!(
                "{} exists and was not made by `livestate demo`; remove it or pass another --dir",
                dir.display()
            );
        }
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("removing the previous demo in {}", dir.display()))?;
    }
    Ok(())
}

/// Runs the demo until `duration` passes (or Ctrl-C), printing what happens; returns the summary.
///
/// # Errors
/// The directory or the listen address cannot be used, or the server fails.
pub async fn run(opts: DemoOptions) -> anyhow::Result<Summary> {
    prepare(&opts.dir)?;
    let spec = crate::example_spec_dir()?;
    // Live, the stock table answers within 2 s instead of the example's 5 min, so shortages
    // fire (triggers fire on commits) while you watch.
    let tables = spec.path().join("tables.toml");
    let text = std::fs::read_to_string(&tables)?;
    let live = text.replacen(
        "freshness = \"5m\"\noptions = { \"merge-engine\" = \"partial-update\"",
        "freshness = \"2s\"\noptions = { \"merge-engine\" = \"partial-update\"",
        1,
    );
    anyhow::ensure!(live != text, "the example spec's stock table changed; the demo cannot tune its budget");
    std::fs::write(&tables, live)?;
    drop(livestate_engine::Livestate::init(&opts.dir, spec.path()).await?);
    std::fs::write(
        opts.dir.join(MARKER),
        "made by livestate demo; the next demo run replaces this directory\n",
    )?;
    let layout = livestate_engine::Layout::new(&opts.dir)?;
    let mut tokens = BTreeMap::new();
    for (name, scopes, _) in PRINCIPALS {
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        tokens.insert(name, livestate_server::auth::add_principal(&layout.principals_file(), name, &scopes)?);
    }
    let listener = tokio::net::TcpListener::bind(&opts.listen).await.with_context(|| {
        format!("listening on {} (pass --listen 127.0.0.1:0 for any free port)", opts.listen)
    })?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop_server, server_stopped) = tokio::sync::oneshot::channel::<()>();
    let dir = opts.dir.clone();
    let server = tokio::spawn(async move {
        livestate_server::serve_with(&dir, listener, livestate_server::ServeConfig::default(), async {
            let _ = server_stopped.await;
        })
        .await
    });
    let client = |name: &str| Client::new(&url, &tokens[name]);
    let admin = client("admin")?;
    let started = Instant::now();
    while admin.whoami().await.is_err() {
        if started.elapsed() > Duration::from_secs(120) || server.is_finished() {
            bail!("the embedded server did not come up");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    println!("livestate demo: the example company, live, at {url} (directory {})", opts.dir.display());
    println!(
        "  approval inbox: {url}/inbox (sign in with the person:demo token)    API: {url}/v1/openapi.json"
    );
    println!("  tokens (send as `Authorization: Bearer <token>`):");
    for (name, _, what) in PRINCIPALS {
        println!("    {name:<20} {}  {what}", tokens[name]);
    }
    match opts.approve {
        Approve::Auto => println!("  approvals: automatic (person:demo approves each proposal)"),
        Approve::Manual => println!(
            "  approvals: yours, e.g. curl -X POST -H 'Authorization: Bearer {}' -d '{{\"decision\":\"approve\",\"reason\":\"ok\"}}' {url}/v1/proposals/ID/decision",
            tokens["person:demo"]
        ),
    }
    match opts.duration {
        Some(d) => {
            println!("  running for {:.0} s at {} events/s, seed {}\n", d.as_secs_f64(), opts.rate, opts.seed)
        }
        None => println!("  running at {} events/s, seed {}; Ctrl-C stops\n", opts.rate, opts.seed),
    }

    let (say, mut heard) = mpsc::unbounded_channel::<Line>();
    let (agent_tx, mut agent_rx) = mpsc::unbounded_channel::<Narration>();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();

    // The modules: business at the given rate, and decisions carried out from their outboxes.
    let modules: BTreeMap<&str, Client> = ["inventory", "commerce", "procurement", "operations"]
        .into_iter()
        .map(|m| Ok((m, client(&format!("module:{m}"))?)))
        .collect::<anyhow::Result<_>>()?;
    let mut company = Company::new(opts.seed, opts.items, &format!("demo{}", opts.seed));
    emit_by_module(&modules, company.setup(chrono::Utc::now())).await?;
    let tally = std::sync::Arc::new(std::sync::Mutex::new(company.tally()));
    {
        let (modules, say, mut stop, rate, tally) =
            (modules.clone(), say.clone(), stop_rx.clone(), opts.rate, tally.clone());
        tasks.push(tokio::spawn(async move {
            let mut cursors: BTreeMap<&str, u64> = BTreeMap::new();
            let mut owed = 0.0;
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            while !*stop.borrow() {
                tokio::select! { _ = tick.tick() => {}, _ = stop.changed() => break }
                let now = chrono::Utc::now();
                let mut events = Vec::new();
                owed += rate / 10.0;
                while owed >= 1.0 {
                    let batch = company.tick(now);
                    owed -= batch.len() as f64;
                    events.extend(batch);
                }
                for m in ["procurement", "operations"] {
                    let after = cursors.get(m).copied().unwrap_or(0);
                    match modules[m].outbox(m, after).await {
                        Ok(o) => {
                            for item in &o.items {
                                let (evs, told) =
                                    company.carry_out(&item.proposal_id, &item.kind, &item.action, now);
                                events.extend(evs);
                                told.into_iter().for_each(|t| drop(say.send(Line::Module(t))));
                            }
                            cursors.insert(m, o.next_after);
                        }
                        Err(e) => drop(say.send(Line::Note(format!("{m} could not read its outbox: {e}")))),
                    }
                }
                let (evs, told) = company.receive_due(now);
                events.extend(evs);
                told.into_iter().for_each(|t| drop(say.send(Line::Module(t))));
                if let Err(e) = emit_by_module(&modules, events).await {
                    let _ = say.send(Line::Note(format!("a module could not emit: {e}")));
                }
                *tally.lock().expect("tally") = company.tally();
            }
        }));
    }

    // The agents.
    {
        let mut agent = ProcurementAgent::new(client("agent:procurement")?, Some(agent_tx.clone()));
        let mut stop = stop_rx.clone();
        tasks.push(tokio::spawn(async move {
            while !*stop.borrow() {
                if let Err(e) = agent.poll().await {
                    let _ = agent_tx.send(Narration::Failed { what: "procurement agent".into(), error: e.to_string() });
                }
                tokio::select! { _ = tokio::time::sleep(Duration::from_millis(200)) => {}, _ = stop.changed() => break }
            }
        }));
    }
    {
        let (tx, mut stop) = (say.clone(), stop_rx.clone());
        let (wtx, mut wrx) = mpsc::unbounded_channel();
        let mut agent = WorkQueueAgent::new(client("agent:work-queue")?, opts.blocked_after, Some(wtx));
        tasks.push(tokio::spawn(async move {
            while !*stop.borrow() {
                if let Err(e) = agent.poll().await {
                    let _ = tx.send(Line::Note(format!("work-queue agent: {e}")));
                }
                while let Ok(n) = wrx.try_recv() {
                    let _ = tx.send(Line::Agent(n));
                }
                tokio::select! { _ = tokio::time::sleep(Duration::from_secs(1)) => {}, _ = stop.changed() => break }
            }
        }));
    }
    if opts.approve == Approve::Auto {
        let person = client("person:demo")?;
        let (tx, mut stop) = (say.clone(), stop_rx.clone());
        tasks.push(tokio::spawn(async move {
            while !*stop.borrow() {
                if let Ok(list) = person.proposals(Some(ProposalStatus::Pending)).await {
                    for p in list.proposals.iter().rev() {
                        if person.decide(&p.id, true, "auto-approved by the demo").await.is_ok() {
                            let _ = tx.send(Line::Approved(p.id.clone(), p.summary.clone()));
                        }
                    }
                }
                tokio::select! { _ = tokio::time::sleep(Duration::from_millis(300)) => {}, _ = stop.changed() => break }
            }
        }));
    }

    // Narrate until the end; the first proposal's decision sheet is shown in full.
    let sheet_reader = client("person:demo")?;
    let mut sheet_shown = false;
    let mut shortages = 0u64;
    let begun = Instant::now();
    let deadline = opts.duration.map(|d| tokio::time::Instant::now() + d);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let line = tokio::select! {
            l = heard.recv() => l,
            n = agent_rx.recv() => n.map(Line::Agent),
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => break,
            _ = &mut ctrl_c => break,
        };
        let Some(line) = line else { break };
        let t = begun.elapsed().as_secs_f64();
        let proposed = match &line {
            Line::Agent(Narration::Proposed { id, .. }) if !sheet_shown => Some(id.clone()),
            _ => None,
        };
        let text = match line {
            Line::Agent(Narration::Shortage { item, location, available, reorder_point }) => {
                shortages += 1;
                format!("shortage     {item} at {location}: available {available} < reorder point {reorder_point}")
            }
            Line::Agent(Narration::Proposed { id, summary, risk }) => {
                format!("proposal     {id}: {summary} [{} risk]", risk.as_str())
            }
            Line::Agent(Narration::Skipped { item, why }) => format!("no proposal  {item}: {why}"),
            Line::Agent(Narration::Failed { what, error }) => format!("problem      {what}: {error}"),
            Line::Approved(id, summary) => format!("approved     {id} by person:demo: {summary}"),
            Line::Module(Happened::OrderPlaced { proposal, item, qty }) => {
                format!("procurement  ordered {qty} x {item} for {proposal}: inbound rises")
            }
            Line::Module(Happened::GoodsReceived { proposal, item, location, qty, on_hand }) => {
                format!("inventory    received {qty} x {item} at {location} for {proposal}: on hand now {on_hand}")
            }
            Line::Module(Happened::JobMoved { proposal, job, machine }) => {
                format!("operations   released {job} on {machine} for {proposal}")
            }
            Line::Note(n) => format!("note         {n}"),
        };
        println!("[{t:6.1}s] {text}");
        if let Some(id) = proposed {
            if let Ok(sheet) = sheet_reader.sheet(&id).await {
                sheet_shown = true;
                println!("             decision sheet of {id} (GET /v1/proposals/{id}/sheet):");
                for l in crate::render::sheet(&sheet).lines() {
                    println!("               {l}");
                }
            }
        }
    }
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    let mut proposals = BTreeMap::new();
    for p in admin.proposals(None).await?.proposals {
        *proposals.entry(p.status.as_str().to_string()).or_insert(0) += 1;
    }
    let _ = stop_server.send(());
    server.await.context("the embedded server")??;
    let record = livestate_engine::Livestate::open(&opts.dir).await?.record().next_offset();
    let summary = Summary {
        seconds: begun.elapsed().as_secs_f64(),
        events_recorded: record,
        shortages,
        proposals,
        modules: tally.lock().expect("tally").clone(),
    };
    print_summary(&summary);
    Ok(summary)
}

async fn emit_by_module(modules: &BTreeMap<&str, Client>, events: Vec<Value>) -> anyhow::Result<()> {
    let mut by: BTreeMap<String, String> = BTreeMap::new();
    for e in &events {
        let lines = by.entry(module_of(e).to_string()).or_default();
        lines.push_str(&e.to_string());
        lines.push('\n');
    }
    for (m, lines) in by {
        let client = modules.get(m.as_str()).with_context(|| format!("no module client for `{m}`"))?;
        client.emit(&lines).await?;
    }
    Ok(())
}

fn print_summary(s: &Summary) {
    let count = |k: &str| s.proposals.get(k).copied().unwrap_or(0);
    let total: u64 = s.proposals.values().sum();
    let t = &s.modules;
    println!("\nsummary after {:.1} s:", s.seconds);
    println!("  events recorded      {}", s.events_recorded);
    println!("  shortages signalled  {}", s.shortages);
    println!(
        "  proposals            {total} ({} approved, {} rejected, {} pending)",
        count("approved"),
        count("rejected"),
        count("pending")
    );
    println!("  purchase orders      {} placed, {} deliveries received", t.purchase_orders, t.receipts);
    println!("  jobs moved           {}", t.jobs_moved);
    println!(
        "  stock-outs           {} of {} item-locations that went short ({} avoided)",
        t.stocked_out,
        t.went_short,
        t.went_short.saturating_sub(t.stocked_out)
    );
}
