//! The single-writer lease of an object-storage warehouse (`docs/formats/lease.md`).
//!
//! S3 has no atomic rename and Paimon writes a snapshot there by "check that it is absent, then
//! write", so two writers could overwrite each other's snapshot. Only the holder of the lease
//! object `<warehouse>/_livestate/lease` commits. The object is written only with conditional
//! PUTs (`If-None-Match: *` to create, `If-Match: <ETag>` to renew or take over), so of two
//! writers racing for it exactly one wins. Every write bumps the epoch (the fencing token).
//! Before each snapshot commit, tag write and file deletion, [`Lease::check`] reads the
//! object's ETag back: a writer whose lease was taken over (its ETag is gone) or that could not
//! renew in time refuses to write.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use livestate_lsm::{Fence, FenceFuture};
use opendal::{ErrorKind, Operator};
use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::warehouse::{S3Env, S3Location};

/// Object key of the lease below the warehouse prefix.
pub const LEASE_KEY: &str = "_livestate/lease";
/// Lease time to live unless `LIVESTATE_LEASE_TTL_MS` says otherwise.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// The lease object's content (JSON).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LeaseDoc {
    /// The writer id of the holding directory (`D/warehouse.json`).
    pub owner: String,
    /// Incremented by every write of the object: the fencing token.
    pub epoch: u64,
    /// The holder may commit until this time (ms since the epoch) minus the safety margin.
    pub expires_at_ms: i64,
    /// Process id of the holder, for messages.
    pub pid: u32,
}

#[derive(Debug, Clone)]
struct Held {
    etag: String,
    doc: LeaseDoc,
}

