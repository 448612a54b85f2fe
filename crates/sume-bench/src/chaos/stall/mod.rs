//! Thousands of stalled connections beside genuine deliveries: `--stalled-bodies` of them send
//! a whole signed head and part of the body and stall; `--stalled-uploads` send headers anyone
//! can write without the secret (a fresh timestamp, a signature of 64 zeros) declaring the
//! largest body the daemon takes (1 MiB), and one byte of it; of the rest, half send half a
//! request head and stall, half send a whole delivery, take its answer and sit idle.
//!
//! A stalled body or upload holds one of the daemon's `MAX_IN_FLIGHT` (1024) request slots, and
//! what it sent of its body, until `BODY_TIMEOUT` or until a newer request sheds it (503): the
//! uploads together declare 32 times `MAX_BODY_MEMORY`, which must cost the daemon only what
//! they sent. While they are all open, genuine signed deliveries are sent one after another on
//! fresh connections; each must be answered 2xx and stored. Then every stalled connection must
//! be closed by the server, within its timeout (HEADER_TIMEOUT, BODY_TIMEOUT with a 408,
//! IDLE_TIMEOUT) and the run's patience. The daemon's resident memory is read when it is
//! ready, when every stalled connection is open, and at its peak.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use sume_wire::Secret;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::load::Conn;
use crate::sql;
use crate::stack;
use crate::webhook::Generator;

use super::args::ChaosArgs;
use super::world::World;

use sockets::{open_retrying, wait_closed, Closed};

mod sockets;

/// Connections opened at once, before the daemon is given time to take them.
const BATCH: usize = 250;

/// Genuine deliveries sent while the stalled connections are open.
pub const GENUINE: usize = 20;

/// How a connection stalls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// Half a request head, then nothing: HEADER_TIMEOUT's.
    Header,
    /// A signed head and part of its body, then nothing: BODY_TIMEOUT's (answered 408), or
    /// shed at MAX_IN_FLIGHT for a newer request (answered 503).
    Body,
    /// Headers that look signed, declaring a 1 MiB body, and one byte of it: as `Body`.
    Upload,
    /// A whole delivery answered, then nothing: IDLE_TIMEOUT's.
    Idle,
}

/// How the connections of one kind fared.
#[derive(Debug, Clone)]
pub struct StallKind {
    /// Which kind.
    pub kind: Stall,
    /// The daemon's timeout for it.
    pub timeout: Duration,
    /// Connections opened.
    pub opened: usize,
    /// Closed by the server within the timeout plus the run's patience.
    pub closed: usize,
    /// Times from the connection's last byte sent (or answer read) to its close: median, max.
    pub median: Duration,
    /// See `median`.
    pub max: Duration,
    /// Body stalls answered 408 before the close.
    pub answered_408: usize,
    /// Body stalls shed (answered 503) at MAX_IN_FLIGHT to make room for newer requests.
    pub shed: usize,
    /// Closed before half their timeout: reset early rather than timed out (the kernel's
    /// listen-queue overflow, see [`StallResult::reopened`]).
    pub early: usize,
}

/// What the stall scenario showed.
#[derive(Debug, Clone)]
pub struct StallResult {
    /// Connections open at once, as the daemon counted them, before the genuine deliveries.
    pub open_seen: u64,
    /// Connections that had to be opened again: reset by the kernel before the daemon took
    /// them, when a burst of connections overflowed the listen queue (SYN cookies).
    pub reopened: u64,
    /// Genuine deliveries answered 2xx and found stored, of [`GENUINE`].
    pub genuine_ok: usize,
    /// Their answer times: median and max.
    pub genuine_median: Duration,
    /// See `genuine_median`.
    pub genuine_max: Duration,
    /// Each kind of stall.
    pub kinds: Vec<StallKind>,
    /// The daemon's resident memory (KiB): ready, every stalled connection open, and its peak
    /// (VmHWM) at the end.
    pub rss_kib: [u64; 3],
    /// What did not hold.
    pub problems: Vec<String>,
}

