//! Events: the JSON envelope modules send, checked against its declared type, and the row
//! operations the mappings derive from it.

use std::borrow::Cow;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use indexmap::IndexSet;
use serde::{Deserialize, Serialize};

use crate::company::{Action, CompanySpec, EventType, Mapping};
use crate::error::EventError;
use crate::types::{format_timestamp, parse_timestamp, Value};

/// Longest accepted event id, in bytes.
pub const MAX_ID_LEN: usize = 200;

/// Longest accepted event line, in bytes (4 MiB, the API's default request body limit): an
/// event is a business fact, and a line this long is a mistake, not one.
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// How far ahead of the accepting clock an event's `occurred_at` may be: one day. Clocks of
/// modules drift and time zones get mixed up, but an event from further in the future is a
/// mistake (a wrong year, milliseconds read as seconds) that would sort after every real event
/// for good, so it is refused when emitted.
pub const MAX_FUTURE_SKEW: chrono::TimeDelta = chrono::TimeDelta::days(1);

/// An event's `data` as modules send it: one JSON object.
pub type EventData = serde_json::Map<String, serde_json::Value>;

/// An event's envelope, `{"id","type","occurred_at","data":{...},"causation"?}`: the one type
/// every layer passes an event in before it is typed ([`Event`]).
///
/// `D` is how `data` is held. As a map ([`EventData`], the default) it is the wire form modules
/// send and the form the record's reads return. As [`DataJson`], the JSON text the record
/// stores, it is what the record appends: an event serialised once on its way in is never
/// parsed again to be stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventEnvelope<D = EventData> {
    pub id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub occurred_at: String,
    pub data: D,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation: Option<String>,
}

impl EventEnvelope {
    /// The same envelope with `data` as the JSON text the record stores (`serde_json`'s
    /// compact writing of the map, keys sorted).
    pub fn to_stored(&self) -> EventEnvelope<DataJson> {
        EventEnvelope {
            id: self.id.clone(),
            event_type: self.event_type.clone(),
            occurred_at: self.occurred_at.clone(),
            data: DataJson::of(&self.data),
            causation: self.causation.clone(),
        }
    }
}

/// An event's `data` as the JSON text of one object: the bytes the record stores. Built from a
/// map, from a typed event ([`Event::stored_envelope`]), or from text checked to be one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataJson(String);

impl DataJson {
    /// The text of `data`, compact with sorted keys, as `serde_json` writes a map.
    pub fn of(data: &EventData) -> DataJson {
        DataJson(serde_json::to_string(data).expect("serialising JSON into memory cannot fail"))
    }

    /// `text`, once checked to be one JSON object (a scan that builds nothing). Stored as it
    /// is: write it compact with sorted keys, as `serde_json` writes a map, to keep the record's
    /// entries canonical.
    ///
    /// # Errors
    /// Why the text is not one JSON object.
    pub fn parse(text: String) -> Result<DataJson, String> {
        serde_json::from_str::<serde::de::IgnoredAny>(&text).map_err(|e| e.to_string())?;
        if !text.starts_with('{') {
            return Err("not a JSON object".into());
        }
        Ok(DataJson(text))
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The object as a map (the text is one object by construction).
    pub fn to_map(&self) -> EventData {
        serde_json::from_str(&self.0).expect("a DataJson holds one JSON object")
    }
}

/// An event line as [`Event::parse_line`] reads it: `data` is kept as its JSON text and typed
/// once the event's type is known (`crate::event_data`), never built as a `serde_json` map.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LineEnvelope<'a> {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    #[serde(borrow)]
    occurred_at: Cow<'a, str>,
    #[serde(borrow)]
    data: &'a serde_json::value::RawValue,
    #[serde(default)]
    causation: Option<String>,
}

/// An event checked against its type: every field typed, every mapping known to apply cleanly.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: String,
    pub event_type: String,
    pub occurred_at: DateTime<Utc>,
    pub causation: Option<String>,
    pub data: Fields,
}

/// The field names of an event type, shared by every event of the type: in the spec's order,
/// which is the order of an event's [`Fields`], and in the sorted order the record's JSON text
/// writes them in, each name already written as a JSON string.
#[derive(Debug, PartialEq, Eq)]
pub struct FieldLayout {
    names: IndexSet<String>,
    /// Positions in `names`, sorted by name.
    sorted: Vec<usize>,
    /// Each name as JSON text (quoted, escaped), by position.
    json_keys: Vec<Vec<u8>>,
}

