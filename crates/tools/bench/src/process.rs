//! Running a measured step in a process of its own: the livestate steps (this binary's hidden
//! subcommands) and the pypaimon peer answer the same way, one JSON object as the last line on
//! stdout, and their memory is sampled while they run.

use std::process::{Command, Stdio};

use serde::de::DeserializeOwned;

use crate::error::{BenchError, Result};
use crate::memory::{tree, Sampler};

/// Runs `cmd` (its stdout piped; stderr as the caller set it) and returns its answer with the
/// peak PSS of its process tree, in MiB. `who` and `what` name the step in errors, with the tail
/// of its stderr when that was captured.
///
/// # Errors
/// The process cannot start, fails, or does not answer with JSON.
pub(crate) fn answer<T: DeserializeOwned>(
    cmd: &mut Command,
    who: &'static str,
    what: &str,
) -> Result<(T, f64)> {
    let child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| BenchError::peer(who, format!("start {what}: {e}")))?;
    let pid = child.id();
    let sampler = Sampler::start(move || tree(pid));
    let out = child.wait_with_output().map_err(|e| BenchError::peer(who, format!("{what}: {e}")))?;
    let peak = sampler.stop();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        return Err(BenchError::peer(
            who,
            format!("{what} failed ({}){}{tail}", out.status, if tail.is_empty() { "" } else { ":\n" }),
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
    let answer = serde_json::from_str(last)
        .map_err(|e| BenchError::peer(who, format!("{what} answered `{last}`: {e}")))?;
    Ok((answer, peak))
}

/// CPU time, user and system, of every child process this one has waited for so far (and of
/// the children they waited for): its growth over a child's run is that child's CPU time.
pub(crate) fn children_cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is valid, zeroed memory of the type `getrusage` writes; `RUSAGE_CHILDREN`
    // is a constant the call accepts.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) } != 0 {
        return 0.0;
    }
    // SAFETY: the call succeeded and filled it in (and a zeroed `rusage` is valid anyway).
    let usage = unsafe { usage.assume_init() };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// A loopback port nobody listens on right now.
///
/// # Errors
/// Binding failed.
pub(crate) fn free_port() -> Result<u16> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(BenchError::io("bind", "127.0.0.1:0"))
}

/// A running `livestate serve`, stopped with SIGINT when dropped (it commits what is pending and
/// stops), killed if it has not stopped within a minute.
pub(crate) struct Serving(pub(crate) std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-INT", &self.0.id().to_string()]).status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `step` on a thread of its own with a current-thread runtime, and waits for it.
///
/// Point reads are timed this way, PostgreSQL's and livestate's alike: a request future and
/// its client's connection task (tokio-postgres and hyper both spawn one) share one thread, so
/// no read pays for waking a second thread on the client's side. On the benchmark's
/// multi-thread runtime each read crossed threads twice (the calling thread to the connection
/// task and back), and that cost more client CPU than the server spent answering
/// (docs/BENCHMARKS.md, "HTTP point reads, third look").
///
/// # Errors
/// `step`'s own; a runtime that cannot start.
pub(crate) async fn on_one_thread<T, F, Fut>(step: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T>>,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("bench-client".into())
        .spawn(move || {
            let answer = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(BenchError::io("start", "a current-thread runtime"))
                .and_then(|rt| rt.block_on(step()));
            let _ = tx.send(answer);
        })
        .map_err(BenchError::io("start", "a client thread"))?;
    rx.await.map_err(|_| BenchError::peer("bench", "the client thread ended without an answer"))?
}
