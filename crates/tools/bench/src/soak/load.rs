//! The load: modules emitting, an agent reading and proposing, a person deciding.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use livestate_client::{Client, TableRead};
use livestate_sim::Rng;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::{tally, Shared};
use crate::workload::{key, Generator};

/// Posts `events` grouped by module, each group with its module's token. Returns how many were
/// acknowledged.
pub(super) async fn emit(clients: &BTreeMap<&'static str, Client>, events: &[Value], t: &Shared) -> u64 {
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
                let n = a.appended.len() as u64;
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
pub(super) async fn emitter(
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
        let mut t = tally(&t);
        t.counts.events += n;
        t.open_orders = generator.open_orders();
    }
}

/// Reads at `rate` a second until stopped: consistent reads of stock and open_orders for one
/// item when `consistent`, else point reads of one stock row.
pub(super) async fn reader(
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
                TableRead::table("stock").key("item", item.as_str()).key("location", loc),
                TableRead::table("open_orders").filter(format!("item == '{item}'")).limit(50),
            ];
            let answer = agent.consistent_read(&tables).await;
            let took = begin.elapsed();
            let mut t = tally(&t);
            match answer {
                Ok(a) if a.results.len() == 2 => {
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
            // The client types the answer: rows and a receipt, or an error (an answer of
            // another shape is a `ClientError::Answer`).
            match answer {
                Ok(_) => {
                    t.counts.point_reads += 1;
                    t.point_read.push(took);
                }
                Err(e) => t.error("point_read", e),
            }
        }
    }
}

/// Proposes every `every` until stopped, citing a stock row it just read; the person decides
/// every third proposal (approving and rejecting in turn).
pub(super) async fn proposer(
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
        let Some(snapshot_id) = read.receipt.snapshot_id else {
            continue; // stock has no snapshot yet: nothing to cite
        };
        let rows: Vec<Value> = read.rows.iter().cloned().map(Value::Object).collect();
        let proposal = json!({
            "kind": "replenishment_order",
            "module": "procurement",
            "summary": format!("Soak: order 10 x {item} for {loc}"),
            "action": {"item": item, "location": loc, "qty": 10, "supplier": "acme-parts"},
            "sources": [{
                "table": "stock", "snapshot_id": snapshot_id, "offset": read.receipt.offset,
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
                    Some(c.id)
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
            Ok(a) if !a.rows.is_empty() => {
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