/// A held lease; renewed in the background until dropped.
#[derive(Debug)]
pub struct Lease {
    op: Operator,
    key: String,
    uri: String,
    ttl: Duration,
    state: Arc<Mutex<Result<Held, String>>>,
    /// Held across each write of the lease object and the update of `state` that follows it,
    /// and across each check, so a check never compares the ETag of a renewal this process is
    /// just writing with the one before it (and takes its own renewal for a takeover).
    writing: Arc<tokio::sync::Mutex<()>>,
    renewer: Option<tokio::task::JoinHandle<()>>,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The TTL from `LIVESTATE_LEASE_TTL_MS`, else [`DEFAULT_TTL`].
pub fn ttl_from_env() -> Duration {
    std::env::var("LIVESTATE_LEASE_TTL_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&ms| ms >= 300)
        .map_or(DEFAULT_TTL, Duration::from_millis)
}

fn operator(loc: &S3Location, env: &S3Env) -> Result<Operator, EngineError> {
    let mut cfg = opendal_service_s3::S3Config::default();
    cfg.bucket = loc.bucket.clone();
    cfg.root = Some("/".into());
    cfg.endpoint = env.endpoint.clone();
    cfg.region = Some(env.region.clone());
    cfg.access_key_id = env.access_key_id.clone();
    cfg.secret_access_key = env.secret_access_key.clone();
    cfg.session_token = env.session_token.clone();
    cfg.enable_virtual_host_style = !env.path_style;
    let op = Operator::from_config(cfg).map_err(|e| lease_io(&loc.uri(), "configure S3", e))?;
    let transport =
        opendal::HttpTransporter::new(opendal_http_transport_reqwest::ReqwestTransport::default());
    Ok(op.with_context(opendal::OperationContext::new().with_http_transport(transport)))
}

fn lease_io(uri: &str, what: &'static str, source: opendal::Error) -> EngineError {
    EngineError::LeaseStore { uri: uri.to_string(), what, source: Box::new(source) }
}

impl Lease {
    /// Takes the lease of the warehouse at `loc` for `owner`: creates the object if absent, or
    /// takes it over when it has expired or already names `owner` (a later process of the same
    /// directory, which holds the directory's lock). Starts renewing it every third of `ttl`.
    ///
    /// # Errors
    /// [`EngineError::LeaseHeld`] when another writer holds an unexpired lease;
    /// [`EngineError::Lease`] when the store cannot be reached or refuses conditional writes.
    pub async fn acquire(loc: &S3Location, owner: &str, ttl: Duration) -> Result<Lease, EngineError> {
        Self::acquire_with(loc, &S3Env::from_env(), owner, ttl).await
    }

    /// As [`Lease::acquire`], with the endpoint and credentials given instead of read from the
    /// environment.
    ///
    /// # Errors
    /// As [`Lease::acquire`].
    pub async fn acquire_with(
        loc: &S3Location,
        env: &S3Env,
        owner: &str,
        ttl: Duration,
    ) -> Result<Lease, EngineError> {
        let op = operator(loc, env)?;
        let key = loc.key(LEASE_KEY);
        let uri = format!("{}/{LEASE_KEY}", loc.uri());
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        for _ in 0..5 {
            let current = read_doc(&op, &key, &uri).await?;
            let (epoch, condition) = match &current {
                None => (1, None),
                Some(held) if held.doc.owner == owner || held.doc.expires_at_ms < now_ms() => {
                    (held.doc.epoch + 1, Some(held.etag.clone()))
                }
                Some(held) => {
                    return Err(EngineError::LeaseHeld {
                        uri,
                        owner: held.doc.owner.clone(),
                        pid: held.doc.pid,
                        epoch: held.doc.epoch,
                        expires_in_ms: held.doc.expires_at_ms - now_ms(),
                    })
                }
            };
            let doc = LeaseDoc {
                owner: owner.to_string(),
                epoch,
                expires_at_ms: now_ms() + ttl_ms,
                pid: std::process::id(),
            };
            match write_doc(&op, &key, &uri, &doc, condition.as_deref()).await? {
                Some(etag) => {
                    let state = Arc::new(Mutex::new(Ok(Held { etag, doc })));
                    let writing = Arc::new(tokio::sync::Mutex::new(()));
                    let renewer = tokio::spawn(renew_loop(
                        op.clone(),
                        key.clone(),
                        uri.clone(),
                        ttl,
                        Arc::clone(&state),
                        Arc::clone(&writing),
                    ));
                    return Ok(Lease { op, key, uri, ttl, state, writing, renewer: Some(renewer) });
                }
                None => continue, // Another writer wrote it between our read and write.
            }
        }
        Err(EngineError::Lease { uri, message: "the lease object kept changing while taking it".into() })
    }

    /// The epoch this process holds (its fencing token).
    ///
    /// # Errors
    /// [`EngineError::Lease`] when the lease was lost.
    pub fn epoch(&self) -> Result<u64, EngineError> {
        match &*self.state.lock().expect("lease state") {
            Ok(h) => Ok(h.doc.epoch),
            Err(reason) => Err(EngineError::Lease { uri: self.uri.clone(), message: reason.clone() }),
        }
    }

    /// Whether this process may write now: the lease was not lost, at least a third of the TTL
    /// is left on it, and the object in the store still has the ETag this process last wrote.
    ///
    /// # Errors
    /// A message saying why not (taken over by whom, expired, or unreachable).
    pub async fn check(&self) -> Result<(), String> {
        let _no_renewal_meanwhile = self.writing.lock().await;
        let held = self.state.lock().expect("lease state").clone()?;
        let margin = i64::try_from(self.ttl.as_millis() / 3).unwrap_or(i64::MAX);
        let left = held.doc.expires_at_ms - now_ms();
        if left < margin {
            return Err(format!(
                "the lease {} (epoch {}) has {left} ms left, under the {margin} ms safety margin: it was not renewed in time",
                self.uri, held.doc.epoch
            ));
        }
        let meta =
            self.op.stat(&self.key).await.map_err(|e| format!("reading the lease {}: {e}", self.uri))?;
        if meta.etag() == Some(held.etag.as_str()) {
            return Ok(());
        }
        let reason = match read_doc(&self.op, &self.key, &self.uri).await {
            Ok(Some(now)) => format!(
                "the lease {} was taken over by writer {} (pid {}, epoch {}) after this process's epoch {}",
                self.uri, now.doc.owner, now.doc.pid, now.doc.epoch, held.doc.epoch
            ),
            Ok(None) => format!("the lease {} was deleted", self.uri),
            Err(e) => e.to_string(),
        };
        *self.state.lock().expect("lease state") = Err(reason.clone());
        Err(reason)
    }
}

impl Lease {
    /// Gives the lease up: stops renewing it and marks the object expired (only if it is still
    /// the one this process wrote), so another directory can take the warehouse at once instead
    /// of after the TTL. Every later [`Lease::check`] of this process refuses.
    ///
    /// # Errors
    /// [`EngineError::Lease`] when the store cannot be reached; the lease then expires after its
    /// TTL as if the process had died.
    pub async fn release(&self) -> Result<(), EngineError> {
        // Not in the middle of a renewal: `state` then names the object in the store.
        let _gate = self.writing.lock().await;
        if let Some(r) = &self.renewer {
            r.abort();
        }
        let held = {
            let mut state = self.state.lock().expect("lease state");
            let held = state.clone();
            *state = Err(format!("the lease {} was released by this process", self.uri));
            held
        };
        let Ok(held) = held else { return Ok(()) };
        let doc = LeaseDoc { epoch: held.doc.epoch + 1, expires_at_ms: 0, ..held.doc };
        // A failed condition means another writer already took it: nothing to give up.
        write_doc(&self.op, &self.key, &self.uri, &doc, Some(&held.etag)).await.map(|_| ())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(r) = self.renewer.take() {
            r.abort();
        }
    }
}

impl Fence for Lease {
    fn check(&self) -> FenceFuture<'_> {
        Box::pin(Lease::check(self))
    }
}

async fn renew_loop(
    op: Operator,
    key: String,
    uri: String,
    ttl: Duration,
    state: Arc<Mutex<Result<Held, String>>>,
    writing: Arc<tokio::sync::Mutex<()>>,
) {
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    loop {
        tokio::time::sleep(ttl / 3).await;
        let _gate = writing.lock().await;
        let Ok(held) = state.lock().expect("lease state").clone() else { return };
        let doc =
            LeaseDoc { epoch: held.doc.epoch + 1, expires_at_ms: now_ms() + ttl_ms, ..held.doc.clone() };
        match write_doc(&op, &key, &uri, &doc, Some(&held.etag)).await {
            Ok(Some(etag)) => *state.lock().expect("lease state") = Ok(Held { etag, doc }),
            Ok(None) => {
                let who = match read_doc(&op, &key, &uri).await {
                    Ok(Some(now)) => {
                        format!("writer {} (pid {}, epoch {})", now.doc.owner, now.doc.pid, now.doc.epoch)
                    }
                    _ => "another writer".into(),
                };
                *state.lock().expect("lease state") = Err(format!(
                    "the lease {uri} was taken over by {who} after this process's epoch {}",
                    held.doc.epoch
                ));
                return;
            }
            // Unreachable store: try again; `check` refuses once too little time is left.
            Err(e) => tracing::warn!("renewing the warehouse lease: {e}"),
        }
    }
}

/// The lease object and its ETag, `None` when absent.
async fn read_doc(op: &Operator, key: &str, uri: &str) -> Result<Option<Held>, EngineError> {
    let meta = match op.stat(key).await {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(lease_io(uri, "read the lease", e)),
    };
    let etag = meta
        .etag()
        .ok_or_else(|| EngineError::Lease { uri: uri.into(), message: "the store returns no ETag".into() })?
        .to_string();
    let read = op.read_with(key).if_match(&etag).await;
    let bytes = match read {
        Ok(b) => b.to_vec(),
        // Rewritten between the stat and the read: the caller's conditional write will fail.
        Err(e) if matches!(e.kind(), ErrorKind::ConditionNotMatch | ErrorKind::NotFound) => {
            return Ok(Some(Held {
                etag,
                doc: LeaseDoc { owner: String::new(), epoch: 0, expires_at_ms: i64::MAX, pid: 0 },
            }))
        }
        Err(e) => return Err(lease_io(uri, "read the lease", e)),
    };
    let doc = serde_json::from_slice(&bytes).map_err(|e| EngineError::Lease {
        uri: uri.into(),
        message: format!("the lease object is not a livestate lease: {e}"),
    })?;
    Ok(Some(Held { etag, doc }))
}

/// Writes `doc` if the object is absent (`condition` `None`) or still has ETag `condition`;
/// the new ETag, or `None` when the condition failed.
async fn write_doc(
    op: &Operator,
    key: &str,
    uri: &str,
    doc: &LeaseDoc,
    condition: Option<&str>,
) -> Result<Option<String>, EngineError> {
    let body = serde_json::to_vec(doc).expect("lease serialises");
    let w = op.write_with(key, body);
    let w = match condition {
        None => w.if_not_exists(true),
        Some(etag) => w.if_match(etag),
    };
    match w.await {
        Ok(meta) => match meta.etag() {
            Some(e) => Ok(Some(e.to_string())),
            None => {
                let m = op.stat(key).await.map_err(|e| lease_io(uri, "read the lease back", e))?;
                let etag = m.etag().map(str::to_string);
                etag.map(Some).ok_or_else(|| EngineError::Lease {
                    uri: uri.into(),
                    message: "the store returns no ETag".into(),
                })
            }
        },
        Err(e) if e.kind() == ErrorKind::ConditionNotMatch => Ok(None),
        // Some stores answer a failed If-None-Match with 409 Conflict.
        Err(e) if condition.is_none() && e.kind() == ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(lease_io(uri, "write the lease", e)),
    }
}
