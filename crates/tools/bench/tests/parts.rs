//! `livestate-bench parts` on a small workload: every part is timed in every round and reported
//! beside its budget. The figures themselves belong in docs/BENCHMARKS.md, from a release build.

use std::process::{Command, Output};

fn parts(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_livestate-bench"))
        .arg("parts")
        .args(args)
        .output()
        .expect("run livestate-bench parts")
}

#[test]
fn every_part_is_timed_in_every_round_and_reported_beside_its_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("parts.json");
    let out = parts(&[
        "--events",
        "2000",
        "--item-locations",
        "200",
        "--rounds",
        "3",
        "--batch",
        "500",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let got: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(got["events"], 2000);
    let names: Vec<&str> =
        got["parts"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["parse", "map", "stored", "append"]);
    for p in got["parts"].as_array().unwrap() {
        let rounds = p["rounds_us_per_event"].as_array().unwrap();
        assert_eq!(rounds.len(), 3, "{p}");
        assert!(rounds.iter().all(|r| r.as_f64().unwrap() > 0.0), "every round took time: {p}");
        assert!(p["us_per_event"].as_f64().unwrap() > 0.0, "{p}");
        assert!(stdout.contains(&format!("| {} |", p["name"].as_str().unwrap())), "{stdout}");
    }
    assert!(
        stdout.contains("| parse |") && stdout.contains("| 0.8 |"),
        "the budget beside the part: {stdout}"
    );
}

#[test]
fn zero_rounds_are_refused_as_the_callers_mistake() {
    let out = parts(&["--rounds", "0", "--events", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least one round"));
}
