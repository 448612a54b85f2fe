//! The ports' server loop: accepts on LISTEN_ADDR (the webhook router) or on ADMIN_ADDR (the
//! admin API and the console) and serves over hyper's HTTP/1, with the timeouts and limits a
//! port reachable by strangers needs.
//!
//! - Timeouts (HEADER_TIMEOUT, IDLE_TIMEOUT, and BODY_TIMEOUT for a response nobody reads) are
//!   kept by the socket of each connection, [`super::timed_io`]; BODY_TIMEOUT for a request's
//!   body by the webhook handler on the public port ([`super::webhook`]), by the server on the
//!   admin port ([`super::timed_body`], answered 408). A request being handled has no timer of
//!   the server's: a `?wait=` holds its connection up to MAX_WAIT. Hyper's own
//!   `header_read_timeout` is set to HEADER_TIMEOUT + IDLE_TIMEOUT, a backstop the socket's
//!   timers always beat.
//! - The connection cap (MAX_CONNECTIONS; MAX_ADMIN_CONNECTIONS), kept by [`super::conns`]: at
//!   the limit, the oldest connection lingering (below) is closed to make room, else the oldest
//!   still waiting for (or reading) a request head; when every connection is busy with a
//!   request, the webhook that has been reading its body the longest is shed
//!   ([`super::body_readers`]: answered 503 with `Retry-After`, its connection closed), so
//!   stalled uploads can never hold every connection; when none is reading one, the new
//!   connection is closed at once. No other request being handled is ever dropped for a
//!   newcomer, and a delivery verified and waiting for its commit never is. While many
//!   connections shed are still to close, the loop waits before it accepts the next.
//! - MAX_IN_FLIGHT: requests handled at once (on the admin port, its connection cap). At the
//!   limit, the webhook that has been reading its body the longest is shed
//!   ([`super::body_readers`]) and the newcomer takes its slot; when no request is reading a
//!   body, `503` with `Retry-After` at once. The probes (`/healthz`, `/readyz`), which answer
//!   from memory, are outside it.
//! - Every request carries its peer's address ([`axum::extract::ConnectInfo`]) and the
//!   connection it came on ([`super::body_readers::Connection`]); the per-request part (the
//!   MAX_IN_FLIGHT shedding, the routes) is the `request` submodule's.
//! - The close: once hyper is done with a connection (its client closed, or an answer said
//!   `Connection: close`), one whose last request's body was not read whole, or whose head
//!   hyper refused (400, 414, 431), lingers ([`super::linger`]): its write side is shut, and
//!   what its client still sends is read and discarded within a time and a byte bound, so that
//!   a client writing its whole body before it reads still reads the answer. Any other
//!   connection closes at once.
//! - HTTP/1.1 alone: a connection that opens with HTTP/2's preface (prior knowledge) is answered
//!   an HTTP/1.1 `505` saying so, counted and logged, then closed.
//! - Accept errors (out of descriptors, say) are logged at a bounded rate and the loop goes on
//!   after a short pause.
//!
//! Shutdown, as with `axum::serve`: on the token the loop stops accepting, every connection
//! finishes its request in flight and closes, and [`serve`] returns when all are closed.
//!
//! Handover: [`serve_until`] serves a port until told to stop, then gives its listener back at
//! once to be served on by [`serve`], the connections it accepted going on by themselves,
//! counted against the same cap ([`Port::conns`]).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::body_readers::{BodyReaders, Connection};
use super::conns::Conns;
use super::linger;
use super::timed_io::{ConnState, TimedIo};
use crate::config::PortConfig;
use crate::metrics::{PortMetrics, RefusedProtocol};
use crate::process::log_budget::LogBudget;

mod request;

/// Accept errors repeat while their cause lasts: a line now and then, with how many were left out.
static ACCEPT_ERRORS_LOG: LogBudget = LogBudget::new(1, Duration::from_secs(5));

/// Connections opening with HTTP/2's preface: a line now and then, with how many were left out.
static HTTP2_LOG: LogBudget = LogBudget::new(1, Duration::from_secs(5));

/// What a client speaking HTTP/2 with prior knowledge is told, and the log line about it.
const HTTP2_REFUSED: &str =
    "HTTP/2 with prior knowledge is not supported: this port speaks HTTP/1.1";

/// The pause after an accept error that says the process is out of something (descriptors,
/// memory): accepting again at once would spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// The largest buffer hyper keeps per connection: request heads larger than this are refused,
/// so a stalled connection holds at most this much.
const MAX_BUF_SIZE: usize = 16 * 1024;

