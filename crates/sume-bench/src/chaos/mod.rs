//! `sume-bench chaos` (what `make chaos` runs): the promise "a delivery answered 2xx is never
//! lost" tried against faults, with real processes on loopback and a real PostgreSQL.
//!
//! - `faults`: signed load on a daemon process while it is killed (`kill -9`, twice, restarted
//!   at once), while its database connections are cut, while the inbox is locked past
//!   `INGEST_TIMEOUT`, and while PostgreSQL crashes and comes back; every delivery answered 2xx
//!   must be in the inbox, 2xx must resume after each fault, and the daemon must survive;
//! - `race`: three instances and racing jobs (early, duplicate, late and out-of-order
//!   deliveries): every job closed by its own terminal event exactly once;
//! - `stall`: thousands of stalled connections beside genuine deliveries.
//!
//! Every scenario takes its size from [`ChaosArgs`]: `make chaos` runs the defaults (over
//! 50,000 acknowledged deliveries), and an integration test runs [`ChaosArgs::small`] inside
//! `make test`. `traffic` is the recording load, `world` the server, databases and daemons,
//! `report` the figures. Every process started is stopped when its guard drops.

mod args;
mod disk;
mod faults;
mod ground;
mod ha;
mod proxy;
mod race;
mod report;
mod stall;
mod traffic;
mod world;

pub use args::{ChaosArgs, Scenario};
pub use faults::{FaultRun, Figure, Unit};
pub use ha::cost::{CostResult, ModeCost};
pub use race::RaceResult;
pub use report::{median, ChaosReport};
pub use stall::{Stall, StallKind, StallResult, GENUINE};

use world::World;

/// Runs the scenarios of `args` in order and answers what they measured. Fails at once when a
/// scenario cannot be carried out or a wait outlasts `--patience` (a hang); what a scenario
/// found wrong (a lost delivery, a job closed twice, a connection left open) is in
/// [`ChaosReport::problems`].
pub async fn run(args: &ChaosArgs) -> anyhow::Result<ChaosReport> {
    let world = World::start(args)?;
    let mut report = ChaosReport {
        heading: heading(args),
        ..ChaosReport::default()
    };
    for &scenario in &args.scenarios {
        if let Some(why) = cannot_run(&world, scenario) {
            report.skipped.push(format!("{}: {why}", scenario.name()));
            continue;
        }
        match scenario {
            Scenario::Race => report.race = Some(race::run(&world, args).await?),
            Scenario::Stall => report.stall = Some(stall::run(&world, args).await?),
            Scenario::SyncCost => report.cost = Some(ha::cost::run(&world, args).await?),
            _ => {
                for round in 1..=args.rounds {
                    let run = match scenario {
                        Scenario::Failover
                        | Scenario::FailoverSilent
                        | Scenario::FailoverAsync
                        | Scenario::SplitBrain
                        | Scenario::Failback => ha::run(&world, args, scenario, round).await?,
                        Scenario::SumeBlackHole => ha::sume_hole::run(&world, args, round).await?,
                        _ => faults::run(&world, args, scenario, round).await?,
                    };
                    report.faults.push(run);
                }
            }
        }
    }
    Ok(report)
}

/// Why `scenario` cannot run here, if it cannot: the crash needs the run's own server, the
/// black hole nftables, the full disk a tmpfs mount.
fn cannot_run(world: &World, scenario: Scenario) -> Option<String> {
    match scenario {
        Scenario::Crash if !world.owns_server() => {
            Some("--database-url names a server this run does not own".to_owned())
        }
        Scenario::BlackHole | Scenario::FailoverSilent => proxy::Nft::usable()
            .err()
            .map(|e| format!("nftables cannot drop packets here ({e})")),
        Scenario::DiskFull => disk::SmallDisk::usable()
            .err()
            .map(|e| format!("no tmpfs can be mounted here ({e})")),
        _ => None,
    }
}

/// `sume-bench chaos`: runs, prints the report, and fails when anything did not hold.
pub async fn main(args: ChaosArgs) -> anyhow::Result<()> {
    let report = run(&args).await?;
    println!("\n{}", report.markdown());
    let problems = report.problems();
    if !problems.is_empty() {
        anyhow::bail!("the chaos suite failed:\n- {}", problems.join("\n- "));
    }
    eprintln!(
        "sume-bench chaos: passed: {} acknowledged, {} lost",
        report.acked(),
        report.lost()
    );
    Ok(())
}

/// The command as the reader would type it, the date, the revision and the machine.
fn heading(args: &ChaosArgs) -> Vec<String> {
    let argv: Vec<String> = std::env::args().skip(2).collect();
    let command = if std::env::var_os("MAKELEVEL").is_some() {
        if argv.is_empty() {
            "make chaos".to_owned()
        } else {
            format!("make chaos CHAOS_ARGS=\"{}\"", argv.join(" "))
        }
    } else {
        std::env::args().collect::<Vec<_>>().join(" ")
    };
    vec![
        format!("Command: `{command}`"),
        format!(
            "Date: {}; revision {}; {} CPUs",
            chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
            crate::run::context::revision(),
            std::thread::available_parallelism().map_or(0, |n| n.get())
        ),
        format!(
            "Daemon settings: INGEST_TIMEOUT={}, HEADER_TIMEOUT={}, BODY_TIMEOUT={}, IDLE_TIMEOUT={} (stall scenario), \
             {} load connections, {} rounds of the faults, PostgreSQL down {} in the crash",
            humantime::format_duration(args.ingest_timeout),
            humantime::format_duration(args.header_timeout),
            humantime::format_duration(args.body_timeout),
            humantime::format_duration(args.idle_timeout),
            args.connections,
            args.rounds,
            humantime::format_duration(args.pg_down),
        ),
    ]
}
