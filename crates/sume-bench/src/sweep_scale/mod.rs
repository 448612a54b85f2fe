//! `sume-bench sweep` (`make bench-sweep`, part of `make bench`): what the sweep costs in
//! Sume's reads, and how late it closes a job whose webhook was lost, with the simulator
//! counting every read.
//!
//! Two shapes ([`shape`]): the issue's (600 jobs over 30 s, `POLL_MAX_INTERVAL=8s`, the day's
//! reads out of the way) and the shipped settings' ratios sixty times faster, at 100,000 jobs a
//! day, one more after every 200 running for hours, the reads paced to 9,000 a day. Each round
//! runs, per shape and side by side (each with a database, a simulator and a daemon of its own,
//! the same jobs), `LIST_WALKS=auto` and `LIST_WALKS=off` (the one-read-a-job before); the first
//! round adds `LIST_WALKS=auto` against a simulator listing oldest first. [`trial`] runs one,
//! [`judge`] checks every job against Sume's truth, [`report`] writes the section with the
//! medians of the rounds and the targets' verdicts.

pub mod judge;
pub mod report;
pub mod shape;
pub mod traffic;
pub mod trial;

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use sume_sim::ListOrder;

use crate::cli::duration;
use crate::run::{context, output, setup};
use crate::stack::Postgres;
use report::SweepReport;
use shape::Shape;
use trial::{Trial, Variant};

/// The flags of `sume-bench sweep`.
#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// Rounds of every shape and variant; the section reports their medians.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub rounds: u32,
    /// The shapes to run, comma separated: `issue`, `shipped`.
    #[arg(long, default_value = "issue,shipped", value_delimiter = ',', value_parser = ["issue", "shipped"])]
    pub shapes: Vec<String>,
    /// How long the shipped shape creates jobs, in real time (sixty times as long of the day).
    #[arg(long, default_value = "2m", value_parser = duration)]
    pub shipped_for: Duration,
    /// Leave out the first round's trial against a list served oldest first.
    #[arg(long)]
    pub no_oldest: bool,
    /// The throwaway-PostgreSQL script.
    #[arg(long, default_value = "scripts/devpg")]
    pub devpg: PathBuf,
    /// Where the throwaway cluster lives.
    #[arg(long, default_value = "target/bench-sweep")]
    pub work_dir: PathBuf,
    /// The file the section is appended to.
    #[arg(long, default_value = "docs/benchmarks.md")]
    pub out: PathBuf,
    /// Print the section only; append nothing.
    #[arg(long)]
    pub no_append: bool,
    /// A remark recorded with the results.
    #[arg(long, env = "BENCH_NOTE")]
    pub note: Option<String>,
}

impl SweepArgs {
    /// The shapes asked for, in the order given.
    pub fn shapes(&self) -> Vec<Shape> {
        self.shapes
            .iter()
            .map(|s| match s.as_str() {
                "issue" => shape::issue(),
                _ => shape::shipped(self.shipped_for),
            })
            .collect()
    }
}

/// `sume-bench sweep`: runs, prints and appends the section; fails when a job was not closed as
/// Sume ended it or a target was missed (after the section is written).
pub async fn run(args: SweepArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.shipped_for >= Duration::from_secs(30),
        "--shipped-for must be at least 30s (the steady part starts after 30 s)"
    );
    let report = measure(&args).await?;
    output::print_and_append(&report.markdown(), &args.out, args.no_append)?;
    let missed = report.missed();
    anyhow::ensure!(missed.is_empty(), "the sweep missed: {}", missed.join("; "));
    Ok(())
}

/// Every round of every shape, on one throwaway cluster; answers the report (nothing written).
pub async fn measure(args: &SweepArgs) -> anyhow::Result<SweepReport> {
    let work_dir = setup::work_dir(&args.work_dir)?;
    eprintln!("sume-bench sweep: starting a throwaway PostgreSQL");
    let pg = Postgres::start(&args.devpg, &work_dir.join("pg"), false)?;
    let db = setup::open_durable(&pg.url).await?;
    let shapes = args.shapes();
    let mut trials: Vec<Trial> = Vec::new();
    for round in 0..args.rounds as usize {
        for shape in &shapes {
            let mut variants = vec![
                Variant {
                    walks: true,
                    order: ListOrder::Newest,
                },
                Variant {
                    walks: false,
                    order: ListOrder::Newest,
                },
            ];
            if round == 0 && !args.no_oldest {
                variants.push(Variant {
                    walks: true,
                    order: ListOrder::Oldest,
                });
            }
            trials.extend(run_round(&pg.url, shape, round, &variants).await?);
        }
    }
    Ok(SweepReport {
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        command: context::command_line_of("bench-sweep", "SWEEP_ARGS"),
        machine: context::machine(&db).await,
        rounds: args.rounds as usize,
        shapes,
        trials,
        note: args.note.clone(),
    })
}

/// One round of `shape`: every variant side by side, on the same planned jobs.
async fn run_round(
    server_url: &str,
    shape: &Shape,
    round: usize,
    variants: &[Variant],
) -> anyhow::Result<Vec<Trial>> {
    eprintln!(
        "sume-bench sweep: round {} of the {} shape: {} jobs over {}, {} side by side",
        round + 1,
        shape.name,
        shape.jobs,
        humantime::format_duration(shape.creating),
        variants
            .iter()
            .map(Variant::label)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let plan = traffic::plan(shape, round as u64 + 1);
    let runs = variants.iter().enumerate().map(|(i, v)| {
        let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
        let name = format!("sweep_{}_{}_{}", shape.name, letter(round), letter(i));
        let plan = &plan;
        async move { trial::run_trial(server_url, &name, shape, plan, *v).await }
    });
    let trials = futures_util::future::try_join_all(runs).await?;
    for t in &trials {
        eprintln!("sume-bench sweep:   {}", report::trial_line(t));
    }
    Ok(trials)
}
