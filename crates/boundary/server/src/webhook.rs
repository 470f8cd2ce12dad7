//! Webhooks: each approved proposal in a module's outbox is POSTed to the module's URL, in
//! order, until the module answers 2xx; failures are retried with exponential backoff (from
//! 200 ms, doubling, at most 30 s apart). What was accepted is remembered in the proposal
//! store, so a restart resumes after the last accepted item and a module sees each at least
//! once (the `X-Livestate-Cursor` header lets it drop repeats).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::Shared;

const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

/// Delivers `module`'s outbox to `url` until the server stops.
pub(crate) async fn deliver(s: Arc<Shared>, module: String, url: String, mut stop: watch::Receiver<bool>) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("an HTTP client");
    let mut backoff = FIRST_RETRY;
    loop {
        if *stop.borrow() {
            return;
        }
        let item = s.store().delivered(&module).and_then(|after| s.store().outbox(&module, after, 1));
        let wait = match item {
            Ok(items) if items.is_empty() => POLL,
            Ok(items) => {
                let item = &items[0];
                let sent = client
                    .post(&url)
                    .header("X-Livestate-Cursor", item.cursor.to_string())
                    .json(item)
                    .send()
                    .await;
                match sent {
                    Ok(r) if r.status().is_success() => match s.store().set_delivered(&module, item.cursor) {
                        Ok(()) => {
                            backoff = FIRST_RETRY;
                            continue;
                        }
                        Err(e) => {
                            tracing::error!(%module, error = %e, "webhook: recording the delivery failed");
                            backoff
                        }
                    },
                    Ok(r) => {
                        tracing::warn!(%module, %url, status = %r.status(), cursor = item.cursor, "webhook refused; retrying");
                        backoff
                    }
                    Err(e) => {
                        tracing::warn!(%module, %url, error = %e, cursor = item.cursor, "webhook unreachable; retrying");
                        backoff
                    }
                }
            }
            Err(e) => {
                tracing::error!(%module, error = %e, "webhook: reading the outbox failed");
                backoff
            }
        };
        if wait != POLL {
            backoff = (backoff * 2).min(MAX_RETRY);
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => {}
        }
    }
}
