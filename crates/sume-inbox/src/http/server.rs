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
//!   the limit, the oldest connection still waiting for (or reading) a request head is closed
//!   to make room; when every connection is busy with a request, the webhook that has been
//!   reading its body the longest is shed ([`super::body_readers`]: answered 503 with
//!   `Retry-After`, its connection closed), so stalled uploads can never hold every
//!   connection; when none is reading one, the new connection is closed at once. No other
//!   request being handled is ever dropped for a newcomer, and a delivery verified and waiting
//!   for its commit never is. While many connections shed are still to close, the loop waits
//!   before it accepts the next.
//! - MAX_IN_FLIGHT: requests handled at once (on the admin port, its connection cap). At the
//!   limit, the webhook that has been reading its body the longest is shed
//!   ([`super::body_readers`]) and the newcomer takes its slot; when no request is reading a
//!   body, `503` with `Retry-After` at once. The probes (`/healthz`, `/readyz`), which answer
//!   from memory, are outside it.
//! - Every request carries its peer's address ([`ConnectInfo`]).
//! - Accept errors (out of descriptors, say) are logged at a bounded rate and the loop goes on
//!   after a short pause.
//!
//! Shutdown, as with `axum::serve`: on the token the loop stops accepting, every connection
//! finishes its request in flight and closes, and [`serve`] returns when all are closed.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderValue, Method, Request, Response, StatusCode};
use axum::response::IntoResponse;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::{service_fn, Service};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::body_readers::{BodyReaders, Connection};
use super::conns::Conns;
use super::timed_body::{Expired, TimedBody};
use super::timed_io::{ConnState, ResponseDone, TimedIo, Tracked};
use crate::config::PortConfig;
use crate::metrics::{PortMetrics, TimeoutKind};
use crate::process::log_budget::LogBudget;

/// Accept errors repeat while their cause lasts: a line now and then, with how many were left out.
static ACCEPT_ERRORS_LOG: LogBudget = LogBudget::new(1, Duration::from_secs(5));

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
    retry_after_secs: u64,
    metrics: PortMetrics,
    in_flight: Arc<Semaphore>,
    body_readers: BodyReaders,
    conns: Conns,
    http: http1::Builder,
}

/// How long a newcomer waits for the slot of a request it shed (its handler answers at once).
const SHED_WAIT: Duration = Duration::from_millis(500);