/// Runs the scenario on a fresh daemon with the short timeouts of `args`.
pub(super) async fn run(world: &World, args: &ChaosArgs) -> anyhow::Result<StallResult> {
    stack::ensure_fd_limit(args.stalls as u64 + 1024)?;
    let url = world.database("chaos_stall").await?;
    let fmt = |d: Duration| humantime::format_duration(d).to_string();
    let settings = [
        ("HEADER_TIMEOUT", fmt(args.header_timeout)),
        ("BODY_TIMEOUT", fmt(args.body_timeout)),
        ("IDLE_TIMEOUT", fmt(args.idle_timeout)),
        ("MAX_IN_FLIGHT", args.max_in_flight.to_string()),
    ];
    let mut daemon = world.daemon(&url, "stall", &settings)?;
    daemon.wait_ready(args.patience).await?;
    let memory = || daemon.pid().and_then(|pid| stack::memory(pid).ok());
    let ready_rss = memory().map_or(0, |m| m.now_kib);
    eprint!("sume-bench chaos: stall, {} connections ... ", args.stalls);
    let run_id = format!("{:06x}", rand::thread_rng().gen::<u32>() & 0xff_ffff);
    let generator = Arc::new(Generator::new(Secret::new(world.secret.clone()), run_id));
    let kinds = [Stall::Header, Stall::Body, Stall::Upload, Stall::Idle];
    let reopened = Arc::new(AtomicU64::new(0));
    let mut closing = JoinSet::new();
    for first in (0..args.stalls).step_by(BATCH) {
        let mut opening = JoinSet::new();
        for i in first..(first + BATCH).min(args.stalls) {
            let kind = kind_of(i, args);
            let (generator, addr, reopened) = (generator.clone(), daemon.listen, reopened.clone());
            opening.spawn(
                async move { (kind, open_retrying(addr, kind, &generator, &reopened).await) },
            );
        }
        while let Some(done) = opening.join_next().await {
            let (kind, stalled) = done?;
            let (stalled, patience) = (stalled?, args.patience + timeout_of(args, kind));
            closing.spawn(async move { (kind, wait_closed(stalled, patience).await) });
        }
        // The daemon takes what the kernel queued before the next burst is sent.
        wait_open(&daemon, closing.len() as f64, Duration::from_secs(2)).await;
    }
    let wanted = args.stalls as f64;
    let open_seen = wait_open(&daemon, wanted, args.patience).await;
    let stalled_rss = memory().map_or(0, |m| m.now_kib);
    let (genuine_ok, mut times) = genuine(daemon.listen, &generator, &url).await?;
    times.sort();
    let mut closes: Vec<(Stall, Option<Closed>)> = Vec::new();
    while let Some(done) = closing.join_next().await {
        closes.push(done?);
    }
    let peak_rss = memory().map_or(0, |m| m.peak_kib);
    let mut result = StallResult {
        open_seen,
        reopened: reopened.load(Ordering::Relaxed),
        genuine_ok,
        genuine_median: times.get(times.len() / 2).copied().unwrap_or_default(),
        genuine_max: times.last().copied().unwrap_or_default(),
        kinds: kinds
            .iter()
            .map(|&k| summarise(k, timeout_of(args, k), &closes))
            .collect(),
        rss_kib: [ready_rss, stalled_rss, peak_rss],
        problems: Vec::new(),
    };
    judge(&mut result, args);
    if daemon.alive().is_err() || !daemon.healthy().await {
        result
            .problems
            .push("the daemon is not alive and healthy after the stalls".into());
    }
    daemon.stop();
    eprintln!(
        "{} open, genuine {}/{GENUINE} in {:.0} ms (max), every stalled one closed: {}, RSS {} MiB stalled",
        result.open_seen,
        result.genuine_ok,
        result.genuine_max.as_secs_f64() * 1e3,
        result.kinds.iter().all(|k| k.closed == k.opened),
        stalled_rss / 1024
    );
    Ok(result)
}

/// Connection `i` stalls in its body (the first `--stalled-bodies`), as an upload (the next
/// `--stalled-uploads`, so they are the newest readers when the genuine deliveries come), else
/// in its headers or idle, alternately.
fn kind_of(i: usize, args: &ChaosArgs) -> Stall {
    match i {
        i if i < args.stalled_bodies => Stall::Body,
        i if i < args.stalled_bodies + args.stalled_uploads => Stall::Upload,
        i if i.is_multiple_of(2) => Stall::Header,
        _ => Stall::Idle,
    }
}

