//! The result of a run: what each step measured ([`Row`]), where and how the run happened
//! ([`Context`]) and the stages beside ingest, gathered in one [`Report`], with the lookups the
//! targets and the table share. `verdicts.rs` judges the targets on it, `markdown.rs`
//! writes it as the table printed and appended to docs/benchmarks.md, `numbers.rs` writes its
//! numbers.

mod markdown;
mod numbers;
mod verdicts;

#[cfg(test)]
mod fixtures;

use std::time::Duration;

use crate::ceiling::Ceiling;
use crate::load::Mode;
use crate::stack::Memory;
use crate::stats::Tally;

pub use numbers::{ms, thousands};
pub use verdicts::Verdict;

/// Which server a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// The daemon as `make bench` builds and configures it: the targets are judged on it.
    Daemon,
    /// Another build or other settings of the daemon, measured beside it for comparison.
    Variant,
    /// The per-request baseline (`sume-bench baseline-server`), the yardstick of the targets.
    Baseline,
}

impl Server {
    /// The server's name in the table: `sume-inbox` for the daemon and its variants (a
    /// variant's [`Row::label`] adds its own label).
    pub fn label(self) -> &'static str {
        match self {
            Server::Daemon | Server::Variant => "sume-inbox",
            Server::Baseline => "per-request baseline",
        }
    }
}

/// One measured step.
#[derive(Debug, Clone)]
pub struct Row {
    /// Which server; only [`Server::Daemon`] rows are judged against the targets.
    pub server: Server,
    /// What the table calls the server (a variant's label is shown beside the name).
    pub label: String,
    /// How the step paced its deliveries.
    pub mode: Mode,
    /// Connections the step loaded the server on.
    pub connections: usize,
    /// The measured window (`--duration`), the divisor of events/s unless the last answer came
    /// later.
    pub window: Duration,
    /// What the step counted.
    pub tally: Tally,
    /// The server's memory read after the step (its peak since the process started); `None`
    /// when `/proc` could not be read.
    pub memory: Option<Memory>,
    /// CPU time per stored event, warm-up included; `None` when a CPU time could not be read
    /// (PostgreSQL's needs a cluster on this machine) or nothing was stored.
    pub cpu: Option<CpuCost>,
    /// Deliveries per commit, warm-up included (the daemon's own count; 1 for the baseline);
    /// `None` when the daemon's metrics could not be read.
    pub per_commit: Option<f64>,
}

/// `(sum, count)` of the daemon's `ingest_batch_size` histogram in a Prometheus text page
/// (whatever prefix the metric carries).
pub fn batch_totals(metrics: &str) -> Option<(f64, f64)> {
    let value = |suffix: &str| {
        metrics.lines().find_map(|l| {
            let (name, v) = l.split_once(' ')?;
            name.ends_with(suffix)
                .then(|| v.trim().parse::<f64>().ok())?
        })
    };
    Some((
        value("ingest_batch_size_sum")?,
        value("ingest_batch_size_count")?,
    ))
}

/// CPU time per stored event: the server's, and PostgreSQL's (every process of the cluster).
/// Other processes on a shared machine change how fast a step runs far more than what each
/// event costs, so these compare well across steps and runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuCost {
    /// The server's CPU time per event, in microseconds.
    pub server_us: f64,
    /// The CPU time of every PostgreSQL process per event, in microseconds.
    pub postgres_us: f64,
    /// The load generator's own share (it runs on the same cores).
    pub load_us: f64,
}

impl CpuCost {
    /// Divides the CPU times spent during a step by the events it acknowledged (the data check
    /// holds them equal to those stored); `None` when there were none.
    pub fn per_event(
        server: Duration,
        postgres: Duration,
        load: Duration,
        events: u64,
    ) -> Option<CpuCost> {
        let per = |d: Duration| d.as_secs_f64() * 1e6 / events as f64;
        (events > 0).then(|| CpuCost {
            server_us: per(server),
            postgres_us: per(postgres),
            load_us: per(load),
        })
    }
}

impl Row {
    /// 2xx answers per second in the measured window: the table's events/s, and what the
    /// median round is chosen by.
    pub fn per_sec(&self) -> f64 {
        self.tally.ok_per_sec(self.window)
    }

    fn load_label(&self) -> String {
        match self.mode {
            Mode::Closed => "max".to_owned(),
            Mode::Rate(r) => format!("{}/s", thousands(r)),
        }
    }
}

