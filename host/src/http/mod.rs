//! Serving HTTP/1.1 for the API (`g2 serve`) and the model gateway: one
//! accept loop with a bound on open connections, read timeouts, and a
//! graceful shutdown with a bounded grace period.
//!
//! Only what the client owes is timed; answers never are, so server-sent
//! events and streamed model answers run as long as they need:
//! - **header**: a request's headers must be complete within this time of
//!   its first byte (of the connection's accept, for its first request);
//! - **body**: a request's body must be complete within this time of its
//!   headers — a deadline for the whole body, so a trickle cannot hold a
//!   connection open;
//! - **idle**: a kept-alive connection with no request in flight is closed
//!   after this time without a byte of a next one.
//!
//! hyper's own `header_read_timeout` starts when a connection becomes ready
//! for its next request, so it cannot tell an idle kept-alive connection
//! from a stalled head; a watchdog per connection keeps the two apart.
//! Over `max_connections`, new connections wait in the listen backlog until
//! a slot frees (the timeouts make sure one does).

pub mod loopback;

pub use loopback::Loopback;

/// Equal, in time that does not depend on where they differ (a token, a
/// CSRF token, a webhook's verify token).
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0, |acc, (x, y)| acc | (x ^ y))
            == 0
}

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, Once};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::serve::Listener;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};

/// How long connections may finish their answers after a stop is asked;
/// then they are closed (an open event stream never ends by itself).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// The bounds of one server (`api.*` or `gateway.*` settings).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl From<&crate::config::ApiSettings> for Limits {
    fn from(s: &crate::config::ApiSettings) -> Self {
        Limits {
            header_timeout: Duration::from_millis(s.header_timeout_ms),
            body_timeout: Duration::from_millis(s.body_timeout_ms),
            idle_timeout: Duration::from_secs(s.idle_timeout_secs),
            max_connections: s.max_connections,
        }
    }
}

impl From<&crate::config::GatewaySettings> for Limits {
    fn from(s: &crate::config::GatewaySettings) -> Self {
        Limits {
            header_timeout: Duration::from_millis(s.header_timeout_ms),
            body_timeout: Duration::from_millis(s.body_timeout_ms),
            idle_timeout: Duration::from_secs(s.idle_timeout_secs),
            max_connections: s.max_connections,
        }
    }
}

/// The error a request body yields when it is not complete in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body was not complete within {} ms", .0.as_millis())]
pub struct BodyTimeout(Duration);

/// Whether `e` or one of its sources is a [`BodyTimeout`].
pub fn is_body_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if e.is::<BodyTimeout>() {
            return true;
        }
        cur = e.source();
    }
    false
}