/// What every connection of the port shares.
struct Server {
    app: Router,
    name: &'static str,
    config: PortConfig,
    body_timeout: Option<Duration>,
    body_limit: usize,
    retry_after_secs: u64,
    metrics: PortMetrics,
    in_flight: Arc<Semaphore>,
    body_readers: BodyReaders,
    conns: Arc<Conns>,
    http: http1::Builder,
}

/// What a port serves, and with which limits.
pub struct Port {
    /// The routes.
    pub app: Router,
    /// The setting that names the port, for its log lines (`LISTEN_ADDR`, `ADMIN_ADDR`).
    pub name: &'static str,
    /// The registry the webhook handler enters while it reads a body (shed at MAX_IN_FLIGHT
    /// and at the connection cap).
    pub body_readers: BodyReaders,
    /// Its open connections, counted against its cap (MAX_CONNECTIONS, MAX_ADMIN_CONNECTIONS):
    /// the same registry for every server that serves the port in turn ([`serve_until`], then
    /// [`serve`]).
    pub conns: Arc<Conns>,
    /// Its timeouts and limits (its connection cap is `conns`').
    pub config: PortConfig,
    /// Whether the server bounds request bodies by BODY_TIMEOUT (answered 408): where the
    /// handlers read them through extractors, not where a handler bounds its own.
    pub bound_bodies: bool,
    /// The largest request body its routes read (MAX_BODY_BYTES; the admin API's 2 MiB): a
    /// connection answered with a body unread reads a few times this before it closes
    /// ([`super::linger`]).
    pub body_limit: usize,
    /// `Retry-After` of its 503s.
    pub retry_after_secs: u64,
    /// Where its refusals and timeouts are counted.
    pub metrics: PortMetrics,
}

/// Serves `port` on `listener` until `shutdown`, then waits for every connection to close.
pub async fn serve(
    listener: TcpListener,
    port: Port,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let tracker = TaskTracker::new();
    // Dropped with this future (a stop forced at SHUTDOWN_TIMEOUT): every connection still open
    // ends with it, and with them the handles they hold, so the ingest writers can drain and
    // stop instead of waiting for a request that will never be answered.
    let abort = CancellationToken::new();
    let _abort_when_dropped = abort.clone().drop_guard();
    let connections = Connections {
        tracker: &tracker,
        drain: &shutdown,
        abort: &abort,
    };
    Server::new(port)
        .accept_until(&listener, &shutdown, connections)
        .await;
    drop(listener);
    tracker.close();
    tracker.wait().await;
    Ok(())
}

/// Serves `port` on `listener` until `handover`, then gives the listener back at once, to be
/// served on by another [`serve`] without a connection refused in between. The connections
/// accepted meanwhile go on by themselves, within the port's timeouts (answers that close
/// them end them sooner), still counted in `port.conns`, and finish their request in flight at
/// `shutdown`.
pub async fn serve_until(
    listener: &TcpListener,
    port: Port,
    handover: &CancellationToken,
    shutdown: &CancellationToken,
) {
    let connections = Connections {
        tracker: &TaskTracker::new(),
        drain: shutdown,
        abort: &CancellationToken::new(),
    };
    Server::new(port)
        .accept_until(listener, handover, connections)
        .await;
}

/// Where the accepted connections run: tasks of `tracker`, each finishing its request in flight
/// and closing at `drain`, or dropped at once at `abort`.
struct Connections<'a> {
    tracker: &'a TaskTracker,
    drain: &'a CancellationToken,
    abort: &'a CancellationToken,
}

/// Logs (at a bounded rate) and pauses when the error says the process is short of resources.
async fn accept_failed(port: &str, e: io::Error) {
    if let Some(left_out) = ACCEPT_ERRORS_LOG.allow() {
        tracing::warn!(error = %e, left_out, port, "accepting a connection failed");
    }
    let starved = matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    );
    if starved {
        tokio::time::sleep(ACCEPT_PAUSE).await;
    }
}

impl Server {
    /// The state `port`'s connections share.
    fn new(port: Port) -> Arc<Server> {
        let Port {
            app,
            name,
            body_readers,
            conns,
            config,
            bound_bodies,
            body_limit,
            retry_after_secs,
            metrics,
        } = port;
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(config.header_timeout + config.idle_timeout)
            .max_buf_size(MAX_BUF_SIZE);
        Arc::new(Server {
            app,
            name,
            in_flight: Arc::new(Semaphore::new(config.max_in_flight)),
            body_readers,
            conns,
            body_timeout: bound_bodies.then_some(config.body_timeout),
            body_limit,
            config,
            retry_after_secs,
            metrics,
            http,
        })
    }

