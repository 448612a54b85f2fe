//! What replication costs the daemon per event: the same signed load (the chaos traffic: a
//! fixed number of connections, one delivery in flight on each) on one daemon and one primary,
//! for `--cost-duration` in each mode, round after round: the standby stopped, streaming
//! asynchronously, synchronous (`synchronous_standby_names`, `synchronous_commit = on`: the
//! standby has flushed the commit), and `remote_apply` (it has applied it). Each mode's rate
//! and latency are the medians over the rounds.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use sume_wire::Secret;

use crate::sql;
use crate::webhook::Generator;

use super::pair::Pair;
use crate::chaos::args::ChaosArgs;
use crate::chaos::ground::with_params;
use crate::chaos::report::median;
use crate::chaos::traffic::Traffic;
use crate::chaos::world::World;

/// The modes, in the order each round runs them.
pub const MODES: [&str; 4] = [
    "no standby (stopped)",
    "asynchronous standby",
    "synchronous standby (`on`)",
    "synchronous standby (`remote_apply`)",
];

/// One mode's medians over the rounds.
#[derive(Debug, Clone)]
pub struct ModeCost {
    /// Which mode: where commits wait (no standby, asynchronous, `on`, `remote_apply`).
    pub mode: &'static str,
    /// Deliveries answered 2xx per second.
    pub rate: f64,
    /// The median and the 99th percentile of a 2xx answer's time.
    pub p50: Duration,
    /// See `p50`.
    pub p99: Duration,
}

/// The sync-cost measurement.
#[derive(Debug, Clone, Default)]
pub struct CostResult {
    /// Rounds run.
    pub rounds: u32,
    /// Load connections.
    pub connections: usize,
    /// How long each mode ran in each round.
    pub duration: Duration,
    /// Each mode's medians.
    pub modes: Vec<ModeCost>,
}

/// Runs every mode `--rounds` times on one pair and one daemon.
pub(in crate::chaos) async fn run(world: &World, args: &ChaosArgs) -> anyhow::Result<CostResult> {
    let mut pair = Pair::start(
        &args.devpg,
        &world.work_dir,
        "sync-cost",
        false,
        args.patience,
    )
    .await?;
    let url = with_params(&pair.url(), &args.db_url_params);
    let mut daemon = world.daemon(&url, "sync-cost", &[])?;
    daemon.wait_ready(args.patience).await?;
    let run_id = format!("{:06x}", rand::thread_rng().gen::<u32>() & 0xff_ffff);
    let generator = Arc::new(Generator::new(Secret::new(world.secret.clone()), run_id));
    let mut samples: Vec<Vec<(f64, Duration, Duration)>> = vec![Vec::new(); MODES.len()];
    for round in 1..=args.rounds {
        for (i, mode) in MODES.iter().enumerate() {
            set_mode(&mut pair, i, args.patience).await?;
            let traffic = Traffic::start(daemon.listen, generator.clone(), args.connections);
            tokio::time::sleep(args.cost_duration).await;
            let answers = traffic.finish().await;
            let s = answers.rate_and_latency(args.cost_duration / 10);
            eprintln!(
                "sume-bench chaos: sync-cost round {round}, {mode}: {:.0}/s, p50 {:.2} ms",
                s.0,
                s.1.as_secs_f64() * 1e3
            );
            samples[i].push(s);
        }
    }
    daemon.stop();
    let modes = MODES
        .iter()
        .zip(samples)
        .map(|(mode, s)| {
            let rates: Vec<Duration> = s.iter().map(|x| Duration::from_secs_f64(x.0)).collect();
            let p50s: Vec<Duration> = s.iter().map(|x| x.1).collect();
            let p99s: Vec<Duration> = s.iter().map(|x| x.2).collect();
            ModeCost {
                mode,
                rate: median(&rates).unwrap_or_default().as_secs_f64(),
                p50: median(&p50s).unwrap_or_default(),
                p99: median(&p99s).unwrap_or_default(),
            }
        })
        .collect();
    Ok(CostResult {
        rounds: args.rounds,
        connections: args.connections,
        duration: args.cost_duration,
        modes,
    })
}

/// Puts the pair in mode `i` of [`MODES`].
async fn set_mode(pair: &mut Pair, i: usize, patience: Duration) -> anyhow::Result<()> {
    let standby = pair.standby();
    match i {
        0 => {
            pair.on_primary(&[
                sql::SERVER_SYNC_STANDBY_OFF,
                sql::SERVER_COMMIT_DEFAULT,
                sql::SERVER_RELOAD,
            ])
            .await?;
            pair.stop(standby).await?;
        }
        1 => {
            pair.start_node(standby).await?;
            pair.wait_standby(false, patience).await?;
        }
        2 => {
            pair.set_sync(true).await?;
            pair.wait_standby(true, patience).await?;
        }
        _ => {
            pair.on_primary(&[sql::SERVER_REMOTE_APPLY, sql::SERVER_RELOAD])
                .await?
        }
    }
    Ok(())
}
