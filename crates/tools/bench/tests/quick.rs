//! The benchmark's quick mode end to end, as CI runs it: every step of every contender runs on
//! the same small workload, and the three end with the same state. The figures themselves are
//! not checked (they belong in docs/BENCHMARKS.md, from a release build).

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../../..")
}

/// The venv's python from `scripts/pyenv.sh` (or `LIVESTATE_PYTHON`).
fn python() -> String {
    if let Ok(p) = std::env::var("LIVESTATE_PYTHON") {
        return p;
    }
    let out =
        Command::new("bash").arg(repo().join("scripts/pyenv.sh")).output().expect("run scripts/pyenv.sh");
    assert!(out.status.success(), "scripts/pyenv.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .expect("pyenv.sh prints the python path")
        .trim()
        .to_string()
}

#[test]
fn quick_run_measures_every_contender_on_the_same_events_and_they_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("results.json");
    let out = Command::new(env!("CARGO_BIN_EXE_livestate-bench"))
        .args([
            "--quick",
            "--events",
            "12000",
            "--item-locations",
            "1500",
            "--commits",
            "40",
            "--freshness-seconds",
            "1.5",
            "--batch",
            "1000,6000",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--work")
        .arg(tmp.path().join("work"))
        .env("LIVESTATE_PYTHON", python())
        .output()
        .expect("run livestate-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "livestate-bench failed:\n{stderr}\n{stdout}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let l = &r["livestate"];

    // Every contender took all the events, at both batch sizes (PostgreSQL in both modes).
    let ours = l["ingests"].as_array().unwrap();
    assert_eq!(ours.iter().map(|i| i["ingest"]["batch"].as_u64().unwrap()).collect::<Vec<_>>(), [1000, 6000]);
    for i in ours {
        assert_eq!(i["ingest"]["events"], 12000);
        assert!(i["ingest"]["commits"].as_u64().unwrap() >= 3, "each table committed: {i}");
    }
    let pg = r["postgres"]["ingests"].as_array().unwrap();
    let runs: Vec<(&str, u64)> =
        pg.iter().map(|i| (i["mode"].as_str().unwrap(), i["batch"].as_u64().unwrap())).collect();
    assert_eq!(runs, [("set-based", 1000), ("pipelined", 1000), ("set-based", 6000), ("pipelined", 6000)]);
    for i in pg {
        assert_eq!(i["events"], 12000, "{i}");
        assert_eq!(i["commits"], if i["batch"] == 1000 { 12 } else { 2 }, "{i}");
    }
    assert_eq!(r["pypaimon"]["batch"], 6000);
    assert_eq!(r["pypaimon"]["write"]["events"], 12000);

    // Every ingest, livestate's and PostgreSQL's in either mode, ended with the same three tables,
    // cell for cell (the run fails otherwise; checked here too, with every table non-empty).
    let digests = &ours[0]["digests"];
    assert_eq!(digests.as_array().unwrap().len(), 3);
    for d in digests.as_array().unwrap() {
        assert!(d["rows"].as_u64().unwrap() > 0, "{d}");
    }
    for other in ours.iter().map(|i| &i["digests"]).chain(pg.iter().map(|i| &i["digests"])) {
        assert_eq!(other, digests);
    }

    // And ended with the same stock table: one row per item-location everywhere.
    for (who, rows) in [
        ("livestate", &l["reads"]["scan_rows"]),
        ("PostgreSQL", &r["postgres"]["scan_rows"]),
        ("pypaimon", &r["pypaimon"]["scan_own"]["rows"]),
        ("pypaimon reading livestate's table", &r["pypaimon"]["scan_livestate"]["rows"]),
        ("livestate after the steady-state commits", &l["steady"]["reads"]["scan_rows"]),
    ] {
        assert_eq!(rows, 1500, "{who}");
    }
    // Lookups found their rows (a miss fails the run; pypaimon reports them).
    assert_eq!(r["pypaimon"]["lookups"]["misses"], 0);
    for lat in [&l["reads"]["index"], &l["reads"]["read_api"], &l["http"], &r["postgres"]["lookups"]] {
        assert!(lat["n"].as_u64().unwrap() > 0 && lat["p99_us"].as_f64().unwrap() > 0.0, "{lat}");
    }
    // Freshness was measured at both rates, on stock events that became visible.
    let rates: Vec<u64> =
        l["freshness"].as_array().unwrap().iter().map(|f| f["rate"].as_u64().unwrap()).collect();
    assert_eq!(rates, [1000, 10000]);
    for f in l["freshness"].as_array().unwrap() {
        assert!(f["visible"]["n"].as_u64().unwrap() > 100, "{f}");
    }
    // The steady state kept the LSM in shape: compaction ran, runs stay below the stop trigger.
    let shape = &l["steady"]["reads"]["shape"];
    assert_eq!(l["steady"]["commits"], 40);
    assert!(shape["max_sorted_runs"].as_u64().unwrap() <= 10, "{shape}");

    // The table has every figure with its ratios.
    for row in [
        "ingest, 1000 events per batch: events/s",
        "ingest, 6000 events per batch: events/s",
        "PostgreSQL set-based",
        "freshness at 10000 events/s",
        "point lookup p99",
        "full scan of stock",
        "LSM after 40 more commits",
        "Goals",
    ] {
        assert!(stdout.contains(row), "no `{row}` in:\n{stdout}");
    }
    assert!(stdout.contains("x |"), "ratios printed:\n{stdout}");
}
