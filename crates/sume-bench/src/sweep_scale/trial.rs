//! One trial: a database of its own, the simulator and the daemon in this process (the
//! daemon on a thread and a runtime of its own, as `sume-inbox serve` runs it), the shape's
//! jobs created and registered, then a wait until every job is closed; the simulator's counts
//! of the key's reads, Sume's truth and the daemon's rows are collected for [`super::judge`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use sume_sim::{JobsAnswer, KeyCount, ListOrder, RunningSim, SimStats};
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::judge::{self, Judged, Row};
use super::shape::{Shape, KEY_NAME};
use super::traffic::{self, Planned};
use crate::sql;

/// How a trial's daemon settles open jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// LIST_WALKS=auto (else off: every job read by itself).
    pub walks: bool,
    /// The order the simulator lists a key's jobs in.
    pub order: ListOrder,
}

impl Variant {
    /// `LIST_WALKS=auto`, `LIST_WALKS=off`, `LIST_WALKS=auto, list oldest first`.
    pub fn label(&self) -> String {
        let walks = if self.walks { "auto" } else { "off" };
        match self.order {
            ListOrder::Newest => format!("LIST_WALKS={walks}"),
            ListOrder::Oldest => format!("LIST_WALKS={walks}, list oldest first"),
            ListOrder::Updated => format!("LIST_WALKS={walks}, list by update"),
        }
    }
}

/// The key's reads in the steady part of a trial (from the shape's warmup to the last create).
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    /// Reads of one job, and pages of the list.
    pub job_reads: u64,
    /// See `job_reads`.
    pub list_reads: u64,
    /// Jobs created meanwhile.
    pub jobs: usize,
    /// The window's length.
    pub secs: f64,
}

/// What one trial measured.
#[derive(Debug, Clone)]
pub struct Trial {
    /// The shape's name.
    pub shape: &'static str,
    /// How the daemon ran.
    pub variant: Variant,
    /// The key's reads of one job over the whole trial, and pages of its list.
    pub job_reads: u64,
    /// See `job_reads`.
    pub list_reads: u64,
    /// The steady part (the shipped shape's reads a day come from it).
    pub window: Window,
    /// Every job against Sume's truth, and the lost webhooks' delays.
    pub judged: Judged,
    /// From the first create until every job was closed (or the trial gave up waiting).
    pub took: Duration,
}

/// Runs one trial of `shape` with `variant` on a fresh database named `db_name`.
pub async fn run_trial(
    server_url: &str,
    db_name: &str,
    shape: &Shape,
    plan: &[Planned],
    variant: Variant,
) -> anyhow::Result<Trial> {
    wait_for_the_day(shape).await;
    let db_url = crate::stages::fresh_database(server_url, db_name).await?;
    let mut db = sume_inbox::db::connect(&db_url).await?;
    sume_inbox::db::migrate::migrate(&mut db).await?;
    let webhook = TcpListener::bind("127.0.0.1:0").await?;
    let admin = TcpListener::bind("127.0.0.1:0").await?;
    let hook_addr = webhook.local_addr()?;
    let sim = RunningSim::start(
        shape.sim_config(&format!("http://{hook_addr}/webhooks/sume"), variant.order),
    )
    .await
    .context("starting the simulator")?;
    let walks = if variant.walks { "auto" } else { "off" };
    let extra = [
        ("LIST_WALKS", walks.into()),
        (
            "SUME_READ_DAILY",
            shape.read_daily(chrono::Utc::now()).to_string(),
        ),
    ];
    let config = shape.daemon_config(&db_url, &sim.api_url(), &extra)?;
    let shutdown = CancellationToken::new();
    // The simulator had to know the webhook's address first.
    let daemon = crate::stages::daemon_thread_on(config, webhook, admin, shutdown.clone())?;
    let outcome = drive(shape, plan, &sim, &db_url, &db, hook_addr).await;
    shutdown.cancel();
    let joined = tokio::task::spawn_blocking(move || daemon.join()).await?;
    sim.stop().await?;
    let (window, counts, truth, rows, took) = outcome?;
    joined.map_err(|_| anyhow::anyhow!("the daemon's thread panicked"))??;
    Ok(Trial {
        shape: shape.name,
        variant,
        job_reads: counts.job_reads,
        list_reads: counts.list_reads,
        window,
        judged: judge::judge(&truth, &rows),
        took,
    })
}

