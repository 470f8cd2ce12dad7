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

/// `mi_option_allow_thp` in the same enum (default 1), also unnamed by the sys crate.
#[cfg(feature = "mimalloc")]
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// Two settings that keep the server's resident memory close to what it uses:
///
/// - Freed memory goes back to the system at once instead of after mimalloc's default 1 s
///   delay. With the delay, a server under a steady load kept what it freed: its memory grew
///   about 53 MiB a minute in a 4-minute soak against 21 without.
/// - No transparent huge pages. mimalloc asks for them on its arenas (`MADV_HUGEPAGE`), and the
///   kernel then backs a whole 2 MiB range on the first touch of any page in it and collapses
///   partly used ranges into huge pages in the background, filling in pages mimalloc had given
///   back. Under the soak's steady load that grew the resident set after the heap had stopped
///   growing (docs/BENCHMARKS.md, "Soak"). The process flag covers the arena mimalloc reserved
///   before `main`; the option keeps it from asking again.
fn tune_allocator() {
    #[cfg(feature = "mimalloc")]
    // SAFETY: called once, first thing in `main`, before any other thread exists (mimalloc's
    // option setter is not thread safe).
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
        libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0);
    }
    #[cfg(all(feature = "mimalloc", target_os = "linux"))]
    // SAFETY: PR_SET_THP_DISABLE takes integers only and changes a flag of this process.
    // Failure (a kernel without the call) leaves huge pages as they were, which is harmless.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

fn main() -> std::process::ExitCode {
    tune_allocator();
    livestate_cli::run(std::env::args_os())
}

#[cfg(all(test, feature = "mimalloc"))]
mod tests {
    #[test]
    fn tuning_sets_the_purge_delay_to_zero_and_turns_transparent_huge_pages_off() {
        // SAFETY: this test is the only code in its process touching mimalloc's options, and
        // PR_GET_THP_DISABLE only reads a flag.
        unsafe {
            // The options by their defaults: a second of purge delay, huge pages allowed.
            assert_eq!(libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY), 1000);
            assert_eq!(libmimalloc_sys::mi_option_get(super::MI_OPTION_ALLOW_THP), 1);
            super::tune_allocator();
            assert_eq!(libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY), 0);
            assert_eq!(libmimalloc_sys::mi_option_get(super::MI_OPTION_ALLOW_THP), 0);
            #[cfg(target_os = "linux")]
            assert_eq!(libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0), 1);
        }
    }
}
