//! The `livestate` binary: parses arguments and hands them to [`livestate_cli::run`].

fn main() -> std::process::ExitCode {
    livestate_cli::run(std::env::args_os())
}
