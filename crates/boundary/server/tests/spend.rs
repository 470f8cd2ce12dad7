//! What a table's freshness costs, measured: each table's commits, compactions, bytes written
//! and busy time in `GET /v1/tables` (last hour and total) and `/metrics` (counters).

mod common;

use common::{bolt_in_stock, eventually, start};
use livestate_client::TableInfo;

fn table<'a>(tables: &'a [TableInfo], name: &str) -> &'a TableInfo {
    tables.iter().find(|t| t.name == name).unwrap()
}

/// The value of `family{table="name"}` in a Prometheus text answer.
fn metric(text: &str, family: &str, name: &str) -> f64 {
    let prefix = format!("{family}{{table=\"{name}\"}} ");
    let line =
        text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix}in {text}"));
    line[prefix.len()..].parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tables_commits_compactions_and_bytes_are_measured_in_tables_and_metrics() {
    let server = start().await;
    // Each consistent read commits stock at once: 30 data commits, which its background
    // compaction (a seconds budget) merges along the way.
    for on_hand in 1..=30 {
        bolt_in_stock(&server, on_hand).await;
    }
    let admin = server.client("admin");
    let stock = eventually("stock's spend to count 30 commits and a compaction", || async {
        let tables = admin.tables().await.unwrap();
        let stock = table(&tables, "stock").clone();
        let total = stock.spend?.total;
        (total.commits >= 30 && total.compactions >= 1).then_some(stock)
    })
    .await;
    let spend = stock.spend.unwrap();
    let total = &spend.total;
    // Every commit wrote a data file (and a changelog file): bytes and files are counted.
    assert!(total.files_written >= 30, "{spend:?}");
    assert!(total.bytes_written > 30 * 100, "{spend:?}");
    // busy_ms is a u64: the typed answer would not have parsed otherwise.
    let busy_ms: u64 = total.busy_ms;
    // Applying 30 events to stock's window took CPU: its share of derivation is counted, and is
    // part of its CPU time.
    let derive_cpu_us = total.derive_cpu_us;
    let cpu_us = total.cpu_us;
    assert!(derive_cpu_us > 0 && derive_cpu_us <= cpu_us, "{spend:?}");
    // Encoding Parquet and writing manifests takes CPU: at least a microsecond per commit,
    let commit_cpu_us = cpu_us - derive_cpu_us;
    assert!(commit_cpu_us >= 30, "{spend:?}");
    // and not more than their wall time (twice it, with each commit's rounding, as slack).
    assert!(commit_cpu_us <= (busy_ms + 100) * 2000, "{spend:?}");
    // The process is younger than an hour: the last hour is everything.
    assert_eq!(spend.last_hour, spend.total, "{spend:?}");
    assert!(spend.since_ms > 1_700_000_000_000, "{spend:?}");
    // A table nothing touched made no commit.
    let work_queue = table(&admin.tables().await.unwrap(), "work_queue").clone();
    assert_eq!(work_queue.spend.map(|s| s.total.commits), Some(0), "{work_queue:?}");
    // and received no row operation, so none of derivation's CPU time is its.
    assert_eq!(work_queue.spend.map(|s| s.total.derive_cpu_us), Some(0), "{work_queue:?}");

    // /metrics: the same totals, as counters.
    let tables = admin.tables().await.unwrap();
    let text = admin.metrics().await.unwrap();
    let total = table(&tables, "stock").spend.unwrap().total;
    let commits = metric(&text, "livestate_table_commits_total", "stock");
    assert!(commits >= 30.0 && commits <= total.commits as f64 + 5.0, "{commits}: {total:?}");
    assert!(metric(&text, "livestate_table_compactions_total", "stock") >= 1.0);
    assert!(metric(&text, "livestate_table_written_bytes_total", "stock") > 3000.0);
    assert!(metric(&text, "livestate_table_busy_seconds_total", "stock") >= 0.0);
    assert!(metric(&text, "livestate_table_cpu_seconds_total", "stock") > 0.0);
    assert!(metric(&text, "livestate_table_derive_cpu_seconds_total", "stock") > 0.0);
    assert_eq!(metric(&text, "livestate_table_derive_cpu_seconds_total", "work_queue"), 0.0);
    assert_eq!(metric(&text, "livestate_table_commits_total", "work_queue"), 0.0);
    assert!(text.contains("# TYPE livestate_table_commits_total counter"), "{text}");
}
