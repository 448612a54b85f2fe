//! `sume-dev demo`: the whole story on one machine, in about a minute.
//!
//! It starts the Sume simulator and daemon instances in this process against DATABASE_URL,
//! then plays an application: a few hundred jobs created at the simulator, each followed by
//! slow work (an order row, a "charge") before the order and the job row commit together. The
//! simulator delivers many webhooks early (before the create call even answers), duplicates
//! some, drops some, rate-limits status reads, and sends a few events for another workspace's
//! jobs to this daemon. When every job has settled, it prints what happened and checks every
//! job's state against the simulator's truth. Timings are compressed; the logic is the
//! production logic.
//!
//! Files: this one runs the story (daemons up, the application's submissions, waiting for every
//! job to settle); `config.rs` sets up the simulator's faults and the compressed timings,
//! `app.rs` is the application that submits, `report.rs` what was measured and how it prints.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::Args;
use sume_sim::RunningSim;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use sume_inbox::db::Store;

use crate::sql;
use sume_inbox::{run, Listeners};

mod app;
mod config;
mod report;

pub use report::Report;

use app::App;
use config::{daemon_config, sim_config};

/// The flags of `sume-dev demo`: the database, how much load, how many daemons.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// PostgreSQL shared by the daemons and the application; the daemons migrate it.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Jobs the application submits.
    #[arg(long, default_value_t = 300)]
    pub jobs: usize,
    /// Jobs of another workspace whose webhooks are (mis)directed to this daemon.
    #[arg(long, default_value_t = 12)]
    pub foreign_jobs: usize,
    /// Daemon instances sharing the database (webhooks alternate between them).
    #[arg(long, default_value_t = 2)]
    pub instances: usize,
    /// Submissions in flight at once.
    #[arg(long, default_value_t = 24)]
    pub concurrency: usize,
    /// The longest slow work between the 202 and the commit, in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub slow_work_ms: u64,
    /// Give up waiting for convergence after this long.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    pub deadline: Duration,
}

const APP_KEY_NAME: &str = "app";
const APP_KEY: &str = "sk_demo_app";
const OTHER_KEY: &str = "sk_demo_other_workspace";

/// Runs the demo and answers its report.
pub async fn run_demo(args: DemoArgs) -> anyhow::Result<Report> {
    let sim = RunningSim::start(sim_config(&args))
        .await
        .context("starting the simulator")?;
    let shutdown = CancellationToken::new();
    let mut daemons = Vec::new();
    let mut hooks = Vec::new();
    for _ in 0..args.instances.max(1) {
        let config = daemon_config(&args.database_url, &sim);
        let webhook = TcpListener::bind(config.listen_addr).await?;
        let admin = TcpListener::bind(config.admin_addr).await?;
        hooks.push(format!("http://{}/webhooks/sume", webhook.local_addr()?));
        daemons.push(tokio::spawn(run(
            config,
            Listeners { webhook, admin },
            shutdown.clone(),
        )));
    }
    let result = drive(&args, &sim, &hooks).await;
    shutdown.cancel();
    for d in daemons {
        d.await.context("daemon task")?.context("daemon")?;
    }
    sim.stop().await?;
    result
}

async fn drive(args: &DemoArgs, sim: &RunningSim, hooks: &[String]) -> anyhow::Result<Report> {
    let store = Store::new(&args.database_url, args.concurrency + 4)?;
    wait_until(Duration::from_secs(30), || async {
        store
            .schema_migrations_version()
            .await
            .map(|v| v >= sume_inbox::db::migrate::latest())
            .unwrap_or(false)
    })
    .await
    .context("the daemon did not migrate the database")?;
    let app = App::new(args, sim, hooks, &store)?;
    let started = Instant::now();
    println!(
        "submitting {} jobs ({} at a time, up to {} ms of slow work each) ...",
        args.jobs, args.concurrency, args.slow_work_ms
    );
    let run_id = format!("{:x}", rand::random::<u32>());
    let ours = app
        .submit_ours(&run_id, args.jobs, args.concurrency)
        .await?;
    let foreign = app.create_foreign(&run_id, args.foreign_jobs).await?;
    println!(
        "all submitted in {:.1}s; waiting for every job to settle ...",
        started.elapsed().as_secs_f64()
    );
    settle(args, sim, &store, &ours, &foreign, started).await
}

/// Measures until every job matches the simulator's truth and no event is left waiting, or
/// until the deadline; answers the last measurement.
async fn settle(
    args: &DemoArgs,
    sim: &RunningSim,
    store: &Store,
    ours: &HashMap<String, DateTime<Utc>>,
    foreign: &[String],
    started: Instant,
) -> anyhow::Result<Report> {
    let http = reqwest::Client::new();
    let instances = args.instances.max(1);
    let deadline = started + args.deadline;
    loop {
        // Nothing waiting before and after the measure: nothing changed while it was taken (a
        // late event would be waiting at the second look, its grace not over yet).
        let quiet_before = pending_events(store).await? == 0;
        let report = Report::measure(
            instances,
            sim,
            &http,
            store,
            ours,
            foreign,
            started.elapsed(),
        )
        .await?;
        let settled = report.all_match() && quiet_before && pending_events(store).await? == 0;
        if settled || Instant::now() > deadline {
            return Ok(report);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn wait_until<F, Fut>(limit: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = Instant::now() + limit;
    while !check().await {
        anyhow::ensure!(Instant::now() < end, "timed out");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Events still waiting that are neither applied nor set aside.
async fn pending_events(store: &Store) -> anyhow::Result<i64> {
    let client = store.pool().get().await?;
    let row = client
        .query_one(sql::EVENTS_COUNT_PENDING.sql(), &[])
        .await?;
    Ok(row.get(0))
}
