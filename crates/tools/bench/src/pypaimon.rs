//! The pypaimon peer: the same events written from Python into equivalent Paimon tables with
//! pypaimon 2.1.0 (a commit per table per batch, as a Python job writing Paimon would), and
//! pypaimon's reads of its own table and of livestate's.
//!
//! The Python side is `peers/pypaimon_peer.py`, built into this binary and written next to the
//! run's other files, so the binary needs nothing from the source tree.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::process::answer;

const PEER: &str = "pypaimon";
const SCRIPT: &str = include_str!("../peers/pypaimon_peer.py");

/// What the write did, as the script reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Write {
    pub events: u64,
    pub rows: u64,
    pub commits: u64,
    pub seconds: f64,
    #[serde(default)]
    pub peak_pss_mib: f64,
}

/// A full read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Scan {
    pub rows: u64,
    pub seconds_median: f64,
}

/// Point lookups as filtered reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Lookups {
    pub n: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    pub misses: usize,
}

/// A Python with pypaimon, and the script.
pub struct Peer {
    python: String,
    script: PathBuf,
}

impl Peer {
    /// Writes the script into `work` and checks that `python` imports pypaimon.
    ///
    /// # Errors
    /// The script cannot be written; pypaimon is not importable.
    pub fn new(python: &str, work: &Path) -> Result<Peer> {
        let script = work.join("pypaimon_peer.py");
        std::fs::write(&script, SCRIPT).map_err(BenchError::io("write", &script))?;
        let ok =
            Command::new(python).args(["-c", "import pypaimon"]).output().is_ok_and(|o| o.status.success());
        if !ok {
            return Err(BenchError::peer(
                PEER,
                format!("`{python}` cannot import pypaimon: run scripts/bench (it creates the venv) or pass --python"),
            ));
        }
        Ok(Peer { python: python.to_string(), script })
    }

    /// Runs one subcommand; returns its answer with the peak memory of the process.
    fn call<T: serde::de::DeserializeOwned>(&self, args: &[&str]) -> Result<(T, f64)> {
        let mut cmd = Command::new(&self.python);
        cmd.arg(&self.script).args(args).stderr(Stdio::piped());
        answer(&mut cmd, PEER, args[0])
    }

    /// Writes `events` into a new warehouse, `batch` events per commit.
    ///
    /// # Errors
    /// The script failing.
    pub fn write(&self, warehouse: &Path, events: &Path, batch: usize) -> Result<Write> {
        let (mut w, peak): (Write, f64) = self.call(&[
            "write",
            "--warehouse",
            &warehouse.to_string_lossy(),
            "--events",
            &events.to_string_lossy(),
            "--batch",
            &batch.to_string(),
        ])?;
        w.peak_pss_mib = peak;
        Ok(w)
    }

    /// Reads a whole table (three times; the median).
    ///
    /// # Errors
    /// The script failing.
    pub fn scan(&self, warehouse: &Path, database: &str, table: &str) -> Result<Scan> {
        let wh = warehouse.to_string_lossy();
        Ok(self.call(&["scan", "--warehouse", &wh, "--database", database, "--table", table])?.0)
    }

    /// `n` lookups of the keys in `keys` (JSON lines `[item, location]`).
    ///
    /// # Errors
    /// The script failing.
    pub fn lookups(&self, warehouse: &Path, database: &str, keys: &Path, n: usize) -> Result<Lookups> {
        let (wh, k, n) = (warehouse.to_string_lossy(), keys.to_string_lossy(), n.to_string());
        let args = [
            "lookups",
            "--warehouse",
            &wh,
            "--database",
            database,
            "--table",
            "stock",
            "--keys",
            &k,
            "--n",
            &n,
        ];
        Ok(self.call(&args)?.0)
    }
}
