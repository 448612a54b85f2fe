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

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::Args;
use futures_util::StreamExt;
use sume_sim::{
    DeliveriesAnswer, DurationRange, Faults, JobTruth, JobsAnswer, RunningSim, SimConfig, SimStats,
    TEST_WEBHOOK_SECRET,
};
use sume_wire::{Secret, Status};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use sume_inbox::config::{ApiKey, Config, Rate, SweepConfig};
use sume_inbox::db::Store;
use sume_inbox::{run, Listeners};

use crate::submit::{Submission, SubmitClient, SubmitConfig};

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
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

/// What a demo run did, as a newcomer reads it.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub instances: usize,
    pub submitted: usize,
    pub closed_by_webhook: i64,
    pub closed_by_poll: i64,
    pub given_up: i64,
    pub states: Vec<(String, i64)>,
    pub early_attached: i64,
    pub early_before_202: usize,
    pub duplicates_absorbed: i64,
    pub foreign_jobs: usize,
    pub foreign_set_aside: i64,
    pub webhook_attempts: usize,
    pub webhook_attempts_refused: usize,
    pub status_reads: u64,
    pub status_429: u64,
    pub converge_time: Duration,
    /// Jobs whose state matches the simulator's truth.
    pub matched: usize,
    pub mismatches: Vec<String>,
}

