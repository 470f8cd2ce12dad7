//! `livestate-bench ab` end to end on a small workload: both builds run in turns and every run is
//! reported. The figures themselves are not checked (they belong in docs/BENCHMARKS.md, from a
//! release build); here both builds are this binary.

use std::path::Path;
use std::process::{Command, Output};

fn ab(args: &[&str], work: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_livestate-bench"))
        .arg("ab")
        .args(args)
        .arg("--work")
        .arg(work)
        .output()
        .expect("run livestate-bench ab")
}

#[test]
fn an_ab_runs_both_builds_in_turns_and_reports_every_run_beside_the_medians() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("ab.json");
    let me = env!("CARGO_BIN_EXE_livestate-bench");
    let out = ab(
        &[
            "--base",
            me,
            "--events",
            "3000",
            "--item-locations",
            "300",
            "--batch",
            "1000",
            "--rounds",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
        &tmp.path().join("work"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ab failed:\n{}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let runs = r["runs"].as_array().unwrap();
    let order: Vec<(&str, u64)> =
        runs.iter().map(|run| (run["build"].as_str().unwrap(), run["round"].as_u64().unwrap())).collect();
    assert_eq!(order, [("base", 1), ("new", 1), ("new", 2), ("base", 2)], "the order swaps every round");
    for run in runs {
        let ingest = &run["ingest"];
        assert_eq!(ingest["events"], 3000, "{run}");
        assert!(run["cpu_seconds"].as_f64().unwrap() > 0.0, "{run}");
        assert!(ingest["commits"].as_u64().unwrap() >= 1, "{run}");
        assert!(run["peak_pss_mib"].as_f64().unwrap() > 0.0, "{run}");
    }
    for row in
        ["| base | ingest s |", "| new | CPU s (user + sys) |", "| new | commits |", "new / base, medians:"]
    {
        assert!(stdout.contains(row), "no `{row}` in:\n{stdout}");
    }
    assert!(!tmp.path().join("work").exists(), "the work directory is removed without --keep");
}

#[test]
fn an_ab_whose_base_is_not_a_binary_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-build");
    let out = ab(&["--base", missing.to_str().unwrap(), "--events", "10"], &tmp.path().join("work"));
    assert_eq!(out.status.code(), Some(2), "a caller's fault exits 2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no-such-build") && stderr.contains("is not a livestate-bench binary"),
        "{stderr}"
    );
}