fn timeout_of(args: &ChaosArgs, kind: Stall) -> Duration {
    match kind {
        Stall::Header => args.header_timeout,
        Stall::Body | Stall::Upload => args.body_timeout,
        Stall::Idle => args.idle_timeout,
    }
}

/// Waits (up to `patience`) until the daemon counts `wanted` connections open or shed;
/// answers the most it counted open at once.
async fn wait_open(daemon: &super::world::Daemon, wanted: f64, patience: Duration) -> u64 {
    let deadline = Instant::now() + patience;
    let mut most = 0.0f64;
    while Instant::now() < deadline {
        let open = daemon.metric("sume_inbox_port_connections_open").await;
        // Bodies shed at MAX_IN_FLIGHT were taken, answered and closed: they count as seen.
        let shed = daemon.metric("sume_inbox_port_bodies_shed_total").await;
        most = most.max(open);
        if open + shed >= wanted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    most as u64
}

/// Sends [`GENUINE`] signed deliveries one after another on fresh connections; answers how
/// many were answered 2xx and are stored, and how long each answer took.
async fn genuine(
    addr: SocketAddr,
    generator: &Generator,
    url: &str,
) -> anyhow::Result<(usize, Vec<Duration>)> {
    let mut acked = Vec::new();
    let mut times = Vec::new();
    for _ in 0..GENUINE {
        let d = generator.next(chrono::Utc::now().timestamp());
        let started = Instant::now();
        let answer = match Conn::open(addr).await {
            Ok(mut c) => c.send(&d).await,
            Err(_) => None,
        };
        times.push(started.elapsed());
        if answer.is_some_and(|s| s.is_success()) {
            acked.push(d.event_id);
        }
    }
    let db = crate::stages::client(url).await?;
    let stored: std::collections::HashSet<String> = db
        .query(sql::EVENTS_RECEIVED_IDS.sql(), &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok((
        acked.iter().filter(|id| stored.contains(*id)).count(),
        times,
    ))
}

fn summarise(kind: Stall, timeout: Duration, closes: &[(Stall, Option<Closed>)]) -> StallKind {
    let mine: Vec<&Option<Closed>> = closes
        .iter()
        .filter(|c| c.0 == kind)
        .map(|c| &c.1)
        .collect();
    let mut times: Vec<Duration> = mine
        .iter()
        .filter_map(|c| c.as_ref().map(|c| c.after))
        .collect();
    times.sort();
    StallKind {
        kind,
        timeout,
        opened: mine.len(),
        closed: times.len(),
        median: times.get(times.len() / 2).copied().unwrap_or_default(),
        max: times.last().copied().unwrap_or_default(),
        answered_408: mine
            .iter()
            .filter(|c| c.as_ref().is_some_and(|c| c.got_408))
            .count(),
        shed: mine
            .iter()
            .filter(|c| c.as_ref().is_some_and(|c| c.got_503))
            .count(),
        early: times.iter().filter(|t| **t < timeout / 2).count(),
    }
}

fn judge(r: &mut StallResult, args: &ChaosArgs) {
    if r.genuine_ok != GENUINE {
        r.problems.push(format!(
            "{} of {GENUINE} genuine deliveries were answered 2xx and stored beside the stalls",
            r.genuine_ok
        ));
    }
    // A shed body's connection is closed at once, so those never count as open together.
    let shed: usize = r.kinds.iter().map(|k| k.shed).sum();
    if r.open_seen + (shed as u64) < args.stalls as u64 {
        r.problems.push(format!(
            "the daemon counted at most {} open connections of the {} stalled",
            r.open_seen, args.stalls
        ));
    }
    for k in &r.kinds {
        if k.closed != k.opened {
            r.problems.push(format!(
                "{:?}: {} of {} stalled connections still open {:?} past the timeout",
                k.kind,
                k.opened - k.closed,
                k.opened,
                args.patience
            ));
        }
        let reads_a_body = matches!(k.kind, Stall::Body | Stall::Upload);
        if reads_a_body && k.answered_408 + k.shed != k.opened {
            r.problems.push(format!(
                "{:?}: {} of {} stalled bodies were answered 408 at BODY_TIMEOUT or shed with 503",
                k.kind,
                k.answered_408 + k.shed,
                k.opened
            ));
        }
    }
}