impl Report {
    pub fn all_match(&self) -> bool {
        self.matched == self.submitted && self.mismatches.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let states: Vec<String> = self
            .states
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect();
        writeln!(f)?;
        writeln!(
            f,
            "sume-dev demo: {} daemon instance(s) on one database",
            self.instances
        )?;
        writeln!(
            f,
            "  jobs submitted ............................ {}",
            self.submitted
        )?;
        writeln!(
            f,
            "    final states ............................ {}",
            states.join(", ")
        )?;
        writeln!(
            f,
            "  closed by webhook ......................... {}",
            self.closed_by_webhook
        )?;
        writeln!(
            f,
            "  closed by poll (webhook dropped or late) .. {}",
            self.closed_by_poll
        )?;
        if self.given_up > 0 {
            writeln!(
                f,
                "  given up (POLL_GIVE_UP) ................... {}",
                self.given_up
            )?;
        }
        writeln!(
            f,
            "  early events attached ..................... {} (arrived before the job row committed; {} even before the 202)",
            self.early_attached, self.early_before_202
        )?;
        writeln!(
            f,
            "  duplicate deliveries absorbed ............. {}",
            self.duplicates_absorbed
        )?;
        writeln!(
            f,
            "  foreign events set aside .................. {} (from {} jobs of another workspace)",
            self.foreign_set_aside, self.foreign_jobs
        )?;
        writeln!(
            f,
            "  webhook attempts spent .................... {} ({} not answered 2xx)",
            self.webhook_attempts, self.webhook_attempts_refused
        )?;
        writeln!(
            f,
            "  status reads at Sume ...................... {} ({} answered 429, each waited out)",
            self.status_reads, self.status_429
        )?;
        writeln!(
            f,
            "  time to converge .......................... {:.1}s",
            self.converge_time.as_secs_f64()
        )?;
        if self.all_match() {
            writeln!(
                f,
                "  every job's state matches the simulator's truth: {}/{} ✓",
                self.matched, self.submitted
            )
        } else {
            writeln!(
                f,
                "  MISMATCH: {}/{} jobs match the simulator's truth; first differences: {}",
                self.matched,
                self.submitted,
                self.mismatches
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
    }
}

fn sim_config(args: &DemoArgs) -> SimConfig {
    let mut c = SimConfig::for_tests()
        .with_key(APP_KEY_NAME, APP_KEY, "mem_app", "ws_demo")
        .with_key("other", OTHER_KEY, "mem_other", "ws_other");
    c.timing.duration_short = DurationRange::millis(50, 400);
    c.timing.long_fraction = 0.1;
    c.timing.duration_long = DurationRange::millis(1_000, 3_000);
    // Sume's 120 reads a minute, compressed to 5 seconds.
    c.limits.reads_per_window = 60;
    c.limits.rate_window = Duration::from_secs(5);
    c.limits.creates_per_window = (args.jobs + args.foreign_jobs).max(10) as u32 * 2;
    c.delivery.webhook_backoff_base = Duration::from_millis(50);
    c.delivery.webhook_backoff_cap = Duration::from_secs(1);
    c.delivery.webhook_timeout = Duration::from_secs(10);
    c.delivery.duplicate_delay = Duration::from_millis(100);
    c.delivery.late_delay = Duration::from_millis(100);
    c.faults = Faults {
        early: 0.3,
        duplicate: 0.15,
        drop: 0.08,
        late_nonterminal: 0.05,
        failed: 0.06,
        canceled: 0.02,
        expired: 0.02,
        status_429: 0.03,
        status_429_retry_after: Duration::from_secs(1),
        ..Faults::none()
    };
    c
}

fn daemon_config(database_url: &str, sim: &RunningSim) -> Config {
    let mut c = Config::local(database_url, TEST_WEBHOOK_SECRET);
    c.db_pool_size = 8;
    c.sume_api_url = sim.api_url();
    c.api_keys = vec![ApiKey {
        name: APP_KEY_NAME.to_owned(),
        key: Secret::new(APP_KEY),
    }];
    c.attach.scan_interval = Duration::from_secs(1);
    // Compressed time: a demo minute holds what production spreads over hours.
    c.sweep = SweepConfig {
        interval: Duration::from_millis(250),
        inbox_grace: Duration::from_secs(2),
        poll_after: Duration::from_secs(1),
        poll_max_interval: Duration::from_secs(2),
        poll_give_up: Duration::from_secs(300),
        lease: Duration::from_secs(10),
        read_rate: Rate {
            count: 50,
            per: Duration::from_secs(5),
        },
        request_timeout: Duration::from_secs(2),
        ..SweepConfig::default()
    };
    c.shutdown_timeout = Duration::from_secs(5);
    c
}

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
    let http = reqwest::Client::new();
    let slow = Duration::ZERO..=Duration::from_millis(args.slow_work_ms);
    let clients: Vec<Arc<SubmitClient>> = hooks
        .iter()
        .map(|hook| {
            let config = SubmitConfig::new(sim.api_url(), APP_KEY_NAME, Secret::new(APP_KEY))
                .with_webhook_url(hook.clone())
                .with_slow_work(slow.clone());
            SubmitClient::new(config, store.pool().clone()).map(Arc::new)
        })
        .collect::<Result<_, _>>()?;
    let other = SubmitClient::new(
        SubmitConfig::new(sim.api_url(), "other", Secret::new(OTHER_KEY))
            .with_webhook_url(hooks[0].clone()),
        store.pool().clone(),
    )?;
    let started = Instant::now();
    println!(
        "submitting {} jobs ({} at a time, up to {} ms of slow work each) ...",
        args.jobs, args.concurrency, args.slow_work_ms
    );
    let run_id = format!("{:x}", rand::random::<u32>());
    let commits: Vec<(String, DateTime<Utc>)> = futures_util::stream::iter(0..args.jobs)
        .map(|i| {
            let client = clients[i % clients.len()].clone();
            let order = format!("order-{run_id}-{i:04}");
            async move {
                let submitted = client
                    .submit(&Submission::new(order, "a fox at dawn"))
                    .await?;
                Ok::<_, anyhow::Error>((submitted.job_id, Utc::now()))
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let mut foreign = Vec::new();
    for i in 0..args.foreign_jobs {
        let order = format!("theirs-{run_id}-{i:03}");
        foreign.push(
            other
                .create_job(&Submission::new(order, "not ours"))
                .await?,
        );
    }
    println!(
        "all submitted in {:.1}s; waiting for every job to settle ...",
        started.elapsed().as_secs_f64()
    );
    let ours: HashMap<String, DateTime<Utc>> = commits.into_iter().collect();
    let deadline = started + args.deadline;
    let report = loop {
        let report = snapshot(args, sim, &http, &store, &ours, &foreign, started.elapsed()).await?;
        let settled = report.all_match() && pending_events(&store).await? == 0;
        if settled || Instant::now() > deadline {
            break report;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    Ok(report)
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
        .query_one(
            "select count(*) from sume.events where applied_at is null and set_aside_at is null",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

async fn snapshot(
    args: &DemoArgs,
    sim: &RunningSim,
    http: &reqwest::Client,
    store: &Store,
    ours: &HashMap<String, DateTime<Utc>>,
    foreign: &[String],
    elapsed: Duration,
) -> anyhow::Result<Report> {
    let truth: JobsAnswer = http.get(sim.sim_url("jobs")).send().await?.json().await?;
    let deliveries: DeliveriesAnswer = http
        .get(sim.sim_url("deliveries"))
        .send()
        .await?
        .json()
        .await?;
    let stats: SimStats = http.get(sim.sim_url("stats")).send().await?.json().await?;
    let truth: HashMap<&str, &JobTruth> = truth.jobs.iter().map(|j| (j.id.as_str(), j)).collect();
    let client = store.pool().get().await?;
    let ids: Vec<&str> = ours.keys().map(String::as_str).collect();
    let rows = client
        .query(
            "select job_id, state, closed_by from sume.jobs where job_id = any($1)",
            &[&ids],
        )
        .await?;
    let mut report = Report {
        instances: args.instances.max(1),
        submitted: ours.len(),
        foreign_jobs: foreign.len(),
        converge_time: elapsed,
        ..Report::default()
    };
    let mut states: HashMap<String, i64> = HashMap::new();
    for row in &rows {
        let (id, state, closed_by): (String, String, Option<String>) =
            (row.get(0), row.get(1), row.get(2));
        *states.entry(state.clone()).or_default() += 1;
        match closed_by.as_deref() {
            Some("webhook") => report.closed_by_webhook += 1,
            Some("poll") => report.closed_by_poll += 1,
            Some("give_up") => report.given_up += 1,
            _ => {}
        }
        let want = truth.get(id.as_str()).and_then(|t| {
            t.terminal
                .then(|| Status::parse(&t.final_status).terminal())
                .flatten()
        });
        match want {
            Some(w) if w.as_str() == state => report.matched += 1,
            Some(w) => report
                .mismatches
                .push(format!("{id}: {state}, Sume says {w}")),
            None => report
                .mismatches
                .push(format!("{id}: {state}, still running at Sume")),
        }
    }
    let mut states: Vec<(String, i64)> = states.into_iter().collect();
    states.sort_by_key(|s| std::cmp::Reverse(s.1));
    report.states = states;
    // Early: the closing event arrived before the order's transaction committed.
    let events = client
        .query(
            "select job_id, received_at from sume.events where outcome = 'closed' and job_id = any($1)",
            &[&ids],
        )
        .await?;
    report.early_attached = events
        .iter()
        .filter(|r| {
            ours.get(&r.get::<_, String>(0))
                .is_some_and(|c| r.get::<_, DateTime<Utc>>(1) < *c)
        })
        .count() as i64;
    report.early_before_202 = deliveries
        .deliveries
        .iter()
        .filter(|d| d.early && d.ok && ours.contains_key(&d.job_id))
        .count();
    let stored: i64 = client
        .query_one("select count(*) from sume.events", &[])
        .await?
        .get(0);
    let ok = deliveries.deliveries.iter().filter(|d| d.ok).count() as i64;
    report.duplicates_absorbed = ok - stored;
    report.foreign_set_aside = client
        .query_one(
            "select count(*) from sume.events where set_aside_at is not null",
            &[],
        )
        .await?
        .get(0);
    report.webhook_attempts = deliveries.deliveries.len();
    report.webhook_attempts_refused = deliveries.deliveries.iter().filter(|d| !d.ok).count();
    if let Some(k) = stats.keys.get(APP_KEY_NAME) {
        report.status_reads = k.counts.reads;
        report.status_429 = k.counts.rate_limited + k.counts.fault_429;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            instances: 2,
            submitted: 3,
            closed_by_webhook: 2,
            closed_by_poll: 1,
            given_up: 0,
            states: vec![("completed".to_owned(), 2), ("failed".to_owned(), 1)],
            early_attached: 1,
            early_before_202: 1,
            duplicates_absorbed: 4,
            foreign_jobs: 2,
            foreign_set_aside: 2,
            webhook_attempts: 9,
            webhook_attempts_refused: 1,
            status_reads: 5,
            status_429: 1,
            converge_time: Duration::from_millis(12_340),
            matched: 3,
            mismatches: Vec::new(),
        }
    }

    #[test]
    fn the_report_prints_every_figure_and_the_verdict() {
        let expected = "
sume-dev demo: 2 daemon instance(s) on one database
  jobs submitted ............................ 3
    final states ............................ 2 completed, 1 failed
  closed by webhook ......................... 2
  closed by poll (webhook dropped or late) .. 1
  early events attached ..................... 1 (arrived before the job row committed; 1 even before the 202)
  duplicate deliveries absorbed ............. 4
  foreign events set aside .................. 2 (from 2 jobs of another workspace)
  webhook attempts spent .................... 9 (1 not answered 2xx)
  status reads at Sume ...................... 5 (1 answered 429, each waited out)
  time to converge .......................... 12.3s
  every job's state matches the simulator's truth: 3/3 ✓
";
        assert_eq!(report().to_string(), expected);
    }

    #[test]
    fn a_mismatch_and_a_give_up_are_printed() {
        let report = Report {
            given_up: 1,
            closed_by_poll: 0,
            matched: 2,
            mismatches: (1..=7).map(|i| format!("job_{i}: running")).collect(),
            ..report()
        };
        let text = report.to_string();
        assert!(
            text.contains("\n  given up (POLL_GIVE_UP) ................... 1\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "  MISMATCH: 2/3 jobs match the simulator's truth; first differences: \
                 job_1: running; job_2: running; job_3: running; job_4: running; job_5: running\n"
            ),
            "{text}"
        );
    }
}
