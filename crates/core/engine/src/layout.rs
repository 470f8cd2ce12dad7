//! Where things live inside a livestate directory, and the write lock.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use fs4::fs_std::FileExt;

use crate::error::{io_err, EngineError};

/// The paths of one livestate directory `D`:
///
/// ```text
/// D/livestate.lock   exclusive lock held by the one process that writes
/// D/spec/            the company spec the directory was initialised with (*.toml)
/// D/record/          the record (embedded store, see docs/formats/record.md)
/// D/warehouse/       the Paimon warehouse: state.db/<table>, record.db/events
/// D/warehouse.json   instead of D/warehouse/: an object-storage warehouse (`warehouse` module)
/// D/status.json      progress and lag last reported by the writing process
/// D/rederive.tmp/    while `livestate rederive` runs: the twin it derives tables in
/// ```
#[derive(Debug, Clone)]
pub struct Layout {
    pub dir: PathBuf,
}

impl Layout {
    /// # Errors
    /// [`EngineError::Io`] when the directory cannot be made absolute.
    pub fn new(dir: &Path) -> Result<Layout, EngineError> {
        let dir = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir().map_err(io_err(dir))?.join(dir)
        };
        Ok(Layout { dir })
    }

    /// Whether a spec replacement was cut between its two renames: no `spec/`, and a complete
    /// `spec.next/` ready to become it ([`Layout::finish_spec_swap`]).
    pub(crate) fn spec_swap_pending(&self) -> bool {
        !self.spec_dir().exists() && self.dir.join("spec.next").join(SPEC_COMPLETE).exists()
    }

    /// Completes a spec replacement a crash interrupted (see [`Layout::replace_spec`]): with
    /// no `spec/`, the complete `spec.next/` becomes it; leftovers are removed. Only the holder
    /// of the write lock calls it ([`crate::Livestate::open`]).
    pub(crate) fn finish_spec_swap(&self) {
        let (next, prev) = (self.dir.join("spec.next"), self.dir.join("spec.prev"));
        if !next.exists() && !prev.exists() {
            return;
        }
        if !self.spec_dir().exists() && next.join(SPEC_COMPLETE).exists() {
            let _ = std::fs::rename(&next, self.spec_dir());
        }
        let _ = std::fs::remove_dir_all(&next);
        if self.spec_dir().exists() {
            let _ = std::fs::remove_dir_all(&prev);
        }
    }

    /// Replaces `D/spec/` with the `*.toml` files of `from`, as a whole: they are copied to
    /// `D/spec.next/` and synced, then the directories are swapped by two renames; a crash
    /// between them is completed by the next [`crate::Livestate::open`]; until then the
    /// directory reads as not initialised.
    ///
    /// # Errors
    /// [`EngineError::Io`].
    pub fn replace_spec(&self, from: &Path) -> Result<(), EngineError> {
        let (next, prev) = (self.dir.join("spec.next"), self.dir.join("spec.prev"));
        let _ = std::fs::remove_dir_all(&next);
        copy_spec_files(from, &next)?;
        let marker = next.join(SPEC_COMPLETE);
        File::create(&marker).and_then(|f| f.sync_all()).map_err(io_err(&marker))?;
        File::open(&next).and_then(|f| f.sync_all()).map_err(io_err(&next))?;
        let _ = std::fs::remove_dir_all(&prev);
        std::fs::rename(self.spec_dir(), &prev).map_err(io_err(&prev))?;
        std::fs::rename(&next, self.spec_dir()).map_err(io_err(&next))?;
        std::fs::remove_file(self.spec_dir().join(SPEC_COMPLETE)).map_err(io_err(&marker))?;
        File::open(&self.dir).and_then(|f| f.sync_all()).map_err(io_err(&self.dir))?;
        std::fs::remove_dir_all(&prev).map_err(io_err(&prev))
    }

    /// The scratch directory `livestate rederive` derives its twin in.
    pub fn rederive_dir(&self) -> PathBuf {
        self.dir.join("rederive.tmp")
    }
    pub fn lock_file(&self) -> PathBuf {
        self.dir.join("livestate.lock")
    }
    pub fn spec_dir(&self) -> PathBuf {
        self.dir.join("spec")
    }
    pub fn record_dir(&self) -> PathBuf {
        self.dir.join("record")
    }
    pub fn index_dir(&self) -> PathBuf {
        self.dir.join("index")
    }
    /// The server's proposal store (proposals, decisions, outboxes), derived from the record.
    pub fn boundary_dir(&self) -> PathBuf {
        self.dir.join("boundary")
    }
    /// Principals and their hashed tokens (see `docs/formats/principals.md`).
    pub fn principals_file(&self) -> PathBuf {
        self.dir.join("principals.toml")
    }
    pub fn warehouse_dir(&self) -> PathBuf {
        self.dir.join("warehouse")
    }
    pub fn status_file(&self) -> PathBuf {
        self.dir.join("status.json")
    }
    /// Row operations the derivers set aside (see `docs/formats/quarantine.md`).
    pub fn quarantine_file(&self) -> PathBuf {
        self.dir.join("quarantine.jsonl")
    }
    pub fn is_initialized(&self) -> bool {
        self.spec_dir().is_dir() && (self.warehouse_dir().is_dir() || self.warehouse_config_file().is_file())
    }
}

/// Copies the `*.toml` files of the spec directory `from` into `to` (created), each synced.
///
/// # Errors
/// [`EngineError::Io`].
pub(crate) fn copy_spec_files(from: &Path, to: &Path) -> Result<(), EngineError> {
    std::fs::create_dir_all(to).map_err(io_err(to))?;
    for entry in std::fs::read_dir(from).map_err(io_err(from))? {
        let p = entry.map_err(io_err(from))?.path();
        if p.extension().is_some_and(|x| x == "toml") && p.is_file() {
            let copy = to.join(p.file_name().expect("a file has a name"));
            std::fs::copy(&p, &copy).map_err(io_err(&p))?;
            File::open(&copy).and_then(|f| f.sync_all()).map_err(io_err(&copy))?;
        }
    }
    Ok(())
}

/// Written last into `D/spec.next/`: the replacement spec is complete.
const SPEC_COMPLETE: &str = ".complete";

/// The exclusive write lock of a directory, released on drop (and by the OS if the process dies).
#[derive(Debug)]
pub struct WriteLock {
    _file: File,
}

impl WriteLock {
    /// Takes the lock or reports who holds it.
    ///
    /// # Errors
    /// [`EngineError::Locked`] naming the holder's pid; [`EngineError::Io`] otherwise.
    pub fn acquire(layout: &Layout) -> Result<WriteLock, EngineError> {
        let path = layout.lock_file();
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(&path))?;
        match FileExt::try_lock_exclusive(&file) {
            Ok(true) => {}
            Ok(false) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                let holder = if holder.trim().is_empty() {
                    "unknown pid".to_string()
                } else {
                    holder.trim().to_string()
                };
                return Err(EngineError::Locked { dir: layout.dir.clone(), holder });
            }
            Err(e) => return Err(EngineError::Io { path, source: e }),
        }
        file.set_len(0).map_err(io_err(&path))?;
        write!(file, "pid {}", std::process::id()).map_err(io_err(&path))?;
        Ok(WriteLock { _file: file })
    }
}
