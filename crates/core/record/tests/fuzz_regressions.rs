//! Every input the fuzz target `event_decoder` found a problem with
//! (`fuzz/regressions/event_decoder/`), and its seeds (`fuzz/seeds/event_decoder/`), through the
//! same function the target calls, against the example company's spec: each must be accepted or
//! refused, never panic or overflow the stack. So CI guards the fixes without cargo-fuzz.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use livestate_record::fuzzing::event_input;
use livestate_spec::CompanySpec;

fn repo() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("../../..")
}

fn inputs(kind: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = repo().join("fuzz").join(kind).join("event_decoder");
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries {
            let path = e.unwrap().path();
            if path.is_file() {
                let bytes = std::fs::read(&path).unwrap();
                out.push((path, bytes));
            }
        }
    }
    out.sort();
    out
}

/// `event_input` on a thread with a tokio worker's 2 MiB stack, where the server checks events.
fn accepted(spec: &Arc<CompanySpec>, bytes: Vec<u8>) -> usize {
    let spec = Arc::clone(spec);
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || event_input(&spec, &bytes))
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn event_decoder_seeds_are_accepted_and_regressions_decode_cleanly() {
    let spec = Arc::new(CompanySpec::load_dir(&repo().join("examples/company")).unwrap());
    let seeds = inputs("seeds");
    assert!(seeds.len() >= 10, "seeds missing: {seeds:?}");
    for (path, bytes) in seeds {
        let lines = bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count();
        let n = accepted(&spec, bytes);
        if path.extension().is_some_and(|x| x == "jsonl") {
            assert_eq!(n, lines, "{}: every seed line is a valid event", path.display());
        }
    }
    for (_, bytes) in inputs("regressions") {
        accepted(&spec, bytes);
    }
}
