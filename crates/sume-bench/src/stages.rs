//! The two measurements beside ingest, run by `sume-bench run` after the ingest steps.
//!
//! - **attach**: N jobs whose events are already waiting are registered through the SQL path at
//!   full speed, or at a steady rate (each its own transaction, on several connections, as
//!   applications do); the daemon attaches them. Measured: the time from the first registration
//!   until every job is closed, and the registration-to-closed latency of each job
//!   (`closed_at - created_at`, both the database's clock), p50/p99.
//! - **sweep**: one pass of the sweep's poll service (`Poll::run_once`) over N open jobs that
//!   are due (each answered `completed` by the simulator), once in a database holding nothing else and once beside a million closed jobs
//!   with their applied events. The ratio of the two pass times shows whether a pass costs what
//!   is due or what is stored.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use serde_json::json;
use sume_inbox::actors::sweep::{Clock, Poll};
use sume_inbox::config::{ApiKey, Config, Rate, SweepConfig};
use sume_inbox::db::Store;
use sume_inbox::metrics::Metrics;
use sume_inbox::sume_api::StatusReader;
use sume_inbox::{run, Listeners};
use sume_sim::{RunningSim, SimConfig, TEST_WEBHOOK_SECRET};
use sume_wire::{Secret, StatusClient};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::sql;

/// What the attach stage measured.
#[derive(Debug, Clone)]
pub struct AttachResult {
    /// Jobs registered, each with a completed event already waiting.
    pub jobs: usize,
    /// Connections registering at once.
    pub connections: usize,
    /// Registrations per second when paced; `None` at full speed.
    pub rate: Option<f64>,
    /// From the first registration until every job was closed.
    pub total: Duration,
    /// From the first registration until the last one committed.
    pub registered_in: Duration,
    /// Registration to closed, per job, in milliseconds of the database's clock: the median.
    pub p50_ms: f64,
    /// Registration to closed: the 99th percentile, in milliseconds.
    pub p99_ms: f64,
    /// Registration to closed: the slowest job, in milliseconds.
    pub max_ms: f64,
}

/// What the sweep stage measured.
#[derive(Debug, Clone)]
pub struct SweepResult {
    /// Open jobs due in each pass, each polled at the simulator and closed.
    pub due: usize,
    /// Closed jobs, with their applied events, beside the due ones in the second database.
    pub closed_beside: usize,
    /// The pass in the database holding only the due jobs (the median of the rounds).
    pub pass_empty: Duration,
    /// The same pass beside the closed jobs (the median of the rounds).
    pub pass_beside_closed: Duration,
    /// Jobs the last pass closed; the stage fails unless it is every due job.
    pub closed_by_pass: usize,
}

impl SweepResult {
    /// `pass_beside_closed / pass_empty`: near 1 when a pass costs what is due rather than
    /// what is stored; the target is at most 1.5.
    pub fn ratio(&self) -> f64 {
        self.pass_beside_closed.as_secs_f64() / self.pass_empty.as_secs_f64()
    }
}

pub(crate) async fn client(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    Ok(sume_inbox::db::connect(url).await?)
}

/// A new database on the server of `server_url`, dropping any of that name first; answers its
/// URL.
pub async fn fresh_database(server_url: &str, name: &str) -> anyhow::Result<String> {
    anyhow::ensure!(
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
        "database name {name:?}: lower-case letters and _ only"
    );
    let admin = client(server_url).await?;
    for statement in [sql::SERVER_DROP_DATABASE, sql::SERVER_CREATE_DATABASE] {
        admin
            .batch_execute(&statement.sql().replace("{database}", name))
            .await?;
    }
    let base = server_url
        .rsplit_once('/')
        .map(|(b, _)| b)
        .unwrap_or(server_url);
    Ok(format!("{base}/{name}"))
}

fn daemon_config(url: &str) -> Config {
    let mut config = Config::local(url, TEST_WEBHOOK_SECRET);
    // No Sume: the attach stage measures registration against waiting events only.
    config.sume_api_url = "http://127.0.0.1:9/v1".into();
    config.shutdown_timeout = Duration::from_secs(10);
    config
}

