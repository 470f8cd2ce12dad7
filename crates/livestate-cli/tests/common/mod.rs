//! Shared by the binary's tests: where the repository is, and the Python with pypaimon and the
//! MCP SDK.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("../..")
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
