//! The check a writer makes right before it changes a table's metadata.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What [`Fence::check`] returns: `Err(reason)` when this process may no longer write.
pub type FenceFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// Decides, right before each snapshot commit, tag write and file deletion, whether this process
/// still owns the table's writes (e.g. a single-writer lease on object storage). A refusal
/// becomes [`crate::LsmError::Fenced`] and nothing is written.
pub trait Fence: Send + Sync + std::fmt::Debug {
    /// `Ok(())` when this process may write now.
    fn check(&self) -> FenceFuture<'_>;
}

/// A shared fence.
pub type SharedFence = Arc<dyn Fence>;
