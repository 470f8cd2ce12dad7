//! What livestate's tests share, so that no test file carries its own copy.
//!
//! - [`example_spec`] and [`SpecFiles`]: the example company's spec (`examples/company`) with typed overrides
//!   (`example_spec().freshness("stock", "200ms")`), each of which panics naming what it
//!   did not find, instead of a text replacement that silently changes nothing once the spec's
//!   text moves on.
//! - [`eventually`]: polls a condition until it holds, with a deadline that names what was
//!   awaited.
//! - [`free_port`], [`token`] and [`Child`]: a loopback port, a token issued by the `livestate`
//!   binary, and a child process that is killed (and reaped) when dropped.
//! - [`ServeCommand`] and [`ServeChild`]: `livestate serve` as a child process on a free loopback
//!   port, waited for until it listens, killed with `SIGKILL` or stopped with a signal, its log's
//!   end in every panic about it.
//! - `InProcessServer` (feature `server`): `livestate serve` in the test's own process, on a
//!   loopback port, with a token per principal.
//!
//! Dev-only: every crate takes it as a dev-dependency and the product never links it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod process;
#[cfg(feature = "server")]
mod server;
mod spec;

pub use process::{last_lines, ServeChild, ServeCommand};
#[cfg(feature = "server")]
pub use server::InProcessServer;
pub use spec::{example_spec, SpecFiles};

/// The repository's root, found when the test runs: cargo sets `CARGO_MANIFEST_DIR` for every
/// test process it starts, and the root is the nearest directory above it with `Cargo.lock`
/// and `examples/`. The path compiled in is only the fallback (a test binary started by hand):
/// a build directory shared by clones at other paths (CI's and this one) reuses test binaries
/// built in another clone, whose compiled-in path may no longer exist.
pub fn repo() -> PathBuf {
    let at_run = std::env::var_os("CARGO_MANIFEST_DIR").and_then(|dir| {
        Path::new(&dir)
            .ancestors()
            .find(|d| d.join("Cargo.lock").is_file() && d.join("examples").is_dir())
            .map(Path::to_path_buf)
    });
    at_run.unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.."))
}

/// The example company's spec directory, `examples/company`.
pub fn example_dir() -> PathBuf {
    repo().join("examples/company")
}

/// How long [`eventually`] waits.
pub const EVENTUALLY: Duration = Duration::from_secs(30);

/// Polls `f` every 50 ms until it returns `Some`, for up to [`EVENTUALLY`].
///
/// # Panics
/// When the time is up, naming `what` was awaited.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {EVENTUALLY:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each table's name, latest snapshot and tags, from `GET /v1/tables`: what a refused write
/// must leave as it was.
pub fn snapshots_and_tags(
    tables: &[livestate_api::read::TableInfo],
) -> Vec<(String, Option<i64>, Vec<livestate_api::read::TagInfo>)> {
    tables.iter().map(|t| (t.name.clone(), t.receipt.snapshot_id, t.health.tags.clone())).collect()
}

/// A loopback port free at the time of the call.
///
/// # Panics
/// When no port can be bound.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// `livestate token add --dir DIR PRINCIPAL [--scope S]…` with the binary `bin`: the new
/// token.
///
/// # Panics
/// When the command fails (its standard error is in the message).
pub fn token(bin: &Path, dir: &Path, principal: &str, scopes: &[&str]) -> String {
    let mut cmd = Command::new(bin);
    cmd.args(["token", "add", "--dir"]).arg(dir).arg(principal);
    for s in scopes {
        cmd.args(["--scope", s]);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
    assert!(out.status.success(), "token add {principal} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A child process killed and reaped when dropped (a test that fails leaves no server behind).
#[derive(Debug)]
pub struct Child(pub std::process::Child);

impl Child {
    /// The process id.
    pub fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn eventually_returns_the_first_value_a_poll_gives() {
        let mut polls = 0;
        let got = eventually("the third poll", || {
            polls += 1;
            let now = polls;
            async move { (now == 3).then_some(now) }
        })
        .await;
        assert_eq!(got, 3);
    }

    #[test]
    fn a_free_port_can_be_bound() {
        let port = free_port();
        std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
    }

    #[test]
    fn a_dropped_child_is_killed_and_reaped() {
        let child = Child(Command::new("sleep").arg("60").spawn().unwrap());
        let pid = child.id();
        drop(child);
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "process {pid} is gone");
    }
}
