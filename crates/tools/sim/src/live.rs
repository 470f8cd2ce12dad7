//! The example company's modules, live: they keep their own books (stock, reservations,
//! inbound, open orders, jobs), emit events as business happens, and carry out approved
//! decisions from their outboxes, citing the proposal as causation. Seeded: the same seed and
//! the same calls give the same events.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::{item_name, Rng, LOCATIONS, SUPPLIERS};

const MACHINES: [&str; 6] = ["press-1", "press-2", "lathe-1", "lathe-2", "mill-3", "paint-1"];
const TEAMS: [&str; 3] = ["assembly", "machining", "paint"];

#[derive(Debug, Clone, Default)]
struct Books {
    on_hand: i64,
    reserved: i64,
    inbound: i64,
    reorder_point: i64,
    ever_short: bool,
    stocked_out: bool,
}

#[derive(Debug, Clone)]
struct Receipt {
    due_ms: i64,
    proposal: String,
    item: String,
    location: String,
    qty: i64,
}

/// What the modules have done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    pub events: u64,
    pub purchase_orders: u64,
    pub receipts: u64,
    pub jobs_moved: u64,
    /// Item-locations whose available stock ever fell below the reorder point.
    pub went_short: u64,
    /// Item-locations whose available stock ever reached zero (a stock-out).
    pub stocked_out: u64,
}

/// Something a module did that is worth telling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happened {
    OrderPlaced { proposal: String, item: String, qty: i64 },
    GoodsReceived { proposal: String, item: String, location: String, qty: i64, on_hand: i64 },
    JobMoved { proposal: String, job: String, machine: String },
}

