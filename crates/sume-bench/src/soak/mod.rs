//! `sume-bench soak` (`make soak`): one daemon held at a fixed rate for minutes (10 by
//! default, 2,000 events/s), with attach, the sweep and retention all working, sampled every
//! 30 s: its memory, the p99 of the last 30 s, and the tables' rows, bytes per live row and
//! dead tuples. After the settling time (3 minutes) no series may grow ([`verdict`]); the run
//! draws them (docs/soak.svg, [`chart`]) and appends a section to docs/benchmarks.md.
//!
//! It stands on its own: a throwaway PostgreSQL (`scripts/devpg`), the Sume simulator (in this
//! process, the sweep's counterpart), and the daemon as a child process:
//! `sume-soak-daemon`, which is `sume-inbox serve` with `SOAK_RETENTION` in place of
//! `RETENTION` and `JOB_RETENTION` (whose accepted minimum is an hour; see
//! `src/bin/soak_daemon.rs`). The traffic and the application are in [`traffic`], the samples
//! in [`sample`], the section in [`report`].

pub mod chart;
pub mod report;
pub mod sample;
mod summary;
pub mod traffic;
pub mod verdict;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;
use sume_sim::{RunningSim, SimConfig};
use tokio::time::Instant;

use crate::cli::duration;
use crate::run::{output, setup};
use crate::stack::{self, Proc};
use report::SoakReport;
use sample::Sample;
use traffic::Shared;

/// The API key's name in `SUME_API_KEYS` and in `sume.jobs.api_key`.
pub const KEY_NAME: &str = "bench";
/// The key itself, as the simulator knows it.
pub const KEY_SECRET: &str = "sk_bench";

/// The flags of `sume-bench soak`.
#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// How long the load runs.
    #[arg(long, default_value = "10m", value_parser = duration)]
    pub duration: Duration,
    /// Deliveries per second (open loop).
    #[arg(long, default_value_t = 2000.0)]
    pub rate: f64,
    /// Keep-alive connections the deliveries are spread over.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Time between two samples (and the window of each sample's p99).
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub sample_every: Duration,
    /// Where the reference of the verdicts is read (at most a third of --duration).
    #[arg(long, default_value = "3m", value_parser = duration)]
    pub settle: Duration,
    /// The span whose largest sample is read at the reference and at the end.
    #[arg(long, default_value = "1m", value_parser = duration)]
    pub span: Duration,
    /// Growth over the reference a flat series may show, in percent (beside each series'
    /// floor, printed with its verdict).
    #[arg(long, default_value_t = 20.0)]
    pub tolerance: f64,
    /// The daemon's retention of applied events and closed jobs (SOAK_RETENTION).
    #[arg(long, default_value = "1m", value_parser = duration)]
    pub retention: Duration,
    /// The daemon binary (default: `sume-soak-daemon` beside this binary).
    #[arg(long)]
    pub daemon_bin: Option<PathBuf>,
    /// The throwaway-PostgreSQL script.
    #[arg(long, default_value = "scripts/devpg")]
    pub devpg: PathBuf,
    /// Where the cluster and the daemon's log live.
    #[arg(long, default_value = "target/bench-soak")]
    pub work_dir: PathBuf,
    /// The chart (SVG); its path relative to --out's directory goes into the section.
    #[arg(long, default_value = "docs/soak.svg")]
    pub svg: PathBuf,
    /// The file the section is appended to.
    #[arg(long, default_value = "docs/benchmarks.md")]
    pub out: PathBuf,
    /// Print the section only; append nothing (the chart is still written to --svg).
    #[arg(long)]
    pub no_append: bool,
    /// A remark recorded with the results.
    #[arg(long, env = "BENCH_NOTE")]
    pub note: Option<String>,
}

impl SoakArgs {
    /// The settling time: --settle, at most a third of the run.
    pub fn settle(&self) -> Duration {
        self.settle.min(self.duration / 3)
    }
}

