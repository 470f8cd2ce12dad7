//! How many cores this process may use.

/// The cores this process may use, asked once: the standard library reads the cgroup's quota
/// files on every call, which a profile of repeated scans caught.
pub(crate) fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
}
