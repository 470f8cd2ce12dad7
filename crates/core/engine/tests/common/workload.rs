//! The random workload the engine's property tests run: events of every module the example
//! company spec derives from, over a few items, orders and jobs so that keys repeat, and
//! compactions between them.

use livestate_lsm::CompactMode;
use proptest::prelude::*;
use serde_json::json;

use super::line;

/// The example spec's tables, one of each merge engine and more.
pub const TABLES: [&str; 5] = ["stock", "open_orders", "reservations_total", "item_first_seen", "work_queue"];

/// One step of a workload: an event, or a compaction of every table.
#[derive(Debug, Clone)]
pub enum Op {
    /// inventory counts `item` at `on_hand`.
    Count(u8, i64),
    /// commerce reserves `reserved` of `item`.
    Reserve(u8, i64),
    /// procurement expects `inbound` of `item`.
    Inbound(u8, i64),
    /// commerce places line 1 of `order` for `qty` of `item`.
    Place(u8, u8, i64),
    /// commerce ships `qty` of line 1 of `order` (`item`).
    Ship(u8, u8, i64),
    /// operations moves `job` to status 0 released, 1 blocked, 2 done.
    Job(u8, u8),
    /// Every table compacted in this mode.
    Compact(CompactMode),
}

/// Events over `items` items (`part-0`..), six orders and three jobs.
pub fn event_op(items: u8) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..items, 0i64..50).prop_map(|(i, n)| Op::Count(i, n)),
        3 => (0..items, 0i64..9).prop_map(|(i, n)| Op::Reserve(i, n)),
        2 => (0..items, 0i64..30).prop_map(|(i, n)| Op::Inbound(i, n)),
        3 => (0u8..6, 0..items, 1i64..9).prop_map(|(o, i, q)| Op::Place(o, i, q)),
        3 => (0u8..6, 0..items, 1i64..9).prop_map(|(o, i, q)| Op::Ship(o, i, q)),
        2 => (0u8..3, 0u8..3).prop_map(|(j, s)| Op::Job(j, s)),
    ]
}

/// As [`event_op`], with a full or partial compaction one step in eighteen.
pub fn event_or_compaction(items: u8) -> impl Strategy<Value = Op> {
    let compact = prop_oneof![Just(CompactMode::Full), (1usize..3).prop_map(CompactMode::NewestRuns)];
    prop_oneof![17 => event_op(items), 1 => compact.prop_map(Op::Compact)]
}

/// The event line of `op` with id `n`; `None` for a compaction.
pub fn event(n: u32, op: &Op) -> Option<String> {
    let item = |i: &u8| format!("part-{i}");
    let stock = |field: &str, i: &u8, v: &i64| json!({"item": item(i), "location": "north", field: v});
    Some(match op {
        Op::Count(i, v) => line(n, "inventory.stock_counted", stock("on_hand", i, v)),
        Op::Reserve(i, v) => line(n, "commerce.reservation_changed", stock("reserved", i, v)),
        Op::Inbound(i, v) => line(n, "procurement.inbound_changed", stock("inbound", i, v)),
        Op::Place(o, i, q) => line(
            n,
            "commerce.order_placed",
            json!({"order_id": format!("o{o}"), "line": 1, "customer": "c", "item": item(i), "location": "north", "qty": q, "unit_price": "2.50"}),
        ),
        Op::Ship(o, i, q) => line(
            n,
            "commerce.order_shipped",
            json!({"order_id": format!("o{o}"), "line": 1, "item": item(i), "location": "north", "qty": q}),
        ),
        Op::Job(j, s) => {
            let status = ["released", "blocked", "done"][*s as usize];
            line(n, "operations.job_status_changed", json!({"job_id": format!("j{j}"), "status": status}))
        }
        Op::Compact(_) => return None,
    })
}

/// An inventory count of `part-{item}` at `on_hand`, as event `n`.
pub fn count(n: u32, item: u8, on_hand: i64) -> String {
    event(n, &Op::Count(item, on_hand)).expect("a count is an event")
}
