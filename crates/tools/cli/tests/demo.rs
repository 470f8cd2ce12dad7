//! `livestate demo` headless: 30 s of the live company with automatic approvals ends with a
//! summary showing shortages, proposals, approvals, orders and deliveries, and narrates one
//! proposal's decision sheet.

use std::process::Command;

fn number_after(text: &str, label: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no `{label}` in:\n{text}"));
    line.trim_start()[label.len()..].split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn thirty_seconds_of_the_demo_make_proposals_approvals_orders_and_deliveries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = Command::new(env!("CARGO_BIN_EXE_livestate"))
        .args(["demo", "--duration", "30s", "--approve", "auto", "--listen", "127.0.0.1:0", "--seed", "3"])
        .arg("--dir")
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("person:demo"), "prints the tokens: {stdout}");
    let summary = &stdout[stdout.find("summary after").expect("a summary")..];
    assert!(number_after(summary, "events recorded") > 500, "{summary}");
    assert!(number_after(summary, "shortages signalled") >= 1, "{summary}");
    let proposals = number_after(summary, "proposals");
    assert!(proposals >= 1, "{summary}");
    assert!(
        summary.contains(&format!("({proposals} approved")) || summary.contains(" approved"),
        "{summary}"
    );
    assert!(number_after(summary, "purchase orders") >= 1, "{summary}");
    assert!(summary.contains("deliveries received"), "{summary}");
    assert!(stdout.contains("inventory    received"), "a delivery arrived within 30 s: {stdout}");
    // One proposal's decision sheet is narrated: inputs, arithmetic, the one-instant verdict.
    let sheet = &stdout[stdout.find("decision sheet of").expect("a sheet narrated")..];
    assert!(sheet.contains("value used") && sheet.contains("at one instant"), "{sheet}");

    // A directory the demo did not make is left alone.
    let other = tmp.path().join("mine");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("keep.txt"), "precious").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_livestate"))
        .args(["demo", "--duration", "1s", "--listen", "127.0.0.1:0", "--dir"])
        .arg(&other)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("was not made by `livestate demo`"));
    assert_eq!(std::fs::read_to_string(other.join("keep.txt")).unwrap(), "precious");
}
