//! Shared by the binary's tests: where the repository is, and the Python with pypaimon and the
//! MCP SDK.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The repository root.
pub fn repo() -> PathBuf {
    livestate_testkit::repo()
}

/// The venv's python from `scripts/pyenv.sh` (or `LIVESTATE_PYTHON`).
pub fn python() -> String {
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

/// The python of schemathesis's own venv (`scripts/pyenv.sh --schemathesis`, or
/// `LIVESTATE_SCHEMATHESIS_PYTHON`).
pub fn schemathesis_python() -> String {
    if let Ok(p) = std::env::var("LIVESTATE_SCHEMATHESIS_PYTHON") {
        return p;
    }
    let out = Command::new("bash")
        .arg(repo().join("scripts/pyenv.sh"))
        .arg("--schemathesis")
        .output()
        .expect("run scripts/pyenv.sh --schemathesis");
    assert!(
        out.status.success(),
        "scripts/pyenv.sh --schemathesis failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().lines().last().expect("a python path").trim().to_string()
}

/// The python of the Python client's venv (`scripts/pyenv.sh --client`, or
/// `LIVESTATE_CLIENT_PYTHON`): httpx, pydantic, pytest and `clients/python` installed editable.
pub fn client_python() -> String {
    if let Ok(p) = std::env::var("LIVESTATE_CLIENT_PYTHON") {
        return p;
    }
    let out = Command::new("bash")
        .arg(repo().join("scripts/pyenv.sh"))
        .arg("--client")
        .output()
        .expect("run scripts/pyenv.sh --client");
    assert!(
        out.status.success(),
        "scripts/pyenv.sh --client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().lines().last().expect("a python path").trim().to_string()
}

/// `livestate serve --dir DIR` on a free loopback port, started and listening (up to a minute),
/// killed when dropped.
pub fn serve(dir: &std::path::Path) -> livestate_testkit::ServeChild {
    livestate_testkit::ServeCommand::new(&binary(), dir).start()
}

/// Issues a token for `principal` with `scopes` in `dir`.
pub fn token(dir: &std::path::Path, principal: &str, scopes: &[&str]) -> String {
    livestate_testkit::token(&binary(), dir, principal, scopes)
}

/// The `livestate` binary the tests run: the one cargo built with them, or `LIVESTATE_TEST_BIN`
/// (`scripts/crash` points it at a copy, so a rebuild during an hour-long run cannot swap the
/// binary between two kills).
pub fn binary() -> PathBuf {
    std::env::var_os("LIVESTATE_TEST_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_livestate")), PathBuf::from)
}

/// `livestate ARGS --dir DIR`, not yet run.
pub fn livestate_command(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut c = Command::new(binary());
    c.args(args).arg("--dir").arg(dir);
    c
}

/// Runs `livestate ARGS --dir DIR`, which must succeed; its standard output.
pub fn livestate(dir: &std::path::Path, args: &[&str]) -> String {
    ok(livestate_command(dir, args))
}

/// Runs `c`, which must succeed; its standard output.
pub fn ok(mut c: Command) -> String {
    let out = c.output().unwrap();
    assert!(out.status.success(), "{c:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Appends JSON lines through `livestate emit -` (`c` is `livestate_command(dir, &["emit", "-"])`,
/// perhaps with an environment), which must succeed.
pub fn emit_with(mut c: Command, lines: &str) {
    use std::io::Write;
    let mut child =
        c.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::null()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "{c:?} failed");
}

/// Appends JSON lines through `livestate emit - --dir DIR`.
pub fn emit(dir: &std::path::Path, lines: &str) {
    emit_with(livestate_command(dir, &["emit", "-"]), lines);
}

/// Rows as canonical JSON text (keys sorted), sorted: how tests compare livestate's rows with
/// another reader's.
pub fn canonical(rows: impl IntoIterator<Item = serde_json::Value>) -> Vec<String> {
    let mut out: Vec<String> = rows
        .into_iter()
        .map(|r| {
            let sorted: std::collections::BTreeMap<String, serde_json::Value> =
                r.as_object().unwrap().clone().into_iter().collect();
            serde_json::to_string(&sorted).unwrap()
        })
        .collect();
    out.sort();
    out
}

/// `livestate read TABLE --json EXTRA` as canonical rows.
pub fn livestate_rows(dir: &std::path::Path, table: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["read", table, "--json"];
    args.extend_from_slice(extra);
    let v: serde_json::Value = serde_json::from_str(&livestate(dir, &args)).unwrap();
    canonical(v["rows"].as_array().unwrap().clone())
}

/// A proposal to order bolts citing `read`, one table's result of a consistent read of `stock`
/// (its snapshot and first row).
pub fn bolt_order_citing(read: &livestate_client::RowsAnswer) -> serde_json::Value {
    serde_json::json!({
        "kind": "replenishment_order", "module": "procurement", "summary": "order 93 bolts",
        "action": {"item": "bolt", "qty": 93},
        "sources": [{"table": "stock", "snapshot_id": read.receipt.snapshot_id, "rows": [read.rows.first()]}],
        "rule": {"name": "up-to-target", "version": "2", "text": "order up to 100"},
        "risk": {"level": "medium", "reasons": ["new supplier"]}
    })
}
