//! The command line: `sume-bench run`, `fleet` and `sweep` (what `make bench` calls), `soak`
//! (`make soak`), `chaos` (`make chaos`), `protocol`, and `baseline-server` (the per-request
//! baseline, started by `run` as a child process).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// The parsed command line of `sume-bench`.
#[derive(Debug, Parser)]
#[command(
    name = "sume-bench",
    about = "Benchmarks sume-inbox against a per-request baseline and the PostgreSQL ceiling, in one run"
)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands: the benchmark itself and the baseline server it starts.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once
pub enum Command {
    /// Start PostgreSQL, the daemon and the baseline; load them; print and append the table.
    Run(RunArgs),
    /// 1, 2 and 4 daemon instances on one PostgreSQL, directly and through PgBouncer.
    Fleet(crate::fleet::FleetArgs),
    /// One daemon at a fixed rate for minutes, attach, the sweep and retention running:
    /// memory, latency and table sizes sampled, drawn and checked for flatness.
    Soak(crate::soak::SoakArgs),
    /// The sweep's reads at Sume and a lost webhook's delay, list walks against one read a
    /// job, with the simulator counting every read.
    Sweep(crate::sweep_scale::SweepArgs),
    /// The chaos suite: faults under signed load, a three-instance race, stalled connections.
    Chaos(crate::chaos::ChaosArgs),
    /// The per-request baseline server (started by `run`; stops when its stdin closes).
    BaselineServer(BaselineArgs),
    /// What unnamed statements (DB_POOLER=transaction) cost per statement against prepared
    /// ones, on DATABASE_URL; prints a table.
    Protocol(crate::protocol::ProtocolArgs),
}

/// A humantime duration flag (`15s`, `10m`), for every subcommand's flags.
pub(crate) fn duration(raw: &str) -> Result<Duration, String> {
    humantime::parse_duration(raw.trim()).map_err(|e| format!("{raw:?}: {e}"))
}

/// The flags of `sume-bench run`; the steps, the stages and the output all read them.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The measured window of each step.
    #[arg(long, default_value = "15s", value_parser = duration)]
    pub duration: Duration,
    /// Load before each measured window, not measured (but checked for data).
    #[arg(long, default_value = "3s", value_parser = duration)]
    pub warmup: Duration,
    /// Run every step this many times (servers taking turns) and report each one's median
    /// round by events/s: steadier numbers on a noisy machine, at that many times the time.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub rounds: u32,
    /// Connection counts of the as-fast-as-possible steps, comma separated.
    #[arg(long, default_value = "16,64,256", value_delimiter = ',')]
    pub connections: Vec<usize>,
    /// Events per second of the fixed-rate step (0 skips it).
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Connections the fixed-rate step spreads its deliveries over.
    #[arg(long, default_value_t = 64)]
    pub rate_connections: usize,
    /// The PostgreSQL ceiling's measured time (0s skips it).
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub ceiling_duration: Duration,
    /// Rows per transaction of the ceiling.
    #[arg(long, default_value_t = 1000)]
    pub ceiling_batch: usize,
    /// Connections inserting at once for the ceiling.
    #[arg(long, default_value_t = 2)]
    pub ceiling_connections: usize,
    /// Jobs of the attach stage: registered at full speed through the SQL path, their events
    /// already waiting (0 skips it).
    #[arg(long, default_value_t = 10_000)]
    pub attach_jobs: usize,
    /// Connections registering jobs in the attach stage.
    #[arg(long, default_value_t = 8)]
    pub attach_connections: usize,
    /// Registrations per second of the attach stage's steady part, after its full-speed part
    /// (0 skips it).
    #[arg(long, default_value_t = 500.0)]
    pub attach_rate: f64,
    /// Jobs of the attach stage's steady part.
    #[arg(long, default_value_t = 5_000)]
    pub attach_steady_jobs: usize,
    /// Open jobs due in the sweep stage's pass (0 skips it).
    #[arg(long, default_value_t = 10_000)]
    pub sweep_due: usize,
    /// Closed jobs beside them in the second database of the sweep stage.
    #[arg(long, default_value_t = 1_000_000)]
    pub sweep_closed: usize,
    /// Skip the per-request baseline steps.
    #[arg(long)]
    pub no_baseline: bool,
    /// No `ANALYZE sume.events` after each warm-up: every step then runs on the plans the
    /// daemon made on the truncated, empty inbox, as a new database does before autovacuum's
    /// first pass (docs/benchmarks.md, "Plans made on an empty database").
    #[arg(long)]
    pub no_analyze: bool,
    /// Send an `X-Sume-Event-Id` that is not the body's `id` (`hdr_<id>`), so the daemon's
    /// check for a row stored under the header's id before 0004_signed_keys runs for every
    /// delivery.
    #[arg(long)]
    pub other_header_ids: bool,
    /// Deliveries of every shape in turn: the envelope with an `id` under that id and under
    /// another header id, the guide's flat body (no `id`) under `evt_<job>` and under its own
    /// key.
    #[arg(long)]
    pub mixed_shapes: bool,
    /// One database from empty: no TRUNCATE and no ANALYZE between steps, so the steps are
    /// consecutive windows of one growing inbox on the plans each daemon made at its start
    /// (`make bench-from-empty`); each step's data check counts the rows it added.
    #[arg(long)]
    pub from_empty: bool,
    /// The baseline's database pool (the daemon's DB_POOL_SIZE default).
    #[arg(long, default_value_t = 16)]
    pub baseline_pool: usize,
    /// The daemon binary (default: `sume-inbox` beside this binary, i.e. the release build).
    #[arg(long)]
    pub daemon_bin: Option<PathBuf>,
    /// Another daemon to measure beside the main one in the same run, on the same steps:
    /// `LABEL:bin=PATH` (another build) and/or `LABEL:INGEST_WRITERS=4,...` (other settings).
    /// Repeatable. The targets are judged on the main daemon only.
    #[arg(long = "variant", value_parser = parse_variant)]
    pub variants: Vec<Variant>,
    /// The throwaway-PostgreSQL script.
    #[arg(long, default_value = "scripts/devpg")]
    pub devpg: PathBuf,
    /// Where the throwaway cluster and the server logs live.
    #[arg(long, default_value = "target/bench-run")]
    pub work_dir: PathBuf,
    /// Keep the cluster (stopped) after the run instead of removing it.
    #[arg(long)]
    pub keep_pg: bool,
    /// Use this database instead of a throwaway one. Its sume.events is TRUNCATED before
    /// every step: never point this at a database whose inbox matters.
    #[arg(long)]
    pub database_url: Option<String>,
    /// The file the results are appended to.
    #[arg(long, default_value = "docs/benchmarks.md")]
    pub out: PathBuf,
    /// Print the table only; append nothing.
    #[arg(long)]
    pub no_append: bool,
    /// A remark recorded with the results (e.g. "machine shared with other builds").
    #[arg(long, env = "BENCH_NOTE")]
    pub note: Option<String>,
}

