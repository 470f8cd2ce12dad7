//! The state every request handler shares, behind methods: its fields are private to this
//! module, so a handler reaches the directory, the proposal store, the principals and the
//! derive loop only through what is here.

use std::collections::HashMap;
use std::time::Duration;

use livestate_api::ErrorCode;
use livestate_engine::{Barrier, BarrierRequest, Livestate};
use livestate_lsm::Maintainer;
use livestate_spec::CompanySpec;
use tokio::sync::{mpsc, oneshot, watch};

use crate::auth::{self, Principals};
use crate::error::ApiError;
use crate::store::{self, Store};
use crate::{web, ServeConfig};

/// What `serve_with` opens before it serves, from which [`Shared`] is built.
pub(crate) struct Opened {
    pub ls: Livestate,
    pub head: watch::Sender<u64>,
    pub stopping: watch::Receiver<bool>,
    pub principals: Principals,
    pub store: Store,
    pub followed: watch::Receiver<u64>,
    pub barriers: mpsc::Sender<BarrierRequest>,
    pub maintainers: HashMap<String, Maintainer>,
    pub config: ServeConfig,
    pub decisions_unsupported: Option<String>,
}

pub(crate) struct Shared {
    ls: Livestate,
    /// The record's next offset, raised after every append: wakes the derive loop and the
    /// proposal-store follower.
    head: watch::Sender<u64>,
    /// Turns true when the server is stopping: streams end so the shutdown can finish.
    stopping: watch::Receiver<bool>,
    principals: Principals,
    store: Store,
    /// How far the proposal store has followed the record.
    followed: watch::Receiver<u64>,
    barriers: mpsc::Sender<BarrierRequest>,
    /// Each state table's maintainer, sharing the derivers' locks (for pinning tags).
    maintainers: HashMap<String, Maintainer>,
    /// Proposals and decisions are checked and recorded one at a time.
    deciding: tokio::sync::Mutex<()>,
    config: ServeConfig,
    /// Why proposals cannot be made with this spec, if they cannot.
    decisions_unsupported: Option<String>,
    /// People signed in to the web inbox.
    sessions: web::Sessions,
    /// Each table's lag over the last hour (the web tables page plots it).
    lag_history: web::LagHistory,
    /// Failed API authentications per client address (rate limit).
    auth_failures: auth::Failures,
}

impl Shared {
    /// Builds the shared state from what `serve_with` opened.
    pub(crate) fn new(o: Opened) -> Shared {
        Shared {
            ls: o.ls,
            head: o.head,
            stopping: o.stopping,
            principals: o.principals,
            store: o.store,
            followed: o.followed,
            barriers: o.barriers,
            maintainers: o.maintainers,
            deciding: tokio::sync::Mutex::new(()),
            config: o.config,
            decisions_unsupported: o.decisions_unsupported,
            sessions: web::Sessions::default(),
            lag_history: web::LagHistory::default(),
            auth_failures: auth::Failures::default(),
        }
    }

    /// The data directory being served.
    pub(crate) fn ls(&self) -> &Livestate {
        &self.ls
    }

    /// The company spec of the directory.
    pub(crate) fn spec(&self) -> &CompanySpec {
        self.ls.spec()
    }

    /// The record, read-only.
    pub(crate) fn record(&self) -> livestate_engine::RecordView<'_> {
        self.ls.record()
    }

    /// How far the proposal store has followed the record.
    pub(crate) fn followed_rx(&self) -> watch::Receiver<u64> {
        self.followed.clone()
    }

    /// Turns true when the server is stopping.
    pub(crate) fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.clone()
    }

    /// Raised after every append to the record's next offset.
    pub(crate) fn head(&self) -> watch::Receiver<u64> {
        self.head.subscribe()
    }

    /// Who may call the API.
    pub(crate) fn principals(&self) -> &Principals {
        &self.principals
    }

    /// The proposal store.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Each table's maintainer, sharing the derivers' locks (for pinning tags).
    pub(crate) fn maintainers(&self) -> &HashMap<String, Maintainer> {
        &self.maintainers
    }

    /// Held while a proposal or a decision is checked and recorded: one at a time.
    pub(crate) async fn deciding(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.deciding.lock().await
    }

    /// How the server was configured.
    pub(crate) fn config(&self) -> &ServeConfig {
        &self.config
    }

    /// Why proposals cannot be made with this spec, if they cannot.
    pub(crate) fn decisions_unsupported(&self) -> Option<&str> {
        self.decisions_unsupported.as_deref()
    }

    /// People signed in to the web inbox.
    pub(crate) fn sessions(&self) -> &web::Sessions {
        &self.sessions
    }

    /// Each table's lag over the last hour.
    pub(crate) fn lag_history(&self) -> &web::LagHistory {
        &self.lag_history
    }

    /// Failed API authentications per client address.
    pub(crate) fn auth_failures(&self) -> &auth::Failures {
        &self.auth_failures
    }

    /// How requests read state tables: this process's reader (lag against its record, keys by
    /// its lookup index).
    pub(crate) fn reader(&self) -> livestate_engine::Reader<'_> {
        self.ls.reader()
    }

    /// Every table's health, with the serving process's maintainers (their tag caches).
    pub(crate) async fn table_infos(&self) -> Result<Vec<livestate_engine::TableInfo>, ApiError> {
        Ok(self.reader().tables(Some(&self.maintainers)).await?)
    }

    /// The recorded proposal `id`, or 404.
    pub(crate) fn proposal(&self, id: &str) -> Result<store::ProposalEntry, ApiError> {
        self.store.get(id)?.ok_or_else(|| ApiError::not_found(format!("no proposal `{id}`")))
    }

    /// The proposal's whole document, from its creating event in the record.
    pub(crate) fn proposal_document(
        &self,
        p: &store::ProposalEntry,
    ) -> Result<livestate_api::proposal::ProposalDocument, ApiError> {
        let ev = self
            .ls
            .record()
            .get(p.created_offset)?
            .ok_or_else(|| ApiError::internal("the proposal's event is missing from the record"))?;
        let text = ev.event.data.get("document").and_then(serde_json::Value::as_str).unwrap_or("{}");
        serde_json::from_str(text).map_err(|e| ApiError::internal(format!("proposal document: {e}")))
    }

    /// Raises the head after an append.
    pub(crate) fn appended(&self) {
        self.head.send_replace(self.ls.record().next_offset());
    }

    /// Waits until the proposal store has applied the event at `offset`.
    pub(crate) async fn followed(&self, offset: u64) -> Result<(), ApiError> {
        let mut rx = self.followed.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while *rx.borrow_and_update() <= offset {
            if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
                return Err(ApiError::internal(format!(
                    "recorded at offset {offset}, but the proposal store has not caught up within 30 s"
                )));
            }
        }
        Ok(())
    }

    /// Asks the derive loop to commit `tables` through one offset at or past `target`.
    pub(crate) async fn barrier(&self, tables: Vec<String>, target: u64) -> Result<Barrier, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.barriers
            .send(BarrierRequest { tables, target, reply })
            .await
            .map_err(|_| ApiError::new(ErrorCode::Unavailable, "the server is stopping"))?;
        Ok(answer.await.map_err(|_| ApiError::new(ErrorCode::Unavailable, "the server is stopping"))??)
    }
}
