//! What the record's tests share.

use livestate_spec::{DataJson, EventEnvelope};

/// An `inventory.stock_counted` event `id` with `data` (a JSON object), as the record appends it.
pub fn event(id: impl Into<String>, data: serde_json::Value) -> EventEnvelope<DataJson> {
    let serde_json::Value::Object(map) = data else { panic!("event data is an object: {data}") };
    EventEnvelope {
        id: id.into(),
        event_type: "inventory.stock_counted".into(),
        occurred_at: "2026-01-01T00:00:00.000Z".into(),
        data: DataJson::of(&map),
        causation: None,
    }
}
