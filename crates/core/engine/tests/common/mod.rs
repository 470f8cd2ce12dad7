#![allow(dead_code)]

pub mod workload;

use std::path::PathBuf;

use livestate_engine::{At, Livestate, ReadRequest, CATCH_UP_COMMIT_EVENTS};
use serde_json::{json, Value};

pub fn example_spec() -> PathBuf {
    livestate_testkit::example_dir()
}

pub async fn fresh() -> (tempfile::TempDir, Livestate) {
    let dir = tempfile::tempdir().unwrap();
    let ls = Livestate::init(&dir.path().join("d"), &example_spec()).await.unwrap();
    (dir, ls)
}

/// One event line; `n` makes the id and a second-resolution timestamp.
pub fn line(n: u32, ty: &str, data: Value) -> String {
    json!({
        "id": format!("t-{n}"),
        "type": ty,
        "occurred_at": format!("2026-03-02T08:{:02}:{:02}Z", n / 60 % 60, n % 60),
        "data": data,
    })
    .to_string()
}

pub async fn derive(ls: &Livestate) -> livestate_engine::DeriveReport {
    let mut d = ls.derivers().await.unwrap();
    ls.catch_up(&mut d, CATCH_UP_COMMIT_EVENTS, &mut |_| {}).await.unwrap()
}

/// Rows of `table` as JSON objects, filtered by `keys`.
pub async fn rows(ls: &Livestate, table: &str, keys: &[(&str, &str)]) -> Vec<Value> {
    let req = ReadRequest {
        table: table.into(),
        keys: keys.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        at: At::Latest,
    };
    ls.read(&req).await.unwrap().json_rows()
}

/// Table rows as canonical JSON lines, sorted, to compare two reads whatever their order.
pub fn canon(rows: impl IntoIterator<Item = Vec<livestate_spec::Value>>) -> Vec<String> {
    let mut out: Vec<String> = rows
        .into_iter()
        .map(|r| {
            serde_json::to_string(&r.iter().map(livestate_spec::Value::to_json).collect::<Vec<_>>()).unwrap()
        })
        .collect();
    out.sort();
    out
}
