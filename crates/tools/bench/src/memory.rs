//! Memory of a process tree, sampled while a contender runs.
//!
//! Each sample sums the proportional set size (PSS, from `/proc/PID/smaps_rollup`) of the
//! processes given: shared pages (PostgreSQL's shared buffers, mapped libraries) count once over
//! all processes instead of once per process, so PostgreSQL's several processes, one livestate
//! process and one Python process are measured alike.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Samples every 100 ms on a thread until stopped; keeps the peak.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    peak_kib: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling the processes `pids()` returns at each sample.
    pub fn start(pids: impl Fn() -> Vec<u32> + Send + 'static) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak_kib = Arc::new(AtomicU64::new(0));
        let (s, p) = (Arc::clone(&stop), Arc::clone(&peak_kib));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let now: u64 = pids().into_iter().filter_map(pss_kib).sum();
                p.fetch_max(now, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Sampler { stop, peak_kib, thread: Some(thread) }
    }

    /// Stops sampling; the peak in MiB.
    pub fn stop(mut self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak_kib.load(Ordering::Relaxed) as f64 / 1024.0
    }
}

/// A process's PSS in KiB (its RSS where `smaps_rollup` is missing); `None` once it is gone.
pub fn pss_kib(pid: u32) -> Option<u64> {
    let field = |text: &str, name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
        if let Some(v) = field(&text, "Pss:") {
            return Some(v);
        }
    }
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    field(&text, "VmRSS:")
}

/// A process's PSS split by what backs it (KiB, from `/proc/PID/smaps_rollup`): anonymous
/// memory (heap, stacks, what the allocator holds) and file-backed pages (the binary's code,
/// libraries, mapped files). `None` once the process is gone or on a kernel without the split.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PssParts {
    pub anon_kib: u64,
    pub file_kib: u64,
}

impl std::ops::Add for PssParts {
    type Output = PssParts;
    fn add(self, o: PssParts) -> PssParts {
        PssParts { anon_kib: self.anon_kib + o.anon_kib, file_kib: self.file_kib + o.file_kib }
    }
}

impl std::iter::Sum for PssParts {
    fn sum<I: Iterator<Item = PssParts>>(iter: I) -> PssParts {
        iter.fold(PssParts::default(), std::ops::Add::add)
    }
}

/// See [`PssParts`].
pub fn pss_parts(pid: u32) -> Option<PssParts> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some(PssParts {
        anon_kib: field("Pss_Anon:")?,
        file_kib: field("Pss_File:")? + field("Pss_Shmem:").unwrap_or(0),
    })
}

/// `root` and every process descended from it.
pub fn tree(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            // The command name is parenthesised and may hold spaces: the parent follows the ')'.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// This process's peak resident set (VmHWM) in MiB.
pub fn own_peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0.0, |kib| kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_is_in_its_own_tree() {
        let me = std::process::id();
        assert!(pss_kib(me).is_some_and(|k| k > 0));
        if let Some(parts) = pss_parts(me) {
            assert!(parts.anon_kib > 0 && parts.file_kib > 0, "{parts:?}");
            assert!(parts.anon_kib + parts.file_kib <= pss_kib(me).unwrap() + 1024, "{parts:?}");
        }
        assert_eq!(tree(me)[0], me);
        assert!(own_peak_rss_mib() > 0.0);
    }
}
