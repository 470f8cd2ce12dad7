//! The `livestate` binary: parses arguments and hands them to [`livestate_cli::run`].

/// mimalloc instead of the system allocator: derivation allocates and frees many small rows and
/// large Arrow and Parquet buffers, where glibc's malloc spent about a third of the time
/// (docs/BENCHMARKS.md). Without the `mimalloc` feature, the system allocator, for heap profilers.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    livestate_cli::run(std::env::args_os())
}
