//! Reading a spec: the directory's TOML files, each within its size limit, then the check.

use std::path::{Path, PathBuf};

use super::check::Builder;
use super::raw::RawFile;
use super::{CompanySpec, MAX_SPEC_BYTES, MAX_SPEC_FILE_BYTES};
use crate::error::{Problem, SpecError};

impl CompanySpec {
    /// Reads every `*.toml` file in `dir` (sorted by name) and checks the whole spec.
    ///
    /// # Errors
    /// [`SpecError::Io`] when a file cannot be read (or is not UTF-8); [`SpecError::Invalid`]
    /// listing every problem (file, location, reason) when the spec is wrong or a file is larger
    /// than [`MAX_SPEC_FILE_BYTES`].
    pub fn load_dir(dir: &Path) -> Result<CompanySpec, SpecError> {
        let io = |source| SpecError::Io { path: dir.to_path_buf(), source };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(SpecError::Invalid(vec![Problem {
                file: dir.to_path_buf(),
                at: "(directory)".into(),
                message: "no .toml files found".into(),
            }]));
        }
        let mut sources = Vec::new();
        let mut too_big = Vec::new();
        let mut total = 0u64;
        for f in files {
            let io = |source| SpecError::Io { path: f.clone(), source };
            let meta = std::fs::metadata(&f).map_err(io)?;
            let len = meta.len();
            // A FIFO or a device named `*.toml` would block the read, or never end.
            if !meta.is_file() {
                too_big.push(Problem {
                    file: f,
                    at: "(file)".into(),
                    message: "not a regular file; a spec file must be one".into(),
                });
                continue;
            }
            total += len;
            if total > MAX_SPEC_BYTES {
                too_big.push(Problem {
                    file: f,
                    at: "(directory)".into(),
                    message: format!("the spec's files hold more than {} MiB together", MAX_SPEC_BYTES >> 20),
                });
                break;
            }
            if len > MAX_SPEC_FILE_BYTES {
                too_big.push(Problem {
                    file: f,
                    at: "(file)".into(),
                    message: format!(
                        "{len} bytes; a spec file may hold at most {} KiB",
                        MAX_SPEC_FILE_BYTES >> 10
                    ),
                });
                continue;
            }
            let text =
                std::fs::read_to_string(&f).map_err(|source| SpecError::Io { path: f.clone(), source })?;
            sources.push((f, text));
        }
        if !too_big.is_empty() {
            return Err(SpecError::Invalid(too_big));
        }
        Self::from_sources(&sources)
    }

    /// Checks a spec given as `(file name, TOML text)` pairs.
    ///
    /// # Errors
    /// [`SpecError::Invalid`] listing every problem.
    pub fn from_sources(sources: &[(PathBuf, String)]) -> Result<CompanySpec, SpecError> {
        let mut b = Builder::default();
        for (file, text) in sources {
            match toml::from_str::<RawFile>(text) {
                Ok(raw) => b.add_file(file, raw),
                Err(e) => b.problem(file, "(syntax)", e.message().to_string() + &span_hint(text, e.span())),
            }
        }
        b.finish()
    }
}

fn span_hint(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    span.map(|s| format!(" (line {})", text[..s.start.min(text.len())].lines().count().max(1)))
        .unwrap_or_default()
}
