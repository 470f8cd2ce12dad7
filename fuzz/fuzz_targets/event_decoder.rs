//! Bytes as a `POST /v1/events` body (and as a stored record entry), checked against the example
//! company's spec, then stored, read back and typed again as derivation does.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use livestate_spec::CompanySpec;

fn example_spec() -> &'static CompanySpec {
    static SPEC: OnceLock<CompanySpec> = OnceLock::new();
    SPEC.get_or_init(|| {
        let files = [
            ("events.toml", include_str!("../../examples/company/events.toml")),
            ("tables.toml", include_str!("../../examples/company/tables.toml")),
            ("mappings.toml", include_str!("../../examples/company/mappings.toml")),
            ("triggers.toml", include_str!("../../examples/company/triggers.toml")),
        ];
        let sources: Vec<(PathBuf, String)> =
            files.iter().map(|(n, t)| (PathBuf::from(n), t.to_string())).collect();
        CompanySpec::from_sources(&sources).expect("the example company's spec is valid")
    })
}

fuzz_target!(|data: &[u8]| {
    livestate_record::fuzzing::event_input(example_spec(), data);
});
