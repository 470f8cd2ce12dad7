//! The accept loop: HTTP/1 connections, each bounded in time and in number, so that slow or
//! silent clients cannot hold the server's descriptors and tasks.
//!
//! - **Headers**: a request's head must arrive within [`ConnectionLimits::header_timeout`] of
//!   the connection opening, or of the previous response on a kept-alive connection. That also
//!   closes a connection that says nothing, or idles between requests, for that long.
//! - **Bodies**: a request body must arrive whole within [`ConnectionLimits::body_timeout`] of
//!   the head (a body shorter than its `Content-Length`, or a chunked body that never ends); the
//!   caller gets a 408 and the connection closes.
//! - **Connections**: at most [`ConnectionLimits::max_connections`] at once; beyond it the accept
//!   loop waits for one to close (new clients wait in the listen backlog).
//! - **Stopping**: no new connections; those open finish their request in flight (idle ones
//!   close at once), for at most [`ConnectionLimits::drain_timeout`].

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Bounds on connections; see the module documentation.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Longest wait for a request's head (default 15 s).
    pub header_timeout: Duration,
    /// Longest time a request body may take to arrive (default 60 s).
    pub body_timeout: Duration,
    /// Most connections open at once (default 1024).
    pub max_connections: usize,
    /// Longest a graceful stop waits for requests in flight (default 60 s).
    pub drain_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            header_timeout: Duration::from_secs(15),
            body_timeout: Duration::from_secs(60),
            max_connections: 1024,
            drain_timeout: Duration::from_secs(60),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then drains.
///
/// # Errors
/// Never for a failed connection (it is dropped); an error of the listener that is not
/// transient (a descriptor limit is waited out).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&permits).acquire_owned() => p.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) if transient(&e) => {
                    // Out of descriptors, or a connection reset before it was accepted.
                    tracing::warn!(error = %e, "accepting a connection failed; trying again");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => return Err(e),
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let body_timeout = limits.body_timeout;
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(addr));
            let timed_out = Arc::new(AtomicBool::new(false));
            // A request without a body (most reads) needs no timer.
            let req = req.map(|body| {
                if http_body::Body::is_end_stream(&body) {
                    axum::body::Body::new(body)
                } else {
                    axum::body::Body::new(TimedBody::new(body, body_timeout, Arc::clone(&timed_out)))
                }
            });
            let mut app = app.clone();
            async move {
                let mut response = tower_service::Service::call(&mut app, req).await?;
                if timed_out.load(Ordering::Relaxed) {
                    response = body_timed_out(body_timeout);
                }
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, peer = %addr, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.drain_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still in flight after {:?}; stopping anyway", limits.drain_timeout);
    }
    Ok(())
}

fn transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    // ENFILE (23) and EMFILE (24): out of descriptors until a connection closes.
    matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted | WouldBlock)
        || matches!(e.raw_os_error(), Some(23 | 24))
}

/// The 408 a request gets when its body did not arrive in time; the connection closes after it.
fn body_timed_out(limit: Duration) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut r = crate::error::ApiError::new(
        livestate_api::ErrorCode::RequestTimeout,
        format!("the request body did not arrive within {limit:?}"),
    )
    .into_response();
    r.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    r
}

/// A request body that fails once `limit` has passed since the request's head arrived.
struct TimedBody {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
    timed_out: Arc<AtomicBool>,
}

impl TimedBody {
    fn new(inner: Incoming, limit: Duration, timed_out: Arc<AtomicBool>) -> TimedBody {
        TimedBody { inner, deadline: Box::pin(tokio::time::sleep(limit)), limit, timed_out }
    }
}

impl http_body::Body for TimedBody {
    type Data = axum::body::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(std::io::Error::other)));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.timed_out.store(true, Ordering::Relaxed);
            let limit = self.limit;
            return Poll::Ready(Some(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the request body did not arrive within {limit:?}"),
            ))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
