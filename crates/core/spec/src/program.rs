//! Mappings compiled once, when the spec loads, into programs over slots.
//!
//! A mapping's expressions name event fields (`qty`), envelope fields (`$event.id`) and the
//! columns of looked-up rows (`stock.on_hand`). Evaluated as written, every name is a string
//! looked up per event: a hash into the event's fields, then a match on the envelope's names,
//! then a split at the dot and a search of the joins. A [`Program`] has each name resolved to a
//! [`Slot`] (a field's position in its event type, an envelope field, or a column of one join),
//! so that running it per event reads positions and compares no strings. It is the first step
//! of the columnar derivation (docs/columnar-derivation.md, slice 2), still one event at a time.
//!
//! The answers and error messages are those of evaluating the expressions by name: the tests
//! here run both over the same events.

use std::fmt;

use indexmap::IndexMap;

use crate::company::{Action, FieldSpec, Lookup, TableSpec};
use crate::error::EventError;
use crate::event::{Event, Fetch, RowOp};
use crate::expr::Expr;
use crate::types::{Value, ValueType};

/// What a resolved name reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The event type's field at this position (its order in the spec).
    Field(usize),
    Id,
    Type,
    OccurredAt,
    Offset,
    Causation,
    /// Column `column` of the row the mapping's lookup `lookup` found (null without one).
    Joined {
        lookup: usize,
        column: usize,
    },
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slot::Field(i) => write!(f, "field #{i}"),
            Slot::Id => f.write_str("$event.id"),
            Slot::Type => f.write_str("$event.type"),
            Slot::OccurredAt => f.write_str("$event.occurred_at"),
            Slot::Offset => f.write_str("$event.offset"),
            Slot::Causation => f.write_str("$event.causation"),
            Slot::Joined { lookup, column } => write!(f, "lookup #{lookup} column #{column}"),
        }
    }
}

/// One lookup join, compiled: its table, and per key column the column's name and type and
/// the expression over the event that gives it.
#[derive(Debug, Clone, PartialEq)]
struct LookupProgram {
    table: String,
    key: Vec<(String, ValueType, Expr<Slot>)>,
}

/// One `set` entry, compiled.
#[derive(Debug, Clone, PartialEq)]
struct SetProgram {
    column: usize,
    name: String,
    ty: ValueType,
    key: bool,
    expr: Expr<Slot>,
}

/// A mapping compiled against its event type and tables.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    table: String,
    action: Action,
    width: usize,
    lookups: Vec<LookupProgram>,
    when: Option<Expr<Slot>>,
    set: Vec<SetProgram>,
}

/// The slot of an envelope name.
fn envelope_slot(name: &str) -> Option<Slot> {
    Some(match name {
        "$event.id" => Slot::Id,
        "$event.type" => Slot::Type,
        "$event.occurred_at" => Slot::OccurredAt,
        "$event.offset" => Slot::Offset,
        "$event.causation" => Slot::Causation,
        _ => return None,
    })
}

