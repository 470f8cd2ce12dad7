//! Bytes as an expression (`where=`, mapping `set`/`when`, trigger conditions): parsed, then
//! type-checked and evaluated when it parses.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = livestate_spec::fuzzing::expr_input(data);
});