impl FieldLayout {
    /// The layout of fields named `names`, in that order.
    pub fn of<'a>(names: impl IntoIterator<Item = &'a String>) -> FieldLayout {
        let names: IndexSet<String> = names.into_iter().cloned().collect();
        let mut sorted: Vec<usize> = (0..names.len()).collect();
        sorted.sort_by(|a, b| names[*a].cmp(&names[*b]));
        let json_keys = names
            .iter()
            .map(|n| serde_json::to_vec(n).expect("writing JSON into memory cannot fail"))
            .collect();
        FieldLayout { names, sorted, json_keys }
    }
}

/// An event's `data`, typed: one value per field of its type, in the type's order, null where
/// the event gave none. The names are the type's, shared, not copied into every event.
#[derive(Debug, Clone, PartialEq)]
pub struct Fields {
    layout: Arc<FieldLayout>,
    values: Vec<Value>,
}

impl Fields {
    pub(crate) fn new(layout: Arc<FieldLayout>, values: Vec<Value>) -> Fields {
        debug_assert_eq!(layout.names.len(), values.len(), "one value per field");
        Fields { layout, values }
    }

    /// The value of field `name`, if the type has it.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.layout.names.get_index_of(name).map(|i| &self.values[i])
    }

    /// The value of the field at `position` in the type's order.
    pub fn at(&self, position: usize) -> Option<&Value> {
        self.values.get(position)
    }

    /// Every field's name and value, in the type's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.layout.names.iter().map(String::as_str).zip(&self.values)
    }
}

/// No fields: the data of an event type that declares none.
impl Default for Fields {
    fn default() -> Fields {
        Fields { layout: Arc::new(FieldLayout::of([])), values: Vec::new() }
    }
}

impl std::ops::Index<&str> for Fields {
    type Output = Value;

    fn index(&self, name: &str) -> &Value {
        self.get(name).unwrap_or_else(|| panic!("no field `{name}`"))
    }
}

/// One change a mapping makes to a table: a full-width row in the table's column order,
/// `Value::Null` where the mapping sets nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct RowOp {
    pub table: String,
    pub action: Action,
    pub row: Vec<Value>,
}

/// Answers a lookup join: the current row of `table` with primary key `key`, if any.
pub type Fetch<'a> = dyn Fn(&str, &[Value]) -> Option<Vec<Value>> + 'a;

