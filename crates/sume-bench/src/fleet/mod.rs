//! `sume-bench fleet`: 1, 2 and 4 daemon instances on one PostgreSQL, directly and through
//! PgBouncer in transaction mode, under one signed load spread over them.
//!
//! The run starts a throwaway PostgreSQL (`scripts/devpg`) and a PgBouncer in front of it
//! (`scripts/devbouncer`, `pool_mode = transaction`). Each configuration (a route and a count
//! of instances) is one step: its instances start (`sume-inbox serve`, the release build, each
//! on its own ports; `DB_POOLER=transaction` behind PgBouncer), the load of `sume-bench run`
//! (closed loop, the connections spread round-robin over the instances) runs for the warm-up
//! and the measured window while PostgreSQL's backends (and PgBouncer's server connections)
//! are sampled, the data check compares stored rows with 2xx answers, and the instances stop.
//! Configurations take turns round after round; each is reported by its median round.
//!
//! `bouncer.rs` runs PgBouncer, `step.rs` one configuration, `report.rs` the table.

mod bouncer;
mod report;
mod step;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;

use crate::cli::duration;
use crate::run::{context, output, setup};
use crate::stack;
use crate::webhook::Generator;

pub use report::{FleetReport, FleetRow};

/// The flags of `sume-bench fleet`.
#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// Instance counts, comma separated.
    #[arg(long, default_value = "1,2,4", value_delimiter = ',')]
    pub instances: Vec<usize>,
    /// Keep-alive connections of the load, spread over the instances.
    #[arg(long, default_value_t = 256)]
    pub connections: usize,
    /// The measured window of each step.
    #[arg(long, default_value = "15s", value_parser = duration)]
    pub duration: Duration,
    /// Load before each measured window, not measured (but checked for data).
    #[arg(long, default_value = "3s", value_parser = duration)]
    pub warmup: Duration,
    /// Rounds; configurations take turns, and each is reported by its median round.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub rounds: u32,
    /// How often PostgreSQL's backends (and PgBouncer's server connections) are sampled in the
    /// measured window.
    #[arg(long, default_value = "250ms", value_parser = duration)]
    pub sample_every: Duration,
    /// Only the direct route (no PgBouncer).
    #[arg(long)]
    pub no_bouncer: bool,
    /// The daemon binary (default: `sume-inbox` beside this binary, i.e. the release build).
    #[arg(long)]
    pub daemon_bin: Option<PathBuf>,
    /// The throwaway-PostgreSQL script.
    #[arg(long, default_value = "scripts/devpg")]
    pub devpg: PathBuf,
    /// The throwaway-PgBouncer script.
    #[arg(long, default_value = "scripts/devbouncer")]
    pub devbouncer: PathBuf,
    /// Where the cluster, the pooler and the daemons' logs live.
    #[arg(long, default_value = "target/bench-fleet")]
    pub work_dir: PathBuf,
    /// The file the results are appended to.
    #[arg(long, default_value = "docs/benchmarks.md")]
    pub out: PathBuf,
    /// Print the table only; append nothing.
    #[arg(long)]
    pub no_append: bool,
    /// A remark recorded with the results.
    #[arg(long, env = "BENCH_NOTE")]
    pub note: Option<String>,
}

/// How the instances reach PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Each instance's own pool of `DB_POOL_SIZE` connections (and its LISTEN connections).
    Direct,
    /// Through PgBouncer in transaction mode, `DB_POOLER=transaction`.
    Bouncer,
}

impl Route {
    /// As the table names it.
    pub fn label(self) -> &'static str {
        match self {
            Route::Direct => "direct",
            Route::Bouncer => "PgBouncer",
        }
    }
}

/// What every step shares.
struct Fleet {
    args: FleetArgs,
    daemon_bin: PathBuf,
    work_dir: PathBuf,
    pg_url: String,
    db: tokio_postgres::Client,
    bouncer: Option<bouncer::Bouncer>,
    secret: String,
    generator: Arc<Generator>,
    postmaster: Option<u32>,
}

/// `sume-bench fleet`: every configuration, round after round; prints the table and appends it.
pub async fn run(args: FleetArgs) -> anyhow::Result<()> {
    let began = Instant::now();
    anyhow::ensure!(
        !args.instances.is_empty() && !args.instances.contains(&0),
        "--instances needs counts of at least 1"
    );
    stack::ensure_fd_limit(2 * args.connections as u64 + 2048)?;
    let work_dir = setup::work_dir(&args.work_dir)?;
    eprintln!("sume-bench: starting a throwaway PostgreSQL");
    let (pg, db) = setup::throwaway_durable(&args.devpg, &work_dir).await?;
    let bouncer = if args.no_bouncer {
        None
    } else {
        eprintln!("sume-bench: starting PgBouncer (transaction mode)");
        Some(bouncer::Bouncer::start(
            &args.devbouncer,
            &work_dir.join("bouncer"),
            &pg.url,
        )?)
    };
    let (secret, generator) = setup::secret_and_generator(false, false);
    let machine = context::machine(&db).await;
    let mut fleet = Fleet {
        daemon_bin: match &args.daemon_bin {
            Some(p) => p.clone(),
            None => std::env::current_exe()?.with_file_name("sume-inbox"),
        },
        postmaster: stack::postmaster_pid(&db).await,
        args: args.clone(),
        work_dir,
        pg_url: pg.url.clone(),
        db,
        bouncer,
        secret,
        generator,
    };
    let mut rows = Vec::new();
    for round in 1..=args.rounds {
        eprintln!("sume-bench: fleet round {round} of {}", args.rounds);
        for route in fleet.routes() {
            for &n in &args.instances {
                rows.push(fleet.step(route, n).await?);
            }
        }
    }
    let report = FleetReport {
        command: context::command_line_of("bench", "FLEET_ARGS"),
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        machine,
        args,
        rows: report::median_rows(rows),
    };
    output::print_and_append(&report.markdown(), &report.args.out, report.args.no_append)?;
    drop(fleet.bouncer.take());
    drop(pg);
    eprintln!("sume-bench: done in {:.0} s", began.elapsed().as_secs_f64());
    Ok(())
}

impl Fleet {
    fn routes(&self) -> Vec<Route> {
        let mut routes = vec![Route::Direct];
        if self.bouncer.is_some() {
            routes.push(Route::Bouncer);
        }
        routes
    }
}
