//! One connection's state and its socket with timers: what lets HEADER_TIMEOUT and
//! IDLE_TIMEOUT differ, which hyper's own `header_read_timeout` cannot (it restarts whenever
//! hyper waits for the next request head, so it would close idle kept-alive connections after
//! the header timeout).
//!
//! [`ConnState`] knows where a connection stands: waiting for (or reading) a request head, busy
//! with a request, idle after a response, or lingering as it closes; and whether the last
//! request's body was read to its end. The server loop moves it to busy when hyper hands a
//! request to the service and to idle when the response body, a [`Tracked`], is dropped
//! (written); the socket moves it from idle to reading a head when a byte arrives. [`TimedIo`]
//! fails a read with `TimedOut` once the deadline of that state has passed:
//! - reading a head: HEADER_TIMEOUT from the accept, or from the first byte of a later request
//!   the socket gives (bytes of a later request read with the one before it, pipelined, stay in
//!   hyper's buffer: the socket sees an idle connection, timed by IDLE_TIMEOUT, which bounds
//!   such a client as it bounds one that sends nothing);
//! - idle: IDLE_TIMEOUT from the end of the last response;
//! - busy: none here (a body read is bounded by BODY_TIMEOUT elsewhere, and the rest of a
//!   request is the server's own time: a `?wait=` on the admin port holds it up to MAX_WAIT);
//! - lingering, answered and closing with its last body left unread: none here, the socket is
//!   read without these timers, on the bounds of [`super::linger`].
//!
//! A write that makes no progress for BODY_TIMEOUT (a client that does not read its answers)
//! fails the same way. Each timeout is counted in the port's `..._timeouts` series.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use crate::config::PortConfig;
use crate::metrics::{PortMetrics, TimeoutKind};

/// Where a connection stands.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for, or reading, a request head since `since`.
    Head { since: Instant },
    /// A request is being handled or its response written.
    Busy,
    /// The last response was written at `since`; no byte of the next request yet.
    Idle { since: Instant },
    /// Answered and closing: what the client still sends is read and discarded
    /// ([`super::linger`]); the socket is no longer read through [`TimedIo`].
    Lingering,
}

/// One open connection, shared by its socket, its service and the server's registry.
#[derive(Debug)]
pub struct ConnState {
    phase: Mutex<Phase>,
    /// Whether the last request's body is still (in part) on the wire: set when a request with
    /// a body starts, cleared once the body has been read to its end
    /// ([`super::linger::ReadToEnd`]).
    body_unread: AtomicBool,
    /// Set when the server sheds this connection at the cap while it reads a body: no longer
    /// counted there, it closes as soon as it has answered, without lingering.
    closing: AtomicBool,
    /// Cancelled when the server sheds this connection to make room for a new one.
    pub shed: CancellationToken,
}

impl ConnState {
    /// A connection accepted now: its head is due within HEADER_TIMEOUT.
    pub fn accepted() -> ConnState {
        ConnState {
            phase: Mutex::new(Phase::Head {
                since: Instant::now(),
            }),
            body_unread: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            shed: CancellationToken::new(),
        }
    }

