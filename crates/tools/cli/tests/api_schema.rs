//! The OpenAPI document tells the truth: schemathesis (an independent fuzzer of OpenAPI
//! services) runs every operation of a real `livestate serve` with generated requests, valid
//! and invalid, and checks that nothing answers a server error and that every status, content
//! type and response body is one the document declares.

mod common;

use std::process::Command;

use common::{emit, livestate, schemathesis_python, serve, token};

#[test]
fn every_operation_answers_only_what_the_openapi_document_declares() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    livestate(&dir, &["init"]);
    // Some state, so reads, consistent reads and SQL answer rows rather than nothing.
    emit(
        &dir,
        "{\"id\":\"c1\",\"type\":\"inventory.stock_counted\",\"occurred_at\":\"2026-03-02T08:00:00Z\",\"data\":{\"item\":\"bolt\",\"location\":\"north\",\"on_hand\":5}}\n",
    );
    let admin = token(&dir, "admin", &[]);
    let server = serve(&dir);
    let python = schemathesis_python();
    let bin = std::path::Path::new(&python).with_file_name("schemathesis");
    let report = tmp.path().join("report");
    let hooks = common::repo().join("crates/tools/cli/tests/schemathesis_hooks.py");
    let out = Command::new(&bin)
        .env("SCHEMATHESIS_HOOKS", &hooks)
        // It keeps a cache of what it found in its working directory: not in the clone.
        .current_dir(tmp.path())
        .args([
            "run",
            &format!("{}/v1/openapi.json", server.url()),
            "--header",
            &format!("Authorization: Bearer {admin}"),
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            "--max-examples",
            "25",
            "--seed",
            "20261202",
            "--workers",
            "2",
            "--request-timeout",
            "60",
            "--generation-database",
            "none",
            "--no-color",
            "--report-dir",
            report.to_str().unwrap(),
        ])
        .output()
        .expect("run schemathesis");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "schemathesis found answers the document does not declare:\n{text}");
    // It ran every operation (a document it could not load would also end without failures).
    assert!(text.contains("Tested: 22"), "{text}");
    drop(server);
}
