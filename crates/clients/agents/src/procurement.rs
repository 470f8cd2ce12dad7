//! The procurement agent.
//!
//! Rule `order-up-to-target` v2: for the item and the warehouse whose shortage fired, when
//! available stock (`on_hand - reserved + inbound`) is below the reorder point, order
//! `target - available`, rounded up to the chosen supplier's pack size. Each proposal is one
//! `stock_replenishment` decision (declared in the spec), citing a receipt for every input the
//! kind declares: the stock row, the supplier's offer and its risk row (or the key read when the
//! supplier has no risk row). The supplier is the lowest-risk one carrying the
//! item (then the cheapest, then by name). Risk: the supplier's level; raised to medium for
//! an order over 5,000, and to high when a warehouse is already out (available ≤ 0) and the
//! lead time is over 3 days.

use std::collections::BTreeMap;
use std::str::FromStr;

use livestate_client::{
    Client, ClientError, ConsistentAnswer, NewProposal, ProposalStatus, Risk, RiskLevel, Rule, TableRead,
};
use rust_decimal::Decimal;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::{int, object, rows_of, source, text, Narration};

pub const RULE: &str = "order-up-to-target";
pub const RULE_VERSION: &str = "2";
/// The rule in words, as each proposal states it.
const RULE_TEXT: &str = "Where on_hand - reserved + inbound is below the reorder point, order target minus that, rounded up to the pack size of the lowest-risk supplier carrying the item (then cheapest).";
/// The decision kind this agent proposes (`[decisions.stock_replenishment]` in the spec).
pub const KIND: &str = "stock_replenishment";
pub const TRIGGER: &str = "stock_below_reorder_point";
/// Order value above which the risk is at least medium.
pub const VALUE_LIMIT: i64 = 5_000;
/// Lead time (days) above which an existing stock-out makes the risk high.
pub const LEAD_TIME_LIMIT: i64 = 3;

fn risk_rank(level: &str) -> u8 {
    match level {
        "low" => 0,
        "medium" => 1,
        "high" => 2,
        _ => 3,
    }
}

/// A proposal's risk from its supplier's rating: a supplier rated other than low or medium
/// (high, or a level the rule does not know, or not rated) makes it high.
fn proposal_risk(supplier_level: &str) -> RiskLevel {
    match risk_rank(supplier_level) {
        0 => RiskLevel::Low,
        1 => RiskLevel::Medium,
        _ => RiskLevel::High,
    }
}

/// What the rule decides for one item from the rows read.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub item: String,
    pub supplier: String,
    pub qty: i64,
    /// (location, qty) per warehouse short of stock.
    pub lines: Vec<(String, i64)>,
    pub pack_size: i64,
    pub unit_price: Decimal,
    pub value: Decimal,
    pub lead_time_days: i64,
    pub risk_level: RiskLevel,
    pub reasons: Vec<String>,
    /// The stock rows short of stock, the chosen offer and its supplier's risk row.
    pub short_rows: Vec<Value>,
    pub offer: Value,
    pub supplier_risk: Value,
}

