//! The load generator: N persistent HTTP/1.1 connections (hyper's client, one connection per
//! sender, no pool in between), each sending one signed delivery at a time.
//!
//! Two modes:
//! - **closed loop** ([`Mode::Closed`]): every sender sends its next delivery as soon as the
//!   previous one is answered: the most the server can take with N requests in flight;
//! - **open loop** ([`Mode::Rate`]): delivery `i` is due at `start + i / rate`, whatever
//!   happened before; a free sender takes the next due delivery. Latency runs from the
//!   *intended* time, so a stall that makes deliveries wait for a sender is counted, not hidden
//!   (coordinated omission corrected).
//!
//! A step is a warm-up followed by the measured window; both run the same loop, and only
//! requests sent (closed) or due (open) inside the window count towards rates and latencies.
//! Every 2xx, warm-up included, is counted for the data check afterwards.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{header, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use sume_wire::headers;
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::stats::Tally;
use crate::webhook::{Delivery, Generator};

/// The webhook path of both servers.
pub const PATH: &str = "/webhooks/sume";

/// How the deliveries are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// As fast as the server answers.
    Closed,
    /// A fixed rate, in deliveries per second.
    Rate(f64),
}

/// One step of load.
#[derive(Debug, Clone)]
pub struct Step {
    /// The server's webhook listener; deliveries are posted to [`PATH`].
    pub addr: SocketAddr,
    /// Persistent connections, each with one request in flight at a time.
    pub connections: usize,
    /// How the deliveries are paced.
    pub mode: Mode,
    /// Load before the measured window; its 2xx count for the data check only.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
}

/// Why a step could not run at all (a failure during the step is counted, not raised).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A TCP connection could not be opened (or set to `TCP_NODELAY`).
    #[error("cannot open connection {index} to {addr}: {source}")]
    Connect {
        /// Which of the step's connections, from 0.
        index: usize,
        /// The server's address.
        addr: SocketAddr,
        /// What the operating system reported.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP/1.1 handshake on a new connection failed.
    #[error("HTTP handshake with {addr} failed: {source}")]
    Handshake {
        /// The server's address.
        addr: SocketAddr,
        /// What hyper reported.
        #[source]
        source: hyper::Error,
    },
}

/// No single request may take longer than this; past it the request counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One persistent connection (also the chaos suite's, see [`crate::chaos`]).
pub(crate) struct Conn {
    addr: SocketAddr,
    host: String,
    sender: SendRequest<Full<Bytes>>,
}

impl Conn {
    pub(crate) async fn open(addr: SocketAddr) -> Result<Conn, LoadError> {
        Self::open_indexed(addr, 0).await
    }