/// A daemon measured for comparison: another binary, other settings, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// Names the variant in the table (`sume-inbox [LABEL]`) and in the section's heading lines.
    pub label: String,
    /// Its binary; `None` runs the main daemon's binary with other settings.
    pub bin: Option<PathBuf>,
    /// Settings put in its environment over the run's own, as `(NAME, value)`.
    pub env: Vec<(String, String)>,
}

/// Reads `LABEL:bin=PATH,KEY=VALUE,...`.
pub fn parse_variant(raw: &str) -> Result<Variant, String> {
    let (label, spec) = raw
        .split_once(':')
        .ok_or_else(|| format!("{raw:?} is not LABEL:bin=PATH or LABEL:KEY=VALUE,..."))?;
    let label = label.trim();
    if label.is_empty() {
        return Err(format!("{raw:?}: the label is empty"));
    }
    let mut variant = Variant {
        label: label.to_owned(),
        bin: None,
        env: Vec::new(),
    };
    for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("{raw:?}: {item:?} is not KEY=VALUE"))?;
        match k.trim() {
            "bin" => variant.bin = Some(PathBuf::from(v.trim())),
            key if !key.is_empty() && key.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
                variant.env.push((key.to_owned(), v.trim().to_owned()))
            }
            key => {
                return Err(format!(
                    "{raw:?}: {key:?} is neither bin nor a setting name"
                ))
            }
        }
    }
    if variant.bin.is_none() && variant.env.is_empty() {
        return Err(format!("{raw:?}: names neither a binary nor a setting"));
    }
    Ok(variant)
}

/// The flags of `sume-bench baseline-server`, which `run` passes when it starts the baseline.
#[derive(Debug, Args)]
pub struct BaselineArgs {
    /// The database to store events in, already migrated.
    #[arg(long)]
    pub database_url: String,
    /// The signing secret deliveries are verified with (a single secret, not a list).
    #[arg(long, env = "SUME_WEBHOOK_SECRET", hide_env_values = true)]
    pub secret: String,
    /// Connections of the database pool.
    #[arg(long, default_value_t = 16)]
    pub pool_size: usize,
    /// The address to listen on; port 0 takes a free port, printed as `listening on ADDR`.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants() {
        let v = parse_variant("before:bin=target/old/sume-inbox").unwrap();
        assert_eq!(v.label, "before");
        assert_eq!(v.bin, Some(PathBuf::from("target/old/sume-inbox")));
        assert!(v.env.is_empty());
        let v = parse_variant("w4:INGEST_WRITERS=4, DB_POOL_SIZE=8").unwrap();
        assert_eq!(
            v.env,
            vec![
                ("INGEST_WRITERS".to_owned(), "4".to_owned()),
                ("DB_POOL_SIZE".to_owned(), "8".to_owned())
            ]
        );
        for bad in ["nolabel", ":bin=x", "x:", "x:writers=4", "x:INGEST_WRITERS"] {
            assert!(parse_variant(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_defaults_parse() {
        let cli = Cli::try_parse_from(["sume-bench", "run"]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("run expected")
        };
        assert_eq!(args.connections, vec![16, 64, 256]);
        assert_eq!(args.duration, Duration::from_secs(15));
        assert_eq!(args.rate, 1000.0);
    }
}