/// Applies the rule to the item's `stock` rows, the `offers` (supplier_items rows) and the
/// suppliers' `risks`. `None` when no warehouse is short or nobody carries the item.
pub fn plan(item: &str, stock: &[Value], offers: &[Value], risks: &[Value]) -> Option<Plan> {
    let mut short = Vec::new();
    for row in stock {
        let available = int(row, "on_hand") - int(row, "reserved") + int(row, "inbound");
        let (rp, target) = (int(row, "reorder_point"), int(row, "target"));
        if row.get("reorder_point").is_some_and(|v| !v.is_null()) && available < rp && target > available {
            short.push((row.clone(), text(row, "location").to_string(), target - available, available));
        }
    }
    if short.is_empty() {
        return None;
    }
    let level_of = |supplier: &str| {
        risks
            .iter()
            .find(|r| text(r, "supplier") == supplier)
            .map_or("unknown", |r| text(r, "level"))
            .to_string()
    };
    let price = |o: &Value| Decimal::from_str(text(o, "unit_price")).unwrap_or(Decimal::MAX);
    let offer = offers
        .iter()
        .filter(|o| text(o, "item") == item && int(o, "pack_size") > 0)
        .min_by(|a, b| {
            (risk_rank(&level_of(text(a, "supplier"))), price(a), text(a, "supplier")).cmp(&(
                risk_rank(&level_of(text(b, "supplier"))),
                price(b),
                text(b, "supplier"),
            ))
        })?
        .clone();
    let supplier = text(&offer, "supplier").to_string();
    let pack = int(&offer, "pack_size");
    let needed: i64 = short.iter().map(|s| s.2).sum();
    let qty = (needed + pack - 1) / pack * pack;
    let mut lines: Vec<(String, i64)> = short.iter().map(|s| (s.1.clone(), s.2)).collect();
    let biggest =
        (0..lines.len()).max_by_key(|&i| (lines[i].1, std::cmp::Reverse(i))).expect("one line at least");
    lines[biggest].1 += qty - needed;
    let unit_price = price(&offer);
    let value = unit_price * Decimal::from(qty);
    let lead = int(&offer, "lead_time_days");
    let level = level_of(&supplier);
    let mut risk = proposal_risk(&level);
    let mut reasons = vec![format!("supplier {supplier} is rated {level} risk")];
    if value > Decimal::from(VALUE_LIMIT) {
        reasons.push(format!("order value {value} is over {VALUE_LIMIT}"));
        if risk == RiskLevel::Low {
            risk = RiskLevel::Medium;
        }
    }
    if short.iter().any(|s| s.3 <= 0) && lead > LEAD_TIME_LIMIT {
        reasons.push(format!("a warehouse is already out of stock and the lead time is {lead} days"));
        risk = RiskLevel::High;
    }
    let supplier_risk =
        risks.iter().find(|r| text(r, "supplier") == supplier).cloned().unwrap_or(Value::Null);
    Some(Plan {
        item: item.to_string(),
        supplier,
        qty,
        lines,
        pack_size: pack,
        unit_price,
        value,
        lead_time_days: lead,
        risk_level: risk,
        reasons,
        short_rows: short.into_iter().map(|s| s.0).collect(),
        offer,
        supplier_risk,
    })
}

/// The procurement agent: keeps at most one pending proposal per item and warehouse.
pub struct ProcurementAgent {
    client: Client,
    /// (item, location) → its pending proposal.
    pending: BTreeMap<(String, String), String>,
    narrate: Option<mpsc::UnboundedSender<Narration>>,
}

impl ProcurementAgent {
    /// An agent acting through `client` (an `agent:` token).
    pub fn new(client: Client, narrate: Option<mpsc::UnboundedSender<Narration>>) -> ProcurementAgent {
        ProcurementAgent { client, pending: BTreeMap::new(), narrate }
    }

    fn say(&self, n: Narration) {
        if let Some(tx) = &self.narrate {
            let _ = tx.send(n);
        }
    }

    /// Learns which of its proposals are still pending (after a restart, say).
    ///
    /// # Errors
    /// API errors.
    pub async fn resume(&mut self) -> Result<(), ClientError> {
        let me = self.client.whoami().await?;
        let agent = match me.role {
            livestate_client::Role::Agent { agent } => agent,
            _ => String::new(),
        };
        let list = self.client.proposals(Some(ProposalStatus::Pending)).await?;
        for p in list.proposals {
            if p.agent == agent.as_str() && p.kind == KIND {
                let full = self.client.proposal(&p.id).await?;
                let action = &full.document.action;
                let text = |k: &str| action.get(k).and_then(Value::as_str);
                if let (Some(item), Some(location)) = (text("item"), text("location")) {
                    self.pending.insert((item.to_string(), location.to_string()), p.id.clone());
                }
            }
        }
        Ok(())
    }

    /// Handles every firing waiting for this agent; returns the proposals made.
    ///
    /// # Errors
    /// API errors (the firings already taken stay handled).
    pub async fn poll(&mut self) -> Result<Vec<String>, ClientError> {
        let firings = self.client.firings(TRIGGER, None, true).await?;
        let mut made = Vec::new();
        for f in firings.firings {
            let key = Value::Object(f.key);
            let (item, location) = (text(&key, "item").to_string(), text(&key, "location").to_string());
            let after = &Value::Object(f.after);
            self.say(Narration::Shortage {
                item: item.clone(),
                location: location.clone(),
                available: int(after, "on_hand") - int(after, "reserved") + int(after, "inbound"),
                reorder_point: int(after, "reorder_point"),
            });
            match self.handle(&item, &location).await {
                Ok(Some(id)) => made.push(id),
                Ok(None) => {}
                Err(e) => self
                    .say(Narration::Failed { what: format!("proposing for {item}"), error: e.to_string() }),
            }
        }
        Ok(made)
    }

