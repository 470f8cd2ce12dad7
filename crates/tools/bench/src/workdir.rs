//! The directory a run works in: the one asked for or a new one under the temp dir, emptied
//! first, and removed at the end unless the caller keeps it.

use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};

/// Where a run works, as the command line says it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct WorkDirArgs {
    /// Work directory (removed afterwards unless --keep) [default: a new one under the temp dir]
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// Keep the work directory (every file the run wrote, the servers' logs included)
    #[arg(long)]
    pub keep: bool,
}

/// A run's work directory, removed when dropped unless kept (then its path is printed).
pub(crate) struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl WorkDir {
    /// The directory `args` ask for, or `<temp dir>/<prefix>-<pid>`, emptied and created.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub(crate) fn create(args: &WorkDirArgs, prefix: &str) -> Result<WorkDir> {
        let path = args
            .work
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join(format!("{prefix}-{}", std::process::id())));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(BenchError::io("create", &path))?;
        Ok(WorkDir { path, keep: args.keep })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("kept {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_directory_is_emptied_first_and_removed_at_the_end_unless_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let asked = tmp.path().join("w");
        std::fs::create_dir_all(asked.join("old")).unwrap();
        let args = |keep| WorkDirArgs { work: Some(asked.clone()), keep };
        let w = WorkDir::create(&args(false), "unused").unwrap();
        assert_eq!(std::fs::read_dir(w.path()).unwrap().count(), 0, "emptied");
        drop(w);
        assert!(!asked.exists(), "removed");
        let kept = WorkDir::create(&args(true), "unused").unwrap();
        drop(kept);
        assert!(asked.exists(), "kept");
    }
}