impl Event {
    /// Parses one JSON line (at most [`MAX_LINE_BYTES`]) and checks it against `spec`.
    ///
    /// # Errors
    /// An [`EventError`] naming the field (`id`, `type`, `data.qty`, ...) and the reason.
    pub fn parse_line(line: &str, spec: &CompanySpec) -> Result<Event, EventError> {
        if line.len() > MAX_LINE_BYTES {
            return Err(EventError::new(
                "(line)",
                format!("{} bytes; an event line may be at most {} MiB", line.len(), MAX_LINE_BYTES >> 20),
            ));
        }
        let env: LineEnvelope<'_> = serde_json::from_str(line).map_err(|e| {
            let field =
                e.to_string().split('`').nth(1).map(str::to_string).unwrap_or_else(|| "(line)".into());
            EventError::new(field, format!("not a valid event envelope: {e}"))
        })?;
        let (ty, occurred_at) =
            Event::check_head(&env.id, &env.event_type, &env.occurred_at, env.causation.as_deref(), spec)?;
        let data = crate::event_data::typed_text(env.data.get(), ty)?;
        let event =
            Event { id: env.id, event_type: env.event_type, occurred_at, causation: env.causation, data };
        event.check_typed(spec, Utc::now())
    }

    /// Checks an envelope against `spec`: its fields, that `occurred_at` is at most
    /// [`MAX_FUTURE_SKEW`] ahead of the clock now, and that every mapping applies cleanly.
    ///
    /// # Errors
    /// An [`EventError`] naming the field (or mapping) and the reason.
    pub fn check(env: EventEnvelope, spec: &CompanySpec) -> Result<Event, EventError> {
        Event::check_at(env, spec, Utc::now())
    }

    /// As [`Event::check`], with the clock reading `now`.
    ///
    /// # Errors
    /// As [`Event::check`].
    pub fn check_at(env: EventEnvelope, spec: &CompanySpec, now: DateTime<Utc>) -> Result<Event, EventError> {
        Event::decode(env, spec)?.check_typed(spec, now)
    }

    /// The checks of [`Event::check_at`] that follow typing.
    fn check_typed(self, spec: &CompanySpec, now: DateTime<Utc>) -> Result<Event, EventError> {
        let event = self;
        if event.occurred_at > now + MAX_FUTURE_SKEW {
            return Err(EventError::new(
                "occurred_at",
                format!(
                    "{}Z is more than a day after the time it was received ({}Z); an event cannot have happened in the future",
                    format_timestamp(&event.occurred_at),
                    format_timestamp(&now)
                ),
            ));
        }
        // What may be stored: checked here, on the way in, and not when a recorded event is
        // derived again, so that no rule added later can stop the derivation of events recorded
        // before it.
        for (name, v) in event.data.iter() {
            if matches!(v, Value::String(s) if s.contains('\0')) {
                return Err(EventError::new(
                    format!("data.{name}"),
                    "holds a NUL character (U+0000), which no string may hold",
                ));
            }
        }
        for op in event.row_ops(spec, 0)? {
            let table = spec.table(&op.table).expect("row ops are made for tables of the spec");
            for ((col, _), v) in table.columns.iter().zip(&op.row) {
                let Value::String(s) = v else { continue };
                if let (true, Some(c)) = (table.is_key(col), s.chars().find(|c| c.is_control())) {
                    return Err(EventError::new(
                        format!("mapping to {}", op.table),
                        format!(
                            "key column `{col}` would hold the control character U+{:04X}; a key may not hold control characters",
                            u32::from(c)
                        ),
                    ));
                }
            }
        }
        Ok(event)
    }

    /// Types an envelope's fields against `spec` without trying its mappings: for events that
    /// were checked on their way into the record and whose row operations the caller computes.
    ///
    /// # Errors
    /// An [`EventError`] naming the field and the reason.
    pub fn decode(env: EventEnvelope, spec: &CompanySpec) -> Result<Event, EventError> {
        let (ty, occurred_at) =
            Event::check_head(&env.id, &env.event_type, &env.occurred_at, env.causation.as_deref(), spec)?;
        let data = crate::event_data::typed_map(env.data, ty)?;
        Ok(Event { id: env.id, event_type: env.event_type, occurred_at, causation: env.causation, data })
    }

    /// Checks the envelope's fields other than `data`: the event's type and when it occurred.
    fn check_head<'s>(
        id: &str,
        event_type: &str,
        occurred_at: &str,
        causation: Option<&str>,
        spec: &'s CompanySpec,
    ) -> Result<(&'s EventType, DateTime<Utc>), EventError> {
        if id.is_empty() || id.len() > MAX_ID_LEN || id.chars().any(char::is_control) {
            return Err(EventError::new(
                "id",
                format!("must be 1 to {MAX_ID_LEN} bytes without control characters"),
            ));
        }
        let Some(ty) = spec.events.get(event_type) else {
            return Err(EventError::new("type", format!("unknown event type `{event_type}`")));
        };
        let occurred_at = parse_timestamp(occurred_at).map_err(|e| EventError::new("occurred_at", e))?;
        if let Some(c) = causation {
            if c.is_empty() || c.len() > MAX_ID_LEN || c.chars().any(char::is_control) {
                return Err(EventError::new(
                    "causation",
                    format!("must be 1 to {MAX_ID_LEN} bytes without control characters"),
                ));
            }
        }
        Ok((ty, occurred_at))
    }

    /// The canonical envelope of this event (what the record stores).
    pub fn envelope(&self) -> EventEnvelope {
        EventEnvelope {
            id: self.id.clone(),
            event_type: self.event_type.clone(),
            occurred_at: self.occurred_at_text(),
            data: self
                .data
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.to_string(), v.to_json()))
                .collect(),
            causation: self.causation.clone(),
        }
    }

    /// The envelope the record appends for this event: [`Event::envelope`] with its `data`
    /// written straight from the typed values as JSON text ([`Event::write_data_json`]), never
    /// through a map.
    pub fn stored_envelope(&self) -> EventEnvelope<DataJson> {
        let mut text = Vec::with_capacity(256);
        self.write_data_json(&mut text);
        EventEnvelope {
            id: self.id.clone(),
            event_type: self.event_type.clone(),
            occurred_at: self.occurred_at_text(),
            data: DataJson(String::from_utf8(text).expect("JSON text is UTF-8")),
            causation: self.causation.clone(),
        }
    }

    /// `occurred_at` as the envelope carries it: RFC 3339, UTC, milliseconds.
    pub fn occurred_at_text(&self) -> String {
        format!("{}Z", format_timestamp(&self.occurred_at))
    }

    /// Appends the JSON text of [`Event::envelope`]'s `data` to `out`, byte for byte what
    /// `serde_json` writes of that map (keys sorted, null fields left out), without building
    /// the map: the record stores these bytes and the archive row carries them.
    pub fn write_data_json(&self, out: &mut Vec<u8>) {
        let layout = &self.data.layout;
        out.push(b'{');
        let mut first = true;
        for &i in &layout.sorted {
            let v = &self.data.values[i];
            if v.is_null() {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(&layout.json_keys[i]);
            out.push(b':');
            v.write_json(out);
        }
        out.push(b'}');
    }

    /// The module that emitted it (the type's prefix).
    pub fn module(&self) -> &str {
        module_of(&self.event_type)
    }

    fn lookup(&self, offset: u64, name: &str) -> Option<Value> {
        if let Some(v) = self.data.get(name) {
            return Some(v.clone());
        }
        Some(match name {
            "$event.id" => Value::String(self.id.clone()),
            "$event.type" => Value::String(self.event_type.clone()),
            "$event.occurred_at" => Value::Timestamp(self.occurred_at),
            "$event.offset" => Value::Int(offset as i64),
            "$event.causation" => self.causation.clone().map_or(Value::Null, Value::String),
            _ => return None,
        })
    }

    /// The row operations every mapping of this event's type into a table livestate derives
    /// produces, in spec order (mappings into `derived_by = "external"` tables are another
    /// engine's to run).
    ///
    /// # Errors
    /// An [`EventError`] naming the mapping when a key would be null or a value does not fit.
    pub fn row_ops(&self, spec: &CompanySpec, offset: u64) -> Result<Vec<RowOp>, EventError> {
        self.row_ops_with(spec, offset, &|_, _| None)
    }

    /// As [`Event::row_ops`], with `fetch(table, key)` answering lookup joins with a table's
    /// current row (`None`: no such row, its columns read as null).
    ///
    /// # Errors
    /// As [`Event::row_ops`].
    pub fn row_ops_with(
        &self,
        spec: &CompanySpec,
        offset: u64,
        fetch: &Fetch<'_>,
    ) -> Result<Vec<RowOp>, EventError> {
        self.row_ops_each(spec, offset, fetch).into_iter().map(|r| r.map_err(|(_, e)| e)).collect()
    }

    /// As [`Event::row_ops_with`], each mapping on its own: a mapping that fails gives its
    /// table and error in place of its row operation, and the others are still made (the
    /// derivers quarantine the failed one and go on).
    pub fn row_ops_each(
        &self,
        spec: &CompanySpec,
        offset: u64,
        fetch: &Fetch<'_>,
    ) -> Vec<Result<RowOp, (String, EventError)>> {
        self.each_mapping(spec, |m| m.program.run(self, offset, fetch))
    }

    /// As [`Event::row_ops_each`], evaluating every mapping's expressions by name instead of
    /// running its compiled program ([`crate::program`]): the oracle the programs are tested
    /// against (the unit tests and the fuzz targets' [`crate::fuzzing::event_line`]).
    #[doc(hidden)]
    pub fn row_ops_by_name(
        &self,
        spec: &CompanySpec,
        offset: u64,
        fetch: &Fetch<'_>,
    ) -> Vec<Result<RowOp, (String, EventError)>> {
        self.each_mapping(spec, |m| self.apply_by_name(spec, m, offset, fetch))
    }

    /// `run` over every mapping of this event's type into a table livestate derives, in spec
    /// order: each one's row operation, none where its `when` does not hold, or its table and
    /// error.
    fn each_mapping(
        &self,
        spec: &CompanySpec,
        run: impl Fn(&Mapping) -> Result<Option<RowOp>, EventError>,
    ) -> Vec<Result<RowOp, (String, EventError)>> {
        spec.derived_mappings_for(&self.event_type)
            .filter_map(|m| run(m).map_err(|e| (m.table.clone(), e)).transpose())
            .collect()
    }

    fn apply_by_name(
        &self,
        spec: &CompanySpec,
        m: &Mapping,
        offset: u64,
        fetch: &Fetch<'_>,
    ) -> Result<Option<RowOp>, EventError> {
        let field = || format!("mapping to {}", m.table);
        let own = |n: &str| self.lookup(offset, n);
        let mut joined: Vec<(&str, &crate::company::TableSpec, Option<Vec<Value>>)> = Vec::new();
        for l in &m.lookups {
            let lt = spec.table(&l.table).expect("lookup tables are checked at spec load");
            let mut key = Vec::with_capacity(l.key.len());
            for (e, col) in l.key.iter().zip(&lt.primary_key) {
                let v = e
                    .eval(&own)
                    .and_then(|v| v.coerce(lt.columns[col]))
                    .map_err(|e| EventError::new(field(), format!("lookup key `{}.{col}`: {e}", l.table)))?;
                key.push(v);
            }
            let row = if key.iter().any(Value::is_null) { None } else { fetch(&l.table, &key) };
            joined.push((&l.table, lt, row));
        }
        let lookup = |n: &str| {
            own(n).or_else(|| {
                let (t, c) = n.split_once('.')?;
                let (_, lt, row) = joined.iter().find(|(name, _, _)| *name == t)?;
                let i = lt.columns.get_index_of(c)?;
                Some(row.as_ref().map_or(Value::Null, |r| r[i].clone()))
            })
        };
        if let Some(w) = &m.when {
            if !w.holds(&lookup).map_err(|e| EventError::new(field(), e))? {
                return Ok(None);
            }
        }
        let table = spec.table(&m.table).expect("mapping tables are checked at spec load");
        let mut row = vec![Value::Null; table.columns.len()];
        for (col, expr) in &m.set {
            let idx = table.columns.get_index_of(col).expect("mapping columns are checked at spec load");
            let ty = table.columns[idx];
            let v = expr
                .eval(&lookup)
                .and_then(|v| v.coerce(ty))
                .map_err(|e| EventError::new(field(), format!("column `{col}`: {e}")))?;
            if v.is_null() && table.is_key(col) {
                return Err(EventError::new(field(), format!("key column `{col}` would be null")));
            }
            row[idx] = v;
        }
        Ok(Some(RowOp { table: m.table.clone(), action: m.action, row }))
    }
}

