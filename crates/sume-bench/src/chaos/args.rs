//! The flags of `sume-bench chaos`: how big each scenario is, the daemon's short timeouts, and
//! where the throwaway PostgreSQL and the logs live. `make chaos` runs the defaults; the
//! integration test runs the same code with small sizes.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::duration;
use clap::{Args, ValueEnum};

/// One scenario of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum Scenario {
    /// `kill -9` of the daemon under signed load, twice, each time restarted at once.
    Kill,
    /// Every connection of the daemon's database cut with `pg_terminate_backend`.
    Terminate,
    /// `sume.events` locked for longer than `INGEST_TIMEOUT`.
    Lock,
    /// PostgreSQL stopped at once (`pg_ctl stop -m immediate`), then started again.
    Crash,
    /// Three instances, racing jobs with early, duplicate and late deliveries.
    Race,
    /// Thousands of stalled connections beside genuine deliveries.
    Stall,
    /// The link to PostgreSQL frozen (a proxy stops moving bytes, sockets open) for longer
    /// than `INGEST_TIMEOUT`, then thawed.
    Freeze,
    /// Every connection to PostgreSQL reset at the TCP level (RST).
    Reset,
    /// PostgreSQL's address black-holed (nftables drops every packet) until the daemon has
    /// given up every connection it held, then back.
    BlackHole,
    /// A synchronous hot standby promoted after a crash of the primary.
    Failover,
    /// A synchronous hot standby promoted while the primary's port goes silent (nftables drops
    /// its packets, the server still running): a network partition, the old address first in
    /// the URL.
    FailoverSilent,
    /// An asynchronous hot standby promoted after a crash of the primary, then
    /// `sume-inbox reconcile` as README says.
    FailoverAsync,
    /// After a failover, the old primary started again as a second writable primary.
    SplitBrain,
    /// A failover, the old primary rebuilt as the new one's standby, then switched back.
    Failback,
    /// Sume's address frozen for the sweep (every read times out) while ingest goes on.
    SumeBlackHole,
    /// PostgreSQL's disk full (a small tmpfs), then space again.
    DiskFull,
    /// Not a fault: the signed load's rate and latency with the standby stopped, asynchronous,
    /// synchronous (`on`) and `remote_apply`.
    SyncCost,
}

impl Scenario {
    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Kill => "kill",
            Scenario::Terminate => "terminate",
            Scenario::Lock => "lock",
            Scenario::Crash => "crash",
            Scenario::Race => "race",
            Scenario::Stall => "stall",
            Scenario::Freeze => "freeze",
            Scenario::Reset => "reset",
            Scenario::BlackHole => "black-hole",
            Scenario::Failover => "failover",
            Scenario::FailoverSilent => "failover-silent",
            Scenario::FailoverAsync => "failover-async",
            Scenario::SplitBrain => "split-brain",
            Scenario::Failback => "failback",
            Scenario::SumeBlackHole => "sume-black-hole",
            Scenario::DiskFull => "disk-full",
            Scenario::SyncCost => "sync-cost",
        }
    }
}

