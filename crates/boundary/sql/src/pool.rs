//! Where queries run: a runtime of their own with a fixed number of threads, a limit on
//! queries at once (overall and per principal), and the memory all queries share.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use datafusion::execution::memory_pool::GreedyMemoryPool;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::error::{Busy, SqlError};
use crate::limits::Limits;

/// Runs SQL queries under [`Limits`]: each on a thread of its own runtime (never the
/// caller's), admitted only within the concurrency limits. Cheap to clone; clones share
/// threads, counts and memory. The runtime starts with the first query and stops, without
/// waiting, when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct Queries {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) limits: Limits,
    runtime: Mutex<Option<Runtime>>,
    /// Queries admitted and not finished, by principal (shared with the permits, which must
    /// not hold the runtime: a permit lives in a task on it).
    running: Arc<Mutex<HashMap<String, usize>>>,
    /// The memory all queries share.
    pub(crate) memory: Arc<GreedyMemoryPool>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.lock().unwrap_or_else(|p| p.into_inner()).take() {
            rt.shutdown_background();
        }
    }
}

/// A query's place: while it lives, the query counts against the limits.
#[derive(Debug)]
pub(crate) struct Permit {
    running: Arc<Mutex<HashMap<String, usize>>>,
    principal: String,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = running.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                running.remove(&self.principal);
            }
        }
    }
}

/// Aborts the task when dropped: a query whose caller went away stops at its next await.
pub(crate) struct AbortOnDrop<T>(pub(crate) JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Queries {
    /// Queries under `limits`.
    pub fn new(limits: Limits) -> Queries {
        Queries {
            inner: Arc::new(Inner {
                limits,
                runtime: Mutex::new(None),
                running: Arc::new(Mutex::new(HashMap::new())),
                memory: Arc::new(GreedyMemoryPool::new(limits.total_memory_bytes)),
            }),
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Queries running now (admitted and not finished, including any still stopping).
    pub fn running(&self) -> usize {
        self.inner.running.lock().unwrap_or_else(|p| p.into_inner()).values().sum()
    }

    /// Admits one query of `principal`.
    ///
    /// # Errors
    /// [`SqlError::Busy`] naming the limit that is reached.
    pub(crate) fn admit(&self, principal: &str) -> Result<Permit, SqlError> {
        let limits = &self.inner.limits;
        let mut running = self.inner.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.values().sum::<usize>() >= limits.concurrent {
            return Err(SqlError::Busy(Busy::All { limit: limits.concurrent }));
        }
        let mine = running.entry(principal.to_string()).or_insert(0);
        if *mine >= limits.per_principal {
            return Err(SqlError::Busy(Busy::Principal {
                name: principal.to_string(),
                limit: limits.per_principal,
            }));
        }
        *mine += 1;
        Ok(Permit { running: Arc::clone(&self.inner.running), principal: principal.to_string() })
    }

    /// Spawns `work` on the queries' runtime, starting it if needed.
    pub(crate) fn spawn<F>(&self, work: F) -> Result<AbortOnDrop<F::Output>, SqlError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let mut rt = self.inner.runtime.lock().unwrap_or_else(|p| p.into_inner());
        if rt.is_none() {
            let limits = &self.inner.limits;
            let built = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(limits.workers.max(1))
                .max_blocking_threads(limits.workers.max(1) * 4)
                .thread_stack_size(limits.stack_bytes)
                .thread_name("livestate-sql")
                .enable_all()
                .build()
                .map_err(|e| SqlError::exec("starting the SQL threads: ", e))?;
            *rt = Some(built);
        }
        let handle = rt.as_ref().expect("started above").spawn(work);
        Ok(AbortOnDrop(handle))
    }
}