    /// Accepts on `listener` until `stop`, each connection admitted served on `connections`.
    async fn accept_until(
        self: Arc<Self>,
        listener: &TcpListener,
        stop: &CancellationToken,
        connections: Connections<'_>,
    ) {
        loop {
            let stream = tokio::select! {
                _ = stop.cancelled() => break,
                accepted = self.accept(listener) => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        accept_failed(self.name, e).await;
                        continue;
                    }
                },
            };
            let Some((id, conn)) = self.conns.admit(&self.body_readers, &self.metrics) else {
                continue;
            };
            let (stream, peer) = stream;
            let connection =
                self.clone()
                    .connection(stream, peer, id, conn, connections.drain.clone());
            let abort = connections.abort.clone();
            connections.tracker.spawn(async move {
                tokio::select! {
                    () = abort.cancelled() => {}
                    () = connection => {}
                }
            });
        }
    }

    /// The next connection, once few enough shed ones are still to close.
    async fn accept(&self, listener: &TcpListener) -> io::Result<(TcpStream, SocketAddr)> {
        self.conns.until_few_closing().await;
        listener.accept().await
    }

    /// Serves one connection until it closes, times out, is shed, or drains at shutdown; once
    /// answered, it closes at once, or lingers when its last request's body (or head) was left
    /// unread ([`super::linger`]).
    async fn connection(
        self: Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
        id: u64,
        conn: Arc<ConnState>,
        shutdown: CancellationToken,
    ) {
        let io = TokioIo::new(TimedIo::new(
            stream,
            conn.clone(),
            &self.config,
            self.metrics.clone(),
        ));
        let service = {
            let (server, conn, on) = (self.clone(), conn.clone(), Connection(id));
            // Boxed, so that hyper can end the connection without shutting its socket, which
            // the close below does instead.
            service_fn(move |request| {
                Box::pin(server.clone().handle(request, conn.clone(), peer, on))
            })
        };
        let mut http = self.http.serve_connection(io, service);
        let mut draining = false;
        let served = loop {
            tokio::select! {
                served = std::future::poll_fn(|cx| http.poll_without_shutdown(cx)) => {
                    break Some(served);
                }
                // Dropping the connection closes the socket.
                _ = conn.shed.cancelled() => break None,
                _ = shutdown.cancelled(), if !draining => {
                    std::pin::Pin::new(&mut http).graceful_shutdown();
                    draining = true;
                }
            }
        };
        match served {
            None => {}
            Some(Err(e)) if e.is_parse_version_h2() => {
                self.refuse_http2(http.into_parts().io.into_inner(), peer)
                    .await;
            }
            Some(served) => {
                if let Some(unread) = self.answered(served, &conn) {
                    let stream = http.into_parts().io.into_inner().into_inner();
                    linger::close(stream, &conn, unread, self.body_limit, &self.metrics).await;
                }
            }
        }
        self.conns.forget(id, &self.metrics);
    }

    /// Whether a connection that hyper has done with ended on an answer, and if so whether
    /// that answer left bytes of the request unread: its body, or for an answer hyper gave to
    /// a head it could not parse (400, 414, 431), the rest of that head.
    fn answered(&self, served: hyper::Result<()>, conn: &ConnState) -> Option<bool> {
        match served {
            Ok(()) => Some(conn.body_unread()),
            Err(e) if e.is_parse() => Some(true),
            Err(e) => {
                tracing::debug!(error = %e, port = self.name, "connection ended on an error");
                None
            }
        }
    }

    /// A connection that opened with HTTP/2's preface (a client with prior knowledge, as
    /// `curl --http2-prior-knowledge`): the port speaks HTTP/1.1 alone, which hyper would say
    /// by closing it silently. Counted, logged (at a bounded rate), and answered an HTTP/1.1
    /// `505` with a line saying so, for whoever reads the bytes; then closed.
    async fn refuse_http2(&self, mut io: TimedIo, peer: SocketAddr) {
        self.metrics
            .protocol_refused(RefusedProtocol::http2_prior_knowledge);
        if let Some(left_out) = HTTP2_LOG.allow() {
            tracing::info!(%peer, left_out, port = self.name, "{HTTP2_REFUSED}");
        }
        let answer = format!(
            "HTTP/1.1 505 HTTP Version Not Supported\r\ncontent-type: text/plain; charset=utf-8\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{HTTP2_REFUSED}\n",
            HTTP2_REFUSED.len() + 1
        );
        // The write is bounded by the socket's stall timer (BODY_TIMEOUT).
        if io.write_all(answer.as_bytes()).await.is_ok() {
            let _ = io.shutdown().await;
        }
    }
}
