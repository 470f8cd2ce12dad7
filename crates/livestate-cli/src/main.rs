//! The `livestate` binary: parses arguments and hands them to [`livestate_cli::run`].

/// mimalloc instead of the system allocator: derivation allocates and frees many small rows and
/// large Arrow and Parquet buffers, where glibc's malloc spent about a third of the time
/// (docs/BENCHMARKS.md). Without the `mimalloc` feature, the system allocator, for heap profilers.
/// Either way counted, so `GET /v1/health` can say how much of the memory is heap in use.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: livestate_server::heap::Counting<mimalloc::MiMalloc> =
    livestate_server::heap::Counting(mimalloc::MiMalloc);
#[cfg(not(feature = "mimalloc"))]
#[global_allocator]
static GLOBAL: livestate_server::heap::Counting<std::alloc::System> =
    livestate_server::heap::Counting(std::alloc::System);

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_t` (mimalloc.h), which the sys crate
/// does not name; the test below checks it is the option whose default is 1000 ms.
#[cfg(feature = "mimalloc")]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Returns freed memory to the system at once instead of after mimalloc's default 1 s delay.
/// With the delay, a server under a steady load kept what it freed: its memory grew about
/// 53 MiB a minute in a 4-minute soak against 21 without (docs/BENCHMARKS.md, "Soak").
fn tune_allocator() {
    #[cfg(feature = "mimalloc")]
    // SAFETY: called once, first thing in `main`, before any other thread exists (mimalloc's
    // option setter is not thread safe).
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
}

fn main() -> std::process::ExitCode {
    tune_allocator();
    livestate_cli::run(std::env::args_os())
}

#[cfg(all(test, feature = "mimalloc"))]
mod tests {
    #[test]
    fn the_purge_delay_option_is_the_one_whose_default_is_a_second_and_tuning_sets_it_to_zero() {
        // SAFETY: this test is the only code in its process touching mimalloc's options.
        unsafe {
            assert_eq!(libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY), 1000);
            super::tune_allocator();
            assert_eq!(libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY), 0);
        }
    }
}