    /// Reads, applies the rule and proposes for `item` at `location`, unless a proposal for
    /// them is pending.
    ///
    /// # Errors
    /// API errors.
    pub async fn handle(&mut self, item: &str, location: &str) -> Result<Option<String>, ClientError> {
        let key = (item.to_string(), location.to_string());
        if let Some(id) = self.pending.get(&key).cloned() {
            let status = self.client.proposal(&id).await?.proposal.status;
            if status == ProposalStatus::Pending {
                self.say(Narration::Skipped {
                    item: item.into(),
                    why: format!("proposal {id} for {location} is still pending"),
                });
                return Ok(None);
            }
            self.pending.remove(&key);
        }
        let (qi, ql) = (item.replace('\'', "''"), location.replace('\'', "''"));
        // One consistent read: every input of the decision at one instant.
        let read = self
            .client
            .consistent_read(&[
                TableRead::table("stock").key("item", item).key("location", location),
                TableRead::table("open_orders").filter(format!("item == '{qi}' and location == '{ql}'")),
                TableRead::table("supplier_items").key("item", item),
                TableRead::table("supplier_risk"),
            ])
            .await?;
        let rows = |t: &str| read.result(t).map(rows_of).unwrap_or_default();
        let (stock, orders, offers, risks) =
            (rows("stock"), rows("open_orders"), rows("supplier_items"), rows("supplier_risk"));
        let Some(plan) = plan(item, &stock, &offers, &risks) else {
            self.say(Narration::Skipped {
                item: item.into(),
                why: format!("{location} is no longer short, or no supplier carries it"),
            });
            return Ok(None);
        };
        let risk_read = read.result("supplier_risk").expect("read");
        if risk_read.receipt.snapshot_id.is_none() {
            self.say(Narration::Skipped {
                item: item.into(),
                why: "no supplier has been risk-assessed yet: the decision's supplier_risk input cannot be cited".into(),
            });
            return Ok(None);
        }
        let proposal = match proposal(&read, &plan, &orders, location) {
            Ok(p) => p,
            Err(why) => {
                self.say(Narration::Skipped { item: item.into(), why });
                return Ok(None);
            }
        };
        let id = self.client.propose(&proposal).await?.id;
        self.pending.insert(key, id.clone());
        self.say(Narration::Proposed { id: id.clone(), summary: proposal.summary, risk: plan.risk_level });
        Ok(Some(id))
    }
}