/// The daemon's settings beside the defaults: the simulator as Sume, short waits before the
/// inbox check and the first poll, a sweep pass every 5 s and retention batches that keep up.
fn daemon_settings(args: &SoakArgs, api_url: &str) -> Vec<(String, String)> {
    [
        ("SUME_API_URL", api_url.to_owned()),
        ("SUME_API_KEYS", format!("{KEY_NAME}:{KEY_SECRET}")),
        ("INBOX_GRACE", "10s".into()),
        // The deliveries' jobs are unknown to the simulator: a poll of one (attach leaving it
        // open this long) would answer 404 and count towards the breaker of SUME_API_URL.
        ("POLL_AFTER", "1m".into()),
        ("POLL_MAX_INTERVAL", "2m".into()),
        ("POLL_GIVE_UP", "1h".into()),
        ("SWEEP_INTERVAL", "5s".into()),
        ("RETENTION", "1h".into()),
        ("JOB_RETENTION", "1h".into()),
        ("RETENTION_BATCH", "20000".into()),
        (
            "SOAK_RETENTION",
            humantime::format_duration(args.retention).to_string(),
        ),
        // glibc writes its fatal errors (heap corruption, say) to the terminal unless told
        // otherwise: into the daemon's log with the rest, should the daemon ever abort.
        ("LIBC_FATAL_STDERR_", "1".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// `sume-bench soak`: fails when a series grows or a delivery was not answered 2xx, after the
/// section and the chart are written.
pub async fn run(args: SoakArgs) -> anyhow::Result<()> {
    let report = soak(&args).await?;
    publish(&args, &report)
}

/// The soak itself, from starting PostgreSQL to the report (nothing written yet).
pub async fn soak(args: &SoakArgs) -> anyhow::Result<SoakReport> {
    anyhow::ensure!(args.rate > 0.0, "--rate must be more than 0");
    anyhow::ensure!(
        args.sample_every > Duration::ZERO && args.duration >= args.sample_every,
        "--sample-every must be more than 0 and at most --duration"
    );
    stack::ensure_fd_limit(2 * args.connections as u64 + 1024)?;
    let work_dir = setup::work_dir(&args.work_dir)?;
    eprintln!("sume-bench: starting a throwaway PostgreSQL and the simulator");
    let (pg, db) = setup::throwaway_durable(&args.devpg, &work_dir).await?;
    let mut sim_config =
        SimConfig::for_tests().with_key(KEY_NAME, KEY_SECRET, "mem_bench", "ws_bench");
    sim_config.log_capacity = 100;
    let sim = RunningSim::start(sim_config)
        .await
        .context("starting the simulator")?;
    let (secret, generator) = setup::secret_and_generator(false, false);
    let settings = daemon_settings(args, &sim.api_url());
    let (mut daemon, addr, admin) =
        start_daemon(args, &pg.url, &secret, &settings, &work_dir).await?;

    eprintln!(
        "sume-bench: soak: {}/s for {}, a sample every {}",
        crate::report::thousands(args.rate),
        humantime::format_duration(args.duration),
        humantime::format_duration(args.sample_every)
    );
    let shared = Arc::new(Shared::default());
    let start = Instant::now();
    let end = start + args.duration;
    let sender = tokio::spawn(traffic::send(
        addr,
        args.connections,
        args.rate,
        end,
        generator.clone(),
        shared.clone(),
    ));
    let app_db = setup::connect(&pg.url).await?;
    let registrar = tokio::spawn(traffic::register(
        app_db,
        generator.clone(),
        args.rate,
        shared.clone(),
    ));
    let poll_db = setup::connect(&pg.url).await?;
    let polled = tokio::spawn(traffic::polled_jobs(poll_db, sim.api_url(), shared.clone()));

    let samples = sample_until_end(args, &db, &mut daemon, start, &shared).await?;
    sender.await??;
    registrar.await??;
    polled.await??;
    daemon.alive()?;
    let counters = summary::counters(admin).await;
    daemon.stop(Duration::from_secs(20));
    sim.stop().await?;

    let report = summary::build_report(args, &db, &shared, samples, counters, &settings).await?;
    drop(pg);
    Ok(report)
}

async fn start_daemon(
    args: &SoakArgs,
    url: &str,
    secret: &str,
    settings: &[(String, String)],
    work_dir: &std::path::Path,
) -> anyhow::Result<(Proc, std::net::SocketAddr, std::net::SocketAddr)> {
    let bin = match &args.daemon_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("sume-soak-daemon"),
    };
    let (listen, admin) = (stack::free_port()?, stack::free_port()?);
    let log = work_dir.join("daemon.log");
    let mut daemon = stack::spawn_daemon(&bin, url, secret, listen, admin, settings, &log)?;
    if !crate::load::wait_ready(listen, "/readyz", Duration::from_secs(60)).await {
        daemon.alive()?;
        bail!("the daemon is not ready after 60 s; see {}", log.display());
    }
    Ok((daemon, listen, admin))
}

/// A sample every --sample-every until the end of the load, each printed as it is taken.
async fn sample_until_end(
    args: &SoakArgs,
    db: &tokio_postgres::Client,
    daemon: &mut Proc,
    start: Instant,
    shared: &Shared,
) -> anyhow::Result<Vec<Sample>> {
    let count = (args.duration.as_secs_f64() / args.sample_every.as_secs_f64()).floor() as u32;
    let mut samples = Vec::new();
    for k in 1..=count {
        let at = args.sample_every * k;
        tokio::time::sleep_until(start + at).await;
        daemon
            .alive()
            .with_context(|| format!("see {}", args.work_dir.join("daemon.log").display()))?;
        let window = shared.take_window();
        let s = sample::take(db, daemon.pid(), at, &window).await?;
        let t = |name: &str| s.table(name).map_or(0, |t| t.live);
        eprintln!(
            "sume-bench: soak {:>5.1} min: RSS {:.1} MiB, p99 {} ms, rows events {} jobs {} job_closes {}, {} not 2xx so far",
            at.as_secs_f64() / 60.0,
            s.rss_kib as f64 / 1024.0,
            crate::report::ms(s.p99),
            t("events"),
            t("jobs"),
            t("job_closes"),
            shared.failed.load(Ordering::Relaxed),
        );
        samples.push(s);
    }
    Ok(samples)
}

/// Writes the chart, prints the section and appends it (unless --no-append); fails when a
/// series grows or a delivery was not answered 2xx.
pub fn publish(args: &SoakArgs, report: &SoakReport) -> anyhow::Result<()> {
    let settle_min = args.settle().as_secs_f64() / 60.0;
    let title = format!(
        "sume-inbox soak: {}/s for {}",
        crate::report::thousands(args.rate),
        humantime::format_duration(args.duration)
    );
    let svg = chart::svg(&report.samples, &title, settle_min)?;
    if let Some(dir) = args.svg.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.svg, svg).with_context(|| format!("writing {}", args.svg.display()))?;
    eprintln!("sume-bench: chart written to {}", args.svg.display());
    output::print_and_append(&report.markdown(), &args.out, args.no_append)?;
    let growing: Vec<String> = report
        .verdicts
        .iter()
        .filter_map(|v| v.as_ref().ok())
        .filter(|v| !v.flat)
        .map(|v| v.name.clone())
        .collect();
    let failed = report.failed;
    if !growing.is_empty() || failed > 0 {
        bail!(
            "the soak did not hold: {} series growing ({}), {failed} deliveries not answered 2xx",
            growing.len(),
            growing.join(", ")
        );
    }
    Ok(())
}
