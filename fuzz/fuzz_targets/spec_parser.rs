//! Bytes as spec files (separated by lines `%%`), loaded and checked as one company spec, then
//! event lines after a line `%% events` checked against it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = livestate_spec::fuzzing::spec_input(data);
});