/// A shape paced to a day's reads waits for the next UTC day when the trial could not end
/// before midnight: the day's reads come back then, which would spoil the pace it measures.
async fn wait_for_the_day(shape: &Shape) {
    if shape.reads_a_day.is_none() {
        return;
    }
    let trial = shape.creating + shape.longest() + 3 * shape.poll_max_interval();
    let left = sume_inbox::decisions::walk_choice::until_utc_midnight(chrono::Utc::now());
    if left < trial + Duration::from_secs(60) {
        eprintln!(
            "sume-bench sweep: waiting {} for the next UTC day (the trial would not end before it)",
            humantime::format_duration(Duration::from_secs(left.as_secs() + 5))
        );
        tokio::time::sleep(left + Duration::from_secs(5)).await;
    }
}

type Outcome = (Window, KeyCount, JobsAnswer, HashMap<String, Row>, Duration);

/// The application's part of a trial, from the daemon's readiness to the collected results.
async fn drive(
    shape: &Shape,
    plan: &[Planned],
    sim: &RunningSim,
    db_url: &str,
    db: &tokio_postgres::Client,
    hook_addr: SocketAddr,
) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        crate::load::wait_ready(hook_addr, "/readyz", Duration::from_secs(60)).await,
        "the daemon was not ready within 60 s"
    );
    let http = reqwest::Client::new();
    let start = Instant::now() + Duration::from_millis(100);
    let window = tokio::spawn(window_counts(
        http.clone(),
        sim.sim_url("stats"),
        start + shape.warmup,
        start + shape.creating,
    ));
    let created = traffic::create_all(shape, plan, &sim.api_url(), db_url, start).await?;
    let deadline =
        Instant::now() + shape.longest() + 3 * shape.poll_max_interval() + shape.creating;
    let took = settle(db, created.jobs.len(), start, deadline).await?;
    let counts = key_counts(&http, &sim.sim_url("stats")).await?;
    let truth: JobsAnswer = get_json(&http, &sim.sim_url(&format!("jobs?key={KEY_NAME}"))).await?;
    let rows = judge::rows(db.query(sql::JOBS_SWEEP_ROWS.sql(), &[]).await?);
    let (first, last) = window.await??;
    let warm = shape.warmup.as_secs_f64();
    let secs = (shape.creating.as_secs_f64() - warm).max(0.0);
    let gap = shape.creating.as_secs_f64() / plan.len().max(1) as f64;
    let window = Window {
        job_reads: last.job_reads.saturating_sub(first.job_reads),
        list_reads: last.list_reads.saturating_sub(first.list_reads),
        jobs: (secs / gap).round() as usize,
        secs,
    };
    Ok((window, counts, truth, rows, took))
}

/// Waits until every one of `jobs` is registered and closed, or `deadline` (then the trial
/// goes on, and the open jobs count against it); answers the time since `start`.
async fn settle(
    db: &tokio_postgres::Client,
    jobs: usize,
    start: Instant,
    deadline: Instant,
) -> anyhow::Result<Duration> {
    loop {
        let row = db.query_one(sql::JOBS_SWEEP_PROGRESS.sql(), &[]).await?;
        let (open, all): (i64, i64) = (row.get(0), row.get(1));
        if (open == 0 && all as usize == jobs) || Instant::now() >= deadline {
            if open > 0 {
                eprintln!("sume-bench sweep: {open} jobs still open at the deadline");
            }
            return Ok(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The key's counts at `from` and at `to`.
async fn window_counts(
    http: reqwest::Client,
    url: String,
    from: Instant,
    to: Instant,
) -> anyhow::Result<(KeyCount, KeyCount)> {
    tokio::time::sleep_until(from).await;
    let first = key_counts(&http, &url).await?;
    tokio::time::sleep_until(to).await;
    Ok((first, key_counts(&http, &url).await?))
}

async fn key_counts(http: &reqwest::Client, url: &str) -> anyhow::Result<KeyCount> {
    let stats: SimStats = get_json(http, url).await?;
    Ok(stats
        .keys
        .get(KEY_NAME)
        .map(|k| k.counts.clone())
        .unwrap_or_default())
}

async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> anyhow::Result<T> {
    Ok(http
        .get(url)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?
        .error_for_status()?
        .json()
        .await?)
}