/// The attach stage, on a fresh database `url`: `jobs` registrations at full speed, or at
/// `rate` a second (registration i due at the start + i / rate, taken by a free connection).
pub async fn attach(
    url: &str,
    jobs: usize,
    connections: usize,
    rate: Option<f64>,
) -> anyhow::Result<AttachResult> {
    let shutdown = CancellationToken::new();
    let daemon = daemon_thread(url, shutdown.clone()).await?;
    let store = Store::new(url, connections + 2)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.schema_migrations_version().await.unwrap_or(0) < sume_inbox::db::migrate::latest() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the daemon did not migrate the database"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The events wait already: one completed event per job, as ingest stores them.
    let c = client(url).await?;
    c.execute(sql::EVENTS_SEED_COMPLETED.sql(), &[&(jobs as i32)])
        .await?;
    c.batch_execute(sql::EVENTS_ANALYZE.sql()).await?;
    let started = Instant::now();
    register(&store, jobs, connections, rate, started).await?;
    let registered_in = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let closed: i64 = c
            .query_one(sql::JOBS_COUNT_COMPLETED.sql(), &[])
            .await?
            .get(0);
        if closed as usize == jobs {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {closed} of {jobs} jobs closed in 300 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let total = started.elapsed();
    let row = c.query_one(sql::JOBS_CLOSE_LATENCY.sql(), &[]).await?;
    shutdown.cancel();
    tokio::task::spawn_blocking(move || daemon.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the daemon's thread panicked"))??;
    Ok(AttachResult {
        jobs,
        connections,
        rate,
        total,
        registered_in,
        p50_ms: row.get::<_, f64>(0),
        p99_ms: row.get::<_, f64>(1),
        max_ms: row.get::<_, f64>(2),
    })
}

/// The daemon on a thread and a runtime of its own, with the binary's WORKER_THREADS (default
/// 1), so that the registering connections of this process do not share its threads.
async fn daemon_thread(
    url: &str,
    shutdown: CancellationToken,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
    let config = daemon_config(url);
    let webhook = TcpListener::bind(config.listen_addr).await?;
    let admin = TcpListener::bind(config.admin_addr).await?;
    daemon_thread_on(config, webhook, admin, shutdown)
}

/// The daemon of `config` on a thread and a runtime of its own (WORKER_THREADS, 1 by
/// default), on listeners already bound (a caller may need their addresses first).
pub(crate) fn daemon_thread_on(
    config: sume_inbox::Config,
    webhook: TcpListener,
    admin: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
    let (webhook, admin) = (webhook.into_std()?, admin.into_std()?);
    Ok(std::thread::spawn(move || -> anyhow::Result<()> {
        let rt = sume_inbox::process::runtime()?;
        rt.block_on(async move {
            let listeners = Listeners {
                webhook: TcpListener::from_std(webhook)?,
                admin: TcpListener::from_std(admin)?,
            };
            Ok(run(config, listeners, shutdown).await?)
        })
    }))
}

/// Registers `jobs` jobs, each its own transaction, spread over `connections`: at full speed,
/// or registration i due at `started` + i / `rate`.
async fn register(
    store: &Store,
    jobs: usize,
    connections: usize,
    rate: Option<f64>,
    started: Instant,
) -> anyhow::Result<()> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let mut writers = Vec::new();
    for _ in 0..connections {
        let (pool, next) = (store.pool().clone(), next.clone());
        writers.push(tokio::spawn(async move {
            let db = pool.get().await?;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i > jobs {
                    return Ok::<_, anyhow::Error>(());
                }
                if let Some(rate) = rate {
                    let due = started + Duration::from_secs_f64((i - 1) as f64 / rate);
                    tokio::time::sleep_until(due.into()).await;
                }
                sql::JOBS_REGISTER
                    .execute(&db, &[&format!("job_{i}")])
                    .await?;
            }
        }));
    }
    for w in writers {
        w.await??;
    }
    Ok(())
}

/// Creates `n` jobs at the simulator (they complete within milliseconds); answers their ids.
async fn sim_jobs(sim: &RunningSim, n: usize) -> anyhow::Result<Vec<String>> {
    let http = reqwest::Client::new();
    let mut ids = Vec::with_capacity(n);
    let url = format!("{}/videos/generations", sim.api_url());
    let mut pending = futures_util::stream::iter(0..n)
        .map(|_| {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let v: serde_json::Value = http
                    .post(url)
                    .bearer_auth("sk_bench")
                    .json(&json!({"prompt": "bench", "sim": {"duration_ms": 1}}))
                    .send()
                    .await?
                    .error_for_status()?
                    .json()
                    .await?;
                Ok::<_, anyhow::Error>(v["job_id"].as_str().unwrap_or_default().to_owned())
            }
        })
        .buffer_unordered(32);
    while let Some(id) = pending.next().await {
        ids.push(id?);
    }
    Ok(ids)
}