/// The modules of the example company.
pub struct Company {
    rng: Rng,
    prefix: String,
    seq: u64,
    items: usize,
    books: BTreeMap<(String, &'static str), Books>,
    /// (order id, item, location, qty)
    open: Vec<(String, String, &'static str, i64)>,
    orders: u64,
    jobs: BTreeMap<String, (String, String)>,
    next_job: u64,
    lead_days: BTreeMap<(String, String), i64>,
    receipts: Vec<Receipt>,
    /// Wall-clock milliseconds one lead-time day takes.
    pub day_ms: i64,
    tally: Tally,
}

impl Company {
    /// A company of `items` items in three warehouses; event ids start with `prefix`.
    pub fn new(seed: u64, items: usize, prefix: &str) -> Company {
        Company {
            rng: Rng(seed),
            prefix: prefix.to_string(),
            seq: 0,
            items: items.max(1),
            books: BTreeMap::new(),
            open: Vec::new(),
            orders: 0,
            jobs: BTreeMap::new(),
            next_job: 0,
            lead_days: BTreeMap::new(),
            receipts: Vec::new(),
            day_ms: 2_000,
            tally: Tally::default(),
        }
    }

    pub fn tally(&self) -> Tally {
        self.tally.clone()
    }

    fn event(&mut self, now: DateTime<Utc>, ty: &str, data: Value, causation: Option<&str>) -> Value {
        self.seq += 1;
        self.tally.events += 1;
        let mut e = json!({
            "id": format!("{}-{:08}", self.prefix, self.seq),
            "type": ty,
            "occurred_at": now.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            "data": data,
        });
        if let Some(c) = causation {
            e["causation"] = json!(c);
        }
        e
    }

    fn watch(&mut self, item: &str, loc: &'static str) {
        let b = self.books.get_mut(&(item.to_string(), loc)).expect("known item");
        let available = b.on_hand - b.reserved + b.inbound;
        if available < b.reorder_point && !b.ever_short {
            b.ever_short = true;
            self.tally.went_short += 1;
        }
        if b.on_hand - b.reserved <= 0 && !b.stocked_out {
            b.stocked_out = true;
            self.tally.stocked_out += 1;
        }
    }

    /// The opening events: supplier risk and offers, planning, stock counts, a work queue.
    pub fn setup(&mut self, now: DateTime<Utc>) -> Vec<Value> {
        let mut out = Vec::new();
        for (i, sup) in SUPPLIERS.iter().enumerate() {
            let level = ["low", "medium", "high"][i % 3];
            out.push(self.event(
                now,
                "procurement.supplier_risk_assessed",
                json!({"supplier": sup, "level": level, "reason": "initial assessment"}),
                None,
            ));
        }
        for i in 0..self.items {
            let item = item_name(i);
            // Two suppliers carry each item.
            for k in 0..2 {
                let sup = SUPPLIERS[(i + k) % SUPPLIERS.len()];
                let pack = [10, 20, 25, 50][self.rng.below(4) as usize];
                let cents = 100 + self.rng.below(5_000);
                let lead = 1 + self.rng.below(4) as i64;
                self.lead_days.insert((sup.to_string(), item.clone()), lead);
                out.push(self.event(
                    now,
                    "procurement.supplier_item_listed",
                    json!({
                        "supplier": sup, "item": item, "pack_size": pack,
                        "unit_price": format!("{}.{:02}", cents / 100, cents % 100), "lead_time_days": lead,
                    }),
                    None,
                ));
            }
            for loc in LOCATIONS {
                let rp = 20 + self.rng.below(30) as i64;
                let on_hand = rp + 1 + self.rng.below(15) as i64;
                self.books
                    .insert((item.clone(), loc), Books { on_hand, reorder_point: rp, ..Default::default() });
                out.push(self.event(
                    now,
                    "procurement.planning_set",
                    json!({"item": item, "location": loc, "reorder_point": rp, "target": rp * 3}),
                    None,
                ));
                out.push(self.event(
                    now,
                    "inventory.stock_counted",
                    json!({"item": item, "location": loc, "on_hand": on_hand}),
                    None,
                ));
            }
        }
        for _ in 0..MACHINES.len() {
            out.extend(self.new_job(now));
        }
        out
    }

    fn new_job(&mut self, now: DateTime<Utc>) -> Vec<Value> {
        self.next_job += 1;
        let job = format!("job-{:05}", self.next_job);
        let machine = MACHINES[self.rng.below(MACHINES.len() as u64) as usize].to_string();
        let team = TEAMS[self.rng.below(TEAMS.len() as u64) as usize].to_string();
        self.jobs.insert(job.clone(), (machine.clone(), team.clone()));
        vec![self.event(
            now,
            "operations.job_status_changed",
            json!({"job_id": job, "status": "released", "machine": machine, "team": team}),
            None,
        )]
    }

    /// One piece of ordinary business: a customer order, a shipment, a cancellation, a
    /// recount, a job moving, or the weekly supplier review.
    pub fn tick(&mut self, now: DateTime<Utc>) -> Vec<Value> {
        let roll = self.rng.below(100);
        let item = item_name(self.rng.below(self.items as u64) as usize);
        let loc = LOCATIONS[self.rng.below(3) as usize];
        match roll {
            0..=44 => {
                let qty = 1 + self.rng.below(8) as i64;
                self.orders += 1;
                let order_id = format!("{}-so-{:06}", self.prefix, self.orders);
                let cents = 500 + self.rng.below(20_000);
                let reserved = {
                    let b = self.books.get_mut(&(item.clone(), loc)).expect("known item");
                    b.reserved += qty;
                    b.reserved
                };
                self.open.push((order_id.clone(), item.clone(), loc, qty));
                self.watch(&item, loc);
                let customer = format!("cust-{:03}", self.rng.below(80));
                vec![
                    self.event(now, "commerce.order_placed", json!({"order_id": order_id, "line": 1, "customer": customer, "item": item, "location": loc, "qty": qty, "unit_price": format!("{}.{:02}", cents / 100, cents % 100)}), None),
                    self.event(now, "commerce.reservation_changed", json!({"item": item, "location": loc, "reserved": reserved}), None),
                ]
            }
            45..=79 if !self.open.is_empty() => {
                let (order_id, item, loc, qty) = self.open.remove(0);
                let b = self.books.get_mut(&(item.clone(), loc)).expect("known item");
                let shipped = qty.min(b.on_hand.max(0));
                b.reserved -= qty;
                b.on_hand -= shipped;
                let (reserved, on_hand) = (b.reserved, b.on_hand);
                self.watch(&item, loc);
                vec![
                    self.event(
                        now,
                        "commerce.order_shipped",
                        json!({"order_id": order_id, "line": 1, "item": item, "location": loc, "qty": qty}),
                        None,
                    ),
                    self.event(
                        now,
                        "commerce.reservation_changed",
                        json!({"item": item, "location": loc, "reserved": reserved}),
                        None,
                    ),
                    self.event(
                        now,
                        "inventory.stock_counted",
                        json!({"item": item, "location": loc, "on_hand": on_hand}),
                        None,
                    ),
                ]
            }
            80..=84 if !self.open.is_empty() => {
                let i = self.rng.below(self.open.len() as u64) as usize;
                let (order_id, item, loc, qty) = self.open.remove(i);
                let b = self.books.get_mut(&(item.clone(), loc)).expect("known item");
                b.reserved -= qty;
                let reserved = b.reserved;
                vec![
                    self.event(now, "commerce.order_cancelled", json!({"order_id": order_id, "line": 1, "item": item, "location": loc, "qty": qty, "reason": "customer changed plans"}), None),
                    self.event(now, "commerce.reservation_changed", json!({"item": item, "location": loc, "reserved": reserved}), None),
                ]
            }
            85..=96 => {
                let Some(job) =
                    self.jobs.keys().nth(self.rng.below(self.jobs.len() as u64) as usize).cloned()
                else {
                    return self.new_job(now);
                };
                let (machine, team) = self.jobs[&job].clone();
                match self.rng.below(3) {
                    0 => vec![self.event(now, "operations.job_status_changed", json!({"job_id": job, "status": "blocked", "block_reason": "waiting for material", "machine": machine, "team": team}), None)],
                    _ => {
                        self.jobs.remove(&job);
                        let mut v = vec![self.event(now, "operations.job_status_changed", json!({"job_id": job, "status": "done", "machine": machine, "team": team}), None)];
                        v.extend(self.new_job(now));
                        v
                    }
                }
            }
            97 => {
                let sup = SUPPLIERS[self.rng.below(SUPPLIERS.len() as u64) as usize];
                let level = ["low", "medium", "high"][self.rng.below(3) as usize];
                vec![self.event(
                    now,
                    "procurement.supplier_risk_assessed",
                    json!({"supplier": sup, "level": level, "reason": "weekly review"}),
                    None,
                )]
            }
            _ => {
                let b = self.books.get_mut(&(item.clone(), loc)).expect("known item");
                b.on_hand = (b.on_hand - 1).max(0);
                let on_hand = b.on_hand;
                self.watch(&item, loc);
                vec![self.event(
                    now,
                    "inventory.stock_counted",
                    json!({"item": item, "location": loc, "on_hand": on_hand}),
                    None,
                )]
            }
        }
    }

    /// Carries out approved proposal `proposal` of `kind` with its drafted `action` (as its
    /// module's outbox hands it over).
    pub fn carry_out(
        &mut self,
        proposal: &str,
        kind: &str,
        action: &Value,
        now: DateTime<Utc>,
    ) -> (Vec<Value>, Vec<Happened>) {
        let proposal = proposal.to_string();
        let mut out = Vec::new();
        let mut told = Vec::new();
        match kind {
            "replenishment_order" | "stock_replenishment" => {
                let it = action["item"].as_str().unwrap_or_default().to_string();
                let supplier = action["supplier"].as_str().unwrap_or_default().to_string();
                let lead = self.lead_days.get(&(supplier, it.clone())).copied().unwrap_or(2);
                let mut total = 0;
                for line in action["lines"].as_array().into_iter().flatten() {
                    let Some(loc) = LOCATIONS.iter().find(|l| line["location"] == **l).copied() else {
                        continue;
                    };
                    let qty = line["qty"].as_i64().unwrap_or(0);
                    let Some(b) = self.books.get_mut(&(it.clone(), loc)) else { continue };
                    b.inbound += qty;
                    let inbound = b.inbound;
                    total += qty;
                    out.push(self.event(
                        now,
                        "procurement.inbound_changed",
                        json!({"item": it, "location": loc, "inbound": inbound}),
                        Some(&proposal),
                    ));
                    self.receipts.push(Receipt {
                        due_ms: now.timestamp_millis() + lead * self.day_ms,
                        proposal: proposal.clone(),
                        item: it.clone(),
                        location: loc.to_string(),
                        qty,
                    });
                }
                self.tally.purchase_orders += 1;
                told.push(Happened::OrderPlaced { proposal, item: it, qty: total });
            }
            "job_reassignment" | "job_release" => {
                let job = action["job_id"].as_str().unwrap_or_default().to_string();
                if let Some((machine, team)) = self.jobs.get(&job).cloned() {
                    let machine = action["to_machine"].as_str().map_or(machine, str::to_string);
                    self.jobs.insert(job.clone(), (machine.clone(), team.clone()));
                    out.push(self.event(
                        now,
                        "operations.job_status_changed",
                        json!({"job_id": job, "status": "released", "machine": machine, "team": team}),
                        Some(&proposal),
                    ));
                    self.tally.jobs_moved += 1;
                    told.push(Happened::JobMoved { proposal, job, machine });
                }
            }
            _ => {}
        }
        (out, told)
    }

    /// Goods whose lead time has passed arrive: on hand rises, inbound falls.
    pub fn receive_due(&mut self, now: DateTime<Utc>) -> (Vec<Value>, Vec<Happened>) {
        let now_ms = now.timestamp_millis();
        let (due, later): (Vec<Receipt>, Vec<Receipt>) =
            std::mem::take(&mut self.receipts).into_iter().partition(|r| r.due_ms <= now_ms);
        self.receipts = later;
        let mut out = Vec::new();
        let mut told = Vec::new();
        for r in due {
            let Some(loc) = LOCATIONS.iter().find(|l| **l == r.location).copied() else { continue };
            let b = self.books.get_mut(&(r.item.clone(), loc)).expect("known item");
            b.on_hand += r.qty;
            b.inbound -= r.qty;
            let (on_hand, inbound) = (b.on_hand, b.inbound);
            out.push(self.event(
                now,
                "inventory.stock_counted",
                json!({"item": r.item, "location": loc, "on_hand": on_hand}),
                Some(&r.proposal),
            ));
            out.push(self.event(
                now,
                "procurement.inbound_changed",
                json!({"item": r.item, "location": loc, "inbound": inbound}),
                Some(&r.proposal),
            ));
            self.tally.receipts += 1;
            told.push(Happened::GoodsReceived {
                proposal: r.proposal,
                item: r.item,
                location: r.location,
                qty: r.qty,
                on_hand,
            });
        }
        (out, told)
    }
}

/// The module an event belongs to (`inventory` for `inventory.stock_counted`).
pub fn module_of(event: &Value) -> &str {
    event["type"].as_str().and_then(|t| t.split_once('.')).map_or("", |(m, _)| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_makes_the_same_business() {
        let now: DateTime<Utc> = "2026-03-02T08:00:00Z".parse().unwrap();
        let run = || {
            let mut c = Company::new(3, 20, "t");
            let mut all = c.setup(now);
            for _ in 0..500 {
                all.extend(c.tick(now));
            }
            (all, c.tally())
        };
        let (a, ta) = run();
        assert_eq!(a, run().0);
        assert!(ta.went_short > 0, "demand pushes some stock below its reorder point: {ta:?}");
    }

    #[test]
    fn an_approved_order_raises_inbound_then_on_hand_citing_the_proposal() {
        let now: DateTime<Utc> = "2026-03-02T08:00:00Z".parse().unwrap();
        let mut c = Company::new(1, 2, "t");
        c.setup(now);
        let action = json!({"item": "part-0001", "supplier": "acme-parts", "qty": 30, "lines": [{"location": "north", "qty": 30}]});
        let (placed, _) = c.carry_out("p1", "replenishment_order", &action, now);
        assert_eq!(placed.len(), 1);
        assert_eq!(placed[0]["causation"], "p1");
        assert_eq!(placed[0]["data"]["inbound"], 30);
        assert!(c.receive_due(now).0.is_empty(), "not before the lead time");
        let (arrived, told) = c.receive_due(now + chrono::Duration::days(30));
        assert_eq!(arrived.len(), 2);
        assert_eq!(arrived[1]["data"]["inbound"], 0);
        assert!(arrived.iter().all(|e| e["causation"] == "p1"));
        assert!(matches!(&told[0], Happened::GoodsReceived { qty: 30, .. }));
    }
}