    fn with_phase<T>(&self, f: impl FnOnce(&mut Phase) -> T) -> T {
        f(&mut self.phase.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Hyper has read a request head and handed the request to the service; `with_body`: the
    /// request has a body, not read yet.
    pub fn request_started(&self, with_body: bool) {
        self.body_unread.store(with_body, Ordering::Relaxed);
        self.with_phase(|p| *p = Phase::Busy);
    }

    /// Whether the last request left its body, or part of it, unread: answered before it was
    /// read, or while it was.
    pub fn body_unread(&self) -> bool {
        self.body_unread.load(Ordering::Relaxed)
    }

    /// The last request's body has been read to its end.
    pub fn body_read(&self) {
        self.body_unread.store(false, Ordering::Relaxed);
    }

    /// Shed at the cap while it reads a body: it answers, then closes at once.
    pub fn closing(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    /// Whether it was shed at the cap while it read a body ([`ConnState::closing`]).
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// The connection is answered and closing, reading what its client still sends.
    pub fn lingering(&self) {
        self.with_phase(|p| *p = Phase::Lingering);
    }

    /// Answered and closing ([`ConnState::lingering`]): the first to go at the connection cap.
    pub fn is_lingering(&self) -> bool {
        self.with_phase(|p| matches!(p, Phase::Lingering))
    }

    /// The response has been written (its body dropped): the idle timer starts.
    pub fn response_done(&self) {
        self.with_phase(|p| {
            *p = Phase::Idle {
                since: Instant::now(),
            }
        });
    }

    /// Waiting for or reading a request head, so it may be shed: no request would be lost.
    pub fn awaiting_head(&self) -> bool {
        self.with_phase(|p| matches!(p, Phase::Head { .. } | Phase::Idle { .. }))
    }

    fn bytes_arrived(&self) {
        self.with_phase(|p| {
            if let Phase::Idle { .. } = p {
                *p = Phase::Head {
                    since: Instant::now(),
                };
            }
        });
    }

    fn read_deadline(&self, timeouts: &Timeouts) -> Option<(Instant, TimeoutKind)> {
        self.with_phase(|p| match *p {
            Phase::Head { since } => Some((since + timeouts.header, TimeoutKind::header)),
            Phase::Idle { since } => Some((since + timeouts.idle, TimeoutKind::idle)),
            Phase::Busy | Phase::Lingering => None,
        })
    }
}

/// The timeouts the socket keeps.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    header: Duration,
    idle: Duration,
    write: Duration,
}

/// A TCP stream whose reads and writes fail with `TimedOut` past the connection's deadlines.
pub struct TimedIo {
    inner: TcpStream,
    conn: Arc<ConnState>,
    timeouts: Timeouts,
    metrics: PortMetrics,
    read_timer: Option<Pin<Box<Sleep>>>,
    write_timer: Option<Pin<Box<Sleep>>>,
}

impl TimedIo {
    /// Wraps an accepted stream.
    pub fn new(
        inner: TcpStream,
        conn: Arc<ConnState>,
        config: &PortConfig,
        metrics: PortMetrics,
    ) -> TimedIo {
        TimedIo {
            inner,
            conn,
            timeouts: Timeouts {
                header: config.header_timeout,
                idle: config.idle_timeout,
                write: config.body_timeout,
            },
            metrics,
            read_timer: None,
            write_timer: None,
        }
    }

    /// The stream, without its timers: for a close that reads on its own bounds
    /// ([`super::linger`]).
    pub fn into_inner(self) -> TcpStream {
        self.inner
    }

    fn timed_out(&self, kind: TimeoutKind) -> io::Error {
        self.metrics.timeout(kind);
        io::Error::new(io::ErrorKind::TimedOut, format!("{kind:?} timeout"))
    }

    /// Called when a read is pending: fails it if the phase's deadline has passed, else
    /// arranges to be woken at the deadline.
    fn poll_read_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let Some((deadline, kind)) = self.conn.read_deadline(&self.timeouts) else {
            return Poll::Pending;
        };
        let timer = self
            .read_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(self.timed_out(kind)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Called on a write's outcome: progress disarms the stall timer, a pending write arms it.
    fn write_outcome<T>(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if outcome.is_ready() {
            self.write_timer = None;
            return outcome;
        }
        let stall = self.timeouts.write;
        let timer = self
            .write_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(self.timed_out(TimeoutKind::write))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for TimedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.conn.bytes_arrived();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.poll_read_deadline(cx).map(Err),
        }
    }
}

impl AsyncWrite for TimedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.inner).poll_write(cx, data);
        this.write_outcome(cx, outcome)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.write_outcome(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.inner).poll_flush(cx);
        this.write_outcome(cx, outcome)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Marks the connection idle when dropped, i.e. when hyper has written the response.
pub struct ResponseDone(Arc<ConnState>);

impl ResponseDone {
    /// For the request `conn` has just started (see [`ConnState::request_started`]).
    pub fn new(conn: Arc<ConnState>) -> ResponseDone {
        ResponseDone(conn)
    }
}

impl Drop for ResponseDone {
    fn drop(&mut self) {
        self.0.response_done();
    }
}

/// A response body that says, by being dropped, that the response has been written.
pub struct Tracked {
    body: Body,
    _done: ResponseDone,
}

impl Tracked {
    /// `body`, which marks the connection idle through `done` once it is dropped.
    pub fn new(body: Body, done: ResponseDone) -> Tracked {
        Tracked { body, _done: done }
    }
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
