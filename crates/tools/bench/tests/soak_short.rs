//! The soak in a short mode, as CI runs it: `livestate serve` under a steady load of events,
//! reads, proposals and decisions for half a minute, with every figure of the report present and
//! sane. The 10-minute figures belong in docs/BENCHMARKS.md, from a release build.

use std::process::Command;

#[test]
fn short_soak_serves_a_steady_load_without_errors_within_budget_and_samples_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("soak.json");
    let out = Command::new(env!("CARGO_BIN_EXE_livestate-bench"))
        .args([
            "soak",
            "--minutes",
            "0.4",
            "--rate",
            "300",
            "--read-rate",
            "20",
            "--consistent-rate",
            "2",
            "--proposal-seconds",
            "1",
            "--sample-seconds",
            "1",
            "--item-locations",
            "600",
            "--order-book",
            "300",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--work")
        .arg(tmp.path().join("work"))
        .output()
        .expect("run livestate-bench soak");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&json)
            .unwrap_or_else(|e| panic!("no JSON written ({e}); the soak said:\n{stderr}\n{stdout}")),
    )
    .unwrap();

    // No request failed.
    assert_eq!(r["errors"]["total"], 0, "errors: {}", r["errors"]);
    // The load ran for the time asked, near the rate asked, with every kind of request.
    let seconds = r["seconds"].as_f64().unwrap();
    assert!((23.0..40.0).contains(&seconds), "ran {seconds} s");
    let achieved = r["achieved_rate"].as_f64().unwrap();
    assert!(achieved > 300.0 * 0.8, "achieved {achieved} events/s of 300");
    let c = &r["counts"];
    assert!(c["events"].as_u64().unwrap() > 5000, "{c}");
    assert!(c["point_reads"].as_u64().unwrap() > 200, "{c}");
    assert!(c["consistent_reads"].as_u64().unwrap() > 20, "{c}");
    assert!(c["proposals"].as_u64().unwrap() >= 10, "{c}");
    assert!(c["decisions"].as_u64().unwrap() >= 3, "{c}");
    for kind in
        ["emit", "point_read", "consistent_read", "proposal", "proposal_visible", "decision", "tables"]
    {
        let l = &r["latencies"][kind];
        assert!(l["n"].as_u64().unwrap() > 0 && l["p99_us"].as_f64().unwrap() > 0.0, "{kind}: {l}");
        assert!(l["p50_us"].as_f64().unwrap() <= l["p99_us"].as_f64().unwrap(), "{kind}: {l}");
    }
    // Every table of the example company was sampled, and stayed within its budget.
    let tables = r["tables"].as_array().unwrap();
    let names: Vec<&str> = tables.iter().map(|t| t["table"].as_str().unwrap()).collect();
    for t in ["stock", "open_orders", "work_queue", "approval_inbox"] {
        assert!(names.contains(&t), "{t} not sampled: {names:?}");
    }
    // The server measures a receipt's lag from its derivers' progress as of their last step, so
    // even the 1 s approval_inbox, idle between proposals, is within budget at every sample.
    for t in tables {
        assert!(t["samples"].as_u64().unwrap() >= 20, "{t}");
        assert_eq!(t["over_budget_samples"], 0, "over budget: {t}");
        if let Some(budget) = t["budget_ms"].as_u64() {
            assert!(t["max_lag_ms"].as_u64().unwrap() <= budget, "{t}");
        }
    }
    // Every proposal was readable in approval_inbox within its 1 s budget.
    let visible = &r["latencies"]["proposal_visible"];
    assert_eq!(visible["n"], c["proposals"], "{visible}");
    assert!(visible["max_us"].as_f64().unwrap() <= 1_000_000.0, "{visible}");
    // Proposals pinned their evidence with tags on stock.
    let stock = tables.iter().find(|t| t["table"] == "stock").unwrap();
    assert!(stock["tags_at_end"].as_u64().unwrap() >= 10, "{stock}");
    // Memory was sampled all along, and the first and last windows compared.
    let m = &r["memory"];
    assert!(m["samples"].as_array().unwrap().len() >= 20, "{m}");
    assert!(m["first_window_mib"].as_f64().unwrap() > 10.0, "{m}");
    assert!(m["last_window_mib"].as_f64().unwrap() > 10.0, "{m}");
    assert!(m["flat"].is_boolean());
    // The PSS is split into anonymous and file-backed memory (this kernel reports both).
    let anon = m["anon_last_window_mib"].as_f64().unwrap();
    let file = m["file_last_window_mib"].as_f64().unwrap();
    assert!(anon > 5.0 && file > 1.0, "{m}");
    assert!(anon + file <= m["last_window_mib"].as_f64().unwrap() + 1.0, "{m}");
    // The order book was filled before the run and held at its bound throughout.
    let open = r["open_orders_at_end"].as_u64().unwrap();
    assert_eq!(r["order_book"], 300);
    assert!((250..=300).contains(&open), "{open} orders open at the end of a book of 300");
    // The report prints each part.
    for part in [
        "memory (PSS of the server)",
        "| anonymous (heap",
        "order book held at 300",
        "| stock |",
        "POST /v1/proposals",
        "events acknowledged",
    ] {
        assert!(stdout.contains(part), "no `{part}` in:\n{stdout}");
    }
    // The exit code says whether the run was healthy: no error, every table within its budget
    // at every sample, memory flat.
    let healthy = r["errors"]["total"] == 0
        && tables.iter().all(|t| t["over_budget_samples"] == 0)
        && m["flat"] == true;
    assert_eq!(out.status.success(), healthy, "exit {}:\n{stderr}", out.status);
}
