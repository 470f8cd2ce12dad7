//! The Python client (`clients/python`) against a real `livestate serve`: its pytest suite
//! emits events, reads rows with receipts and consistently, checks the error classes, proposes
//! as an agent citing receipts, decides as a person, reads the sheet and the audit, checks its
//! models against `GET /v1/openapi.json`, and runs the example procurement agent end to end.

mod common;

use std::process::Command;

use common::{client_python, livestate, serve, token};

#[test]
fn the_python_client_passes_its_tests_against_a_real_server() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    livestate(&dir, &["init"]);
    let admin = token(&dir, "admin", &[]);
    let agent = token(&dir, "agent:procurement", &[]);
    let person = token(&dir, "person:ana", &["procurement"]);
    let module = token(&dir, "module:inventory", &[]);
    let server = serve(&dir);
    let python = client_python();
    let client = common::repo().join("clients/python");
    let out = Command::new(&python)
        // The tests import this clone's client, whichever clone the venv was installed from.
        .env("PYTHONPATH", client.join("src"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("LIVESTATE_URL", server.url())
        .env("LIVESTATE_ADMIN_TOKEN", &admin)
        .env("LIVESTATE_AGENT_TOKEN", &agent)
        .env("LIVESTATE_PERSON_TOKEN", &person)
        .env("LIVESTATE_MODULE_TOKEN", &module)
        .env_remove("LIVESTATE_TOKEN")
        .current_dir(&client)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", "tests"])
        .output()
        .expect("run pytest with the client venv's python");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Python client's tests failed:\n{text}");
    // Every test ran: none was skipped or deselected.
    let summary = text.lines().rev().find(|l| l.contains(" passed")).unwrap_or_default().to_string();
    assert!(!summary.contains("skipped") && !summary.contains("deselected"), "{text}");
    let passed: usize =
        summary.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{text}"));
    assert!(passed >= 50, "only {passed} tests ran:\n{text}");
    drop(server);
}
