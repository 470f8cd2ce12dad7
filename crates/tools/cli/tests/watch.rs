//! `livestate watch` delivers each committed firing once per consumer.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn run(dir: &Path, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_livestate"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn counted(id: &str, on_hand: i64) -> String {
    format!(
        r#"{{"id":"{id}","type":"inventory.stock_counted","occurred_at":"2026-03-02T08:00:00Z","data":{{"item":"bolt","location":"north","on_hand":{on_hand}}}}}"#
    ) + "\n"
}

#[test]
fn watch_prints_each_firing_once_per_consumer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    assert_eq!(run(&dir, &["init"], None).0, 0);
    let plan = r#"{"id":"p","type":"procurement.planning_set","occurred_at":"2026-03-02T08:00:00Z","data":{"item":"bolt","location":"north","reorder_point":20,"target":60}}"#;
    assert_eq!(run(&dir, &["emit", "-"], Some(&(counted("c1", 50) + plan + "\n"))).0, 0);
    assert_eq!(run(&dir, &["derive", "--once"], None).0, 0);
    assert_eq!(run(&dir, &["emit", "-"], Some(&counted("c2", 12))).0, 0);
    assert_eq!(run(&dir, &["derive", "--once"], None).0, 0);

    let watch = |consumer: &str, extra: &[&str]| {
        let mut args = vec!["watch", "stock_below_reorder_point", "--consumer", consumer];
        args.extend_from_slice(extra);
        let (code, out, err) = run(&dir, &args, None);
        assert_eq!(code, 0, "{err}");
        out.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect::<Vec<_>>()
    };
    let peeked = watch("buyer", &["--peek"]);
    assert_eq!(peeked.len(), 1);
    let first = watch("buyer", &[]);
    assert_eq!(first, peeked, "peeking does not move the cursor");
    assert_eq!(first[0]["after"]["on_hand"], 12);
    assert_eq!(first[0]["before"]["on_hand"], 50);
    assert!(watch("buyer", &[]).is_empty(), "delivered once");
    assert_eq!(watch("planner", &[]).len(), 1, "another consumer has its own cursor");
    // A cursor as the API names one: a principal's own cursor of its.
    assert_eq!(watch("agent:procurement/night-shift", &[]).len(), 1);

    let (code, _, err) = run(&dir, &["watch", "no_such", "--consumer", "x"], None);
    assert_eq!(code, 2);
    assert!(err.contains("unknown trigger `no_such`") && err.contains("stock_below_reorder_point"), "{err}");
}