/// Serves `router` on `listener` until `shutdown` resolves; then stops
/// accepting, lets open connections finish for [`SHUTDOWN_GRACE`] and
/// closes what is left. Each request carries its connection's peer as
/// axum's `ConnectInfo<L::Addr>` (the API's back-off counts by it).
pub async fn serve<L>(
    mut listener: L,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) where
    L: Listener,
    L::Addr: Clone + Send + Sync + 'static,
{
    tune_allocator();
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut conns = JoinSet::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // The watchdog below times heads; hyper's timer would also cut idle
    // kept-alive connections at the header timeout.
    http.keep_alive(true).header_read_timeout(None);
    let mut shutdown = pin!(shutdown);
    loop {
        let slot = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
        };
        let (io, peer) = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        while conns.try_join_next().is_some() {}
        let watch = Arc::new(Watch::new());
        let service = {
            let (router, watch) = (router.clone(), watch.clone());
            hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let flight = Flight::start(watch.clone());
                let mut req = req.map(|body| with_deadline(body, limits.body_timeout));
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer.clone()));
                let answer = tower_service::Service::call(&mut router.clone(), req);
                async move {
                    let resp = answer.await?;
                    Ok::<_, std::convert::Infallible>(resp.map(|body| Answer {
                        body,
                        _flight: flight,
                    }))
                }
            })
        };
        let conn = graceful.watch(http.serve_connection(
            TokioIo::new(Watched {
                io,
                watch: watch.clone(),
            }),
            service,
        ));
        conns.spawn(async move {
            tokio::select! {
                _ = conn => {}
                _ = watch.expired(&limits) => tracing::debug!("closed a connection that stalled or idled"),
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!(
            open = conns.len(),
            "connections still open after the grace period (streams); closing them"
        );
    }
    conns.shutdown().await;
}

/// What a connection is doing, for its watchdog.
struct Watch {
    state: Mutex<State>,
    changed: Notify,
}

struct State {
    /// Requests whose answers are not finished.
    in_flight: usize,
    /// When the connection last had nothing in flight.
    idle_since: Instant,
    /// Whether a request was ever seen (the first one gets no idle time).
    served: bool,
    /// The first byte read while nothing was in flight: a head has begun.
    head_since: Option<Instant>,
}

impl Watch {
    fn new() -> Self {
        Watch {
            state: Mutex::new(State {
                in_flight: 0,
                idle_since: Instant::now(),
                served: false,
                head_since: None,
            }),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// When the connection must be closed unless something changes; None
    /// while a request is in flight.
    fn deadline(&self, limits: &Limits) -> Option<Instant> {
        let s = self.lock();
        if s.in_flight > 0 {
            return None;
        }
        Some(match s.head_since {
            Some(t) => t + limits.header_timeout,
            None if !s.served => s.idle_since + limits.header_timeout,
            None => s.idle_since + limits.idle_timeout,
        })
    }

    /// Resolves once the connection is past its deadline.
    async fn expired(&self, limits: &Limits) {
        loop {
            match self.deadline(limits) {
                Some(d) if d <= Instant::now() => return,
                Some(d) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(d) => {}
                        _ = self.changed.notified() => {}
                    }
                }
                None => self.changed.notified().await,
            }
        }
    }

    fn bytes_read(&self) {
        let mut s = self.lock();
        if s.in_flight == 0 && s.head_since.is_none() {
            s.head_since = Some(Instant::now());
            drop(s);
            // One waiter: a stored permit covers a change made before it waits.
            self.changed.notify_one();
        }
    }
}

/// A request in flight, from its head until its answer is written (or
/// dropped).
struct Flight(Arc<Watch>);

impl Flight {
    fn start(watch: Arc<Watch>) -> Self {
        {
            let mut s = watch.lock();
            s.in_flight += 1;
            s.served = true;
            s.head_since = None;
        }
        watch.changed.notify_one();
        Flight(watch)
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        {
            let mut s = self.0.lock();
            s.in_flight -= 1;
            if s.in_flight == 0 {
                s.idle_since = Instant::now();
                s.head_since = None;
            }
        }
        self.0.changed.notify_one();
    }
}

/// An answer's body; the request stays in flight until hyper drops it.
struct Answer {
    body: Body,
    _flight: Flight,
}

impl HttpBody for Answer {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

fn with_deadline(body: Incoming, limit: Duration) -> Body {
    if body.is_end_stream() {
        return Body::new(body);
    }
    Body::new(Deadline {
        body,
        sleep: Box::pin(tokio::time::sleep(limit)),
        limit,
    })
}

/// A request body that fails with [`BodyTimeout`] once its deadline passes.
struct Deadline {
    body: Incoming,
    sleep: Pin<Box<Sleep>>,
    limit: Duration,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => match self.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout(self.limit))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection's stream, telling its watchdog when bytes arrive.
struct Watched<I> {
    io: I,
    watch: Arc<Watch>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.watch.bytes_read();
        }
        r
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// glibc raises its mmap threshold each time a large block is freed (up to
/// 32 MiB), after which large request bodies come from the heap and their
/// memory stays with the process when freed. A fixed threshold keeps every
/// block of 128 KiB or more in its own mapping, returned when freed.
fn tune_allocator() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: mallopt only changes allocator parameters; it takes the
        // allocator's own locks.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        }
    });
}
