//! livestate over HTTP: `livestate serve` on the ingested directory, point lookups through the
//! API with an agent's token, one at a time on a kept-alive connection, from a client on a thread
//! of its own (see [`crate::process::on_one_thread`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};
use crate::memory::{pss_kib, tree};
use crate::process::Serving;
use crate::stats::Latencies;
use crate::workload::key;

const WHO: &str = "livestate serve";

/// The `livestate` binary: `LIVESTATE_BIN`, else next to this one.
///
/// # Errors
/// Neither exists.
pub fn livestate_bin() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("LIVESTATE_BIN") {
        return Ok(PathBuf::from(p));
    }
    let me = std::env::current_exe().map_err(BenchError::io("locate", "this binary"))?;
    let mut dir = me.parent().map(Path::to_path_buf).unwrap_or_default();
    // Test binaries live in target/<profile>/deps; the binaries one level up.
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join("livestate");
    if bin.exists() {
        Ok(bin)
    } else {
        Err(BenchError::peer(
            WHO,
            format!("{} not found: build it (cargo build --workspace) or set LIVESTATE_BIN", bin.display()),
        ))
    }
}

/// Point reads over HTTP.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HttpLookups {
    pub latencies: Latencies,
    /// The server's memory after the reads (PSS of its process tree).
    pub serve_pss_mib: f64,
}

/// Lookup latencies over HTTP and the server's memory after them.
///
/// # Errors
/// The server not starting; a lookup failing or not finding its row.
pub async fn lookups(dir: &Path, item_locations: usize, n: usize) -> Result<HttpLookups> {
    let bin = livestate_bin()?;
    let dir_s = dir.to_string_lossy().to_string();
    let out = Command::new(&bin)
        .args(["token", "add", "--dir", &dir_s, &format!("agent:bench-{}", std::process::id())])
        .output()
        .map_err(BenchError::io("run", &bin))?;
    if !out.status.success() {
        return Err(BenchError::peer(WHO, format!("token add: {}", String::from_utf8_lossy(&out.stderr))));
    }
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let port = crate::process::free_port()?;
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(&bin)
        .args(["serve", "--dir", &dir_s, "--listen", &listen])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(BenchError::io("run", &bin))?;
    let serving = Serving(child);
    let base = format!("http://{listen}");
    let reads = crate::process::on_one_thread(move || async move {
        let client = livestate_client::Client::new(&base, &token)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while client.whoami().await.is_err() {
            if Instant::now() > deadline {
                return Err(BenchError::peer(WHO, "did not answer within 60 s"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut out = Vec::with_capacity(n);
        for j in 0..n {
            let (item, loc) = key((j * 7919) % item_locations.max(1));
            let t = Instant::now();
            let answer = client.rows("stock", &[("item", &item), ("location", loc)]).await?;
            out.push(t.elapsed());
            let rows = answer.rows.len();
            if rows != 1 {
                return Err(BenchError::peer(WHO, format!("{item} at {loc}: {rows} rows")));
            }
        }
        Ok(out)
    });
    let mut out = reads.await?;
    let pss: u64 = tree(serving.0.id()).into_iter().filter_map(pss_kib).sum();
    drop(serving);
    Ok(HttpLookups { latencies: Latencies::of(&mut out), serve_pss_mib: pss as f64 / 1024.0 })
}