/// Where and how the run happened.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The command as the reader would type it (`make bench ...` when make ran it).
    pub command: String,
    /// When the run started measuring, `YYYY-MM-DD HH:MM UTC`: the section's heading.
    pub date: String,
    /// CPUs this process may use; 0 when unknown.
    pub cpus: usize,
    /// The CPU's model name from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// The machine's memory, e.g. `16 GiB RAM`.
    pub memory: String,
    /// The kernel, e.g. `Linux 6.8.0`.
    pub kernel: String,
    /// PostgreSQL's version, as the server measured reports it.
    pub postgres: String,
    /// The short git commit, marked when the work tree has uncommitted changes.
    pub revision: String,
    /// The main daemon's tunables for this run, as `(NAME, value)`.
    pub settings: Vec<(String, String)>,
    /// `label: what differs` of each variant measured beside the daemon.
    pub variants: Vec<String>,
    /// The warm-up of each step (`--warmup`).
    pub warmup: Duration,
    /// The measured window of each step (`--duration`).
    pub duration: Duration,
    /// Rounds of every step; each row is its median round.
    pub rounds: u32,
    /// `--note` (BENCH_NOTE), printed under the heading; `None` prints nothing.
    pub note: Option<String>,
}

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// Where and how the run happened.
    pub context: Context,
    /// The ingest steps, one row per server and load (the median round), in the order run.
    pub rows: Vec<Row>,
    /// The PostgreSQL ceiling; `None` when skipped (`--ceiling-duration 0s`) or not reached.
    pub ceiling: Option<Ceiling>,
    /// The attach stage: at full speed, then at a steady rate; each skipped at 0 jobs or rate
    /// (`--attach-jobs`, `--attach-rate`), or not reached.
    pub attach: Vec<crate::stages::AttachResult>,
    /// The sweep stage; `None` when skipped (`--sweep-due 0`) or not reached.
    pub sweep: Option<crate::stages::SweepResult>,
}

/// Keeps, for each server and load, the round with the median events/s (the lower middle
/// one for an even count), in the order the steps first ran.
pub fn median_rows(rows: Vec<Row>) -> Vec<Row> {
    let key = |r: &Row| (r.label.clone(), format!("{:?}", r.mode), r.connections);
    let mut keys = Vec::new();
    for r in &rows {
        if !keys.contains(&key(r)) {
            keys.push(key(r));
        }
    }
    keys.into_iter()
        .map(|k| {
            let mut same: Vec<&Row> = rows.iter().filter(|r| key(r) == k).collect();
            same.sort_by(|a, b| a.per_sec().total_cmp(&b.per_sec()));
            same[(same.len() - 1) / 2].clone()
        })
        .collect()
}

/// The rows the targets and the table look up.
impl Report {
    /// The baseline's as-fast-as-possible step at `connections`.
    fn baseline_for(&self, connections: usize) -> Option<&Row> {
        self.rows.iter().find(|r| {
            r.server == Server::Baseline && r.mode == Mode::Closed && r.connections == connections
        })
    }

    /// The main daemon's as-fast-as-possible step at `connections`.
    fn daemon_closed(&self, connections: usize) -> Option<&Row> {
        self.rows.iter().find(|r| {
            r.server == Server::Daemon && r.mode == Mode::Closed && r.connections == connections
        })
    }

    /// The main daemon's fixed-rate step.
    fn daemon_rate(&self) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.server == Server::Daemon && matches!(r.mode, Mode::Rate(_)))
    }

    /// The baseline's fixed-rate step.
    fn baseline_rate(&self) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.server == Server::Baseline && matches!(r.mode, Mode::Rate(_)))
    }

    /// The main daemon's highest peak resident set over all its steps.
    fn daemon_peak_kib(&self) -> Option<u64> {
        self.rows
            .iter()
            .filter(|r| r.server == Server::Daemon)
            .filter_map(|r| r.memory.map(|m| m.peak_kib))
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::row;
    use super::*;

    #[test]
    fn median_rounds() {
        let rows = vec![
            row(Server::Daemon, Mode::Closed, 16, 300, 1_000),
            row(Server::Baseline, Mode::Closed, 16, 50, 1_000),
            row(Server::Daemon, Mode::Closed, 16, 100, 1_000),
            row(Server::Baseline, Mode::Closed, 16, 70, 1_000),
            row(Server::Daemon, Mode::Closed, 16, 200, 1_000),
            row(Server::Baseline, Mode::Closed, 16, 60, 1_000),
        ];
        let m = median_rows(rows);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].server, m[0].tally.ok), (Server::Daemon, 200));
        assert_eq!((m[1].server, m[1].tally.ok), (Server::Baseline, 60));
    }

    #[test]
    fn reads_batch_sizes_from_metrics() {
        let page =
            "# HELP sume_inbox_ingest_batch_size Deliveries written per ingest transaction\n\
                    # TYPE sume_inbox_ingest_batch_size histogram\n\
                    sume_inbox_ingest_batch_size_sum 5120.0\n\
                    sume_inbox_ingest_batch_size_count 40\n\
                    sume_inbox_ingest_batch_size_bucket{le=\"1.0\"} 3\n";
        assert_eq!(batch_totals(page), Some((5120.0, 40.0)));
        assert_eq!(batch_totals("webhooks_total 3\n"), None);
    }
}
