//! The one seeded workload every contender gets: the example company's inventory counts,
//! reservations, inbound changes, order lines (placed, shipped, cancelled) and job moves over a
//! fixed set of item-locations.
//!
//! The first `item_locations` events count every item-location once (so every stock row
//! exists); the rest are drawn with fixed weights. The same seed gives the same events.

use livestate_sim::Rng;
use serde_json::{json, Value};

/// Warehouse locations; item-location `i` is item `i / 3` at `LOCATIONS[i % 3]`.
pub const LOCATIONS: [&str; 3] = ["north", "south", "east"];

const MACHINES: [&str; 6] = ["press-1", "press-2", "lathe-1", "lathe-2", "mill-3", "paint-1"];
const TEAMS: [&str; 3] = ["assembly", "machining", "paint"];
const STATUSES: [&str; 3] = ["released", "blocked", "done"];

/// The item and location of item-location `i`.
pub fn key(i: usize) -> (String, &'static str) {
    (format!("part-{:06}", i / 3 + 1), LOCATIONS[i % 3])
}

/// Whether an event of this type writes the stock table.
pub fn touches_stock(event_type: &str) -> bool {
    matches!(
        event_type,
        "inventory.stock_counted" | "commerce.reservation_changed" | "procurement.inbound_changed"
    )
}

/// An endless, seeded stream of events.
#[derive(Debug, Clone)]
pub struct Generator {
    rng: Rng,
    item_locations: usize,
    jobs: usize,
    prefix: String,
    seq: u64,
    next_order: u64,
    open: Vec<(String, usize, i64)>,
    /// At most this many orders open at once (`None`: no bound).
    book: Option<usize>,
    start_ms: i64,
}

impl Generator {
    /// `prefix` starts every event id, so two streams of one seed never share an id.
    pub fn new(seed: u64, item_locations: usize, prefix: &str) -> Generator {
        Generator {
            rng: Rng(seed),
            item_locations: item_locations.max(1),
            jobs: (item_locations / 20).max(10),
            prefix: prefix.to_string(),
            seq: 0,
            next_order: 0,
            open: Vec::new(),
            book: None,
            start_ms: 1_772_438_400_000, // 2026-03-02T08:00:00Z
        }
    }

    /// At most `n` orders open at once: once the book holds `n`, a draw that would place an
    /// order closes one instead, so placements and closings balance and the book stays at about
    /// `n` orders, as a business's does. Default: no bound; the book then grows by about 4 % of
    /// the events (15 % place an order, 11 % close one), the workload every contender of the
    /// comparison gets. Until the book is full the stream is the unbounded one.
    pub fn with_order_book(mut self, n: usize) -> Generator {
        self.book = Some(n);
        self
    }

    /// Orders open now.
    pub fn open_orders(&self) -> usize {
        self.open.len()
    }

    /// An order placed at a random item-location, whatever the draw (to fill the book before a
    /// run).
    pub fn place_order(&mut self) -> Value {
        let (item, loc) = key(self.rng.below(self.item_locations as u64) as usize);
        self.order_placed(item, loc)
    }

    fn envelope(&mut self, ty: &str, data: Value) -> Value {
        let at = chrono::DateTime::from_timestamp_millis(self.start_ms + self.seq as i64)
            .expect("timestamps of the workload are in range");
        self.seq += 1;
        json!({
            "id": format!("{}{}", self.prefix, self.seq),
            "type": ty,
            "occurred_at": at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            "data": data,
        })
    }

    /// The next event.
    pub fn next_event(&mut self) -> Value {
        let il = self.item_locations;
        if (self.seq as usize) < il {
            let (item, loc) = key(self.seq as usize);
            let on_hand = 20 + self.rng.below(200) as i64;
            return self.envelope(
                "inventory.stock_counted",
                json!({"item": item, "location": loc, "on_hand": on_hand}),
            );
        }
        let i = self.rng.below(il as u64) as usize;
        let (item, loc) = key(i);
        match self.rng.below(100) {
            0..35 => {
                let reserved = self.rng.below(150) as i64;
                self.envelope(
                    "commerce.reservation_changed",
                    json!({"item": item, "location": loc, "reserved": reserved}),
                )
            }
            35..55 => {
                let on_hand = self.rng.below(400) as i64;
                self.envelope(
                    "inventory.stock_counted",
                    json!({"item": item, "location": loc, "on_hand": on_hand}),
                )
            }
            55..70 => {
                let inbound = 10 * self.rng.below(30) as i64;
                self.envelope(
                    "procurement.inbound_changed",
                    json!({"item": item, "location": loc, "inbound": inbound}),
                )
            }
            70..85 if self.book.is_some_and(|n| self.open.len() >= n) && !self.open.is_empty() => {
                self.order_closed()
            }
            70..85 => self.order_placed(item, loc),
            85..96 if !self.open.is_empty() => self.order_closed(),
            85..96 => self.order_placed(item, loc),
            _ => {
                let job = format!("job-{:06}", self.rng.below(self.jobs as u64) + 1);
                let status = STATUSES[self.rng.below(3) as usize];
                let machine = MACHINES[self.rng.below(MACHINES.len() as u64) as usize];
                let team = TEAMS[self.rng.below(TEAMS.len() as u64) as usize];
                let mut data = json!({"job_id": job, "status": status, "machine": machine, "team": team});
                if status == "blocked" {
                    data["block_reason"] = json!("waiting for material");
                }
                self.envelope("operations.job_status_changed", data)
            }
        }
    }

