//! Where a directory's Paimon warehouse lives: `D/warehouse/` (the default) or an S3 bucket.
//!
//! A directory initialised with `--warehouse s3://bucket/prefix` records the location in
//! `D/warehouse.json` (`{"uri": "s3://bucket/prefix", "writer": "<id>"}`); every later command
//! and `serve` read it from there. The endpoint, region and credentials come from the
//! environment of each process and are never written to disk:
//!
//! | variable | meaning |
//! |---|---|
//! | `AWS_ENDPOINT_URL` | endpoint of an S3-compatible store (default: AWS for the region) |
//! | `AWS_REGION` (or `AWS_DEFAULT_REGION`) | region (default `us-east-1`) |
//! | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` | credentials |
//! | `LIVESTATE_S3_PATH_STYLE` | `true`/`false`: path-style URLs (default `true` when `AWS_ENDPOINT_URL` is set) |

use std::path::PathBuf;

use paimon::{CatalogOptions, Options};
use serde::{Deserialize, Serialize};

use crate::error::{io_err, EngineError};
use crate::Layout;

/// A warehouse location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warehouse {
    /// A local directory (`D/warehouse/`).
    Local(PathBuf),
    /// An S3 bucket and key prefix.
    S3(S3Location),
}

/// `s3://bucket/prefix`, checked: a bucket name and a prefix without empty segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    /// Key prefix without leading or trailing `/` (may be empty).
    pub prefix: String,
}

impl S3Location {
    /// Parses `s3://bucket[/prefix]`.
    ///
    /// # Errors
    /// [`EngineError::BadWarehouse`] naming what is wrong with `uri`.
    pub fn parse(uri: &str) -> Result<S3Location, EngineError> {
        let bad = |message: &str| EngineError::BadWarehouse { uri: uri.to_string(), message: message.into() };
        let rest = uri
            .strip_prefix("s3://")
            .ok_or_else(|| bad("only s3://bucket/prefix is supported (the default is D/warehouse/)"))?;
        let rest = rest.trim_end_matches('/');
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !bucket_ok {
            return Err(bad("the bucket name must be 3 to 63 characters of a-z, 0-9, `-` and `.`"));
        }
        if prefix.split('/').any(|s| s.is_empty() || s == "." || s == "..") && !prefix.is_empty() {
            return Err(bad("the prefix has an empty, `.` or `..` segment"));
        }
        if prefix.chars().any(char::is_control) {
            return Err(bad("the prefix has a control character"));
        }
        Ok(S3Location { bucket: bucket.to_string(), prefix: prefix.to_string() })
    }

    /// `s3://bucket/prefix` (no trailing `/`).
    pub fn uri(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }

    /// The object key of `name` below the prefix.
    pub fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.prefix)
        }
    }
}

/// S3 connection settings read from the environment (see the module docs).
#[derive(Clone, Default)]
pub struct S3Env {
    pub endpoint: Option<String>,
    pub region: String,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub path_style: bool,
}

impl std::fmt::Debug for S3Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Env")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &self.secret_access_key.as_ref().map(|_| "<set>"))
            .field("path_style", &self.path_style)
            .finish_non_exhaustive()
    }
}

impl S3Env {
    /// Reads the settings from the environment.
    pub fn from_env() -> S3Env {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let endpoint = var("AWS_ENDPOINT_URL");
        let path_style = var("LIVESTATE_S3_PATH_STYLE")
            .map_or(endpoint.is_some(), |v| v.eq_ignore_ascii_case("true") || v == "1");
        S3Env {
            region: var("AWS_REGION")
                .or_else(|| var("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|| "us-east-1".into()),
            access_key_id: var("AWS_ACCESS_KEY_ID"),
            secret_access_key: var("AWS_SECRET_ACCESS_KEY"),
            session_token: var("AWS_SESSION_TOKEN"),
            endpoint,
            path_style,
        }
    }

    /// The Paimon `s3.*` options of these settings.
    pub fn paimon_options(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![("s3.region", self.region.clone())];
        if let Some(e) = &self.endpoint {
            out.push(("s3.endpoint", e.clone()));
        }
        if let Some(k) = &self.access_key_id {
            out.push(("s3.access-key", k.clone()));
        }
        if let Some(k) = &self.secret_access_key {
            out.push(("s3.secret-key", k.clone()));
        }
        if let Some(t) = &self.session_token {
            out.push(("s3.session.token", t.clone()));
        }
        out.push(("s3.path-style-access", self.path_style.to_string()));
        out
    }
}

/// What `D/warehouse.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WarehouseConfig {
    /// `s3://bucket/prefix`.
    pub uri: String,
    /// This directory's writer id: the owner it writes into the warehouse's lease.
    pub writer: String,
}

impl Layout {
    /// `D/warehouse.json`: present when the warehouse is not `D/warehouse/`.
    pub fn warehouse_config_file(&self) -> PathBuf {
        self.dir.join("warehouse.json")
    }