/// What a port serves, and with which limits.
pub struct Port {
    /// The routes.
    pub app: Router,
    /// The setting that names the port, for its log lines (`LISTEN_ADDR`, `ADMIN_ADDR`).
    pub name: &'static str,
    /// The registry the webhook handler enters while it reads a body (shed at MAX_IN_FLIGHT).
    pub body_readers: BodyReaders,
    /// Its timeouts and limits (`max_connections` is its connection cap).
    pub config: PortConfig,
    /// Whether the server bounds request bodies by BODY_TIMEOUT (answered 408): where the
    /// handlers read them through extractors, not where a handler bounds its own.
    pub bound_bodies: bool,
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
    let Port {
        app,
        name,
        body_readers,
        config,
        bound_bodies,
        retry_after_secs,
        metrics,
    } = port;
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout + config.idle_timeout)
        .max_buf_size(MAX_BUF_SIZE);
    let server = Arc::new(Server {
        app,
        name,
        in_flight: Arc::new(Semaphore::new(config.max_in_flight)),
        conns: Conns::new(
            config.max_connections,
            body_readers.clone(),
            metrics.clone(),
        ),
        body_readers,
        body_timeout: bound_bodies.then_some(config.body_timeout),
        config,
        retry_after_secs,
        metrics,
        http,
    });
    let tracker = TaskTracker::new();
    // Dropped with this future (a stop forced at SHUTDOWN_TIMEOUT): every connection still open
    // ends with it, and with them the handles they hold, so the ingest writers can drain and
    // stop instead of waiting for a request that will never be answered.
    let abort = CancellationToken::new();
    let _abort_when_dropped = abort.clone().drop_guard();
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = server.accept(&listener) => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(name, e).await;
                    continue;
                }
            },
        };
        if let Some((id, conn)) = server.conns.admit() {
            let (stream, peer) = stream;
            let connection = server
                .clone()
                .connection(stream, peer, id, conn, shutdown.clone());
            let abort = abort.clone();
            tracker.spawn(async move {
                tokio::select! {
                    () = abort.cancelled() => {}
                    () = connection => {}
                }
            });
        }
    }
    drop(listener);
    tracker.close();
    tracker.wait().await;
    Ok(())
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
    /// The next connection, once few enough shed ones are still to close.
    async fn accept(&self, listener: &TcpListener) -> io::Result<(TcpStream, SocketAddr)> {
        self.conns.until_few_closing().await;
        listener.accept().await
    }

    /// Serves one connection until it closes, times out, is shed, or drains at shutdown.
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
            service_fn(move |request| server.clone().handle(request, conn.clone(), peer, on))
        };
        let mut http = pin!(self.http.serve_connection(io, service));
        let mut draining = false;
        let served = loop {
            tokio::select! {
                served = http.as_mut() => break served,
                // Dropping the connection closes the socket.
                _ = conn.shed.cancelled() => break Ok(()),
                _ = shutdown.cancelled(), if !draining => {
                    http.as_mut().graceful_shutdown();
                    draining = true;
                }
            }
        };
        if let Err(e) = served {
            tracing::debug!(error = %e, port = self.name, "connection ended on an error");
        }
        self.conns.forget(id);
    }

    /// One request: refused at once beyond MAX_IN_FLIGHT, else routed.
    async fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
        conn: Arc<ConnState>,
        peer: SocketAddr,
        on: Connection,
    ) -> Result<Response<Tracked>, Infallible> {
        conn.request_started();
        let done = ResponseDone::new(conn);
        // The probes answer from memory: MAX_IN_FLIGHT deliveries waiting on a slow database
        // must not fail the liveness probe (an orchestrator would restart a healthy process).
        if is_probe(&request) {
            let response = self.route(request, peer, on).await;
            return Ok(response.map(|body| Tracked::new(body, done)));
        }
        let permit = match self.in_flight.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => self.shed_a_body_reader().await,
        };
        let response = match permit {
            Some(_permit) => self.route(request, peer, on).await,
            None => {
                self.metrics.in_flight_refused.inc();
                overloaded(self.retry_after_secs)
            }
        };
        Ok(response.map(|body| Tracked::new(body, done)))
    }

    /// Hands the request to the routes, with its peer's address, the connection it came on
    /// and, where the server keeps BODY_TIMEOUT, its body bounded (a body cut by it is answered
    /// 408, whatever the handler made of the error, and the connection closed).
    async fn route(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
        on: Connection,
    ) -> Response<Body> {
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(ConnectInfo(peer));
        parts.extensions.insert(on);
        let (body, expired) = match self.body_timeout {
            Some(timeout) => {
                let (body, expired) = TimedBody::new(body, Instant::now() + timeout);
                (Body::new(body), expired)
            }
            None => (Body::new(body), Expired::default()),
        };
        let routed =
            TowerToHyperService::new(self.app.clone()).call(Request::from_parts(parts, body));
        let response = match routed.await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        if !expired.happened() {
            return response;
        }
        self.metrics.timeout(TimeoutKind::body);
        super::timed_body::late(&response)
    }

    /// At MAX_IN_FLIGHT: sheds the oldest request still reading its body and takes its slot.
    async fn shed_a_body_reader(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if !self.body_readers.shed_oldest() {
            return None;
        }
        let slot = self.in_flight.clone().acquire_owned();
        tokio::time::timeout(SHED_WAIT, slot).await.ok()?.ok()
    }
}

/// `GET` or `HEAD` of `/healthz` or `/readyz`, which read only what is in memory.
fn is_probe<B>(request: &Request<B>) -> bool {
    matches!(*request.method(), Method::GET | Method::HEAD)
        && matches!(request.uri().path(), "/healthz" | "/readyz")
}

fn overloaded(retry_after_secs: u64) -> Response<Body> {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        "too many requests in flight; retry later",
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}