/// The module an event type belongs to: the part of its name before the first dot (the whole
/// name when it has none).
pub fn module_of(event_type: &str) -> &str {
    event_type.split('.').next().unwrap_or_default()
}

/// What a line says it is, read before any check, so that who may append it can be decided
/// before anything else is: its `type`, and its `id` when that is a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineHead {
    pub event_type: String,
    pub id: Option<String>,
}

impl LineHead {
    /// `None` when the line is not a JSON object with a string `type` (the event check then
    /// names what is wrong with it).
    ///
    /// Reads the two fields and skips the rest without building it (the server peeks at every
    /// line it is sent before the line is parsed in full).
    pub fn peek(line: &str) -> Option<LineHead> {
        #[derive(Deserialize)]
        struct Head<'a> {
            #[serde(rename = "type", borrow)]
            event_type: Cow<'a, str>,
            #[serde(default, borrow)]
            id: Option<&'a serde_json::value::RawValue>,
        }
        let head: Head<'_> = serde_json::from_str(line).ok()?;
        Some(LineHead {
            event_type: head.event_type.into_owned(),
            id: head.id.and_then(|raw| serde_json::from_str::<String>(raw.get()).ok()),
        })
    }

    /// The module its type belongs to ([`module_of`]).
    pub fn module(&self) -> &str {
        module_of(&self.event_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_head_is_its_type_module_and_string_id() {
        let h = LineHead::peek(r#"{"id":"d1","type":"decisions.proposal_created","data":{}}"#).unwrap();
        assert_eq!(
            (h.event_type.as_str(), h.module(), h.id.as_deref()),
            ("decisions.proposal_created", "decisions", Some("d1"))
        );
        let h = LineHead::peek(r#"{"id":7,"type":"nodot"}"#).unwrap();
        assert_eq!((h.module(), h.id.as_deref()), ("nodot", None));
        let h = LineHead::peek(r#"{"data":{"type":"x"},"type":"a.b\u0021","id":"i\"d"}"#).unwrap();
        assert_eq!((h.event_type.as_str(), h.id.as_deref()), ("a.b!", Some("i\"d")), "escapes read");
    }

    #[test]
    fn a_line_that_is_not_an_object_with_a_string_type_has_no_head() {
        for line in ["[1]", "null", r#"{"type":1}"#, r#"{"id":"x"}"#, "{", r#"{"type":"a"} x"#] {
            assert_eq!(LineHead::peek(line), None, "{line}");
        }
    }

    fn spec() -> CompanySpec {
        CompanySpec::from_sources(&[(
            "c.toml".into(),
            r#"
            [events."inventory.counted"]
            fields = { item = "string", qty = "int" }
            [tables.stock]
            primary_key = ["item"]
            freshness = "5m"
            columns = { item = "string", on_hand = "int" }
            [[mappings]]
            event = "inventory.counted"
            table = "stock"
            set = { item = "item", on_hand = "qty" }
            "#
            .to_string(),
        )])
        .unwrap()
    }

    fn at(occurred_at: &str) -> EventEnvelope {
        serde_json::from_value(serde_json::json!({
            "id": "e1", "type": "inventory.counted", "occurred_at": occurred_at,
            "data": {"item": "bolt", "qty": 1}
        }))
        .unwrap()
    }

    #[test]
    fn data_text_that_is_not_one_json_object_is_refused_by_name() {
        for (text, why) in
            [("[1]", "not a JSON object"), ("{\"a\":", "EOF"), ("{} {}", "trailing"), ("", "EOF")]
        {
            let e = DataJson::parse(text.into()).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        assert_eq!(DataJson::parse(r#"{"a":1}"#.into()).unwrap().as_str(), r#"{"a":1}"#);
    }

    #[test]
    fn the_stored_envelope_of_an_event_is_its_envelope_with_the_data_text_of_the_map() {
        let spec = spec();
        let mut env = at("2026-03-02T08:00:00Z");
        env.causation = Some("c1".into());
        let event = Event::check(env, &spec).unwrap();
        let stored = event.stored_envelope();
        let expected = event.envelope().to_stored();
        assert_eq!(stored, expected);
        assert_eq!(stored.data.as_str(), r#"{"item":"bolt","qty":1}"#);
        assert_eq!(stored.data.to_map(), event.envelope().data);
    }

    #[test]
    fn occurred_at_more_than_a_day_ahead_of_the_clock_is_refused_naming_the_field() {
        let now = parse_timestamp("2026-03-02T08:00:00Z").unwrap();
        let spec = spec();
        assert!(Event::check_at(at("2026-03-03T08:00:00Z"), &spec, now).is_ok(), "exactly a day ahead");
        assert!(Event::check_at(at("2020-01-01T00:00:00Z"), &spec, now).is_ok(), "the past is fine");
        let e = Event::check_at(at("2026-03-03T08:00:00.001Z"), &spec, now).unwrap_err();
        assert_eq!(e.field, "occurred_at");
        assert!(e.reason.contains("2026-03-03T08:00:00.001Z is more than a day after"), "{e}");
        let e = Event::check_at(at("9999-12-31T23:59:59Z"), &spec, now).unwrap_err();
        assert_eq!(e.field, "occurred_at", "{e}");
    }

    #[test]
    fn a_key_with_a_control_character_and_a_string_with_nul_are_refused_naming_where() {
        let spec = spec();
        let line = |item: &str| {
            serde_json::json!({"id": "e1", "type": "inventory.counted", "occurred_at": "2026-03-01T00:00:00Z",
                "data": {"item": item, "qty": 1}})
            .to_string()
        };
        for (item, char_name) in [("bolt\u{1}", "U+0001"), ("bolt\nnut", "U+000A"), ("\u{7f}", "U+007F")] {
            let e = Event::parse_line(&line(item), &spec).unwrap_err();
            assert_eq!(e.field, "mapping to stock", "{e}");
            assert!(e.reason.contains("key column `item`") && e.reason.contains(char_name), "{e}");
        }
        let e = Event::parse_line(&line("bolt\u{0}"), &spec).unwrap_err();
        assert_eq!(e.field, "data.item", "{e}");
        assert!(e.reason.contains("NUL"), "{e}");
        assert!(Event::parse_line(&line("bolt ünïcode ✓"), &spec).is_ok());
    }
}