    /// The warehouse config, `None` for a local warehouse.
    ///
    /// # Errors
    /// [`EngineError::Io`] or [`EngineError::BadWarehouse`] when the file cannot be read or parsed.
    pub fn warehouse_config(&self) -> Result<Option<WarehouseConfig>, EngineError> {
        let path = self.warehouse_config_file();
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| EngineError::BadWarehouse {
                uri: path.display().to_string(),
                message: format!("not a warehouse config: {e}"),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(EngineError::Io { path, source: e }),
        }
    }

    /// Where this directory's warehouse is.
    ///
    /// # Errors
    /// As [`Layout::warehouse_config`], or a recorded URI that does not parse.
    pub fn warehouse(&self) -> Result<Warehouse, EngineError> {
        match self.warehouse_config()? {
            Some(c) => Ok(Warehouse::S3(S3Location::parse(&c.uri)?)),
            None => Ok(Warehouse::Local(self.warehouse_dir())),
        }
    }

    /// Records `config` (at init, before the spec directory marks the directory initialised).
    pub(crate) fn store_warehouse_config(&self, config: &WarehouseConfig) -> Result<(), EngineError> {
        let path = self.warehouse_config_file();
        let bytes = serde_json::to_vec_pretty(config).expect("warehouse config serialises");
        std::fs::write(&path, bytes).map_err(io_err(&path))
    }
}

impl Warehouse {
    /// The warehouse as Paimon names it: a local path or `s3://bucket/prefix`.
    pub fn uri(&self) -> String {
        match self {
            Warehouse::Local(p) => p.to_string_lossy().to_string(),
            Warehouse::S3(s) => s.uri(),
        }
    }

    /// The options of a Paimon filesystem catalog over this warehouse (S3 settings from the
    /// environment; they stay in memory).
    pub fn catalog_options(&self) -> Options {
        let mut opts = Options::new();
        opts.set(CatalogOptions::WAREHOUSE, self.uri());
        // Parsed Parquet footers kept for reads (the crate's default: 50 MiB). Every commit
        // adds files, so under a steady load the cache fills to its bound; 8 MiB holds about
        // 800 footers of the example's tables, many times what one consistent read opens.
        opts.set(CatalogOptions::FILE_FORMAT_METADATA_CACHE_MAX_SIZE, "8 mb");
        if let Warehouse::S3(_) = self {
            for (k, v) in S3Env::from_env().paimon_options() {
                opts.set(k, v);
            }
        }
        opts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_uri_with_prefix_parses_and_round_trips() {
        let l = S3Location::parse("s3://acme-data/live/wh/").unwrap();
        assert_eq!(l.bucket, "acme-data");
        assert_eq!(l.prefix, "live/wh");
        assert_eq!(l.uri(), "s3://acme-data/live/wh");
        assert_eq!(l.key("_livestate/lease"), "live/wh/_livestate/lease");
    }

    #[test]
    fn warehouse_uris_that_are_not_s3_or_have_bad_parts_are_refused() {
        for bad in ["gs://b/p", "s3://", "s3://UPPER/p", "s3://b/p", "s3://bucket/a//b", "s3://bucket/../x"] {
            let e = S3Location::parse(bad).unwrap_err();
            assert!(e.to_string().contains(bad.trim_end_matches('/')), "{bad}: {e}");
        }
    }
}