/// The `stock_replenishment` proposal of `plan` for `location`, from the consistent read `read`
/// (whose `open_orders` result is `orders`): it cites the stock rows short of stock with the key
/// read, the open orders (if any), the chosen offer, and the supplier's risk row or, when it has
/// none, the key read.
///
/// # Errors
/// Why nothing can be proposed: a table to cite has no snapshot yet.
fn proposal(
    read: &ConsistentAnswer,
    plan: &Plan,
    orders: &[Value],
    location: &str,
) -> Result<NewProposal, String> {
    let item = plan.item.as_str();
    let cite = |table: &str, rows: &[Value], key: Option<Map<String, Value>>| {
        let result = read.result(table).expect("the read names every table the proposal cites");
        source(result, rows, key).ok_or_else(|| format!("{table} has no snapshot yet: it cannot be cited"))
    };
    let mut sources = vec![cite(
        "stock",
        &plan.short_rows,
        Some(object([("item", item.into()), ("location", location.into())])),
    )?];
    if !orders.is_empty() {
        sources.push(cite("open_orders", orders, None)?);
    }
    sources.push(cite("supplier_items", std::slice::from_ref(&plan.offer), None)?);
    // The supplier's risk row, or the key read when it has none (the input is then null).
    sources.push(if plan.supplier_risk.is_null() {
        cite("supplier_risk", &[], Some(object([("supplier", plan.supplier.as_str().into())])))?
    } else {
        cite("supplier_risk", std::slice::from_ref(&plan.supplier_risk), None)?
    });
    let lines: Vec<Value> = plan
        .lines
        .iter()
        .map(|(l, q)| object([("location", l.as_str().into()), ("qty", (*q).into())]).into())
        .collect();
    Ok(NewProposal {
        kind: KIND.into(),
        module: "procurement".into(),
        summary: format!("Order {} x {} from {} for {}", plan.qty, item, plan.supplier, location),
        action: object([
            ("item", item.into()),
            ("location", location.into()),
            ("supplier", plan.supplier.as_str().into()),
            ("qty", plan.qty.into()),
            ("lines", lines.into()),
            ("unit_price", plan.unit_price.to_string().into()),
            ("value", plan.value.to_string().into()),
            ("lead_time_days", plan.lead_time_days.into()),
        ]),
        sources,
        rule: Rule {
            name: RULE.into(),
            version: RULE_VERSION.into(),
            parameters: object([
                ("value_limit", VALUE_LIMIT.into()),
                ("lead_time_limit_days", LEAD_TIME_LIMIT.into()),
                ("pack_size", plan.pack_size.into()),
            ]),
            text: RULE_TEXT.into(),
        },
        risk: Risk { level: plan.risk_level, reasons: plan.reasons.clone() },
        idempotency_key: Some(format!("{item}@{location}@{}", read.offset)),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stock(loc: &str, on_hand: i64, reserved: i64, inbound: i64) -> Value {
        json!({"item": "bolt", "location": loc, "on_hand": on_hand, "reserved": reserved, "inbound": inbound, "reorder_point": 40, "target": 100})
    }

    #[test]
    fn orders_up_to_target_rounded_to_the_lowest_risk_suppliers_pack() {
        let s = [stock("north", 50, 15, 0), stock("south", 90, 0, 0), stock("east", 10, 5, 20)];
        let offers = [
            json!({"item": "bolt", "supplier": "acme", "pack_size": 50, "unit_price": "1.50", "lead_time_days": 2}),
            json!({"item": "bolt", "supplier": "cheap", "pack_size": 10, "unit_price": "0.50", "lead_time_days": 2}),
        ];
        let risks =
            [json!({"supplier": "acme", "level": "low"}), json!({"supplier": "cheap", "level": "high"})];
        let p = plan("bolt", &s, &offers, &risks).unwrap();
        // north: 100 - 35 = 65; east: 100 - 25 = 75; 140 rounded up to 150; +10 to east.
        assert_eq!(p.supplier, "acme");
        assert_eq!(p.qty, 150);
        assert_eq!(p.lines, vec![("north".to_string(), 65), ("east".to_string(), 85)]);
        assert_eq!(p.value, Decimal::from_str("225.00").unwrap());
        assert_eq!(p.risk_level, RiskLevel::Low);
        assert_eq!(p.short_rows.len(), 2);
    }

    fn acme_slow_and_dear() -> [Value; 1] {
        [
            json!({"item": "bolt", "supplier": "acme", "pack_size": 1, "unit_price": "100", "lead_time_days": 9}),
        ]
    }

    #[test]
    fn a_stock_out_with_a_long_lead_time_is_high_risk() {
        let risks = [json!({"supplier": "acme", "level": "low"})];
        let p = plan("bolt", &[stock("north", 3, 10, 0)], &acme_slow_and_dear(), &risks).unwrap();
        assert_eq!(p.qty, 107);
        assert_eq!(p.risk_level, RiskLevel::High);
        assert_eq!(p.reasons.len(), 3, "{:?}", p.reasons);
    }

    #[test]
    fn an_order_over_the_value_limit_from_a_low_risk_supplier_is_medium_risk() {
        let offers = [
            json!({"item": "bolt", "supplier": "acme", "pack_size": 1, "unit_price": "100", "lead_time_days": 2}),
        ];
        let risks = [json!({"supplier": "acme", "level": "low"})];
        let p = plan("bolt", &[stock("north", 30, 0, 0)], &offers, &risks).unwrap();
        assert_eq!(p.value, Decimal::from(7000));
        assert_eq!(p.risk_level, RiskLevel::Medium);
    }

    #[test]
    fn a_supplier_the_rule_has_no_rating_for_makes_the_order_high_risk() {
        let offers = [
            json!({"item": "bolt", "supplier": "acme", "pack_size": 10, "unit_price": "1", "lead_time_days": 2}),
        ];
        let unrated = plan("bolt", &[stock("north", 30, 0, 0)], &offers, &[]).unwrap();
        assert_eq!(unrated.risk_level, RiskLevel::High);
        let odd = [json!({"supplier": "acme", "level": "severe"})];
        assert_eq!(
            plan("bolt", &[stock("north", 30, 0, 0)], &offers, &odd).unwrap().risk_level,
            RiskLevel::High
        );
    }

    #[test]
    fn nothing_short_or_nobody_carrying_the_item_plans_nothing() {
        let risks = [json!({"supplier": "acme", "level": "low"})];
        assert!(plan("bolt", &[stock("north", 90, 0, 0)], &acme_slow_and_dear(), &risks).is_none());
        assert!(plan("bolt", &[stock("north", 3, 0, 0)], &[], &risks).is_none());
    }

    /// A consistent read at offset 12: bolt short at north, one open order, acme's offer, and
    /// a risk row for another supplier only.
    fn read_at_12() -> ConsistentAnswer {
        let receipt = |table: &str, snapshot: i64, lag: Option<u64>, at: Option<&str>| {
            json!({"table": table, "snapshot_id": snapshot, "offset": 12, "committed_at": at, "lag_ms": lag,
                   "budget": "5s", "within_budget": true, "measured_by": "record", "served_by": "paimon"})
        };
        serde_json::from_value(json!({"offset": 12, "results": [
            {"columns": [], "receipt": receipt("stock", 4, Some(0), Some("2026-03-02T08:00:01.000Z")), "rows": [
                {"item": "bolt", "location": "north", "on_hand": 50, "reserved": 15, "inbound": null, "reorder_point": 40, "target": 100},
                {"item": "bolt", "location": "south", "on_hand": 90, "reserved": 0, "inbound": 0, "reorder_point": 40, "target": 100}]},
            {"columns": [], "receipt": receipt("open_orders", 2, Some(3), None),
             "rows": [{"order_id": "so-1", "item": "bolt", "location": "north", "qty": 20}]},
            {"columns": [], "receipt": receipt("supplier_items", 9, None, Some("2026-03-01T10:00:00.000Z")),
             "rows": [{"item": "bolt", "supplier": "acme", "pack_size": 50, "unit_price": "1.50", "lead_time_days": 2}]},
            {"columns": [], "receipt": receipt("supplier_risk", 7, Some(1), Some("2026-03-02T07:00:00.000Z")),
             "rows": [{"supplier": "cheap", "level": "high"}]}
        ]}))
        .expect("a consistent answer")
    }

    #[test]
    fn the_typed_proposal_goes_over_the_wire_as_the_json_the_agent_used_to_build() {
        let read = read_at_12();
        let rows = |t: &str| read.result(t).map(rows_of).unwrap_or_default();
        let p = plan("bolt", &rows("stock"), &rows("supplier_items"), &rows("supplier_risk")).unwrap();
        let typed = proposal(&read, &p, &rows("open_orders"), "north").unwrap();
        // What the `json!` the agent built before the typed wire gave for this read.
        let old = json!({
            "action": {"item": "bolt", "lead_time_days": 2, "lines": [{"location": "north", "qty": 100}], "location": "north",
                       "qty": 100, "supplier": "acme", "unit_price": "1.50", "value": "150.00"},
            "idempotency_key": "bolt@north@12", "kind": "stock_replenishment", "module": "procurement",
            "risk": {"level": "high", "reasons": ["supplier acme is rated unknown risk"]},
            "rule": {"name": "order-up-to-target", "parameters": {"lead_time_limit_days": 3, "pack_size": 50, "value_limit": 5000},
                     "text": "Where on_hand - reserved + inbound is below the reorder point, order target minus that, rounded up to the pack size of the lowest-risk supplier carrying the item (then cheapest).",
                     "version": "2"},
            "sources": [
                {"committed_at": "2026-03-02T08:00:01.000Z", "keys": [{"item": "bolt", "location": "north"}], "lag_ms": 0, "offset": 12,
                 "rows": [{"inbound": null, "item": "bolt", "location": "north", "on_hand": 50, "reorder_point": 40, "reserved": 15, "target": 100}],
                 "snapshot_id": 4, "table": "stock"},
                {"committed_at": null, "lag_ms": 3, "offset": 12, "rows": [{"item": "bolt", "location": "north", "order_id": "so-1", "qty": 20}],
                 "snapshot_id": 2, "table": "open_orders"},
                {"committed_at": "2026-03-01T10:00:00.000Z", "lag_ms": null, "offset": 12,
                 "rows": [{"item": "bolt", "lead_time_days": 2, "pack_size": 50, "supplier": "acme", "unit_price": "1.50"}],
                 "snapshot_id": 9, "table": "supplier_items"},
                {"committed_at": "2026-03-02T07:00:00.000Z", "keys": [{"supplier": "acme"}], "lag_ms": 1, "offset": 12, "rows": [],
                 "snapshot_id": 7, "table": "supplier_risk"}
            ],
            "summary": "Order 100 x bolt from acme for north"
        });
        crate::assert_wire_unchanged(&typed, old);
    }

    #[test]
    fn a_table_to_cite_without_a_snapshot_proposes_nothing_and_says_which() {
        let mut read = read_at_12();
        let rows = |r: &ConsistentAnswer, t: &str| r.result(t).map(rows_of).unwrap_or_default();
        let p = plan("bolt", &rows(&read, "stock"), &rows(&read, "supplier_items"), &[]).unwrap();
        read.results[3].receipt.snapshot_id = None;
        let why = proposal(&read, &p, &[], "north").unwrap_err();
        assert!(why.contains("supplier_risk has no snapshot"), "{why}");
    }
}