    async fn open_indexed(addr: SocketAddr, index: usize) -> Result<Conn, LoadError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| LoadError::Connect {
                index,
                addr,
                source,
            })?;
        stream
            .set_nodelay(true)
            .map_err(|source| LoadError::Connect {
                index,
                addr,
                source,
            })?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|source| LoadError::Handshake { addr, source })?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            addr,
            host: addr.to_string(),
            sender,
        })
    }

    /// Sends one delivery and reads the whole answer. `None`: no answer (the connection
    /// failed, or the request timed out); the connection is then reopened for the next one.
    pub(crate) async fn send(&mut self, d: &Delivery) -> Option<StatusCode> {
        let request = Request::post(PATH)
            .header(header::HOST, self.host.as_str())
            .header(header::CONTENT_TYPE, "application/json")
            .header(headers::EVENT_ID, d.header_id.as_str())
            .header(headers::TIMESTAMP, d.timestamp)
            .header(headers::SIGNATURE, d.signature.as_str())
            .body(Full::new(d.body.clone()))
            .expect("a valid request");
        let exchange = async {
            self.sender.ready().await.ok()?;
            let response = self.sender.send_request(request).await.ok()?;
            let status = response.status();
            response.into_body().collect().await.ok()?;
            Some(status)
        };
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .ok()
            .flatten();
        if answer.is_none() {
            // Best effort: a sender that cannot reconnect keeps counting errors until the end.
            if let Ok(fresh) = Conn::open(self.addr).await {
                *self = fresh;
            }
        }
        answer
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Runs one step: opens every connection first (so connecting is not measured), then sends
/// until the warm-up and the measured window have passed, and waits for every answer.
pub async fn run(step: &Step, generator: Arc<Generator>) -> Result<Tally, LoadError> {
    run_spread(step, &[step.addr], generator).await
}

/// [`run`] with the connections spread over several servers (connection `i` goes to
/// `addrs[i % addrs.len()]`; `step.addr` is not used): one load over a fleet of instances.
pub async fn run_spread(
    step: &Step,
    addrs: &[SocketAddr],
    generator: Arc<Generator>,
) -> Result<Tally, LoadError> {
    assert!(!addrs.is_empty(), "a load needs a server");
    let mut opening = JoinSet::new();
    for index in 0..step.connections {
        let addr = addrs[index % addrs.len()];
        opening.spawn(async move { Conn::open_indexed(addr, index).await });
    }
    let mut conns = Vec::with_capacity(step.connections);
    while let Some(opened) = opening.join_next().await {
        conns.push(opened.expect("connect task")?);
    }
    let start = Instant::now();
    let clock = Clock {
        start,
        measure_from: start + step.warmup,
        end: start + step.warmup + step.duration,
    };
    let due = Arc::new(AtomicU64::new(0));
    let mut senders = JoinSet::new();
    for conn in conns {
        let generator = generator.clone();
        let due = due.clone();
        let mode = step.mode;
        senders.spawn(async move {
            match mode {
                Mode::Closed => closed_loop(conn, &generator, clock).await,
                Mode::Rate(rate) => open_loop(conn, &generator, clock, rate, &due).await,
            }
        });
    }
    let mut total = Tally::default();
    while let Some(tally) = senders.join_next().await {
        total.merge(&tally.expect("sender task"));
    }
    Ok(total)
}

#[derive(Debug, Clone, Copy)]
struct Clock {
    start: Instant,
    measure_from: Instant,
    end: Instant,
}

fn count(tally: &mut Tally, answer: Option<StatusCode>, measured: bool) {
    tally.sent_total += 1;
    let ok = answer.is_some_and(|s| s.is_success());
    if ok {
        tally.acked_total += 1;
    }
    if measured {
        match answer {
            Some(_) if ok => tally.ok += 1,
            Some(_) => tally.not_2xx += 1,
            None => tally.errors += 1,
        }
    }
}

async fn closed_loop(mut conn: Conn, generator: &Generator, clock: Clock) -> Tally {
    let mut tally = Tally::default();
    loop {
        let sent = Instant::now();
        if sent >= clock.end {
            break;
        }
        let delivery = generator.next(unix_now());
        let answer = conn.send(&delivery).await;
        let answered = Instant::now();
        let measured = sent >= clock.measure_from;
        count(&mut tally, answer, measured);
        if measured {
            tally.latency.record(answered - sent);
            tally.service.record(answered - sent);
            tally.last_answer = tally.last_answer.max(answered - clock.measure_from);
        }
    }
    tally
}

async fn open_loop(
    mut conn: Conn,
    generator: &Generator,
    clock: Clock,
    rate: f64,
    due: &AtomicU64,
) -> Tally {
    let mut tally = Tally::default();
    loop {
        let i = due.fetch_add(1, Ordering::Relaxed);
        let intended = clock.start + Duration::from_secs_f64(i as f64 / rate);
        if intended >= clock.end {
            break;
        }
        tokio::time::sleep_until(intended).await;
        let sent = Instant::now();
        let delivery = generator.next(unix_now());
        let answer = conn.send(&delivery).await;
        let answered = Instant::now();
        let measured = intended >= clock.measure_from;
        count(&mut tally, answer, measured);
        if measured {
            tally.latency.record(answered - intended);
            tally.service.record(answered - sent);
            tally.last_answer = tally.last_answer.max(answered - clock.measure_from);
        }
    }
    tally
}

/// The body of `GET path` when it answers 200 (e.g. the daemon's `/metrics`).
pub async fn get_text(addr: SocketAddr, path: &str) -> Option<String> {
    let mut conn = Conn::open(addr).await.ok()?;
    let request = Request::get(path)
        .header(header::HOST, conn.host.as_str())
        .body(Full::new(Bytes::new()))
        .ok()?;
    let exchange = async {
        let response = conn.sender.send_request(request).await.ok()?;
        if response.status() != StatusCode::OK {
            return None;
        }
        let body = response.into_body().collect().await.ok()?.to_bytes();
        String::from_utf8(body.to_vec()).ok()
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .ok()
        .flatten()
}

/// Waits until `GET path` answers 200, polling every 100 ms, for at most `patience`.
pub async fn wait_ready(addr: SocketAddr, path: &str, patience: Duration) -> bool {
    let deadline = Instant::now() + patience;
    while Instant::now() < deadline {
        if let Ok(mut conn) = Conn::open(addr).await {
            let request = Request::get(path)
                .header(header::HOST, conn.host.as_str())
                .body(Full::new(Bytes::new()))
                .expect("a valid request");
            if let Ok(response) = conn.sender.send_request(request).await {
                if response.status() == StatusCode::OK {
                    return true;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