/// The flags of `sume-bench chaos`.
#[derive(Debug, Clone, Args)]
pub struct ChaosArgs {
    /// The scenarios to run, comma separated, in this order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "kill,terminate,lock,crash,freeze,reset,black-hole,disk-full,failover,failover-silent,failover-async,split-brain,failback,sume-black-hole,sync-cost,race,stall"
    )]
    pub scenarios: Vec<Scenario>,
    /// Acknowledged deliveries each fault scenario (kill, terminate, lock, crash) reaches in a
    /// round; a third of them before the fault.
    #[arg(long, default_value_t = 6_000)]
    pub size: u64,
    /// Rounds of the fault scenarios; their times are reported as medians.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub rounds: u32,
    /// Persistent connections of the signed load, each with one delivery in flight.
    #[arg(long, default_value_t = 32)]
    pub connections: usize,
    /// Jobs of the three-instance race.
    #[arg(long, default_value_t = 5_000)]
    pub race_jobs: usize,
    /// Jobs of the race in flight at once.
    #[arg(long, default_value_t = 64)]
    pub race_concurrency: usize,
    /// Stalled connections of the stall scenario: `--stalled-bodies` stalled in their body,
    /// `--stalled-uploads` stalled after one byte of a 1 MiB body, the rest half in their
    /// headers, half idle after a delivery.
    #[arg(long, default_value_t = 8_000)]
    pub stalls: usize,
    /// Of the stalls, how many stall in their body. Each holds a request slot until
    /// BODY_TIMEOUT or until, at the daemon's MAX_IN_FLIGHT, a newer request sheds it (503).
    #[arg(long, default_value_t = 2000)]
    pub stalled_bodies: usize,
    /// Of the stalls, how many send headers that only look signed (no secret is needed),
    /// declare a body of MAX_BODY_BYTES (1 MiB) and send one byte of it. Each holds a request
    /// slot as a stalled body does; together they declare far more than MAX_BODY_MEMORY.
    #[arg(long, default_value_t = 2000)]
    pub stalled_uploads: usize,
    /// The stall scenario daemon's MAX_IN_FLIGHT: stalled bodies beyond it are shed.
    #[arg(long, default_value_t = 1024)]
    pub max_in_flight: usize,
    /// The daemon's INGEST_TIMEOUT; the lock scenario holds its lock for twice this and more.
    #[arg(long, default_value = "2s", value_parser = duration)]
    pub ingest_timeout: Duration,
    /// How long PostgreSQL stays down in the crash scenario.
    #[arg(long, default_value = "2s", value_parser = duration)]
    pub pg_down: Duration,
    /// The daemon's HEADER_TIMEOUT in the stall scenario.
    #[arg(long, default_value = "5s", value_parser = duration)]
    pub header_timeout: Duration,
    /// The daemon's BODY_TIMEOUT in the stall scenario.
    #[arg(long, default_value = "8s", value_parser = duration)]
    pub body_timeout: Duration,
    /// The daemon's IDLE_TIMEOUT in the stall scenario.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub idle_timeout: Duration,
    /// Parameters added to the daemon's DATABASE_URL in every scenario (libpq's names, e.g.
    /// `tcp_user_timeout=3&keepalives_idle=1`); empty: the daemon's own defaults.
    #[arg(long, default_value = "")]
    pub db_url_params: String,
    /// failover-async: the standby's link to the primary frozen this long before the crash (a
    /// replica this far behind); 0: the replica's own lag on loopback.
    #[arg(long, default_value = "1s", value_parser = duration)]
    pub replica_lag: Duration,
    /// The daemon's SUME_TIMEOUT in the scenarios that talk to the simulator.
    #[arg(long, default_value = "2s", value_parser = duration)]
    pub sume_timeout: Duration,
    /// disk-full: the size of the tmpfs that holds PostgreSQL's data directory, in MiB.
    #[arg(long, default_value_t = 160)]
    pub disk_mib: u64,
    /// sync-cost: how long the load runs in each mode of each round.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub cost_duration: Duration,
    /// The longest any wait may take (recovery, convergence, a socket's close beyond its
    /// timeout) before the run fails: a bound against hangs, not a target.
    #[arg(long, default_value = "60s", value_parser = duration)]
    pub patience: Duration,
    /// The daemon binary (default: `sume-inbox` beside this binary).
    #[arg(long)]
    pub daemon_bin: Option<PathBuf>,
    /// The throwaway-PostgreSQL script.
    #[arg(long, default_value = "scripts/devpg")]
    pub devpg: PathBuf,
    /// Where the throwaway cluster and the daemons' logs live.
    #[arg(long, default_value = "target/chaos")]
    pub work_dir: PathBuf,
    /// Use this server instead of a throwaway cluster: a database per scenario is created
    /// (and dropped first) on it, and the crash scenario is skipped, since it would stop a
    /// server this run does not own.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

impl ChaosArgs {
    /// Small sizes for a run inside `make test`: every scenario, one round, a few hundred
    /// deliveries and jobs, second-long timeouts.
    pub fn small(devpg: PathBuf, work_dir: PathBuf, daemon_bin: PathBuf) -> ChaosArgs {
        ChaosArgs {
            scenarios: vec![
                Scenario::Kill,
                Scenario::Terminate,
                Scenario::Lock,
                Scenario::Crash,
                Scenario::Race,
                Scenario::Stall,
                Scenario::Freeze,
                Scenario::BlackHole,
                Scenario::Failover,
            ],
            size: 600,
            rounds: 1,
            connections: 8,
            race_jobs: 300,
            race_concurrency: 32,
            stalls: 800,
            // More bodies than slots, and more of them in flight than idle deliveries come, so
            // every request finds a body to shed.
            stalled_bodies: 250,
            stalled_uploads: 200,
            max_in_flight: 180,
            ingest_timeout: Duration::from_secs(1),
            pg_down: Duration::from_secs(1),
            header_timeout: Duration::from_secs(2),
            body_timeout: Duration::from_secs(3),
            idle_timeout: Duration::from_secs(4),
            // Dead connections given up within about 3 s, not the daemon's 20 s.
            db_url_params: "tcp_user_timeout=3&keepalives_idle=1&keepalives_interval=1".into(),
            replica_lag: Duration::from_secs(1),
            sume_timeout: Duration::from_secs(1),
            disk_mib: 160,
            cost_duration: Duration::from_secs(2),
            patience: Duration::from_secs(60),
            daemon_bin: Some(daemon_bin),
            devpg,
            work_dir,
            database_url: None,
        }
    }
}