    /// A random open order shipped (three in four) or cancelled.
    fn order_closed(&mut self) -> Value {
        let (order_id, at, qty) = self.open.swap_remove(self.rng.below(self.open.len() as u64) as usize);
        let (item, loc) = key(at);
        let ty = if self.rng.below(4) == 0 { "commerce.order_cancelled" } else { "commerce.order_shipped" };
        self.envelope(ty, json!({"order_id": order_id, "line": 1, "item": item, "location": loc, "qty": qty}))
    }

    fn order_placed(&mut self, item: String, loc: &str) -> Value {
        self.next_order += 1;
        let order_id = format!("{}so-{}", self.prefix, self.next_order);
        let qty = 1 + self.rng.below(12) as i64;
        let cents = 500 + self.rng.below(20_000);
        let at = LOCATIONS.iter().position(|l| *l == loc).expect("a known location");
        let index = (item[5..].parse::<usize>().expect("item names end in a number") - 1) * 3 + at;
        self.open.push((order_id.clone(), index, qty));
        let customer = format!("cust-{:04}", self.rng.below(5000));
        self.envelope(
            "commerce.order_placed",
            json!({
                "order_id": order_id, "line": 1, "customer": customer, "item": item, "location": loc,
                "qty": qty, "unit_price": format!("{}.{:02}", cents / 100, cents % 100),
            }),
        )
    }
}

/// The workload a command runs on, as the command line gives it (the A/B and the parts).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct WorkloadArgs {
    /// Events in the workload
    #[arg(long, default_value_t = 1_000_000)]
    pub events: u64,
    /// Distinct item-locations (stock rows)
    #[arg(long, default_value_t = 100_000)]
    pub item_locations: usize,
    /// Workload seed
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_gives_the_same_stream() {
        let mut g = Generator::new(1, 30, "e");
        let a: Vec<Value> = (0..500).map(|_| g.next_event()).collect();
        let mut g = Generator::new(1, 30, "e");
        let b: Vec<Value> = (0..500).map(|_| g.next_event()).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn every_item_location_is_counted_first_and_every_module_follows() {
        let mut g = Generator::new(1, 30, "e");
        let a: Vec<Value> = (0..500).map(|_| g.next_event()).collect();
        for (i, e) in a.iter().take(30).enumerate() {
            assert_eq!(e["type"], "inventory.stock_counted");
            assert_eq!(e["data"]["item"], key(i).0);
        }
        let types: std::collections::BTreeSet<&str> = a.iter().map(|e| e["type"].as_str().unwrap()).collect();
        for t in ["commerce.order_placed", "commerce.order_shipped", "operations.job_status_changed"] {
            assert!(types.contains(t), "{t} missing from {types:?}");
        }
    }

    #[test]
    fn a_bounded_book_stays_at_its_size_and_is_the_unbounded_stream_until_full() {
        let (mut free, mut bounded) =
            (Generator::new(5, 300, "e"), Generator::new(5, 300, "e").with_order_book(200));
        let mut same = 0;
        loop {
            let (a, b) = (free.next_event(), bounded.next_event());
            if bounded.open_orders() >= 200 {
                break;
            }
            assert_eq!(a, b, "event {same} differs before the book is full");
            same += 1;
        }
        assert!(same > 1000, "the book filled after {same} events");
        let mut placed: i32 = 0;
        let mut closed: i32 = 0;
        for _ in 0..50_000 {
            match bounded.next_event()["type"].as_str().unwrap() {
                "commerce.order_placed" => placed += 1,
                "commerce.order_shipped" | "commerce.order_cancelled" => closed += 1,
                _ => {}
            }
            assert!(bounded.open_orders() <= 200, "the book outgrew its bound");
        }
        assert!(bounded.open_orders() >= 190, "the book stays full: {}", bounded.open_orders());
        assert!((placed - closed).abs() <= 10 && placed > 5000, "placed {placed}, closed {closed}");
        let before = bounded.open_orders();
        let e = bounded.place_order();
        assert_eq!(e["type"], "commerce.order_placed");
        assert_eq!(bounded.open_orders(), before + 1);
    }

    #[test]
    fn shipped_orders_were_placed_before_and_name_their_item() {
        let mut g = Generator::new(3, 60, "e");
        let events: Vec<Value> = (0..3000).map(|_| g.next_event()).collect();
        let mut placed = std::collections::HashMap::new();
        for e in &events {
            let d = &e["data"];
            match e["type"].as_str().unwrap() {
                "commerce.order_placed" => {
                    placed.insert(d["order_id"].as_str().unwrap().to_string(), d["item"].clone());
                }
                "commerce.order_shipped" | "commerce.order_cancelled" => {
                    let item = placed.remove(d["order_id"].as_str().unwrap()).expect("placed earlier, once");
                    assert_eq!(item, d["item"]);
                }
                _ => {}
            }
        }
    }
}
