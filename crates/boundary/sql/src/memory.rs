//! One query's memory pool: its own limit, inside a limit shared by all queries.

use std::fmt;
use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{
    FairSpillPool, GreedyMemoryPool, MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

use crate::error::ALL_QUERIES_MEMORY;
use crate::limits::bytes;

/// A query's pool: a [`FairSpillPool`] of the query's limit (operators that can spill share it
/// fairly and spill when it is full), each reservation also taken from the pool all queries
/// share.
#[derive(Debug)]
pub(crate) struct QueryPool {
    query: FairSpillPool,
    limit: usize,
    all: Arc<GreedyMemoryPool>,
    all_limit: usize,
}

impl QueryPool {
    pub(crate) fn new(limit: usize, all: Arc<GreedyMemoryPool>, all_limit: usize) -> QueryPool {
        QueryPool { query: FairSpillPool::new(limit), limit, all, all_limit }
    }
}

impl fmt::Display for QueryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "query pool of {} within {}", bytes(self.limit as u64), bytes(self.all_limit as u64))
    }
}

impl MemoryPool for QueryPool {
    fn name(&self) -> &str {
        "livestate-query"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        self.query.register(consumer);
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.query.unregister(consumer);
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.all.grow(reservation, additional);
        self.query.grow(reservation, additional);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.query.shrink(reservation, shrink);
        self.all.shrink(reservation, shrink);
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        // Operators spill on `ResourcesExhausted`, so both refusals keep that kind.
        self.query.try_grow(reservation, additional).map_err(|e| {
            DataFusionError::ResourcesExhausted(format!(
                "the query's memory limit of {} is reached ({})",
                bytes(self.limit as u64),
                e.find_root()
            ))
        })?;
        if let Err(e) = self.all.try_grow(reservation, additional) {
            self.query.shrink(reservation, additional);
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{ALL_QUERIES_MEMORY}, {}, is in use ({})",
                bytes(self.all_limit as u64),
                e.find_root()
            )));
        }
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.query.reserved()
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.limit)
    }
}
