//! The `livestate` command line: argument parsing, the commands, and how results are printed.
//! Exit codes: 0 success, 1 failure, 2 bad input or usage (the caller can fix it).

mod args;
mod commands;
mod demo;
mod render;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;
use livestate_api::ErrorKind;

pub use args::{Cli, Command};

/// A mistake in the command line or its input that the caller can fix: exit code 2.
#[derive(Debug)]
pub(crate) struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// The example company's spec, built into the binary so `init` and `demo` work anywhere.
pub const EXAMPLE_SPEC: [(&str, &str); 5] = [
    ("events.toml", include_str!("../../../../examples/company/events.toml")),
    ("tables.toml", include_str!("../../../../examples/company/tables.toml")),
    ("mappings.toml", include_str!("../../../../examples/company/mappings.toml")),
    ("triggers.toml", include_str!("../../../../examples/company/triggers.toml")),
    ("decisions.toml", include_str!("../../../../examples/company/decisions.toml")),
];

/// Writes the built-in example spec into a fresh temporary directory.
fn example_spec_dir() -> anyhow::Result<tempfile::TempDir> {
    use anyhow::Context;
    let tmp = tempfile::tempdir().context("creating a temporary directory for the built-in spec")?;
    for (name, text) in EXAMPLE_SPEC {
        std::fs::write(tmp.path().join(name), text)?;
    }
    Ok(tmp)
}

/// The error and its causes, each cause only when the message does not already contain it
/// (most of ours quote their source). Paimon errors are left out: ours describe them
/// (`livestate_lsm::describe_paimon`), while their own text dumps their cause with `Debug`.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        if cause.downcast_ref::<paimon::Error>().is_some() {
            continue;
        }
        let c = cause.to_string();
        if text.contains(&c) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&c);
    }
    text
}

/// The kind of a command's failure: the kind its first classified cause reports (each crate
/// decides its own errors' kinds); a failure no crate classified is internal.
fn kind_of(e: &anyhow::Error) -> ErrorKind {
    e.chain().find_map(kind_of_cause).unwrap_or(ErrorKind::Internal)
}

/// The kind `cause` reports, when it is one of livestate's errors.
fn kind_of_cause(cause: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    macro_rules! kind_if {
        ($($t:ty),*) => {
            $(if let Some(e) = cause.downcast_ref::<$t>() {
                return Some(e.kind());
            })*
        };
    }
    if cause.downcast_ref::<Usage>().is_some() {
        return Some(ErrorKind::Input);
    }
    kind_if!(
        livestate_engine::EngineError,
        livestate_sql::SqlError,
        livestate_server::ServerError,
        livestate_server::auth::AuthError,
        livestate_client::ClientError,
        livestate_mcp::McpServerError,
        livestate_record::RecordError,
        livestate_lsm::LsmError,
        livestate_spec::SpecError
    );
    None
}

/// The one place a kind becomes an exit code: 2 when the caller can fix it (input, not found,
/// conflict), 1 otherwise.
fn exit_code(kind: ErrorKind) -> ExitCode {
    if kind.is_callers() {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}

/// Threads for blocking work (file reads and writes, fjall) beyond the async workers; more work
/// waits in tokio's queue. Each thread that allocates keeps partly used allocator pages of its
/// own, so the process's memory rose with every thread tokio added: with 32, a 6-minute soak
/// grew 18 MiB beyond its heap as the pool filled, with 8 under 5 MiB, latencies unchanged
/// (docs/BENCHMARKS.md, "Soak").
const MAX_BLOCKING_THREADS: usize = 8;

/// Parses `args` and runs the command.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LIVESTATE_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // Paimon's file system reads each file on a blocking thread, and tokio adds one whenever all
    // are busy, up to 512, each keeping its allocator pages: a serving process grew to 230 of
    // them in 12 minutes of soak, memory growing with them (docs/BENCHMARKS.md, "Soak"). Hence
    // a small cap.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            exit_code(kind_of(&e))
        }
    }
}
