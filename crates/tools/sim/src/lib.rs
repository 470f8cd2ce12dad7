//! Simulated modules of the example company: a seeded, deterministic stream of events as the
//! inventory, commerce, procurement and operations modules would emit them.
//!
//! ```
//! let a = livestate_sim::company_events(&livestate_sim::SimConfig::default());
//! let b = livestate_sim::company_events(&livestate_sim::SimConfig::default());
//! assert_eq!(a, b);
//! ```

pub mod live;

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};

pub const LOCATIONS: [&str; 3] = ["north", "south", "east"];
pub const SUPPLIERS: [&str; 3] = ["acme-parts", "borealis-supply", "cobalt-industrial"];

/// What to generate.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    pub items: usize,
    pub orders: usize,
    pub jobs: usize,
    /// Timestamp of the first event; later events follow one second apart.
    pub start: DateTime<Utc>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 7,
            items: 12,
            orders: 40,
            jobs: 10,
            start: "2026-03-02T08:00:00Z".parse().expect("valid timestamp"),
        }
    }
}

/// SplitMix64: a tiny, well-known generator; enough for reproducible test data (the
/// benchmark's workload uses it too). The `u64` is the seed.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

struct Stream {
    clock: DateTime<Utc>,
    seq: u64,
    out: Vec<Value>,
}

impl Stream {
    fn emit(&mut self, ty: &str, data: Value) {
        self.seq += 1;
        self.out.push(json!({
            "id": format!("sim-{:06}", self.seq),
            "type": ty,
            "occurred_at": self.clock.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            "data": data,
        }));
        self.clock += Duration::seconds(1);
    }
}

/// Item names `part-0001`, `part-0002`, ...
pub fn item_name(i: usize) -> String {
    format!("part-{:04}", i + 1)
}

/// The company's events in the order the modules emit them, as JSON envelopes.
pub fn company_events(cfg: &SimConfig) -> Vec<Value> {
    let mut rng = Rng(cfg.seed);
    let mut s = Stream { clock: cfg.start, seq: 0, out: Vec::new() };
    for (i, sup) in SUPPLIERS.iter().enumerate() {
        let level = ["low", "medium", "high"][(i + rng.below(3) as usize) % 3];
        s.emit(
            "procurement.supplier_risk_assessed",
            json!({"supplier": sup, "level": level, "reason": format!("weekly review: {level}")}),
        );
    }
    for i in 0..cfg.items {
        for loc in LOCATIONS {
            let rp = 20 + rng.below(30) as i64;
            s.emit(
                "procurement.planning_set",
                json!({"item": item_name(i), "location": loc, "reorder_point": rp, "target": rp * 3}),
            );
            s.emit(
                "inventory.stock_counted",
                json!({"item": item_name(i), "location": loc, "on_hand": 10 + rng.below(120) as i64}),
            );
            if rng.below(3) == 0 {
                s.emit(
                    "procurement.inbound_changed",
                    json!({"item": item_name(i), "location": loc, "inbound": 10 * (1 + rng.below(6) as i64)}),
                );
            }
        }
    }
    let mut reserved: BTreeMap<(String, &str), i64> = BTreeMap::new();
    let mut open: Vec<(String, i64, String, &str, i64)> = Vec::new();
    for o in 0..cfg.orders {
        let item = item_name(rng.below(cfg.items as u64) as usize);
        let loc = LOCATIONS[rng.below(3) as usize];
        let qty = 1 + rng.below(12) as i64;
        let order_id = format!("so-{:05}", o + 1);
        let cents = 500 + rng.below(20_000);
        s.emit("commerce.order_placed", json!({
            "order_id": order_id, "line": 1, "customer": format!("cust-{:03}", rng.below(50)),
            "item": item, "location": loc, "qty": qty, "unit_price": format!("{}.{:02}", cents / 100, cents % 100),
        }));
        let r = reserved.entry((item.clone(), loc)).or_default();
        *r += qty;
        s.emit("commerce.reservation_changed", json!({"item": item, "location": loc, "reserved": *r}));
        open.push((order_id, 1, item, loc, qty));
        // Now and then an older order ships or is cancelled.
        if open.len() > 3 && rng.below(3) == 0 {
            let (order_id, line, item, loc, qty) = open.remove(rng.below(open.len() as u64) as usize);
            let ty = if rng.below(4) == 0 { "commerce.order_cancelled" } else { "commerce.order_shipped" };
            s.emit(
                ty,
                json!({"order_id": order_id, "line": line, "item": item, "location": loc, "qty": qty}),
            );
            let r = reserved.entry((item.clone(), loc)).or_default();
            *r -= qty;
            s.emit("commerce.reservation_changed", json!({"item": item, "location": loc, "reserved": *r}));
        }
    }
    let machines = ["press-1", "press-2", "lathe-1", "mill-3"];
    let teams = ["assembly", "machining", "paint"];
    for j in 0..cfg.jobs {
        let job = format!("job-{:04}", j + 1);
        let machine = machines[rng.below(machines.len() as u64) as usize];
        let team = teams[rng.below(teams.len() as u64) as usize];
        s.emit(
            "operations.job_status_changed",
            json!({"job_id": job, "status": "released", "machine": machine, "team": team}),
        );
        match rng.below(3) {
            0 => s.emit("operations.job_status_changed", json!({"job_id": job, "status": "blocked", "block_reason": "waiting for material", "machine": machine, "team": team})),
            1 => s.emit("operations.job_status_changed", json!({"job_id": job, "status": "done", "machine": machine, "team": team})),
            _ => {}
        }
    }
    s.out
}

/// The events as JSON lines.
pub fn to_json_lines(events: &[Value]) -> String {
    let mut out = String::new();
    for e in events {
        out.push_str(&e.to_string());
        out.push('\n');
    }
    out
}
