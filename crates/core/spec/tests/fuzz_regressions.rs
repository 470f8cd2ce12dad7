//! Every input the fuzz targets `spec_parser` and `expr_parser` found a problem with
//! (`fuzz/regressions/<target>/`), and their seeds (`fuzz/seeds/<target>/`), through the same
//! functions the targets call: each must come back as `Ok` or `Err`, never a panic or a stack
//! overflow. So CI guards the fixes without cargo-fuzz.

use std::path::{Path, PathBuf};

use livestate_spec::fuzzing::{expr_input, spec_input};

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let fuzz = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../../../fuzz");
    let mut out = Vec::new();
    for kind in ["seeds", "regressions"] {
        let dir = fuzz.join(kind).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
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

/// Runs `f` on a thread with the 2 MiB stack of a tokio worker (where the server parses specs,
/// events and `where=` conditions): deep recursion shows as an overflow here rather than passing
/// on a generous main-thread stack.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(2 << 20).spawn(f).unwrap().join().unwrap()
}

#[test]
fn spec_parser_seeds_and_regressions_load_or_fail_cleanly() {
    let inputs = inputs("spec_parser");
    assert!(inputs.len() >= 6, "seeds missing: {inputs:?}");
    let mut loaded = 0;
    for (path, bytes) in inputs {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let ok = on_small_stack(move || spec_input(&bytes).is_ok());
        loaded += usize::from(ok);
        if ["example-company.txt", "bench-spec.txt", "example-decisions.txt"].contains(&name.as_str()) {
            assert!(ok, "{name} is a valid spec");
        }
    }
    assert!(loaded >= 2);
}

#[test]
fn expr_parser_seeds_and_regressions_parse_or_fail_cleanly() {
    let inputs = inputs("expr_parser");
    assert!(inputs.len() >= 10, "seeds missing: {inputs:?}");
    for (path, bytes) in inputs {
        let seed = path.parent().unwrap().parent().unwrap().ends_with("seeds");
        let result = on_small_stack(move || expr_input(&bytes));
        if seed {
            assert!(result.is_ok(), "{}: {result:?}", path.display());
        }
    }
}