async fn prepare_sweep_db(url: &str, job_ids: &[String], closed: usize) -> anyhow::Result<()> {
    let mut c = client(url).await?;
    sume_inbox::db::migrate::migrate(&mut c).await?;
    c.batch_execute(sql::SERVER_TRIGGERS_OFF.sql()).await?;
    if closed > 0 {
        c.execute(sql::JOBS_SEED_CLOSED.sql(), &[&(closed as i32)])
            .await?;
        c.execute(sql::EVENTS_SEED_CLOSED.sql(), &[&(closed as i32)])
            .await?;
    }
    c.execute(sql::JOBS_SEED_OPEN.sql(), &[&job_ids]).await?;
    c.batch_execute(sql::SERVER_TRIGGERS_ON.sql()).await?;
    c.batch_execute(sql::JOBS_VACUUM_ANALYZE.sql()).await?;
    c.batch_execute(sql::EVENTS_VACUUM_ANALYZE.sql()).await?;
    Ok(())
}

async fn one_pass(url: &str, sim: &RunningSim, due: usize) -> anyhow::Result<(Duration, usize)> {
    let store = Store::new(url, 16)?;
    let config = SweepConfig {
        poll_after: Duration::from_secs(60),
        batch: 500,
        concurrency: 16,
        lease: Duration::from_secs(600),
        read_rate: Rate {
            count: 1_000_000,
            per: Duration::from_secs(1),
        },
        // The pass is measured, not the day's allowance: no cap within it.
        daily_reads: 100_000_000,
        request_timeout: Duration::from_secs(10),
        ..SweepConfig::default()
    };
    let metrics = Arc::new(Metrics::new());
    let reader = StatusReader::new(
        store.clone(),
        metrics.clone(),
        StatusClient::new(&sim.api_url(), Duration::from_secs(10))?,
        vec![ApiKey {
            name: "bench".into(),
            key: Secret::new("sk_bench"),
        }],
        config.read_rate,
    )
    .with_daily_reads(config.daily_reads);
    let poll = Poll::new(store.clone(), metrics, reader, config, Clock::Database);
    let started = Instant::now();
    let stats = poll.run_once(&CancellationToken::new()).await?;
    let took = started.elapsed();
    anyhow::ensure!(
        stats.closed_by_poll == due,
        "the pass closed {} of {due} jobs ({stats:?})",
        stats.closed_by_poll
    );
    Ok((took, stats.closed_by_poll))
}

/// The sweep stage: the same pass over `due` jobs without and beside `closed` closed jobs,
/// taking turns, `rounds` times each after one round that warms the caches; each keeps its
/// median.
pub async fn sweep(
    server_url: &str,
    due: usize,
    closed: usize,
    rounds: usize,
) -> anyhow::Result<SweepResult> {
    let mut sc = SimConfig::for_tests().with_key("bench", "sk_bench", "mem_bench", "ws_bench");
    sc.log_capacity = 10;
    let sim = RunningSim::start(sc)
        .await
        .context("starting the simulator")?;
    let ids = sim_jobs(&sim, due).await?;
    let empty = fresh_database(server_url, "bench_sweep_empty").await?;
    let full = fresh_database(server_url, "bench_sweep_full").await?;
    prepare_sweep_db(&empty, &ids, 0).await?;
    prepare_sweep_db(&full, &ids, closed).await?;
    let mut took: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut closed_by_pass = 0;
    for round in 0..=rounds.max(1) {
        for (i, url) in [&empty, &full].into_iter().enumerate() {
            if round > 0 {
                // Re-open the jobs the round before closed.
                client(url)
                    .await?
                    .execute(sql::JOBS_REOPEN.sql(), &[&ids])
                    .await?;
            }
            let (t, n) = one_pass(url, &sim, due).await?;
            if round > 0 {
                took[i].push(t);
            }
            closed_by_pass = n;
        }
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[(v.len() - 1) / 2]
    };
    let [mut empty_took, mut full_took] = took;
    sim.stop().await?;
    Ok(SweepResult {
        due,
        closed_beside: closed,
        pass_empty: median(&mut empty_took),
        pass_beside_closed: median(&mut full_took),
        closed_by_pass,
    })
}