impl Program {
    /// Compiles a checked mapping: `fields` are its event type's, `table` its target, and
    /// `looked_up` the tables of `lookups`, in order.
    ///
    /// # Errors
    /// A name that resolves to nothing (the spec's checks refuse those first).
    pub(crate) fn compile(
        fields: &IndexMap<String, FieldSpec>,
        table: &TableSpec,
        action: Action,
        lookups: &[Lookup],
        looked_up: &[&TableSpec],
        when: Option<&Expr>,
        set: &[(String, Expr)],
    ) -> Result<Program, String> {
        let own = |n: &str| -> Result<Slot, String> {
            fields
                .get_index_of(n)
                .map(Slot::Field)
                .or_else(|| envelope_slot(n))
                .ok_or_else(|| format!("unknown name `{n}`"))
        };
        let any = |n: &str| -> Result<Slot, String> {
            own(n).or_else(|e| {
                let (t, c) = n.split_once('.').ok_or_else(|| e.clone())?;
                let lookup = lookups.iter().position(|l| l.table == t).ok_or_else(|| e.clone())?;
                let column = looked_up[lookup].columns.get_index_of(c).ok_or(e)?;
                Ok(Slot::Joined { lookup, column })
            })
        };
        let lookups = lookups
            .iter()
            .zip(looked_up)
            .map(|(l, lt)| {
                let key = l
                    .key
                    .iter()
                    .zip(&lt.primary_key)
                    .map(|(e, col)| Ok((col.clone(), lt.columns[col], e.resolve(&own)?)))
                    .collect::<Result<_, String>>()?;
                Ok(LookupProgram { table: l.table.clone(), key })
            })
            .collect::<Result<_, String>>()?;
        let when = when.map(|w| w.resolve(&any)).transpose()?;
        let set = set
            .iter()
            .map(|(name, e)| {
                let column = table.columns.get_index_of(name).ok_or_else(|| format!("no column `{name}`"))?;
                let ty = table.columns[column];
                Ok(SetProgram {
                    column,
                    name: name.clone(),
                    ty,
                    key: table.is_key(name),
                    expr: e.resolve(&any)?,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Program { table: table.name.clone(), action, width: table.columns.len(), lookups, when, set })
    }

    /// The value of `slot` for `event` at `offset`, with `joined` the rows the lookups found.
    fn read(event: &Event, offset: u64, joined: &[Option<Vec<Value>>], slot: Slot) -> Value {
        match slot {
            Slot::Field(i) => event.data.at(i).cloned().unwrap_or(Value::Null),
            Slot::Id => Value::String(event.id.clone()),
            Slot::Type => Value::String(event.event_type.clone()),
            Slot::OccurredAt => Value::Timestamp(event.occurred_at),
            Slot::Offset => Value::Int(offset as i64),
            Slot::Causation => event.causation.clone().map_or(Value::Null, Value::String),
            Slot::Joined { lookup, column } => {
                joined.get(lookup).and_then(Option::as_ref).map_or(Value::Null, |r| r[column].clone())
            }
        }
    }

    /// Runs the mapping over `event` recorded at `offset`, with `fetch` answering its lookups:
    /// its row operation, or `None` when its `when` does not hold.
    ///
    /// # Errors
    /// An [`EventError`] naming the mapping when a key would be null or a value does not fit.
    pub fn run(&self, event: &Event, offset: u64, fetch: &Fetch<'_>) -> Result<Option<RowOp>, EventError> {
        let field = || format!("mapping to {}", self.table);
        let mut joined: Vec<Option<Vec<Value>>> = Vec::with_capacity(self.lookups.len());
        for l in &self.lookups {
            let mut key = Vec::with_capacity(l.key.len());
            for (col, ty, e) in &l.key {
                let v = e
                    .eval_by(&|s: &Slot| Some(Program::read(event, offset, &[], *s)))
                    .and_then(|v| v.coerce(*ty))
                    .map_err(|e| EventError::new(field(), format!("lookup key `{}.{col}`: {e}", l.table)))?;
                key.push(v);
            }
            joined.push(if key.iter().any(Value::is_null) { None } else { fetch(&l.table, &key) });
        }
        let lookup = |s: &Slot| Some(Program::read(event, offset, &joined, *s));
        if let Some(w) = &self.when {
            if !w.holds_by(&lookup).map_err(|e| EventError::new(field(), e))? {
                return Ok(None);
            }
        }
        let mut row = vec![Value::Null; self.width];
        for s in &self.set {
            let v = s
                .expr
                .eval_by(&lookup)
                .and_then(|v| v.coerce(s.ty))
                .map_err(|e| EventError::new(field(), format!("column `{}`: {e}", s.name)))?;
            if v.is_null() && s.key {
                return Err(EventError::new(field(), format!("key column `{}` would be null", s.name)));
            }
            row[s.column] = v;
        }
        Ok(Some(RowOp { table: self.table.clone(), action: self.action, row }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::company::CompanySpec;
    use crate::types::parse_timestamp;

    /// The example company's spec: mappings with a lookup join, `coalesce`, decimal
    /// arithmetic, literals and every envelope name the example uses.
    fn example() -> CompanySpec {
        let file = |name: &str, text: &str| (std::path::PathBuf::from(name), text.to_string());
        CompanySpec::from_sources(&[
            file("events.toml", include_str!("../../../../examples/company/events.toml")),
            file("tables.toml", include_str!("../../../../examples/company/tables.toml")),
            file("mappings.toml", include_str!("../../../../examples/company/mappings.toml")),
        ])
        .unwrap()
    }

    /// A spec made to reach what the example does not: `when`, every envelope name, a lookup
    /// keyed by an expression, joined columns in `when`, and values that fail to fit.
    fn edges() -> CompanySpec {
        CompanySpec::from_sources(&[(
            "edges.toml".into(),
            r#"
            [events."m.e"]
            fields = { k = "string", n = "int?", d = "decimal(10,2)?", c = "string?" }
            [tables.base]
            primary_key = ["k"]
            freshness = "1s"
            columns = { k = "string", n = "int", note = "string" }
            [tables.out]
            primary_key = ["k"]
            freshness = "1s"
            [tables.out.columns]
            k = "string"
            small = "decimal(4,1)"
            total = "int"
            who = "string"
            ty = "string"
            at = "timestamp"
            off = "int"
            cause = "string"
            note = "string"
            [[mappings]]
            event = "m.e"
            table = "out"
            lookup = { base = { k = "k" } }
            when = "coalesce(base.n, 0) + coalesce(n, 0) >= 0 and $event.offset != 13"
            set = { k = "k", small = "d * 10", total = "n + base.n", who = "$event.id", ty = "$event.type", at = "$event.occurred_at", off = "$event.offset", cause = "$event.causation", note = "base.note" }
            [[mappings]]
            event = "m.e"
            table = "base"
            when = "n > 100"
            set = { k = "c", n = "n * 2", note = "'big'" }
            "#
            .to_string(),
        )])
        .unwrap()
    }

    fn event(spec: &CompanySpec, ty: &str, data: serde_json::Value, causation: Option<&str>) -> Event {
        let mut line = serde_json::json!({"id": "e-1", "type": ty, "occurred_at": "2026-03-02T08:00:00.250Z", "data": data});
        if let Some(c) = causation {
            line["causation"] = c.into();
        }
        let env = serde_json::from_value(line).unwrap();
        Event::decode(env, spec).unwrap()
    }

    /// Both ways over `event` at several offsets, with `fetch` answering the lookups.
    fn both(
        spec: &CompanySpec,
        event: &Event,
        fetch: &Fetch<'_>,
    ) -> Vec<Vec<Result<RowOp, (String, EventError)>>> {
        [0, 7, 13, i64::MAX as u64]
            .into_iter()
            .map(|offset| {
                let compiled = event.row_ops_each(spec, offset, fetch);
                assert_eq!(compiled, event.row_ops_by_name(spec, offset, fetch), "{event:?} at {offset}");
                compiled
            })
            .collect()
    }

    /// The spec accepts the names of `ENVELOPE_NAMES`; each must compile to a slot.
    #[test]
    fn every_envelope_name_the_spec_accepts_has_a_slot() {
        for (name, _) in crate::company::ENVELOPE_NAMES {
            assert!(envelope_slot(name).is_some(), "{name}");
        }
    }

    #[test]
    fn the_example_companys_programs_answer_as_its_expressions_with_and_without_a_joined_row() {
        let spec = example();
        let stock = |_: &str, key: &[Value]| {
            (key[0] == Value::String("bolt".into())).then(|| {
                let mut row = vec![Value::Null; spec.tables["stock"].columns.len()];
                let col = |c: &str| spec.tables["stock"].columns.get_index_of(c).unwrap();
                row[col("on_hand")] = Value::Int(40);
                row[col("reserved")] = Value::Int(15);
                row
            })
        };
        let mut ran = 0;
        for (ty, t) in &spec.events {
            // Every field given a value of its type, then every optional field left out.
            let full: serde_json::Map<String, serde_json::Value> = t
                .fields
                .iter()
                .map(|(name, f)| {
                    let v = match f.ty {
                        ValueType::String if name == "item" => "bolt".into(),
                        ValueType::String => format!("{name}-1").into(),
                        ValueType::Int => 3.into(),
                        ValueType::Bool => true.into(),
                        ValueType::Decimal { .. } => "12.50".into(),
                        ValueType::Timestamp => "2026-03-01T00:00:00Z".into(),
                    };
                    (name.clone(), v)
                })
                .collect();
            let required: serde_json::Map<String, serde_json::Value> = full
                .iter()
                .filter(|(n, _)| t.fields[*n].required)
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect();
            for data in [full, required] {
                let e = event(&spec, ty, data.into(), Some("c-9"));
                for fetch in [&stock as &Fetch<'_>, &|_: &str, _: &[Value]| None] {
                    ran += both(&spec, &e, fetch).iter().flatten().count();
                }
            }
        }
        assert!(ran > 50, "the example's mappings ran: {ran}");
    }

    #[test]
    fn when_envelope_names_joins_and_failures_answer_as_the_expressions_do() {
        let spec = edges();
        let base = |_: &str, key: &[Value]| match &key[0] {
            Value::String(k) if k == "neg" => Some(vec![key[0].clone(), Value::Int(-50), Value::Null]),
            Value::String(k) if k == "big" => {
                Some(vec![key[0].clone(), Value::Int(i64::MAX), Value::String("joined".into())])
            }
            _ => None,
        };
        let cases = [
            (serde_json::json!({"k": "a", "n": 1, "d": "1.25", "c": "x"}), Some("c-1")),
            (serde_json::json!({"k": "neg", "n": 1}), None),
            (serde_json::json!({"k": "big", "n": 1}), None),
            (serde_json::json!({"k": "a", "d": "99999999.99"}), None),
            (serde_json::json!({"k": "a", "n": 500}), None),
            (serde_json::json!({"k": "a", "n": 500, "c": "b"}), None),
        ];
        let mut outcomes = Vec::new();
        for (data, causation) in cases {
            let e = event(&spec, "m.e", data, causation);
            outcomes.extend(both(&spec, &e, &base).into_iter().flatten());
        }
        let (oks, errs): (Vec<_>, Vec<_>) = outcomes.iter().partition(|r| r.is_ok());
        assert!(!oks.is_empty() && !errs.is_empty(), "both kinds reached: {outcomes:?}");
        let messages: Vec<String> = errs.iter().map(|e| e.as_ref().unwrap_err().1.to_string()).collect();
        assert!(messages.iter().any(|m| m.contains("overflow")), "{messages:?}");
        assert!(messages.iter().any(|m| m.contains("column `small`")), "{messages:?}");
        assert!(messages.iter().any(|m| m.contains("key column `k` would be null")), "{messages:?}");
        // The envelope names and the joined column, read through slots.
        let e = event(&spec, "m.e", serde_json::json!({"k": "big", "n": -1, "d": "0.5"}), Some("c-1"));
        let op = e.row_ops_each(&spec, 7, &base).remove(0).unwrap();
        let at = parse_timestamp("2026-03-02T08:00:00.250Z").unwrap();
        assert_eq!(
            op.row,
            [
                Value::String("big".into()),
                Value::Decimal(rust_decimal::Decimal::new(50, 1)),
                Value::Int(i64::MAX - 1),
                Value::String("e-1".into()),
                Value::String("m.e".into()),
                Value::Timestamp(at),
                Value::Int(7),
                Value::String("c-1".into()),
                Value::String("joined".into()),
            ]
        );
        assert!(e.row_ops_each(&spec, 13, &base).is_empty(), "`when` reads the offset");
    }
}
